package fallback_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/require"
)

// compactionKey names one compaction on the wire: its stream and its ID.
type compactionKey struct {
	session string
	id      protocol.ID
}

func (k compactionKey) String() string { return fmt.Sprintf("%s/%s", k.session, k.id) }

type taggedLine struct {
	key  compactionKey
	kind emitter.EventKind
	line []byte
}

// tagLog records every line a renderer sends together with the event that
// caused it. The tag comes from the emitter's call, not from the wire, so
// renderers whose carrier names no compaction (prose) can be checked per
// compaction too; what each line is (start, outcome) is read from the wire.
type tagLog struct {
	mu    sync.Mutex
	lines []taggedLine
}

func (l *tagLog) renderer(r emitter.Renderer) emitter.Renderer {
	return rendererFunc(func(ctx context.Context, ev emitter.Event, n emitter.Notifier) error {
		key := compactionKey{ev.SessionID, ev.ID}
		return r.Render(ctx, ev, emitter.NotifierFunc(func(ctx context.Context, sessionID string, update any) error {
			// The line is what wiretest.Recorder would keep: the exact
			// session/update notification.
			line, err := wiretest.Line(sessionID, update)
			if err != nil {
				return err
			}
			l.mu.Lock()
			l.lines = append(l.lines, taggedLine{key, ev.Kind, line})
			l.mu.Unlock()
			return nil
		}))
	})
}

// expectation is what the driver knows it asked for, per compaction.
type expectation int

const (
	expectLive          expectation = iota + 1 // started live: one start form, then one outcome
	expectReplayed                             // a settled record replayed: one outcome, no start
	expectReplaySkipped                        // a running record: nothing at all
)

type model struct {
	mu sync.Mutex
	m  map[compactionKey]expectation
}

func (m *model) set(k compactionKey, e expectation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.m[k]; dup {
		panic("duplicate compaction key " + k.String())
	}
	m.m[k] = e
}

type propertyConfig struct {
	goroutines int
	opsPer     int
	sessions   int
}

// runRandomLifecycles drives em from several goroutines at once with random
// starts, chunks, completions, failures, cancels, per-session settle-alls,
// failures right after the start, and replays, over sessions shared
// between the goroutines; then it closes the connection
// (Emitter.SettleAll) so that nothing is left open. It returns what each
// compaction should look like on the wire.
func runRandomLifecycles(t *testing.T, seed uint64, em *emitter.Emitter, cfg propertyConfig) map[compactionKey]expectation {
	t.Helper()
	ctx := context.Background()
	mdl := &model{m: make(map[compactionKey]expectation)}
	type target struct {
		s   *emitter.Session
		sid string
	}
	var targets []target
	for i := range cfg.sessions {
		sid := fmt.Sprintf("sess_%d", i)
		targets = append(targets, target{em.Session(sid), sid})
	}
	triggers := []protocol.Trigger{protocol.Manual, protocol.Auto, protocol.Idle}
	reasons := []error{emitter.ErrCancelled, emitter.ErrTurnEnded, emitter.ErrTimeout, fmt.Errorf("wrapped: %w", emitter.ErrCancelled), errors.New("provider: rate limited")}
	statuses := []protocol.Status{protocol.Completed, protocol.Failed, protocol.Cancelled, protocol.InProgress, "_vendor_paused"}

	var wg sync.WaitGroup
	errs := make(chan error, cfg.goroutines)
	for g := range cfg.goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			var open []*emitter.Compaction
			n := 0
			prefix := "g" + strconv.Itoa(g) + "_"
			newID := func() protocol.ID { n++; return protocol.ID(prefix + strconv.Itoa(n)) }
			pick := func() (int, *emitter.Compaction) {
				i := rng.IntN(len(open))
				return i, open[i]
			}
			drop := func(i int) { open[i] = open[len(open)-1]; open = open[:len(open)-1] }
			// ok accepts the errors that are legitimate here: another
			// goroutine's SettleAll settled the compaction first, or the
			// summary policy withheld a chunk of a compaction not marked
			// user-displayable.
			ok := func(err error) error {
				if err == nil || errors.Is(err, emitter.ErrSettled) || errors.Is(err, emitter.ErrWithheld) {
					return nil
				}
				return err
			}
			for range cfg.opsPer {
				tg := targets[rng.IntN(len(targets))]
				var err error
				switch op := rng.IntN(100); {
				case op < 25 || len(open) == 0:
					id := newID()
					opts := []emitter.StartOption{emitter.WithID(id), emitter.WithTrigger(triggers[rng.IntN(len(triggers))])}
					if rng.IntN(2) == 0 {
						opts = append(opts, emitter.UserDisplayable())
					}
					var c *emitter.Compaction
					if c, err = tg.s.Start(ctx, opts...); err == nil {
						mdl.set(compactionKey{tg.sid, id}, expectLive)
						open = append(open, c)
					}
				case op < 50:
					_, c := pick()
					err = ok(c.Chunk(ctx, protocol.Text("chunk ")))
				case op < 62:
					i, c := pick()
					var so []emitter.SettleOption
					switch rng.IntN(3) {
					case 0:
						so = append(so, emitter.Summary(protocol.Text("final summary")))
					case 1:
						so = append(so, emitter.Summary())
					}
					err = ok(c.Complete(ctx, so...))
					drop(i)
				case op < 70:
					i, c := pick()
					err = ok(c.Fail(ctx, errors.New("provider overloaded")))
					drop(i)
				case op < 76:
					i, c := pick()
					err = ok(c.Cancel(ctx))
					drop(i)
				case op < 80:
					_, err = tg.s.SettleAll(ctx, reasons[rng.IntN(len(reasons))])
				case op < 86:
					id := newID()
					mdl.set(compactionKey{tg.sid, id}, expectLive)
					// Another goroutine's SettleAll may settle it between
					// its start and its failure; either way it must end
					// exactly once.
					var c *emitter.Compaction
					if c, err = tg.s.Start(ctx, emitter.WithID(id)); err == nil {
						err = ok(c.Fail(ctx, errors.New("failed right after its start")))
					}
				default:
					id := newID()
					st := statuses[rng.IntN(len(statuses))]
					rec := emitter.Record{ID: id, Status: st, Trigger: triggers[rng.IntN(len(triggers))], Displayable: rng.IntN(2) == 0}
					if st == protocol.Failed {
						rec.Error = "replayed failure"
					}
					if rng.IntN(2) == 0 {
						rec.Summary = []protocol.ContentBlock{protocol.Text("replayed summary")}
					}
					e := expectReplaySkipped
					if st.Terminal() {
						e = expectReplayed
					}
					mdl.set(compactionKey{tg.sid, id}, e)
					err = tg.s.Replay(ctx, rec)
				}
				if err != nil {
					errs <- fmt.Errorf("goroutine %d: %w", g, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	// A goroutine sends only its failure, so the first value (nil once the
	// closed channel is drained) is the one to report.
	require.NoError(t, <-errs, "seed %d", seed)
	_, err := em.SettleAll(ctx, emitter.ErrConnectionClosed)
	require.NoError(t, err, "seed %d: closing the connection", seed)
	n, err := em.SettleAll(ctx, emitter.ErrConnectionClosed)
	require.NoError(t, err, "seed %d: closing the connection again", seed)
	require.Equal(t, 0, n, "seed %d: the connection closed with %d compactions still open", seed, n)
	return mdl.m
}

// causedBy reports whether a form may stem from an event of kind k: what
// the wire says must match what happened.
func causedBy(f form, k emitter.EventKind) bool {
	switch f {
	case formStart:
		return k == emitter.EventStarted
	case formProgress:
		return k == emitter.EventChunk || k == emitter.EventHeartbeat
	case formTerminal, formContent:
		return k == emitter.EventSettled || k == emitter.EventReplayed
	}
	return false
}

// checkLifecycles asserts the fallback contract on what was sent.
func checkLifecycles(t *testing.T, log *tagLog, want map[compactionKey]expectation, carriers []string) {
	t.Helper()
	type seen struct {
		forms map[string][]form
	}
	got := make(map[compactionKey]*seen)
	v := schemaV1(t)
	for i, tl := range log.lines {
		li, err := classify(tl.line)
		require.NoError(t, err, "line %s", tl.line)
		require.NotEqual(t, protocol.KindUpdate, li.kind, "%s sent to a client without the capability: %s", li.kind, tl.line)
		require.NotEqual(t, protocol.KindSummaryChunk, li.kind, "%s sent to a client without the capability: %s", li.kind, tl.line)
		if i%97 == 0 { // the official schema is slow under -race; sample it
			require.NoError(t, v.Update(wiretest.RawUpdate(tl.line)), "update of %s", tl.line)
		}
		require.NotEqual(t, formOther, li.form, "unrecognised fallback update %s", tl.line)
		require.True(t, causedBy(li.form, tl.kind), "a %s form rendered for a %s event: %s", li.form, tl.kind, tl.line)
		if li.id != "" {
			require.Contains(t, []string{string(tl.key.id), fallback.ToolCallID(tl.key.id)}, li.id,
				"update names another compaction than %s, which caused it: %s", tl.key, tl.line)
		}
		s := got[tl.key]
		if s == nil {
			s = &seen{forms: make(map[string][]form)}
			got[tl.key] = s
		}
		s.forms[li.carrier] = append(s.forms[li.carrier], li.form)
	}
	for k := range got {
		// A lookup, not require.Contains: that walks the whole map for
		// each key.
		_, known := want[k]
		require.True(t, known, "updates sent for a compaction never started nor replayed: %s", k)
	}

	for k, e := range want {
		s := got[k]
		if e == expectReplaySkipped || len(carriers) == 0 {
			require.Nil(t, s, "%s: expected nothing on the wire, got %v", k, s)
			continue
		}
		require.NotNil(t, s, "%s: no update at all; every started compaction needs its outcome", k)
		for _, c := range carriers {
			forms := s.forms[c]
			starts, terminals := 0, 0
			for _, f := range forms {
				switch f {
				case formStart:
					starts++
					require.Equal(t, 0, terminals, "%s/%s: start form after the outcome: %v", k, c, forms)
				case formTerminal:
					terminals++
				case formProgress:
					require.Equal(t, 0, terminals, "%s/%s: progress after the outcome: %v", k, c, forms)
				case formContent:
					require.Equal(t, 1, terminals, "%s/%s: summary text must follow the outcome (%d terminal forms before it): %v", k, c, terminals, forms)
				}
			}
			require.Equal(t, 1, terminals, "%s/%s", k, c)
			if e == expectLive {
				require.Equal(t, 1, starts, "%s/%s", k, c)
				require.Equal(t, formStart, forms[0], "%s/%s: the start form comes first, got %s first: %v", k, c, forms[0], forms)
			} else {
				require.Zero(t, starts, "%s/%s: start forms for a replay: %v", k, c, forms)
			}

		}
	}
}

func TestPropertyRandomLifecyclesNeverLeakStandardUpdatesAndAlwaysSettle(t *testing.T) {
	cfg := propertyConfig{goroutines: 4, opsPer: 5000, sessions: 8}
	if testing.Short() {
		cfg.opsPer = 500
	}
	cases := []struct {
		name     string
		r        func() emitter.Renderer
		carriers []string
	}{
		{"text", func() emitter.Renderer { return fallback.Text() }, []string{"text"}},
		{"marker", func() emitter.Renderer { return fallback.Marker() }, []string{"marker:" + fallback.DefaultMarkerKey}},
		{"opencode-marker", fallback.OpencodeMarker, []string{"marker:" + fallback.OpencodeMarkerKey}},
		{"toolcall", func() emitter.Renderer { return fallback.ToolCall() }, []string{"toolcall"}},
		{"none", func() emitter.Renderer { return fallback.None{} }, nil},
		// The composition also covers the options that add updates: the
		// summary after Text's outcome, the tool call's content updates.
		{"compose", func() emitter.Renderer {
			return fallback.Compose(fallback.Marker(), fallback.Text(fallback.WithSummary()), fallback.ToolCall(fallback.WithSummaryContent()))
		}, []string{"marker:" + fallback.DefaultMarkerKey, "text", "toolcall"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			seed := uint64(20261006 + i)
			log := &tagLog{}
			r := log.renderer(tc.r())
			em := emitter.New(emitter.NotifierFunc(func(context.Context, string, any) error {
				return errors.New("an update bypassed the renderer")
			}), emitter.WithNegotiation(v1NoCapability), emitter.WithFallback(r))
			want := runRandomLifecycles(t, seed, em, cfg)
			checkLifecycles(t, log, want, tc.carriers)
			t.Logf("seed %d: %d operations, %d compactions, %d lines", seed, cfg.goroutines*cfg.opsPer, len(want), len(log.lines))
		})
	}
}
