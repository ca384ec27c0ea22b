package emitter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
)

// held is what a client holds of one compaction, as the RFD's client
// rules (conformance.Reducer) build it. Summaries compare as a client shows
// them: adjacent text blocks joined, since chunks split text arbitrarily.
func held(t *testing.T, version int, lines [][]byte, id protocol.ID) string {
	t.Helper()
	r := conformance.NewReducer(version)
	for _, l := range lines {
		if err := r.ApplyMessage(l); err != nil {
			t.Fatalf("reducer: %v\nline: %s", err, l)
		}
	}
	for _, sid := range r.Sessions() {
		for _, it := range r.Timeline(sid) {
			if it.Kind != conformance.KindCompaction || it.ID != string(id) {
				continue
			}
			var sum strings.Builder
			for _, b := range it.Summary {
				var blk struct{ Type, Text string }
				_ = json.Unmarshal(b, &blk)
				if blk.Type == "text" {
					sum.WriteString(blk.Text)
				} else {
					sum.Write(b)
				}
			}
			errText := "none"
			if it.Error != nil {
				errText = fmt.Sprintf("%q", *it.Error)
			}
			summary := "none"
			if it.Summary != nil {
				summary = fmt.Sprintf("%q", sum.String())
			}
			return fmt.Sprintf("%s summary=%s error=%s", it.Status, summary, errText)
		}
	}
	return "absent"
}

// settleWay is one way a compaction that streamed "draft " and "text" ends.
type settleWay struct {
	name string
	// hidden starts the compaction without UserDisplayable.
	hidden bool
	// policy replaces the default summary policy, DisplayableOnly.
	policy emitter.SummaryPolicy
	settle func(ctx context.Context, s *emitter.Session, c *emitter.Compaction) error
	// want is what the live client holds afterwards.
	want string
}

func settleWays() []settleWay {
	final := emitter.Summary(protocol.Text("## Final"))
	return []settleWay{
		{name: "completed keeping the streamed summary", want: `completed summary="draft text" error=none`,
			settle: func(ctx context.Context, _ *emitter.Session, c *emitter.Compaction) error { return c.Complete(ctx) }},
		{name: "completed with a final summary", want: `completed summary="## Final" error=none`,
			settle: func(ctx context.Context, _ *emitter.Session, c *emitter.Compaction) error {
				return c.Complete(ctx, final)
			}},
		{name: "completed clearing the summary", want: `completed summary=none error=none`,
			settle: func(ctx context.Context, _ *emitter.Session, c *emitter.Compaction) error {
				return c.Complete(ctx, emitter.Summary())
			}},
		{name: "completed with an empty summary", want: `completed summary=none error=none`,
			settle: func(ctx context.Context, _ *emitter.Session, c *emitter.Compaction) error {
				return c.Complete(ctx, emitter.Summary())
			}},
		{name: "failed by the runtime", want: `failed summary=none error="provider overloaded"`,
			settle: func(ctx context.Context, _ *emitter.Session, c *emitter.Compaction) error {
				return c.Fail(ctx, errors.New("provider overloaded"))
			}},
		{name: "failed by the runtime, confirming the partial summary", want: `failed summary="draft text" error="provider overloaded"`,
			settle: func(ctx context.Context, _ *emitter.Session, c *emitter.Compaction) error {
				return c.Fail(ctx, errors.New("provider overloaded"), emitter.Summary(protocol.Text("draft text")))
			}},
		{name: "failed by id", want: `failed summary=none error="provider overloaded"`,
			settle: func(ctx context.Context, s *emitter.Session, c *emitter.Compaction) error {
				return s.Fail(ctx, c.ID(), errors.New("provider overloaded"))
			}},
		{name: "cancelled by the runtime", want: `cancelled summary=none error=none`,
			settle: func(ctx context.Context, _ *emitter.Session, c *emitter.Compaction) error { return c.Cancel(ctx) }},
		{name: "settled at the end of the turn", want: `failed summary=none error="the turn ended before the compaction finished"`,
			settle: func(ctx context.Context, s *emitter.Session, _ *emitter.Compaction) error {
				_, err := s.SettleAll(ctx, emitter.ErrTurnEnded)
				return err
			}},
		{name: "settled after a user cancel", want: `cancelled summary=none error=none`,
			settle: func(ctx context.Context, s *emitter.Session, _ *emitter.Compaction) error {
				_, err := s.SettleAll(ctx, emitter.ErrCancelled)
				return err
			}},
		{name: "settled after a caught panic", want: `failed summary=none error="the agent crashed during compaction"`,
			settle: func(ctx context.Context, s *emitter.Session, _ *emitter.Compaction) error {
				_, err := s.SettleAll(ctx, emitter.ErrAgentCrashed)
				return err
			}},
		{name: "not displayable", hidden: true, want: `completed summary=none error=none`,
			settle: func(ctx context.Context, _ *emitter.Session, c *emitter.Compaction) error {
				return c.Complete(ctx, final)
			}},
		{name: "final summary withheld by a policy that passed the chunks", want: `completed summary=none error=none`,
			policy: func(_ emitter.Info, b protocol.ContentBlock) (protocol.ContentBlock, bool) {
				return b, !strings.HasPrefix(b.Text, "##")
			},
			settle: func(ctx context.Context, _ *emitter.Session, c *emitter.Compaction) error {
				return c.Complete(ctx, final)
			}},
	}
}

// TestLiveAndReplayAgreeForEveryTerminalStatus: whatever a client holds
// once a compaction's terminal update is applied, a client that only sees
// the replay of its final record (the one OnFinalRecord hands over) holds
// too (status, summary, error), for every terminal status and every
// settlement path, the kit's included, a completion that kept what was
// streamed among them.
func TestLiveAndReplayAgreeForEveryTerminalStatus(t *testing.T) {
	ctx := context.Background()
	for _, version := range []int{1, 2} {
		for _, w := range settleWays() {
			t.Run(fmt.Sprintf("v%d/%s", version, w.name), func(t *testing.T) {
				n := capability.Negotiation{Version: version, Compaction: true}
				opts := []emitter.Option{emitter.WithNegotiation(n)}
				if w.policy != nil {
					opts = append(opts, emitter.WithSummaryPolicy(w.policy))
				}
				var finals []emitter.Record
				live := &wiretest.Recorder{}
				s := emitter.New(live, append(opts, emitter.OnFinalRecord(func(_ context.Context, _ string, rec emitter.Record) {
					finals = append(finals, rec)
				}))...).Session("s")
				start := []emitter.StartOption{emitter.WithID("cmp_1")}
				if !w.hidden {
					start = append(start, emitter.UserDisplayable())
				}
				c, err := s.Start(ctx, start...)
				if err != nil {
					t.Fatalf("Start: %v", err)
				}
				for _, text := range []string{"draft ", "text"} {
					if err := c.Chunk(ctx, protocol.Text(text)); !w.hidden && err != nil {
						t.Fatalf("Chunk %q: %v", text, err)
					}
				}
				if err := w.settle(ctx, s, c); err != nil {
					t.Fatalf("settle: %v", err)
				}
				got := held(t, version, live.Lines(), "cmp_1")
				if got != w.want {
					t.Errorf("live client holds %s, want %s", got, w.want)
				}

				if len(finals) != 1 {
					t.Fatalf("final records: got %d, want one", len(finals))
				}
				rec := finals[0]
				if r := c.Record(); !reflect.DeepEqual(r, rec) {
					t.Errorf("the record handed over is not the handle's:\nhandle's: %s\n  handed: %s", recordJSON(r), recordJSON(rec))
				}
				replayed := &wiretest.Recorder{}
				if err := emitter.New(replayed, opts...).Session("s").Replay(ctx, rec); err != nil {
					t.Fatalf("Replay: %v", err)
				}
				if fromReplay := held(t, version, replayed.Lines(), "cmp_1"); fromReplay != got {
					t.Errorf("a client that only sees the replay holds %s, the live client %s", fromReplay, got)
				}
			})
		}
	}
}

// TestWatchdogSettlementAgreesWithReplay: the watchdog's failure after
// streamed output clears the summary live, as the replay of its record
// does.
func TestWatchdogSettlementAgreesWithReplay(t *testing.T) {
	ctx := context.Background()
	live := &wiretest.Recorder{}
	obs := newEvents()
	em := emitter.New(live, emitter.WithNegotiation(capable), emitter.WithObserver(obs), emitter.WithMaxDuration(20*time.Millisecond))
	c, err := em.Session("s").Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := c.Chunk(ctx, protocol.Text("partial")); err != nil {
		t.Fatalf("Chunk: %v", err)
	}
	obs.waitFor(t, emitter.EventSettled)
	got := held(t, 1, live.Lines(), "cmp_1")
	if want := `failed summary=none error="compaction timed out after 20ms"`; got != want {
		t.Errorf("live client holds %s, want %s", got, want)
	}
	replayed := &wiretest.Recorder{}
	if err := emitter.New(replayed, emitter.WithNegotiation(capable)).Session("s").Replay(ctx, c.Record()); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if fromReplay := held(t, 1, replayed.Lines(), "cmp_1"); fromReplay != got {
		t.Errorf("a client that only sees the replay holds %s, the live client %s", fromReplay, got)
	}
}

// TestFailedOrCancelledAfterPartialOutputClearsTheSummary: the terminal
// update of a failed or cancelled compaction that streamed a summary
// nobody confirmed carries summary: null; without streamed output it
// omits the summary as before; Record keeps no summary. Only a completion
// keeps what was streamed.
func TestFailedOrCancelledAfterPartialOutputClearsTheSummary(t *testing.T) {
	ctx := context.Background()
	em, rec, _ := newCapable(t)
	s := em.Session("s")
	streamed := func(id protocol.ID) *emitter.Compaction {
		c, err := s.Start(ctx, emitter.WithID(id))
		if err != nil {
			t.Fatalf("Start %s: %v", id, err)
		}
		if err := c.Chunk(ctx, protocol.Text("partial")); err != nil {
			t.Fatalf("Chunk %s: %v", id, err)
		}
		return c
	}
	failed := streamed("failed")
	if err := failed.Fail(ctx, errors.New("boom")); err != nil {
		t.Fatalf("Fail: %v", err)
	}
	cancelled := streamed("cancelled")
	if err := cancelled.Cancel(ctx); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	completed := streamed("completed")
	if err := completed.Complete(ctx); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	quiet, _ := s.Start(ctx, emitter.WithID("quiet"))
	if err := quiet.Fail(ctx, errors.New("boom")); err != nil {
		t.Fatalf("Fail quiet: %v", err)
	}
	turn := streamed("turn")
	_, err := s.SettleAll(ctx, emitter.ErrTurnEnded)
	if err != nil {
		t.Fatalf("SettleAll: %v", err)
	}

	var terminals []string
	for _, l := range wire(rec) {
		if strings.HasPrefix(l, "compaction_update") && !strings.Contains(l, "in_progress") {
			terminals = append(terminals, l)
		}
	}
	want := []string{
		`compaction_update failed failed summary=null error=boom`,
		`compaction_update cancelled cancelled summary=null`,
		`compaction_update completed completed`,
		`compaction_update quiet failed error=boom`,
		`compaction_update turn failed summary=null error=` + emitter.ErrTurnEnded.Error(),
	}
	if !slices.Equal(terminals, want) {
		t.Errorf("terminal updates:\n got %q\nwant %q", terminals, want)
	}
	for _, c := range []*emitter.Compaction{failed, cancelled, quiet, turn} {
		if sum := c.Record().Summary; sum != nil {
			t.Errorf("%s: record summary: got %+v, want nil", c.ID(), sum)
		}
	}
	if sum := completed.Record().Summary; sum != nil {
		t.Errorf("completed: record summary: got %+v, want nil (without OnFinalRecord the emitter keeps no streamed blocks, so the record of a completion that kept them has none)", sum)
	}
	validateAll(t, rec, 1)
}

// TestWithheldChunkReturnsErrWithheld: a chunk the summary policy withholds
// is not sent and Chunk (by handle or by ID) says so with ErrWithheld; a
// completion whose final summary is withheld still sends its terminal
// update and returns nil, and its settled event counts what was withheld.
func TestWithheldChunkReturnsErrWithheld(t *testing.T) {
	ctx := context.Background()
	rec := &wiretest.Recorder{}
	obs := newEvents()
	em := emitter.New(rec, emitter.WithNegotiation(capable), emitter.WithObserver(obs))
	s := em.Session("s")
	c, err := s.Start(ctx, emitter.WithID("hidden"))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	err = c.Chunk(ctx, protocol.Text("secret"))
	if !errors.Is(err, emitter.ErrWithheld) {
		t.Fatalf("Compaction.Chunk of a hidden compaction: got %v, want ErrWithheld", err)
	}
	if !strings.Contains(err.Error(), "UserDisplayable") {
		t.Errorf("ErrWithheld text %q does not name UserDisplayable (the error says how to opt in)", err)
	}
	if err := s.Chunk(ctx, "hidden", protocol.Text("secret")); !errors.Is(err, emitter.ErrWithheld) {
		t.Fatalf("Session.Chunk of a hidden compaction: got %v, want ErrWithheld", err)
	}
	if err := c.Complete(ctx, emitter.Summary(protocol.Text("secret summary"))); err != nil {
		t.Fatalf("Complete with a withheld summary: %v (the terminal update was sent: Complete does not fail)", err)
	}
	want := []string{
		`compaction_update hidden in_progress`,
		`compaction_update hidden completed`,
	}
	if got := wire(rec); !slices.Equal(got, want) {
		t.Errorf("wire:\n got %q\nwant %q", got, want)
	}
	settled := obs.waitFor(t, emitter.EventSettled)
	if settled.Withheld != 3 {
		t.Errorf("settled event's Withheld: got %d, want 3 (two chunks and the final summary)", settled.Withheld)
	}
	obs.mu.Lock()
	for _, ev := range obs.evs {
		if ev.Kind == emitter.EventWithheld && !errors.Is(ev.Err, emitter.ErrWithheld) {
			t.Errorf("withheld event's error: got %v, want ErrWithheld", ev.Err)
		}
	}
	obs.mu.Unlock()

	shown, _ := s.Start(ctx, emitter.WithID("shown"), emitter.UserDisplayable())
	if err := shown.Chunk(ctx, protocol.Text("visible")); err != nil {
		t.Fatalf("Chunk shown: %v", err)
	}
	if err := shown.Complete(ctx); err != nil {
		t.Fatalf("Complete shown: %v", err)
	}
	if n := obs.waitFor(t, emitter.EventSettled).Withheld; n != 0 {
		t.Errorf("settled event's Withheld for a shown compaction: got %d, want 0", n)
	}
}

// TestSlogObserverLogsOneLinePerCompactionWithAWithheldSummary: however
// many blocks were withheld, the default logger sees one Info line per
// compaction (at its settlement or replay) naming UserDisplayable, and
// none for a compaction whose summary was shown.
func TestSlogObserverLogsOneLinePerCompactionWithAWithheldSummary(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	em := emitter.New(&wiretest.Recorder{}, emitter.WithNegotiation(capable), emitter.WithObserver(emitter.NewSlogObserver(logger)))
	s := em.Session("s")
	hidden, _ := s.Start(ctx, emitter.WithID("hidden"))
	for range 50 {
		_ = hidden.Chunk(ctx, protocol.Text("secret"))
	}
	if err := hidden.Complete(ctx, emitter.Summary(protocol.Text("secret"))); err != nil {
		t.Fatalf("Complete hidden: %v", err)
	}
	shown, _ := s.Start(ctx, emitter.WithID("shown"), emitter.UserDisplayable())
	if err := shown.Chunk(ctx, protocol.Text("visible")); err != nil {
		t.Fatalf("Chunk shown: %v", err)
	}
	if err := shown.Complete(ctx); err != nil {
		t.Fatalf("Complete shown: %v", err)
	}
	if err := s.Replay(ctx, emitter.Record{ID: "old", Status: protocol.Completed, Summary: []protocol.ContentBlock{protocol.Text("secret")}}); err != nil {
		t.Fatalf("Replay: %v", err)
	}

	var lines []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "compaction summary withheld") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("withheld log lines: got %d, want 2 (one for the live compaction, one for the replayed one):\n%s", len(lines), buf.String())
	}
	for _, want := range []string{"compaction=hidden", "blocks=51", "level=INFO", "UserDisplayable()"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("live compaction's log line %q: no %q", lines[0], want)
		}
	}
	if want := "compaction=old"; !strings.Contains(lines[1], want) {
		t.Errorf("replayed compaction's log line %q: no %q", lines[1], want)
	}
}
