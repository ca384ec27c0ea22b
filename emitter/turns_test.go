package emitter_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	assert.Nil(t, c, "Start outside a turn returned a handle %v", c.ID())
	require.ErrorIs(t, err, emitter.ErrOutsideTurn, "Start outside a turn")
	noLines(t, rec, "nothing reaches a client that is not in a turn")

	tt.on.Store(true)
	c, err = s.Start(ctx, emitter.WithID("in"))
	require.NoError(t, err, "Start in a turn")
	require.NoError(t, c.Complete(ctx), "Complete")
	want := []string{"compaction_update in in_progress", "compaction_update in completed"}
	assert.Equal(t, want, wire(rec), "wire")
	validateAll(t, rec, 1)
}

func TestBackgroundCompactionIsShownOnlyWhenItSettles(t *testing.T) {
	ctx := context.Background()
	em, rec, tt := newTurned(t, emitter.RefuseOutsideTurn)
	s := em.Session("s1")
	tt.on.Store(true)

	c, err := s.Start(ctx, emitter.WithID("bg"), emitter.Background(), emitter.UserDisplayable())
	require.NoError(t, err, "Start")
	require.NoError(t, c.Chunk(ctx, protocol.Text("## Retained")), "Chunk 1")
	noLines(t, rec, "a background compaction is not shown half-way")

	// The turn ends: SettleAll leaves it running, the client saw nothing.
	tt.on.Store(false)
	n, err := s.SettleAll(ctx, emitter.ErrTurnEnded)
	require.NoError(t, err, "SettleAll")
	assert.Equal(t, 0, n, "SettleAll at the turn's end settled")
	require.NoError(t, c.Chunk(ctx, protocol.Text(" context")), "Chunk 2")
	require.NoError(t, c.Complete(ctx), "Complete")
	noLines(t, rec, "settled between turns: held until the next turn")
	assert.Equal(t, protocol.Completed, c.Record().Status, "record status")
	assert.Equal(t, []protocol.ContentBlock{protocol.Text("## Retained"), protocol.Text(" context")}, c.Record().Summary, "record summary (the record keeps the summary the client will hold)")

	tt.on.Store(true)
	require.NoError(t, s.Deliver(ctx), "Deliver")
	assert.Equal(t, []string{`compaction_update bg completed summary=["## Retained" " context"]`}, wire(rec), "wire (terminal-first, with what it streamed as its summary)")
	require.NoError(t, s.Deliver(ctx), "second Deliver")
	assert.Equal(t, 1, len(rec.Lines()), "lines after a second Deliver (delivered once)")
	validateAll(t, rec, 1)
}

func TestBackgroundCompactionSettledInATurnIsShownAtOnce(t *testing.T) {
	ctx := context.Background()
	em, rec, tt := newTurned(t, emitter.RefuseOutsideTurn)
	s := em.Session("s1")

	c, err := s.Start(ctx, emitter.WithID("bg"), emitter.Background())
	require.NoError(t, err, "Start of a background compaction outside a turn (it may start outside a turn)")
	tt.on.Store(true)
	require.NoError(t, c.Fail(ctx, errors.New("summary request failed")), "Fail")
	want := []string{`compaction_update bg failed summary=null error=summary request failed`}
	assert.Equal(t, want, wire(rec), "wire")
}

func TestHeldCompactionStillRunningIsShownWhenTheNextTurnBegins(t *testing.T) {
	ctx := context.Background()
	em, rec, tt := newTurned(t, emitter.HoldOutsideTurn)
	s := em.Session("s1")

	c, err := s.Start(ctx, emitter.WithID("h"), emitter.UserDisplayable())
	require.NoError(t, err, "Start")
	require.NoError(t, c.Chunk(ctx, protocol.Text("a")), "Chunk a")
	require.NoError(t, c.Chunk(ctx, protocol.Text("b")), "Chunk b")
	noLines(t, rec, "held between turns, never sent")

	tt.on.Store(true)
	require.NoError(t, s.Deliver(ctx), "Deliver")
	require.NoError(t, c.Chunk(ctx, protocol.Text("c")), "Chunk c")
	// From now on it is the turn's: its end settles it.
	tt.on.Store(false)
	n, err := s.SettleAll(ctx, emitter.ErrTurnEnded)
	require.NoError(t, err, "SettleAll")
	assert.Equal(t, 1, n, "SettleAll at the turn's end settled")
	want := []string{
		"compaction_update h in_progress",
		`compaction_summary_chunk h +"a"`,
		`compaction_summary_chunk h +"b"`,
		`compaction_summary_chunk h +"c"`,
		"compaction_update h failed summary=null error=the turn ended before the compaction finished",
	}
	assert.Equal(t, want, wire(rec), "wire")
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
			require.NoError(t, err, "Start")
			require.NoError(t, c.Chunk(ctx, protocol.Text("partial")), "Chunk")
			require.NoError(t, tc.settle(c), "settle")
			noLines(t, rec, "settled between turns: held until the next turn")
			tt.on.Store(true)
			require.NoError(t, s.Deliver(ctx), "Deliver")
			assert.Equal(t, []string{tc.want}, wire(rec), "wire")
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
	require.NoError(t, err, "Start")
	require.NoError(t, c.Complete(ctx), "Complete")
	noLines(t, rec, "settled between turns: held until the next turn")
	tt.on.Store(true)
	require.NoError(t, s.Deliver(ctx), "Deliver")
	ups := rec.Updates()
	require.Len(t, ups, 1, "updates delivered")
	assert.Equal(t, "tool_call", ups[0]["sessionUpdate"], "delivered update (the client never saw it start: the whole tool call, settled)")
	assert.Equal(t, "completed", ups[0]["status"], "delivered tool call status")
	validateAll(t, rec, 1)
}

func TestConnectionEndSettlesBackgroundCompactions(t *testing.T) {
	ctx := context.Background()
	em, rec, tt := newTurned(t, emitter.RefuseOutsideTurn)
	tt.on.Store(true)
	c, err := em.Session("s1").Start(ctx, emitter.WithID("bg"), emitter.Background())
	require.NoError(t, err, "Start")
	n, err := em.SettleAll(ctx, emitter.ErrConnectionClosed)
	require.NoError(t, err, "Emitter.SettleAll")
	assert.Equal(t, 1, n, "Emitter.SettleAll settled")
	assert.Equal(t, protocol.Failed, c.Record().Status, "record status")
	want := []string{"compaction_update bg failed summary=null error=the connection closed"}
	assert.Equal(t, want, wire(rec), "wire")
}
