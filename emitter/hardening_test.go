package emitter_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// The hardening issue's emitter items: the hold between turns is bounded
// (26.1), a replay settles what it replays (26.3), a panicking sink loses
// no record (26.6), and a call of a turn that is over opens nothing (26.8).

const (
	testHoldCompactions = 256
	testHoldBytes       = 8 << 20
)

// A session holds at most 256 compactions its client has not seen start;
// past that Start is refused with ErrHoldLimit, the ID is spent, and the
// next turn shows exactly the ones held.
func TestHeldCompactionsPerSessionAreBounded(t *testing.T) {
	ctx := context.Background()
	em, rec, tt := newTurned(t, emitter.HoldOutsideTurn)
	s := em.Session("s1")
	for i := range testHoldCompactions {
		_, err := s.Start(ctx, emitter.WithID(protocol.ID(fmt.Sprintf("h%d", i))))
		require.NoError(t, err, "held start %d", i)
	}
	_, err := s.Start(ctx, emitter.WithID("over"))
	require.ErrorIs(t, err, emitter.ErrHoldLimit, "the start past the bound")
	_, err = s.Start(ctx, emitter.WithID("bg"), emitter.Background())
	require.ErrorIs(t, err, emitter.ErrHoldLimit, "a background start past the bound (it is unseen too)")
	noLines(t, rec, "nothing is sent between turns")

	tt.on.Store(true)
	require.NoError(t, s.Deliver(ctx), "Deliver")
	starts := 0
	for _, l := range wire(rec) {
		require.NotContains(t, l, " over ", "the refused compaction reached the client")
		if strings.HasSuffix(l, " in_progress") {
			starts++
		}
	}
	assert.Equal(t, testHoldCompactions, starts, "starts delivered")
	_, err = s.Start(ctx, emitter.WithID("over"))
	assert.ErrorIs(t, err, emitter.ErrIDReused, "the refused ID is spent: nothing of it reaches the client later")
	validateAll(t, rec, 1)
}

// A held compaction whose chunks pass the session's 8 MiB is never shown
// half-way: past the bound its chunks are refused (ErrHoldLimit) and what
// it kept is let go; it settles with no summary, and the session's hold is
// free again for the next one.
func TestHeldSummaryPastTheByteBoundIsNeverShownHalfWay(t *testing.T) {
	ctx := context.Background()
	block := protocol.Text(strings.Repeat("x", 1<<20))
	for _, tc := range []struct {
		name string
		// settleBeforeTurn: it completes between turns (terminal-first at
		// the next turn); otherwise it is still running when the turn
		// begins, and completes in the turn.
		settleBeforeTurn bool
		want             []string
	}{
		{"settled between turns", true, []string{`compaction_update big completed summary=null`}},
		{"running when the turn begins", false, []string{`compaction_update big in_progress`, `compaction_update big completed`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			em, rec, tt := newTurned(t, emitter.HoldOutsideTurn)
			s := em.Session("s1")
			c, err := s.Start(ctx, emitter.WithID("big"), emitter.UserDisplayable())
			require.NoError(t, err, "held start")
			refused := 0
			for range 12 {
				if err := c.Chunk(ctx, block); err != nil {
					require.ErrorIs(t, err, emitter.ErrHoldLimit, "a chunk past the hold")
					refused++
				}
				require.LessOrEqual(t, emitter.KeptBytes(s), testHoldBytes, "the session's hold")
			}
			assert.Equal(t, 5, refused, "chunks refused (the 8th MiB and after; the hold's bound counts each block's overhead)")
			assert.Zero(t, emitter.KeptBytes(s), "what the compaction kept was let go at the bound")
			if tc.settleBeforeTurn {
				require.NoError(t, c.Complete(ctx), "Complete between turns")
				tt.on.Store(true)
				require.NoError(t, s.Deliver(ctx), "Deliver")
			} else {
				tt.on.Store(true)
				require.NoError(t, s.Deliver(ctx), "Deliver")
				assert.ErrorIs(t, c.Chunk(ctx, protocol.Text("tail")), emitter.ErrHoldLimit, "a chunk once shown: the client must not get the tail alone")
				require.NoError(t, c.Complete(ctx), "Complete in the turn")
			}
			assert.Equal(t, tc.want, wire(rec), "wire: the whole compaction, none of its summary")
			assert.Zero(t, emitter.KeptBytes(s), "the hold after the compaction")

			// The hold is free again.
			tt.on.Store(false)
			next, err := s.Start(ctx, emitter.WithID("next"), emitter.UserDisplayable())
			require.NoError(t, err, "the next held start")
			require.NoError(t, next.Chunk(ctx, protocol.Text("small")), "a chunk within the hold")
			require.NoError(t, next.Complete(ctx), "Complete")
			rec.Reset()
			tt.on.Store(true)
			require.NoError(t, s.Deliver(ctx), "Deliver")
			assert.Equal(t, []string{`compaction_update next completed summary=["small"]`}, wire(rec), "the next compaction keeps its summary")
			validateAll(t, rec, 1)
		})
	}
}

// A final summary given at settlement between turns waits for the turn
// within the hold; past it, the terminal update and the record go without
// it, so that the client holds what a replay gives it.
func TestHeldFinalSummaryPastTheBoundGoesWithout(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var recs []emitter.Record
	sink := emitter.OnFinalRecord(func(_ context.Context, _ string, r emitter.Record) {
		mu.Lock()
		recs = append(recs, r)
		mu.Unlock()
	})
	em, rec, tt := newTurned(t, emitter.HoldOutsideTurn, sink)
	s := em.Session("s1")
	c, err := s.Start(ctx, emitter.WithID("big"), emitter.UserDisplayable())
	require.NoError(t, err, "held start")
	huge := protocol.Text(strings.Repeat("y", testHoldBytes))
	require.NoError(t, c.Complete(ctx, emitter.Summary(huge)), "Complete with a final summary past the hold")
	assert.Zero(t, emitter.KeptBytes(s), "the hold")
	tt.on.Store(true)
	require.NoError(t, s.Deliver(ctx), "Deliver")
	assert.Equal(t, []string{`compaction_update big completed summary=null`}, wire(rec), "wire")
	mu.Lock()
	defer mu.Unlock()
	if assert.Len(t, recs, 1, "records") {
		assert.Zero(t, len(recs[0].Summary), "the record's summary blocks: as the client holds them (none)")
	}
}

// With OnFinalRecord, the streamed blocks kept for a record are bounded
// too: the client gets every chunk, and the record goes without the
// streamed summary rather than with part of it.
func TestFinalRecordKeepsNoStreamedSummaryPastTheHold(t *testing.T) {
	ctx := context.Background()
	var got []emitter.Record
	em, rec, _ := newCapable(t, emitter.OnFinalRecord(func(_ context.Context, _ string, r emitter.Record) { got = append(got, r) }))
	s := em.Session("s1")
	c, err := s.Start(ctx, emitter.WithID("big"), emitter.UserDisplayable())
	require.NoError(t, err, "Start")
	block := protocol.Text(strings.Repeat("z", 1<<20))
	for i := range 12 {
		require.NoError(t, c.Chunk(ctx, block), "chunk %d: the client gets every one", i)
		require.LessOrEqual(t, emitter.KeptBytes(s), testHoldBytes, "the session's hold")
	}
	require.NoError(t, c.Complete(ctx), "Complete")
	chunks := 0
	for _, l := range wire(rec) {
		if strings.HasPrefix(l, "compaction_summary_chunk") {
			chunks++
		}
	}
	assert.Equal(t, 12, chunks, "chunks sent")
	if assert.Len(t, got, 1, "records") {
		assert.Zero(t, len(got[0].Summary), "the record's streamed summary blocks past the hold")
		assert.Equal(t, protocol.Completed, got[0].Status, "the record's status")
	}
	assert.Zero(t, emitter.KeptBytes(s), "the hold after settlement")
}

// A replay settles what it replays: a compaction held between turns whose
// ID a session/load replays completed is settled by the replay; the
// client sees the replayed terminal update and nothing more of it.
func TestReplayOfAHeldIDSettlesIt(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		settled bool // it settled unseen before the replay
	}{{"open", false}, {"settled unseen", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var recs []emitter.Record
			obs := newEvents()
			em, rec, tt := newTurned(t, emitter.HoldOutsideTurn, emitter.WithObserver(obs),
				emitter.OnFinalRecord(func(_ context.Context, _ string, r emitter.Record) { recs = append(recs, r) }))
			s := em.Session("s1")
			c, err := s.Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable())
			require.NoError(t, err, "held start")
			require.NoError(t, c.Chunk(ctx, protocol.Text("draft")), "held chunk")
			if tc.settled {
				require.NoError(t, c.Complete(ctx), "Complete between turns")
			}
			require.NoError(t, s.Replay(ctx, emitter.Record{ID: "cmp_1", Status: protocol.Completed, Displayable: true,
				Summary: []protocol.ContentBlock{protocol.Text("replayed")}}), "Replay")
			tt.on.Store(true)
			require.NoError(t, s.Deliver(ctx), "Deliver")
			assert.ErrorIs(t, c.Complete(ctx), emitter.ErrSettled, "the handle after the replay")
			assert.Equal(t, []string{`compaction_update cmp_1 completed summary=["replayed"] error=null`}, wire(rec), "wire")
			assert.Zero(t, emitter.KeptBytes(s), "the hold")
			if assert.Len(t, recs, 1, "records") && !tc.settled {
				assert.Equal(t, []protocol.ContentBlock{protocol.Text("replayed")}, recs[0].Summary, "the record: as replayed")
			}
			kinds := obs.kinds()
			assert.Equal(t, 1, count(kinds, "settled"), "settled events %v", kinds)
			validateAll(t, rec, 1)
		})
	}
}

func count(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

// A sink that settles other compactions while it handles one (allowed),
// then panics: the records its calls queued are still handed over, exactly
// once, and the panic goes on to the caller.
func TestPanickingSinkLosesNoRecord(t *testing.T) {
	ctx := context.Background()
	var em *emitter.Emitter
	var mu sync.Mutex
	got := map[protocol.ID]int{}
	var others []*emitter.Compaction
	sink := func(ctx context.Context, _ string, r emitter.Record) {
		mu.Lock()
		got[r.ID]++
		mu.Unlock()
		if r.ID == "a" {
			for _, o := range others {
				_ = o.Complete(ctx)
			}
			panic("the store is down")
		}
	}
	em, _, _ = newCapable(t, emitter.OnFinalRecord(sink))
	s := em.Session("s1")
	a, err := s.Start(ctx, emitter.WithID("a"))
	require.NoError(t, err)
	for _, id := range []protocol.ID{"b", "c"} {
		o, err := s.Start(ctx, emitter.WithID(id))
		require.NoError(t, err)
		others = append(others, o)
	}
	assert.PanicsWithValue(t, "the store is down", func() { _ = a.Complete(ctx) }, "the sink's panic reaches the caller")
	handed := func() map[protocol.ID]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(got)
	}
	assert.Equal(t, map[protocol.ID]int{"a": 1, "b": 1, "c": 1}, handed(), "records handed over")
	// The session hands over again afterwards.
	d, err := s.Start(ctx, emitter.WithID("d"))
	require.NoError(t, err)
	require.NoError(t, d.Complete(ctx))
	assert.Equal(t, map[protocol.ID]int{"a": 1, "b": 1, "c": 1, "d": 1}, handed(), "records after a later settlement")
}

// A Start whose context says its turn is over (cause ErrTurnEnded, as the
// kits' prompt contexts say once their turn ended) is refused with
// ErrOutsideTurn, whatever turn runs now, unless it may outlive its turn.
func TestStartOfATurnThatIsOverIsRefused(t *testing.T) {
	em, rec, tt := newTurned(t, emitter.RefuseOutsideTurn)
	tt.on.Store(true) // the session's next turn runs
	s := em.Session("s1")
	stale, cancel := context.WithCancelCause(context.Background())
	cancel(fmt.Errorf("wrapped: %w", emitter.ErrTurnEnded))
	_, err := s.Start(stale, emitter.WithID("stale"))
	require.ErrorIs(t, err, emitter.ErrOutsideTurn, "a start of a turn that is over")
	require.ErrorIs(t, err, emitter.ErrTurnEnded, "the refusal names why")
	noLines(t, rec, "the stale start reached the client")
	c, err := s.Start(stale, emitter.WithID("bg"), emitter.Background())
	require.NoError(t, err, "a background start may outlive its turn")
	require.NoError(t, c.Complete(stale), "it settles")
	cancelled, cancel2 := context.WithCancelCause(context.Background())
	cancel2(emitter.ErrCancelled)
	_, err = s.Start(cancelled, emitter.WithID("cancelled"))
	assert.NoError(t, err, "a start in a cancelled turn that still runs")
	assert.False(t, errors.Is(err, emitter.ErrOutsideTurn))
}
