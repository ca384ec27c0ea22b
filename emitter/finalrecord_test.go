package emitter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/observe"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// handover is one call of an OnFinalRecord sink, as a test sees it.
type handover struct {
	sessionID string
	rec       emitter.Record
	// onWire: the recorder held the compaction's terminal update when the
	// sink was called.
	onWire bool
	// ctxErr and traced describe the context the sink got.
	ctxErr error
	traced bool
}

// sink is an OnFinalRecord sink that keeps every call.
type sink struct {
	rec *wiretest.Recorder
	mu  sync.Mutex
	got []handover
	// during, when set, runs inside the sink's call.
	during func(ctx context.Context, sessionID string, rec emitter.Record)
}

func (k *sink) final(ctx context.Context, sessionID string, rec emitter.Record) {
	h := handover{sessionID: sessionID, rec: rec, onWire: terminalOnWire(k.rec, rec.ID), ctxErr: ctx.Err()}
	_, h.traced = observe.TraceFrom(ctx)
	if k.during != nil {
		k.during(ctx, sessionID, rec)
	}
	k.mu.Lock()
	k.got = append(k.got, h)
	k.mu.Unlock()
}

func (k *sink) calls() []handover {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]handover(nil), k.got...)
}

// count returns how many times id was handed over.
func (k *sink) count(id protocol.ID) int {
	n := 0
	for _, h := range k.calls() {
		if h.rec.ID == id {
			n++
		}
	}
	return n
}

// terminalOnWire reports whether rec holds a terminal compaction_update
// for id.
func terminalOnWire(rec *wiretest.Recorder, id protocol.ID) bool {
	for _, u := range rec.Updates() {
		if u["sessionUpdate"] == "compaction_update" && u["compactionId"] == string(id) {
			if st, _ := u["status"].(string); protocol.Status(st).Terminal() {
				return true
			}
		}
	}
	return false
}

// finalPath is one way a compaction settles, for the rule that every one
// hands its final record over exactly once.
type finalPath struct {
	name string
	// hold makes starts outside a turn held (HoldOutsideTurn) rather than
	// refused; the paths start in a turn unless they say otherwise.
	hold bool
	// settle settles the compaction cmp_1 that the test started (c; nil
	// for the paths that start nothing) and, for paths that settle
	// elsewhere, waits for it.
	settle func(ctx context.Context, em *emitter.Emitter, tt *turns, c *emitter.Compaction) error
	// background starts cmp_1 with Background.
	background bool
	// outside starts cmp_1 outside a turn.
	outside bool
	status  protocol.Status
	summary []protocol.ContentBlock
	// unseen: the terminal update goes out only at the next turn.
	unseen bool
	// watchdog: the watchdog settles it, on its timer's goroutine, with
	// a context of its own.
	watchdog bool
}

var streamedAB = []protocol.ContentBlock{protocol.Text("a"), protocol.Text("b")}

func finalPaths() []finalPath {
	settleAll := func(reason error) func(context.Context, *emitter.Emitter, *turns, *emitter.Compaction) error {
		return func(ctx context.Context, em *emitter.Emitter, _ *turns, _ *emitter.Compaction) error {
			n, err := em.Session("s").SettleAll(ctx, reason)
			if n != 1 {
				return fmt.Errorf("SettleAll settled %d", n)
			}
			return err
		}
	}
	return []finalPath{
		{name: "the runtime's Complete keeping what was streamed", status: protocol.Completed, summary: streamedAB,
			settle: func(ctx context.Context, _ *emitter.Emitter, _ *turns, c *emitter.Compaction) error {
				return c.Complete(ctx)
			}},
		{name: "the runtime's Complete with a final summary", status: protocol.Completed, summary: []protocol.ContentBlock{protocol.Text("## Final")},
			settle: func(ctx context.Context, _ *emitter.Emitter, _ *turns, c *emitter.Compaction) error {
				return c.Complete(ctx, emitter.Summary(protocol.Text("## Final")))
			}},
		{name: "the runtime's Fail", status: protocol.Failed,
			settle: func(ctx context.Context, _ *emitter.Emitter, _ *turns, c *emitter.Compaction) error {
				return c.Fail(ctx, errors.New("boom"))
			}},
		{name: "the runtime's Cancel", status: protocol.Cancelled,
			settle: func(ctx context.Context, _ *emitter.Emitter, _ *turns, c *emitter.Compaction) error {
				return c.Cancel(ctx)
			}},
		{name: "Complete of the handle by ID", status: protocol.Completed, summary: streamedAB,
			settle: func(ctx context.Context, em *emitter.Emitter, _ *turns, _ *emitter.Compaction) error {
				c, err := em.Session("s").Compaction("cmp_1")
				if err != nil {
					return err
				}
				return c.Complete(ctx)
			}},
		{name: "Fail of the handle by ID", status: protocol.Failed,
			settle: func(ctx context.Context, em *emitter.Emitter, _ *turns, _ *emitter.Compaction) error {
				c, err := em.Session("s").Compaction("cmp_1")
				if err != nil {
					return err
				}
				return c.Fail(ctx, errors.New("boom"))
			}},
		{name: "SettleAll at the end of the turn", status: protocol.Failed, settle: settleAll(emitter.ErrTurnEnded)},
		{name: "SettleAll at the cancel grace", status: protocol.Cancelled, settle: settleAll(emitter.ErrCancelled)},
		{name: "SettleAll after a caught panic", status: protocol.Failed, settle: settleAll(emitter.ErrAgentCrashed)},
		{name: "the watchdog", status: protocol.Failed, watchdog: true,
			settle: func(context.Context, *emitter.Emitter, *turns, *emitter.Compaction) error { return nil }},
		{name: "Emitter.SettleAll when the connection closes", status: protocol.Failed,
			settle: func(ctx context.Context, em *emitter.Emitter, _ *turns, _ *emitter.Compaction) error {
				_, err := em.SettleAll(ctx, emitter.ErrConnectionClosed)
				return err
			}},
		{name: "Emitter.SettleAll ending a background compaction", status: protocol.Failed, background: true,
			settle: func(ctx context.Context, em *emitter.Emitter, _ *turns, _ *emitter.Compaction) error {
				_, err := em.SettleAll(ctx, emitter.ErrConnectionClosed)
				return err
			}},
		{name: "CloseSession", status: protocol.Cancelled,
			settle: func(ctx context.Context, em *emitter.Emitter, _ *turns, _ *emitter.Compaction) error {
				_, err := em.CloseSession(ctx, "s", emitter.ErrCancelled)
				return err
			}},
		{name: "settled unseen between turns", status: protocol.Completed, summary: streamedAB, hold: true, outside: true, unseen: true,
			settle: func(ctx context.Context, _ *emitter.Emitter, _ *turns, c *emitter.Compaction) error {
				return c.Complete(ctx)
			}},
		{name: "a background compaction settled between turns", status: protocol.Completed, summary: streamedAB, background: true, unseen: true,
			settle: func(ctx context.Context, _ *emitter.Emitter, tt *turns, c *emitter.Compaction) error {
				tt.on.Store(false) // the turn it started in ended
				return c.Complete(ctx)
			}},
	}
}

// TestEveryCompactionHandsOverItsFinalRecordExactlyOnceWhoeverSettlesIt:
// OnFinalRecord's sink gets the final record of every compaction exactly
// once, on every settlement path, once its terminal update is on the wire
// (for a compaction settled unseen between turns: at settlement, before
// the next turn delivers the update), with the handle's Record, the
// streamed summary a completion kept, the position given at Start, and a
// context that keeps the settling call's values but not its cancellation.
// The sink calls the emitter (the session's lock): it runs without it.
func TestEveryCompactionHandsOverItsFinalRecordExactlyOnceWhoeverSettlesIt(t *testing.T) {
	for _, p := range finalPaths() {
		t.Run(p.name, func(t *testing.T) {
			cctx, cancel := context.WithCancel(observe.WithTrace(context.Background(), observe.TraceContext{Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}))
			cancel() // a cancelled turn's records are kept all the same
			ctx := cctx
			tt := &turns{}
			rec := &wiretest.Recorder{}
			k := &sink{rec: rec}
			var em *emitter.Emitter
			k.during = func(_ context.Context, sessionID string, _ emitter.Record) { _ = emitter.OpenOf(em.Session(sessionID)) }
			outside := emitter.RefuseOutsideTurn
			if p.hold {
				outside = emitter.HoldOutsideTurn
			}
			opts := []emitter.Option{emitter.WithNegotiation(capable), emitter.OnFinalRecord(k.final), emitter.WithTurns(tt.inTurn, outside)}
			if p.watchdog {
				opts = append(opts, emitter.WithMaxDuration(10*time.Millisecond))
			}
			em = emitter.New(rec, opts...)
			tt.on.Store(!p.outside)
			var c *emitter.Compaction
			{
				start := []emitter.StartOption{emitter.WithID("cmp_1"), emitter.UserDisplayable(), emitter.After("msg_1")}
				if p.background {
					start = append(start, emitter.Background())
				}
				var err error
				c, err = em.Session("s").Start(ctx, start...)
				require.NoError(t, err, "Start")
				for _, b := range streamedAB {
					if !p.watchdog { // it may have fired already
						require.NoError(t, c.Chunk(ctx, b), "Chunk %q", b.Text)
					}
				}
			}
			require.NoError(t, p.settle(ctx, em, tt, c), "settle")
			if p.watchdog {
				deadline := time.Now().Add(10 * time.Second)
				for k.count("cmp_1") == 0 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
			}

			got := k.calls()
			require.Len(t, got, 1, "final records handed over")
			h := got[0]
			assert.Equal(t, "s", h.sessionID, "session ID")
			assert.Equal(t, protocol.ID("cmp_1"), h.rec.ID, "record ID")
			assert.Equal(t, p.status, h.rec.Status, "record status")
			assert.Equal(t, p.summary, h.rec.Summary, "record summary")
			assert.Equal(t, !p.unseen, h.onWire, "terminal update on the wire at the handover (handed over after its terminal update was written; unseen: at settlement)")
			assert.NoError(t, h.ctxErr, "the sink's context is cancelled")
			assert.Equal(t, !p.watchdog, h.traced, "the sink's context has the settling call's trace (it keeps the settling call's values)")
			if c != nil {
				r := c.Record()
				assert.Equal(t, h.rec, r, "final record is not the handle's Record:\nhandle's: %s\n  handed: %s", recordJSON(r), recordJSON(h.rec))
				assert.Equal(t, "msg_1", h.rec.After, "record After")
			} else {
				assert.Empty(t, h.rec.After, "record After (a failure before any start has no position)")
			}

			// Nothing settles it twice, and delivering the held update
			// hands nothing over again.
			if c != nil {
				assert.ErrorIs(t, c.Complete(ctx), emitter.ErrSettled, "Complete after settlement")
			}
			_, _ = em.Session("s").SettleAll(ctx, emitter.ErrTurnEnded)
			_, _ = em.SettleAll(ctx, emitter.ErrConnectionClosed)
			tt.on.Store(true)
			require.NoError(t, em.Session("s").Deliver(ctx), "Deliver")
			assert.True(t, terminalOnWire(rec, "cmp_1"), "the client never got the terminal update")
			assert.Equal(t, 1, k.count("cmp_1"), "final records of cmp_1")
			validateAll(t, rec, 1)
		})
	}
}

// TestFinalRecordSinkMayCallTheEmitter: the sink runs without the
// emitter's locks, so it may start and settle compactions of the same
// session; a record a call from the sink settles is handed over after the
// sink returns, in settlement order.
func TestFinalRecordSinkMayCallTheEmitter(t *testing.T) {
	ctx := context.Background()
	rec := &wiretest.Recorder{}
	k := &sink{rec: rec}
	em := emitter.New(rec, emitter.WithNegotiation(capable), emitter.OnFinalRecord(k.final))
	s := em.Session("s")
	k.during = func(ctx context.Context, _ string, r emitter.Record) {
		if r.ID != "cmp_1" {
			return
		}
		c, err := s.Start(ctx, emitter.WithID("cmp_2"))
		assert.NoError(t, err, "Start cmp_2 from the sink")
		assert.NoError(t, c.Complete(ctx), "Complete cmp_2 from the sink")
		n := k.count("cmp_2")
		assert.Equal(t, 0, n, "cmp_2 handed over %d times inside the sink(handed over after the sink returns)", n)
	}
	c, err := s.Start(ctx, emitter.WithID("cmp_1"))
	require.NoError(t, err, "Start cmp_1")
	require.NoError(t, c.Complete(ctx), "Complete cmp_1")
	var ids []protocol.ID
	for _, h := range k.calls() {
		ids = append(ids, h.rec.ID)
	}
	assert.Equal(t, []protocol.ID{"cmp_1", "cmp_2"}, ids, "final records handed over")
}

// TestFinalRecordsOfASessionAreHandedOverOneAtATimeInSettlementOrder:
// however many goroutines settle compactions of one session at once, the
// sink sees that session's records one at a time, each once, in the order
// their terminal updates went out.
func TestFinalRecordsOfASessionAreHandedOverOneAtATimeInSettlementOrder(t *testing.T) {
	ctx := context.Background()
	rec := &wiretest.Recorder{}
	var inside atomic.Int32
	k := &sink{rec: rec}
	k.during = func(context.Context, string, emitter.Record) {
		assert.Equal(t, int32(1), inside.Add(1), "two calls of the sink at once for one session")
		time.Sleep(10 * time.Microsecond)
		inside.Add(-1)
	}
	em := emitter.New(rec, emitter.WithNegotiation(capable), emitter.OnFinalRecord(k.final))
	s := em.Session("s")
	const workers, each = 8, 40
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				c, err := s.Start(ctx, emitter.WithID(protocol.ID(fmt.Sprintf("cmp_%d_%d", w, i))))
				if !assert.NoError(t, err, "Start cmp_%d_%d", w, i) {
					return
				}
				if i%2 == 0 {
					assert.NoError(t, c.Complete(ctx), "Complete %s", c.ID())
				} else {
					assert.NoError(t, c.Fail(ctx, errors.New("boom")), "Fail %s", c.ID())
				}

			}
		})
	}
	wg.Wait()
	var onWire []string
	for _, u := range rec.Updates() {
		if st, _ := u["status"].(string); protocol.Status(st).Terminal() {
			onWire = append(onWire, u["compactionId"].(string))
		}
	}
	var handed []string
	for _, h := range k.calls() {
		handed = append(handed, string(h.rec.ID))
	}
	require.Len(t, handed, workers*each, "final records handed over")
	assert.Equal(t, onWire, handed, "final records not in settlement order:\nhanded over\n    on wire")
}

// Sinks add up: each OnFinalRecord's sink gets every record, in the order
// the options gave them (a kit's store first, then a runtime's own).
func TestFinalRecordSinksAddUp(t *testing.T) {
	ctx := context.Background()
	var got []string
	sink := func(name string) emitter.Option {
		return emitter.OnFinalRecord(func(_ context.Context, _ string, r emitter.Record) { got = append(got, name+":"+string(r.ID)) })
	}
	em, _, _ := newCapable(t, sink("store"), emitter.OnFinalRecord(nil), sink("runtime"))
	for _, id := range []protocol.ID{"a", "b"} {
		c, err := em.Session("s").Start(ctx, emitter.WithID(id))
		require.NoError(t, err)
		require.NoError(t, c.Complete(ctx))
	}
	assert.Equal(t, []string{"store:a", "runtime:a", "store:b", "runtime:b"}, got, "records handed over")
}
