package observe_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/observe"
	"github.com/acpcompact/acpcompact/observe/internal/script"
	"github.com/acpcompact/acpcompact/protocol"
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
		if ds.Count != wantSettled[k] {
			t.Errorf("Durations[%v].Count = %d, want %d", k, ds.Count, wantSettled[k])
		}
		if ds.Sum < ds.Max || ds.Max < 0 {
			t.Errorf("Durations[%v] = %+v: inconsistent", k, ds)
		}
	}
	if len(got.Durations) != len(wantSettled) {
		t.Errorf("Durations has %d series, want %d", len(got.Durations), len(wantSettled))
	}
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
	if !reflect.DeepEqual(got, want) {
		t.Errorf("snapshot:\n got %+v\nwant %+v", got, want)
	}
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
		if got != tc.want || ok != tc.ok {
			t.Errorf("AbandonmentOf(%v) = %q, %v; want %q, %v", tc.err, got, ok, tc.want, tc.ok)
		}
	}
}

func TestBlockBytes(t *testing.T) {
	img := protocol.ContentBlock{Type: "image", Text: "ignored"}
	if got := observe.BlocksBytes([]protocol.ContentBlock{protocol.Text("héllo"), img}); got != 6 {
		t.Errorf("BlocksBytes = %d, want 6 (UTF-8 bytes of text blocks only)", got)
	}
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
				if err != nil {
					t.Error(err)
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
	if got.Started[protocol.Auto] != n || got.Settled[series{protocol.Completed, protocol.Auto}] != n || got.SummaryBytes != 2*n {
		t.Errorf("got %v", got)
	}
}

func TestSnapshotIsACopy(t *testing.T) {
	var c observe.Counters
	ctx := context.Background()
	c.Dropped(ctx, observe.DropOther)
	s := c.Snapshot()
	c.Dropped(ctx, observe.DropOther)
	if s.Dropped[observe.DropOther] != 1 {
		t.Errorf("snapshot changed after the fact: %v", s.Dropped)
	}
	if got := (observe.Snapshot{}).String(); got != "" {
		t.Errorf("empty snapshot renders %q", got)
	}
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
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: AbandonmentOfEvent = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
