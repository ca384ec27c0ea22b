package emitter_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
)

// turns is a host's turn state for one session, as WithTurns reads it.
type turns struct{ on atomic.Bool }

func (tt *turns) inTurn(string) bool { return tt.on.Load() }

func newTurned(t *testing.T, outside emitter.OutsideTurn, opts ...emitter.Option) (*emitter.Emitter, *wiretest.Recorder, *turns) {
	t.Helper()
	tt := &turns{}
	em, rec, _ := newCapable(t, append([]emitter.Option{emitter.WithTurns(tt.inTurn, outside)}, opts...)...)
	return em, rec, tt
}

func TestStartOutsideATurnIsRefusedWithErrOutsideTurn(t *testing.T) {
	ctx := context.Background()
	em, rec, tt := newTurned(t, emitter.RefuseOutsideTurn)
	s := em.Session("s1")

	c, err := s.Start(ctx, emitter.WithID("late"))
	if c != nil {
		t.Errorf("Start outside a turn returned a handle %v", c.ID())
	}
	if !errors.Is(err, emitter.ErrOutsideTurn) {
		t.Fatalf("Start outside a turn: got %v, want ErrOutsideTurn", err)
	}
	noLines(t, rec, "nothing reaches a client that is not in a turn")
	if err := s.Fail(ctx, "late2", errors.New("boom")); !errors.Is(err, emitter.ErrOutsideTurn) {
		t.Fatalf("Session.Fail outside a turn: got %v, want ErrOutsideTurn (a failure before any start is a start too)", err)
	}
	noLines(t, rec, "a refused failure sends nothing")

	tt.on.Store(true)
	c, err = s.Start(ctx, emitter.WithID("in"))
	if err != nil {
		t.Fatalf("Start in a turn: %v", err)
	}
	if err := c.Complete(ctx); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	want := []string{"compaction_update in in_progress", "compaction_update in completed"}
	if got := wire(rec); !slices.Equal(got, want) {
		t.Errorf("wire:\n got %q\nwant %q", got, want)
	}
	validateAll(t, rec, 1)
}

func TestBackgroundCompactionIsShownOnlyWhenItSettles(t *testing.T) {
	ctx := context.Background()
	em, rec, tt := newTurned(t, emitter.RefuseOutsideTurn)
	s := em.Session("s1")
	tt.on.Store(true)

	c, err := s.Start(ctx, emitter.WithID("bg"), emitter.Background(), emitter.UserDisplayable())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := c.Chunk(ctx, protocol.Text("## Retained")); err != nil {
		t.Fatalf("Chunk 1: %v", err)
	}
	noLines(t, rec, "a background compaction is not shown half-way")

	// The turn ends: SettleAll leaves it running, the client saw nothing.
	tt.on.Store(false)
	n, err := s.SettleAll(ctx, emitter.ErrTurnEnded)
	if err != nil {
		t.Fatalf("SettleAll: %v", err)
	}
	if n != 0 {
		t.Errorf("SettleAll at the turn's end settled %d, want 0", n)
	}
	if err := c.Chunk(ctx, protocol.Text(" context")); err != nil {
		t.Fatalf("Chunk 2: %v", err)
	}
	if err := c.Complete(ctx); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	noLines(t, rec, "settled between turns: held until the next turn")
	if got := c.Record().Status; got != protocol.Completed {
		t.Errorf("record status: got %q, want %q", got, protocol.Completed)
	}
	if got, want := c.Record().Summary, []protocol.ContentBlock{protocol.Text("## Retained"), protocol.Text(" context")}; !reflect.DeepEqual(got, want) {
		t.Errorf("record summary: got %+v, want %+v (the record keeps the summary the client will hold)", got, want)
	}

	tt.on.Store(true)
	if err := s.Deliver(ctx); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if got, want := wire(rec), []string{`compaction_update bg completed summary=["## Retained" " context"]`}; !slices.Equal(got, want) {
		t.Errorf("wire:\n got %q\nwant %q (terminal-first, with what it streamed as its summary)", got, want)
	}
	if err := s.Deliver(ctx); err != nil {
		t.Fatalf("second Deliver: %v", err)
	}
	if n := len(rec.Lines()); n != 1 {
		t.Errorf("lines after a second Deliver: got %d, want 1 (delivered once)", n)
	}
	validateAll(t, rec, 1)
}

func TestBackgroundCompactionSettledInATurnIsShownAtOnce(t *testing.T) {
	ctx := context.Background()
	em, rec, tt := newTurned(t, emitter.RefuseOutsideTurn)
	s := em.Session("s1")

	c, err := s.Start(ctx, emitter.WithID("bg"), emitter.Background())
	if err != nil {
		t.Fatalf("Start of a background compaction outside a turn: %v (it may start outside a turn)", err)
	}
	tt.on.Store(true)
	if err := c.Fail(ctx, errors.New("summary request failed")); err != nil {
		t.Fatalf("Fail: %v", err)
	}
	want := []string{`compaction_update bg failed summary=null error=summary request failed`}
	if got := wire(rec); !slices.Equal(got, want) {
		t.Errorf("wire:\n got %q\nwant %q", got, want)
	}
}

func TestHeldCompactionStillRunningIsShownWhenTheNextTurnBegins(t *testing.T) {
	ctx := context.Background()
	em, rec, tt := newTurned(t, emitter.HoldOutsideTurn)
	s := em.Session("s1")

	c, err := s.Start(ctx, emitter.WithID("h"), emitter.UserDisplayable())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := c.Chunk(ctx, protocol.Text("a")); err != nil {
		t.Fatalf("Chunk a: %v", err)
	}
	if err := c.Chunk(ctx, protocol.Text("b")); err != nil {
		t.Fatalf("Chunk b: %v", err)
	}
	noLines(t, rec, "held between turns, never sent")

	tt.on.Store(true)
	if err := s.Deliver(ctx); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if err := c.Chunk(ctx, protocol.Text("c")); err != nil {
		t.Fatalf("Chunk c: %v", err)
	}
	// From now on it is the turn's: its end settles it.
	tt.on.Store(false)
	n, err := s.SettleAll(ctx, emitter.ErrTurnEnded)
	if err != nil {
		t.Fatalf("SettleAll: %v", err)
	}
	if n != 1 {
		t.Errorf("SettleAll at the turn's end settled %d, want 1", n)
	}
	want := []string{
		"compaction_update h in_progress",
		`compaction_summary_chunk h +"a"`,
		`compaction_summary_chunk h +"b"`,
		`compaction_summary_chunk h +"c"`,
		"compaction_update h failed summary=null error=the turn ended before the compaction finished",
	}
	if got := wire(rec); !slices.Equal(got, want) {
		t.Errorf("wire:\n got %q\nwant %q", got, want)
	}
	validateAll(t, rec, 1)
}

func TestHeldCompactionSettledBetweenTurnsIsDeliveredTerminalFirst(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		settle func(*emitter.Compaction) error
		want   string
	}{
		{"completed", func(c *emitter.Compaction) error { return c.Complete(ctx) }, `compaction_update h completed summary=["partial"]`},
		{"completed with a summary", func(c *emitter.Compaction) error {
			return c.Complete(ctx, emitter.Summary(protocol.Text("whole")))
		}, `compaction_update h completed summary=["whole"]`},
		{"failed", func(c *emitter.Compaction) error { return c.Fail(ctx, errors.New("boom")) }, "compaction_update h failed summary=null error=boom"},
		{"cancelled", func(c *emitter.Compaction) error { return c.Cancel(ctx) }, "compaction_update h cancelled summary=null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			em, rec, tt := newTurned(t, emitter.HoldOutsideTurn)
			s := em.Session("s1")
			c, err := s.Start(ctx, emitter.WithID("h"), emitter.UserDisplayable())
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if err := c.Chunk(ctx, protocol.Text("partial")); err != nil {
				t.Fatalf("Chunk: %v", err)
			}
			if err := tc.settle(c); err != nil {
				t.Fatalf("settle: %v", err)
			}
			noLines(t, rec, "settled between turns: held until the next turn")
			tt.on.Store(true)
			if err := s.Deliver(ctx); err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			if got, want := wire(rec), []string{tc.want}; !slices.Equal(got, want) {
				t.Errorf("wire:\n got %q\nwant %q", got, want)
			}
			validateAll(t, rec, 1)
		})
	}
}

func TestHeldCompactionReachesAFallbackClientAsOneToolCall(t *testing.T) {
	ctx := context.Background()
	tt := &turns{}
	rec := &wiretest.Recorder{}
	em := emitter.New(rec, emitter.WithNegotiation(capability.Negotiation{Version: 1}), emitter.WithFallback(fallback.ToolCall()),
		emitter.WithTurns(tt.inTurn, emitter.HoldOutsideTurn))
	s := em.Session("s1")
	c, err := s.Start(ctx, emitter.WithID("h"))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := c.Complete(ctx); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	noLines(t, rec, "settled between turns: held until the next turn")
	tt.on.Store(true)
	if err := s.Deliver(ctx); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	ups := rec.Updates()
	if len(ups) != 1 {
		t.Fatalf("updates delivered: got %d %v, want 1", len(ups), ups)
	}
	if got := ups[0]["sessionUpdate"]; got != "tool_call" {
		t.Errorf("delivered update: got %v, want tool_call (the client never saw it start: the whole tool call, settled)", got)
	}
	if got := ups[0]["status"]; got != "completed" {
		t.Errorf("delivered tool call status: got %v, want completed", got)
	}
	validateAll(t, rec, 1)
}

func TestConnectionEndSettlesBackgroundCompactions(t *testing.T) {
	ctx := context.Background()
	em, rec, tt := newTurned(t, emitter.RefuseOutsideTurn)
	tt.on.Store(true)
	c, err := em.Session("s1").Start(ctx, emitter.WithID("bg"), emitter.Background())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	n, err := em.SettleAll(ctx, emitter.ErrConnectionClosed)
	if err != nil {
		t.Fatalf("Emitter.SettleAll: %v", err)
	}
	if n != 1 {
		t.Errorf("Emitter.SettleAll settled %d, want 1", n)
	}
	if got := c.Record().Status; got != protocol.Failed {
		t.Errorf("record status: got %q, want %q", got, protocol.Failed)
	}
	want := []string{"compaction_update bg failed summary=null error=the connection closed"}
	if got := wire(rec); !slices.Equal(got, want) {
		t.Errorf("wire:\n got %q\nwant %q", got, want)
	}
}
