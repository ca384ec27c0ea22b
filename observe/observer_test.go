package observe_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/observe"
	"github.com/acpcompact/acpcompact/observe/internal/script"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
)

type series = observe.Series

func TestObserverScript(t *testing.T) {
	var c observe.Counters
	script.Run(t, context.Background(), observe.NewObserver(&c))
	got := c.Snapshot()

	wantSettled := map[series]int64{
		{protocol.Completed, protocol.Auto}:   2, // c1, u1
		{protocol.Failed, protocol.Manual}:    3, // c2, c6, c7
		{protocol.Cancelled, protocol.Manual}: 1, // c3
		{protocol.Failed, protocol.Auto}:      1, // c4
		{protocol.Cancelled, protocol.Auto}:   1, // c5
		{protocol.Failed, protocol.Idle}:      1, // w1
	}
	for k, ds := range got.Durations {
		assert.Equal(t, wantSettled[k], ds.Count, "Durations[%v].Count", k)
		if assert.GreaterOrEqual(t, ds.Sum, ds.Max, "Durations[%v] = %+v: inconsistent", k, ds) {
			assert.GreaterOrEqual(t, ds.Max, time.Duration(0), "Durations[%v] = %+v: inconsistent", k, ds)
		}
	}
	assert.Len(t, got.Durations, len(wantSettled), "Durations has %d series", len(got.Durations))
	got.Durations = nil // sums depend on the machine; counts were checked above

	want := observe.Snapshot{
		Started:  map[protocol.Trigger]int64{protocol.Auto: 4, protocol.Manual: 4, protocol.Idle: 1},
		Settled:  wantSettled,
		Replayed: map[series]int64{{protocol.Completed, protocol.Auto}: 1},
		Abandoned: map[observe.Abandonment]int64{
			observe.AbandonedConnectionClosed: 1,
			observe.AbandonedTurnEnded:        1,
			observe.AbandonedAgentCrashed:     1,
			observe.AbandonedTimeout:          1,
			observe.AbandonedCancelUnreported: 1,
		},
		Dropped:       map[observe.DropReason]int64{observe.DropAfterSettled: 2, observe.DropIDReused: 1},
		SummaryBytes:  script.SummaryBytes,
		Withheld:      1,
		Undeliverable: 2,
	}
	assert.Equal(t, want, got, "snapshot")
}

func TestAbandonmentOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want observe.Abandonment
		ok   bool
	}{
		{nil, "", false},
		{errors.New("provider returned 500"), "", false},
		{emitter.ErrCancelled, "", false},
		{fmt.Errorf("%w after 1ms", emitter.ErrTimeout), observe.AbandonedTimeout, true},
		{emitter.ErrAgentCrashed, observe.AbandonedAgentCrashed, true},
		{emitter.ErrConnectionClosed, observe.AbandonedConnectionClosed, true},
		{emitter.ErrTurnEnded, observe.AbandonedTurnEnded, true},
		// The specific cause wins over the generic end of the turn.
		{fmt.Errorf("%w: %w", emitter.ErrTurnEnded, emitter.ErrConnectionClosed), observe.AbandonedConnectionClosed, true},
		// A user cancel that also names a real abandonment counts as it.
		{fmt.Errorf("%w: %w", emitter.ErrCancelled, emitter.ErrConnectionClosed), observe.AbandonedConnectionClosed, true},
	} {
		got, ok := observe.AbandonmentOf(tc.err)
		if assert.Equal(t, tc.want, got, "AbandonmentOf(%v) , %v", tc.err, tc.ok) {
			assert.Equal(t, tc.ok, ok, "AbandonmentOf(%v) , %v", tc.err, tc.ok)
		}
	}
}

func TestBlockBytes(t *testing.T) {
	img := protocol.ContentBlock{Type: "image", Text: "ignored"}
	assert.Equal(t, int64(6), observe.BlocksBytes([]protocol.ContentBlock{protocol.Text("héllo"), img}), "BlocksBytes (UTF-8 bytes of text blocks only)")
}

// TestConcurrentSessions runs many sessions at once against one observer,
// with snapshots taken meanwhile; -race checks the locking, the totals check
// that no update is lost.
func TestConcurrentSessions(t *testing.T) {
	const sessions, perSession = 16, 25
	var c observe.Counters
	em := emitter.New(emitter.NotifierFunc(func(context.Context, string, any) error { return nil }),
		emitter.WithNegotiation(script.Negotiation), emitter.WithObserver(observe.NewObserver(&c)),
		emitter.WithSummaryPolicy(emitter.AllSummaries))
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			s := em.Session(fmt.Sprint("s", i))
			for range perSession {
				cmp, err := s.Start(ctx, emitter.WithTrigger(protocol.Auto))
				if !assert.NoError(t, err, "s.Start") {
					return
				}
				_ = cmp.Chunk(ctx, protocol.Text("ab"))
				_ = cmp.Complete(ctx)
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			_ = c.Snapshot().String()
		}
	})
	wg.Wait()
	got := c.Snapshot()
	const n = sessions * perSession
	if assert.Equal(t, int64(n), got.Started[protocol.Auto], "started auto compactions; snapshot %v", got) {
		if assert.Equal(t, int64(n), got.Settled[series{protocol.Completed, protocol.Auto}], "completed auto compactions; snapshot %v", got) {
			assert.Equal(t, int64(2*n), got.SummaryBytes, "summary bytes; snapshot %v", got)
		}
	}
}

func TestSnapshotIsACopy(t *testing.T) {
	var c observe.Counters
	ctx := context.Background()
	c.Dropped(ctx, observe.DropOther)
	s := c.Snapshot()
	c.Dropped(ctx, observe.DropOther)
	assert.Equal(t, int64(1), s.Dropped[observe.DropOther], "snapshot changed after the fact: %v", s.Dropped)
	got := (observe.Snapshot{}).String()
	assert.Empty(t, got, "empty snapshot renders %q", got)
}

func TestAbandonmentOfEvent(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   emitter.Event
		want observe.Abandonment
		ok   bool
	}{
		{"the runtime's own cancel", emitter.Event{Status: protocol.Cancelled, Err: emitter.ErrCancelled, SettledBy: emitter.SettledByRuntime}, "", false},
		{"a cancel the runtime never reported", emitter.Event{Status: protocol.Cancelled, Err: emitter.ErrCancelled, SettledBy: emitter.SettledBySettleAll}, observe.AbandonedCancelUnreported, true},
		{"the runtime's own failure", emitter.Event{Status: protocol.Failed, Err: errors.New("boom"), SettledBy: emitter.SettledByRuntime}, "", false},
		{"the watchdog", emitter.Event{Status: protocol.Failed, Err: emitter.ErrTimeout, SettledBy: emitter.SettledByWatchdog}, observe.AbandonedTimeout, true},
		{"the turn's end", emitter.Event{Status: protocol.Failed, Err: emitter.ErrTurnEnded, SettledBy: emitter.SettledBySettleAll}, observe.AbandonedTurnEnded, true},
	} {
		got, ok := observe.AbandonmentOfEvent(tc.ev)
		if assert.Equal(t, tc.want, got, "%s: AbandonmentOfEvent , %v", tc.name, tc.ok) {
			assert.Equal(t, tc.ok, ok, "%s: AbandonmentOfEvent , %v", tc.name, tc.ok)
		}
	}
}
