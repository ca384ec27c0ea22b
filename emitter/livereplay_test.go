package emitter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// held is what a client holds of one compaction, as the RFD's client
// rules (conformance.Reducer) build it. Summaries compare as a client shows
// them: adjacent text blocks joined, since chunks split text arbitrarily.
func held(t *testing.T, version int, lines [][]byte, id protocol.ID) string {
	t.Helper()
	r := conformance.NewReducer(version)
	for _, l := range lines {
		require.NoError(t, r.ApplyMessage(l), "reducer\nline: %s", l)
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
				h, err := s.Compaction(c.ID())
				if err != nil {
					return err
				}
				return h.Fail(ctx, errors.New("provider overloaded"))
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
				require.NoError(t, err, "Start")
				for _, text := range []string{"draft ", "text"} {
					err := c.Chunk(ctx, protocol.Text(text))
					if !w.hidden {
						require.NoError(t, err, "Chunk %q", text)
					}
				}
				require.NoError(t, w.settle(ctx, s, c), "settle")
				got := held(t, version, live.Lines(), "cmp_1")
				assert.Equal(t, w.want, got, "live client holds")

				require.Len(t, finals, 1, "final records")
				rec := finals[0]
				r := c.Record()
				assert.Equal(t, rec, r, "the record handed over is not the handle's:\nhandle's: %s\n  handed: %s", recordJSON(r), recordJSON(rec))
				replayed := &wiretest.Recorder{}
				require.NoError(t, emitter.New(replayed, opts...).Session("s").Replay(ctx, rec), "Replay")
				fromReplay := held(t, version, replayed.Lines(), "cmp_1")
				assert.Equal(t, got, fromReplay, "a client that only sees the replay holds %s, the live client %s", fromReplay, got)
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
	require.NoError(t, err, "Start")
	require.NoError(t, c.Chunk(ctx, protocol.Text("partial")), "Chunk")
	obs.waitFor(t, emitter.EventSettled)
	got := held(t, 1, live.Lines(), "cmp_1")
	assert.Equal(t, `failed summary=none error="compaction timed out after 20ms"`, got, "live client holds")
	replayed := &wiretest.Recorder{}
	require.NoError(t, emitter.New(replayed, emitter.WithNegotiation(capable)).Session("s").Replay(ctx, c.Record()), "Replay")
	fromReplay := held(t, 1, replayed.Lines(), "cmp_1")
	assert.Equal(t, got, fromReplay, "a client that only sees the replay holds %s, the live client %s", fromReplay, got)
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
		require.NoError(t, err, "Start %s", id)
		require.NoError(t, c.Chunk(ctx, protocol.Text("partial")), "Chunk %s", id)
		return c
	}
	failed := streamed("failed")
	require.NoError(t, failed.Fail(ctx, errors.New("boom")), "Fail")
	cancelled := streamed("cancelled")
	require.NoError(t, cancelled.Cancel(ctx), "Cancel")
	completed := streamed("completed")
	require.NoError(t, completed.Complete(ctx), "Complete")
	quiet, _ := s.Start(ctx, emitter.WithID("quiet"))
	require.NoError(t, quiet.Fail(ctx, errors.New("boom")), "Fail quiet")
	turn := streamed("turn")
	_, err := s.SettleAll(ctx, emitter.ErrTurnEnded)
	require.NoError(t, err, "SettleAll")

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
	assert.Equal(t, want, terminals, "terminal updates")
	for _, c := range []*emitter.Compaction{failed, cancelled, quiet, turn} {
		assert.Nil(t, c.Record().Summary, "%s: record summary", c.ID())
	}
	assert.Nil(t, completed.Record().Summary, "completed: record summary (without OnFinalRecord the emitter keeps no streamed blocks, so the record of a completion that kept them has none)")
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
	require.NoError(t, err, "Start")
	err = c.Chunk(ctx, protocol.Text("secret"))
	require.ErrorIs(t, err, emitter.ErrWithheld, "Compaction.Chunk of a hidden compaction")
	assert.ErrorContains(t, err, "UserDisplayable", "ErrWithheld text %q does not name UserDisplayable (the error says how to opt in)", err)
	h, err := s.Compaction("hidden")
	require.NoError(t, err, "Session.Compaction hidden")
	require.ErrorIs(t, h.Chunk(ctx, protocol.Text("secret")), emitter.ErrWithheld, "Chunk by ID of a hidden compaction")
	require.NoError(t, c.Complete(ctx, emitter.Summary(protocol.Text("secret summary"))), "Complete with a withheld summary (the terminal update was sent: Complete does not fail)")
	want := []string{
		`compaction_update hidden in_progress`,
		`compaction_update hidden completed`,
	}
	assert.Equal(t, want, wire(rec), "wire")
	settled := obs.waitFor(t, emitter.EventSettled)
	assert.Equal(t, 3, settled.Withheld, "settled event's Withheld (two chunks and the final summary)")
	obs.mu.Lock()
	for _, ev := range obs.evs {
		if ev.Kind == emitter.EventWithheld {
			assert.ErrorIs(t, ev.Err, emitter.ErrWithheld, "withheld event's error")
		}

	}
	obs.mu.Unlock()

	shown, _ := s.Start(ctx, emitter.WithID("shown"), emitter.UserDisplayable())
	require.NoError(t, shown.Chunk(ctx, protocol.Text("visible")), "Chunk shown")
	require.NoError(t, shown.Complete(ctx), "Complete shown")
	assert.Equal(t, 0, obs.waitFor(t, emitter.EventSettled).Withheld, "settled event's Withheld for a shown compaction")
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
	require.NoError(t, hidden.Complete(ctx, emitter.Summary(protocol.Text("secret"))), "Complete hidden")
	shown, _ := s.Start(ctx, emitter.WithID("shown"), emitter.UserDisplayable())
	require.NoError(t, shown.Chunk(ctx, protocol.Text("visible")), "Chunk shown")
	require.NoError(t, shown.Complete(ctx), "Complete shown")
	require.NoError(t, s.Replay(ctx, emitter.Record{ID: "old", Status: protocol.Completed, Summary: []protocol.ContentBlock{protocol.Text("secret")}}), "Replay")

	var lines []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "compaction summary withheld") {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, 2, "withheld log lines (one for the live compaction, one for the replayed one):\n%s", buf.String())
	for _, want := range []string{"compaction=hidden", "blocks=51", "level=INFO", "UserDisplayable()"} {
		assert.Contains(t, lines[0], want, "live compaction's log line %q: no %q", lines[0], want)
	}
	want := "compaction=old"
	assert.Contains(t, lines[1], want, "replayed compaction's log line %q: no %q", lines[1], want)
}
