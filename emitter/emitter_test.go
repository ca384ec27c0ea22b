package emitter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var capable = capability.Negotiation{Version: 1, Compaction: true}

// events collects observer events for assertions.
type events struct {
	mu  sync.Mutex
	evs []emitter.Event
	ch  chan emitter.Event
}

func newEvents() *events { return &events{ch: make(chan emitter.Event, 1024)} }

func (e *events) Observe(_ context.Context, ev emitter.Event) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
	select {
	case e.ch <- ev:
	default:
	}
}

func (e *events) kinds() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.evs {
		out = append(out, ev.Kind.String())
	}
	return out
}

// waitFor blocks until an event of kind arrives (no timing assertion: the
// test fails only if it never comes).
func (e *events) waitFor(t *testing.T, kind emitter.EventKind) emitter.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-e.ch:
			if ev.Kind == kind {
				return ev
			}
		case <-deadline:
			require.Fail(t, fmt.Sprintf("no %s event; saw %v", kind, e.kinds()))
		}
	}
}

func newCapable(t *testing.T, opts ...emitter.Option) (*emitter.Emitter, *wiretest.Recorder, *events) {
	t.Helper()
	rec := &wiretest.Recorder{}
	obs := newEvents()
	all := append([]emitter.Option{emitter.WithNegotiation(capable), emitter.WithObserver(obs), emitter.WithSummaryPolicy(emitter.AllSummaries)}, opts...)
	return emitter.New(rec, all...), rec, obs
}

// wire renders the recorded updates compactly: kind/id/status plus the
// patch fields present, so assertions read like the RFD's examples.
func wire(rec *wiretest.Recorder) []string {
	var out []string
	for _, u := range rec.Updates() {
		s := fmt.Sprintf("%s %s", u["sessionUpdate"], u["compactionId"])
		if st, ok := u["status"]; ok {
			s += " " + st.(string)
		}
		if c, ok := u["content"].(map[string]any); ok {
			s += fmt.Sprintf(" +%q", c["text"])
		}
		for _, k := range []string{"summary", "error", "_meta"} {
			if v, ok := u[k]; ok {
				switch v := v.(type) {
				case nil:
					s += " " + k + "=null"
				case []any:
					var texts []string
					for _, b := range v {
						texts = append(texts, fmt.Sprint(b.(map[string]any)["text"]))
					}
					s += fmt.Sprintf(" %s=%q", k, texts)
				default:
					s += fmt.Sprintf(" %s=%v", k, v)
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// noLines fails t unless rec holds no lines; why says what that shows.
func noLines(t *testing.T, rec *wiretest.Recorder, why string) {
	t.Helper()
	lines := rec.Lines()
	assert.Empty(t, lines, "%d lines sent(%s):\n%s", len(lines), why, bytes.Join(lines, []byte("\n")))
}

func validateAll(t *testing.T, rec *wiretest.Recorder, version int) {
	t.Helper()
	v := schematest.For(t, version)
	for _, l := range rec.Lines() {
		assert.NoError(t, v.Update(wiretest.RawUpdate(l)), "v%d update schema\nline: %s", version, l)
		assert.NoError(t, v.Message(l), "v%d message schema\nline: %s", version, l)
	}
}

func TestLifecycleTransitions(t *testing.T) {
	ctx := context.Background()
	em, rec, _ := newCapable(t)
	s := em.Session("s1")

	a, err := s.Start(ctx, emitter.WithID("a"))
	require.NoError(t, err, "Start a")
	require.NoError(t, a.Chunk(ctx, protocol.Text("## Retained")), "a.Chunk 1")
	require.NoError(t, a.Chunk(ctx, protocol.Text(" context")), "a.Chunk 2")
	require.NoError(t, a.Complete(ctx, emitter.Summary(protocol.Text("## Retained context"))), "a.Complete")

	b, _ := s.Start(ctx, emitter.WithID("b"))
	require.NoError(t, b.Chunk(ctx, protocol.Text("partial")), "b.Chunk")
	require.NoError(t, b.Fail(ctx, errors.New("summary request failed")), "b.Fail")

	c, _ := s.Start(ctx, emitter.WithID("c"))
	require.NoError(t, c.Cancel(ctx), "c.Cancel")

	// A runtime that only exposes completed compactions.
	d, _ := s.Start(ctx, emitter.WithID("d"))
	require.NoError(t, d.Complete(ctx), "d.Complete")

	want := []string{
		`compaction_update a in_progress`,
		`compaction_summary_chunk a +"## Retained"`,
		`compaction_summary_chunk a +" context"`,
		`compaction_update a completed summary=["## Retained context"]`,
		`compaction_update b in_progress`,
		`compaction_summary_chunk b +"partial"`,
		`compaction_update b failed summary=null error=summary request failed`,
		`compaction_update c in_progress`,
		`compaction_update c cancelled`,
		`compaction_update d in_progress`,
		`compaction_update d completed`,
	}
	assert.Equal(t, want, wire(rec), "wire")
	assert.Equal(t, 0, emitter.OpenCount(em), "open compactions")
	validateAll(t, rec, 1)
}

func TestCompactionIDsAreNeverReusedEvenAfterSettlement(t *testing.T) {
	ctx := context.Background()
	em, rec, obs := newCapable(t)
	s := em.Session("s1")
	c, err := s.Start(ctx, emitter.WithID("x"))
	require.NoError(t, err, "Start x")
	_, err = s.Start(ctx, emitter.WithID("x"))
	assert.ErrorIs(t, err, emitter.ErrIDReused, "Start x while x is open (an open ID is never overwritten)")
	require.NoError(t, c.Complete(ctx), "Complete x")
	_, err = s.Start(ctx, emitter.WithID("x"))
	assert.ErrorIs(t, err, emitter.ErrIDReused, "Start x after x settled (a settled ID is never reused)")
	assert.ErrorContains(t, err, "s1", "ErrIDReused text %q does not name the session s1", err)
	assert.ErrorContains(t, err, "x", "ErrIDReused text %q does not name the ID x", err)
	_, err = s.Start(ctx, emitter.WithID(""))
	assert.ErrorIs(t, err, protocol.ErrInvalidID, "Start with an empty ID")

	// The same ID in another session is a different compaction.
	_, err = em.Session("s2").Start(ctx, emitter.WithID("x"))
	assert.NoError(t, err, "Start x in another session")

	// Replayed IDs are used too.
	require.NoError(t, s.Replay(ctx, emitter.Record{ID: "old", Status: protocol.Completed}), "Replay old")
	_, err = s.Start(ctx, emitter.WithID("old"))
	assert.ErrorIs(t, err, emitter.ErrIDReused, "Start of a replayed ID")
	kinds := obs.kinds()
	assert.Contains(t, kinds, "dropped", "observed events %v: no dropped event", kinds)
	assert.Len(t, wire(rec), 4, "wire (refused starts send nothing)")
}

func TestMintedIDsAreUniqueAndSkipUsedOnes(t *testing.T) {
	ctx := context.Background()
	seq := []protocol.ID{"dup", "dup", "dup", "fresh"}
	i := 0
	em, _, _ := newCapable(t, emitter.WithIDGenerator(func() protocol.ID { i++; return seq[i-1] }))
	s := em.Session("s")
	a, err := s.Start(ctx)
	require.NoError(t, err, "first Start")
	b, err := s.Start(ctx)
	require.NoError(t, err, "second Start")
	assert.Equal(t, protocol.ID("dup"), a.ID(), "first minted ID")
	assert.Equal(t, protocol.ID("fresh"), b.ID(), "second minted ID (the used ID skipped)")

	em2, _, _ := newCapable(t)
	seen := map[protocol.ID]bool{}
	for range 1000 {
		c, err := em2.Session("s").Start(ctx)
		require.NoError(t, err, "Start")
		assert.True(t, strings.HasPrefix(string(c.ID()), "cmp_"), "minted ID %q: want the prefix cmp_", c.ID())
		assert.False(t, seen[c.ID()], "minted ID %q twice", c.ID())

		seen[c.ID()] = true
	}
}

func TestSeveralOpenCompactionsSettleIndependently(t *testing.T) {
	ctx := context.Background()
	em, rec, _ := newCapable(t)
	s := em.Session("s")
	a, _ := s.Start(ctx, emitter.WithID("a"))
	b, _ := s.Start(ctx, emitter.WithID("b"))
	assert.Equal(t, 2, emitter.OpenOf(s), "open compactions")
	require.NoError(t, b.Chunk(ctx, protocol.Text("b1")), "b.Chunk")
	require.NoError(t, a.Chunk(ctx, protocol.Text("a1")), "a.Chunk")
	require.NoError(t, b.Complete(ctx), "b.Complete")
	require.NoError(t, a.Complete(ctx), "a.Complete")
	want := []string{
		`compaction_update a in_progress`,
		`compaction_update b in_progress`,
		`compaction_summary_chunk b +"b1"`,
		`compaction_summary_chunk a +"a1"`,
		`compaction_update b completed`,
		`compaction_update a completed`,
	}
	assert.Equal(t, want, wire(rec), "wire")
}

func TestChunksOutsideAnOpenCompactionAreDroppedAndReported(t *testing.T) {
	ctx := context.Background()
	em, rec, obs := newCapable(t)
	s := em.Session("s")
	_, err := s.Compaction("early")
	assert.ErrorIs(t, err, emitter.ErrNotOpen, "the handle of an ID before its Start")
	c, _ := s.Start(ctx, emitter.WithID("c"))
	byID, err := s.Compaction("c")
	require.NoError(t, err, "Session.Compaction c")
	require.Same(t, c, byID, "the handle by ID is Start's handle")
	require.NoError(t, byID.Chunk(ctx, protocol.Text("ok")), "Chunk c by ID")
	require.NoError(t, c.Complete(ctx), "Complete c")
	assert.ErrorIs(t, c.Chunk(ctx, protocol.Text("late")), emitter.ErrSettled, "Compaction.Chunk after settlement")
	assert.ErrorIs(t, byID.Chunk(ctx, protocol.Text("late")), emitter.ErrSettled, "Chunk by ID after settlement")
	_, err = s.Compaction("c")
	assert.ErrorIs(t, err, emitter.ErrSettled, "the handle of a settled ID")
	want := []string{
		`compaction_update c in_progress`,
		`compaction_summary_chunk c +"ok"`,
		`compaction_update c completed`,
	}
	assert.Equal(t, want, wire(rec), "wire")
	dropped := 0
	for _, k := range obs.kinds() {
		if k == "dropped" {
			dropped++
		}
	}
	assert.Equal(t, 2, dropped, "dropped events (the two late chunks)")
}

func TestExactlyOneTerminalPerID(t *testing.T) {
	ctx := context.Background()
	em, rec, obs := newCapable(t)
	s := em.Session("s")
	c, _ := s.Start(ctx, emitter.WithID("c"))
	require.NoError(t, c.Complete(ctx), "Complete c")
	assert.ErrorIs(t, c.Fail(ctx, errors.New("late")), emitter.ErrSettled, "Compaction.Fail after settlement")
	assert.ErrorIs(t, c.Cancel(ctx), emitter.ErrSettled, "Compaction.Cancel after settlement")
	assert.ErrorIs(t, c.Complete(ctx), emitter.ErrSettled, "Compaction.Complete after settlement")
	_, err := s.Start(ctx, emitter.WithID("c"))
	assert.ErrorIs(t, err, emitter.ErrIDReused, "Start of a settled ID")
	n, err := s.SettleAll(ctx, emitter.ErrTurnEnded)
	assert.NoError(t, err, "SettleAll")
	assert.Equal(t, 0, n, "SettleAll settled")
	want := []string{`compaction_update c in_progress`, `compaction_update c completed`}
	assert.Equal(t, want, wire(rec), "wire")
	kinds := obs.kinds()
	assert.Contains(t, kinds, "dropped", "observed events %v: no dropped event", kinds)
}

func TestFinalSummaryIsAnAuthoritativeReplacement(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		opts []emitter.SettleOption
		want string
	}{
		{"omitted keeps the streamed content", nil, `compaction_update c completed`},
		{"concrete summary replaces", []emitter.SettleOption{emitter.Summary(protocol.Text("new"))}, `compaction_update c completed summary=["new"]`},
		{"ClearSummary sends null", []emitter.SettleOption{emitter.Summary()}, `compaction_update c completed summary=null`},
		{"empty Summary clears", []emitter.SettleOption{emitter.Summary()}, `compaction_update c completed summary=null`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			em, rec, _ := newCapable(t)
			c, _ := em.Session("s").Start(ctx, emitter.WithID("c"))
			require.NoError(t, c.Chunk(ctx, protocol.Text("streamed")), "Chunk")
			require.NoError(t, c.Complete(ctx, tc.opts...), "Complete")
			w := wire(rec)
			assert.Equal(t, tc.want, w[len(w)-1], "terminal update")
			validateAll(t, rec, 1)
		})
	}
}

func TestOmitRedundantSummaryComparesByRunningHash(t *testing.T) {
	ctx := context.Background()
	em, rec, _ := newCapable(t, emitter.WithOmitRedundantSummary())
	s := em.Session("s")
	a, _ := s.Start(ctx, emitter.WithID("same"))
	for _, part := range []string{"## Retained", " context\n", "more"} {
		require.NoError(t, a.Chunk(ctx, protocol.Text(part)), "Chunk %q", part)
	}
	require.NoError(t, a.Complete(ctx, emitter.Summary(protocol.Text("## Retained context\nmore"))), "Complete same")
	b, _ := s.Start(ctx, emitter.WithID("differs"))
	require.NoError(t, b.Chunk(ctx, protocol.Text("draft")), "Chunk differs")
	require.NoError(t, b.Complete(ctx, emitter.Summary(protocol.Text("final"))), "Complete differs")
	c, _ := s.Start(ctx, emitter.WithID("nothing-streamed"))
	require.NoError(t, c.Complete(ctx, emitter.Summary(protocol.Text("x"))), "Complete nothing-streamed")
	w := wire(rec)
	for _, want := range []string{
		`compaction_update same completed`,
		`compaction_update differs completed summary=["final"]`,
		`compaction_update nothing-streamed completed summary=["x"]`,
	} {
		assert.Contains(t, w, want, "wire %q: no %q", w, want)
	}
	// The record still knows the final summary for replay.
	assert.Equal(t, "## Retained context\nmore", a.Record().Summary[0].Text, "recorded summary")
}

func TestFailureTextIsHumanReadable(t *testing.T) {
	ctx := context.Background()
	trace := errors.New("panic: runtime error: index out of range\n\ngoroutine 1 [running]:\nmain.main()")
	cases := []struct {
		name  string
		opts  []emitter.Option
		cause error
		want  string
	}{
		{"short prose passes", nil, errors.New("summary request failed"), "summary request failed"},
		{"stack trace becomes generic", nil, trace, "Compaction failed"},
		{"empty becomes generic", nil, errors.New(" "), "Compaction failed"},
		{"nil becomes generic", nil, nil, "Compaction failed"},
		{"very long becomes generic", nil, errors.New(strings.Repeat("x", 400)), "Compaction failed"},
		{"generic text configurable", []emitter.Option{emitter.WithGenericError("Context compaction failed")}, trace, "Context compaction failed"},
		{"whole mapping configurable", []emitter.Option{emitter.WithErrorText(func(error) string { return "nope" })}, errors.New("x"), "nope"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			em, rec, obs := newCapable(t, tc.opts...)
			c, _ := em.Session("s").Start(ctx, emitter.WithID("c"))
			require.NoError(t, c.Fail(ctx, tc.cause), "Fail")
			w := wire(rec)
			assert.Equal(t, "compaction_update c failed error="+tc.want, w[len(w)-1], "terminal update")
			if tc.cause != nil {
				settled := obs.waitFor(t, emitter.EventSettled)
				assert.Equal(t, tc.cause, settled.Err, "settled event's error (observers see the full cause)")
			}
		})
	}
}

func TestSettleAllDistinguishesCancelFromFailure(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		reason error
		want   string
	}{
		{emitter.ErrCancelled, "cancelled"},
		{fmt.Errorf("turn: %w", emitter.ErrCancelled), "cancelled"},
		{emitter.ErrTurnEnded, "failed error=" + emitter.ErrTurnEnded.Error()},
		{emitter.ErrConnectionClosed, "failed error=" + emitter.ErrConnectionClosed.Error()},
		{errors.New("provider returned 529"), "failed error=provider returned 529"},
		{nil, "failed error=" + emitter.ErrTurnEnded.Error()},
	} {
		t.Run(fmt.Sprint(tc.reason), func(t *testing.T) {
			em, rec, _ := newCapable(t)
			s := em.Session("s")
			_, _ = s.Start(ctx, emitter.WithID("a"))
			_, _ = s.Start(ctx, emitter.WithID("b"))
			done, _ := s.Start(ctx, emitter.WithID("done"))
			require.NoError(t, done.Complete(ctx), "Complete done")
			other, _ := em.Session("other").Start(ctx, emitter.WithID("o"))
			n, err := s.SettleAll(ctx, tc.reason)
			require.NoError(t, err, "SettleAll")
			assert.Equal(t, 2, n, "SettleAll settled")
			w := wire(rec)
			assert.Equal(t, "compaction_update a "+tc.want, w[len(w)-2], "first settled (oldest first)")
			assert.Equal(t, "compaction_update b "+tc.want, w[len(w)-1], "second settled")
			assert.Equal(t, 1, emitter.OpenCount(em), "open compactions (other sessions are untouched)")
			n, _ = em.SettleAll(ctx, emitter.ErrConnectionClosed)
			assert.Equal(t, 1, n, "Emitter.SettleAll settled")
			assert.ErrorIs(t, other.Complete(ctx), emitter.ErrSettled, "Complete of the other session's compaction after Emitter.SettleAll")
		})
	}
}

func TestWatchdogSettlesARunawayCompactionAsFailed(t *testing.T) {
	ctx := context.Background()
	em, rec, obs := newCapable(t, emitter.WithMaxDuration(20*time.Millisecond))
	c, _ := em.Session("s").Start(ctx, emitter.WithID("runaway"))
	ev := obs.waitFor(t, emitter.EventSettled)
	assert.Equal(t, protocol.Failed, ev.Status, "settled status")
	assert.ErrorIs(t, ev.Err, emitter.ErrTimeout, "settled event's error")
	assert.ErrorIs(t, c.Complete(ctx), emitter.ErrSettled, "the runtime's late Complete (it is dropped)")
	w := wire(rec)
	assert.Equal(t, "compaction_update runaway failed error=compaction timed out after 20ms", w[len(w)-1], "terminal update")
}

func TestHeartbeatResendsInProgressDuringSilence(t *testing.T) {
	ctx := context.Background()
	em, rec, obs := newCapable(t, emitter.WithHeartbeat(5*time.Millisecond))
	c, _ := em.Session("s").Start(ctx, emitter.WithID("slow"))
	obs.waitFor(t, emitter.EventHeartbeat)
	require.NoError(t, c.Complete(ctx), "Complete")
	w := wire(rec)
	assert.GreaterOrEqual(t, len(w), 3, "wire (start, a heartbeat, the terminal)")
	for _, l := range w[1 : len(w)-1] {
		assert.Equal(t, "compaction_update slow in_progress", l, "heartbeat (heartbeats are field-less in_progress updates)")
	}
	n := len(rec.Lines())
	time.Sleep(20 * time.Millisecond)
	assert.Equal(t, n, len(rec.Lines()), "lines 20ms after settlement (no heartbeat after settlement)")
}

func TestTerminalUpdatesSurviveACancelledContext(t *testing.T) {
	var sawCancelled bool
	var lines int
	n := emitter.NotifierFunc(func(ctx context.Context, _ string, _ any) error {
		if ctx.Err() != nil {
			sawCancelled = true
			return ctx.Err()
		}
		lines++
		return nil
	})
	em := emitter.New(n, emitter.WithNegotiation(capable))
	ctx, cancel := context.WithCancel(context.Background())
	c, err := em.Session("s").Start(ctx)
	require.NoError(t, err, "Start")
	cancel()
	require.NoError(t, c.Cancel(ctx), "Cancel with a cancelled context")
	assert.False(t, sawCancelled, "the notifier got a cancelled context for the terminal update")
	assert.Equal(t, 2, lines, "lines sent")
	_, err = em.Session("s").Start(ctx)
	assert.ErrorIs(t, err, emitter.ErrUndeliverable, "Start with a cancelled context (non-terminal updates honour the caller's context)")
}

func TestUndeliverableUpdatesAreReportedAndStillSettle(t *testing.T) {
	ctx := context.Background()
	em, rec, obs := newCapable(t)
	c, _ := em.Session("s").Start(ctx, emitter.WithID("c"))
	rec.Fail = errors.New("broken pipe")
	err := c.Complete(ctx)
	assert.ErrorIs(t, err, emitter.ErrUndeliverable, "Complete over a broken notifier")
	assert.ErrorContains(t, err, "broken pipe", "error %q does not carry the notifier's error %q", err, "broken pipe")
	assert.Equal(t, 0, emitter.OpenCount(em), "open compactions")
	kinds := obs.kinds()
	assert.Contains(t, kinds, "undeliverable", "observed events %v: no undeliverable event", kinds)
}

func TestReplayIsTerminalFirstAtTheCallersPosition(t *testing.T) {
	ctx := context.Background()
	em, rec, obs := newCapable(t)
	s := em.Session("s")
	for _, r := range []emitter.Record{
		{ID: "done", Status: protocol.Completed, Summary: []protocol.ContentBlock{protocol.Text("kept")}, Displayable: true},
		{ID: "nosum", Status: protocol.Completed},
		{ID: "bad", Status: protocol.Failed, Error: "summary request failed"},
		{ID: "stopped", Status: protocol.Cancelled},
		{ID: "running", Status: protocol.InProgress},
	} {
		require.NoError(t, s.Replay(ctx, r), "Replay %s", r.ID)
	}
	assert.ErrorIs(t, s.Replay(ctx, emitter.Record{}), protocol.ErrInvalidID, "Replay of a record without an ID")
	// Replay uses authoritative patches so a client that still holds the
	// entity ends with exactly the stored state, never a duplicate.
	want := []string{
		`compaction_update done completed summary=["kept"] error=null`,
		`compaction_update nosum completed summary=null error=null`,
		`compaction_update bad failed summary=null error=summary request failed`,
		`compaction_update stopped cancelled summary=null error=null`,
	}
	assert.Equal(t, want, wire(rec), "wire")
	kinds := obs.kinds()
	assert.Contains(t, kinds, "skipped", "observed events %v: no skipped event", kinds)
	assert.Equal(t, 0, emitter.OpenCount(em), "open compactions")
	validateAll(t, rec, 1)
	validateAll(t, rec, 2)
}

func TestCapabilityGateLiveAndOnReplay(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		n    capability.Negotiation
		mode capability.Mode
		sent bool
	}{
		{"v1 without the capability", capability.Negotiation{Version: 1}, capability.Off, false},
		{"v1 zero negotiation", capability.Negotiation{}, capability.Off, false},
		{"v1 with the capability", capable, capability.Standard, true},
		{"v2", capability.Negotiation{Version: 2, Compaction: true}, capability.Standard, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &wiretest.Recorder{}
			em := emitter.New(rec, emitter.WithNegotiation(tc.n))
			assert.Equal(t, tc.mode, em.Mode(), "mode")
			s := em.Session("s")
			c, err := s.Start(ctx, emitter.UserDisplayable())
			require.NoError(t, err, "Start")
			require.NoError(t, c.Chunk(ctx, protocol.Text("x")), "Chunk")
			require.NoError(t, c.Complete(ctx), "Complete")
			f, err := s.Start(ctx)
			require.NoError(t, err, "Start")
			require.NoError(t, f.Fail(ctx, errors.New("x")), "Fail")
			require.NoError(t, s.Replay(ctx, emitter.Record{ID: "r", Status: protocol.Completed}), "Replay")
			if tc.sent {
				assert.NotEmpty(t, rec.Lines(), "nothing sent to a client with the capability")
			} else {
				noLines(t, rec, "a client without the capability never receives a compaction update")
			}
		})
	}
	// A fallback renderer is used only for clients without the capability.
	var rendered []emitter.EventKind
	fb := emitter.RendererFunc(func(_ context.Context, ev emitter.Event, _ emitter.Notifier) error {
		rendered = append(rendered, ev.Kind)
		return nil
	})
	em := emitter.New(&wiretest.Recorder{}, emitter.WithFallback(fb))
	assert.Equal(t, capability.Fallback, em.Mode(), "mode with a fallback renderer")
	c, _ := em.Session("s").Start(ctx)
	_ = c.Complete(ctx)
	_ = em.Session("s").Replay(ctx, emitter.Record{ID: "r", Status: protocol.Failed})
	assert.Equal(t, []emitter.EventKind{emitter.EventStarted, emitter.EventSettled, emitter.EventReplayed}, rendered, "rendered events")
	em = emitter.New(&wiretest.Recorder{}, emitter.WithFallback(fb), emitter.WithNegotiation(capable))
	assert.Equal(t, capability.Standard, em.Mode(), "mode with a fallback renderer and the capability")
	em = emitter.New(&wiretest.Recorder{}, emitter.WithPolicy(func(capability.Negotiation, bool) capability.Mode { return capability.Fallback }))
	assert.Equal(t, capability.Off, em.Mode(), "mode (fallback mode without a renderer is off)")
}

func TestSummaryPolicyDefaultsToUserDisplayableOnly(t *testing.T) {
	ctx := context.Background()
	rec := &wiretest.Recorder{}
	obs := newEvents()
	em := emitter.New(rec, emitter.WithNegotiation(capable), emitter.WithObserver(obs))
	s := em.Session("s")
	hidden, _ := s.Start(ctx, emitter.WithID("hidden"))
	require.ErrorIs(t, hidden.Chunk(ctx, protocol.Text("secret context")), emitter.ErrWithheld, "Chunk of a compaction not UserDisplayable")
	require.NoError(t, hidden.Complete(ctx, emitter.Summary(protocol.Text("secret context"))), "Complete hidden")
	shown, _ := s.Start(ctx, emitter.WithID("shown"), emitter.UserDisplayable())
	require.NoError(t, shown.Chunk(ctx, protocol.Text("visible")), "Chunk shown")
	require.NoError(t, shown.Complete(ctx, emitter.Summary(protocol.Text("visible"))), "Complete shown")
	want := []string{
		`compaction_update hidden in_progress`,
		`compaction_update hidden completed`,
		`compaction_update shown in_progress`,
		`compaction_summary_chunk shown +"visible"`,
		`compaction_update shown completed summary=["visible"]`,
	}
	assert.Equal(t, want, wire(rec), "wire")
	kinds := obs.kinds()
	assert.Contains(t, kinds, "withheld", "observed events %v: no withheld event", kinds)

	redact := func(_ emitter.Info, b protocol.ContentBlock) (protocol.ContentBlock, bool) {
		b.Text = strings.ReplaceAll(b.Text, "sk-123", "[redacted]")
		return b, true
	}
	rec2 := &wiretest.Recorder{}
	em = emitter.New(rec2, emitter.WithNegotiation(capable), emitter.WithSummaryPolicy(redact))
	c, _ := em.Session("s").Start(ctx, emitter.WithID("r"))
	require.NoError(t, c.Chunk(ctx, protocol.Text("key sk-123")), "Chunk r")
	require.NoError(t, c.Complete(ctx, emitter.Summary(protocol.Text("uses sk-123"))), "Complete r")
	want = []string{
		`compaction_update r in_progress`,
		`compaction_summary_chunk r +"key [redacted]"`,
		`compaction_update r completed summary=["uses [redacted]"]`,
	}
	assert.Equal(t, want, wire(rec2), "wire with a redacting policy")
}

func TestNilHandleIsAnErrorNotAPanic(t *testing.T) {
	var c *emitter.Compaction
	ctx := context.Background()
	assert.ErrorIs(t, c.Chunk(ctx, protocol.Text("x")), emitter.ErrNotOpen, "Chunk on a nil handle")
	assert.ErrorIs(t, c.Complete(ctx), emitter.ErrNotOpen, "Complete on a nil handle")
	assert.ErrorIs(t, c.Fail(ctx, nil), emitter.ErrNotOpen, "Fail on a nil handle")
	assert.ErrorIs(t, c.Cancel(ctx), emitter.ErrNotOpen, "Cancel on a nil handle")
	assert.Empty(t, c.ID(), "ID of a nil handle")
	assert.Equal(t, emitter.Record{}, c.Record(), "Record of a nil handle")
}

func TestStartMetaAndSettleMetaReachTheWire(t *testing.T) {
	ctx := context.Background()
	em, rec, _ := newCapable(t)
	c, _ := em.Session("s").Start(ctx, emitter.WithID("m"), emitter.WithStartMeta(protocol.Meta{"k": []byte(`1`)}))
	require.NoError(t, c.Complete(ctx, emitter.WithSettleMeta(protocol.Meta{"k": []byte(`2`)})), "Complete")
	want := []string{
		`compaction_update m in_progress _meta=map[k:1]`,
		`compaction_update m completed _meta=map[k:2]`,
	}
	assert.Equal(t, want, wire(rec), "wire")
}

func TestSettledEventsSayWhoSettled(t *testing.T) {
	ctx := context.Background()
	em, _, obs := newCapable(t, emitter.WithMaxDuration(20*time.Millisecond))
	s := em.Session("s")
	byRuntime, _ := s.Start(ctx, emitter.WithID("runtime"))
	require.NoError(t, byRuntime.Cancel(ctx), "Cancel")
	assert.Equal(t, emitter.SettledByRuntime, obs.waitFor(t, emitter.EventSettled).SettledBy, "settled by after Cancel")
	_, _ = s.Start(ctx, emitter.WithID("bulk"))
	_, err := s.SettleAll(ctx, emitter.ErrCancelled)
	require.NoError(t, err, "SettleAll")
	ev := obs.waitFor(t, emitter.EventSettled)
	assert.Equal(t, protocol.ID("bulk"), ev.ID, "settled event's ID")
	assert.Equal(t, emitter.SettledBySettleAll, ev.SettledBy, "settled by after SettleAll")
	_, _ = s.Start(ctx, emitter.WithID("runaway"))
	ev = obs.waitFor(t, emitter.EventSettled)
	assert.Equal(t, emitter.SettledByWatchdog, ev.SettledBy, "settled by after the watchdog")
	assert.Equal(t, "watchdog", ev.SettledBy.String(), "SettledByWatchdog.String()")
}
