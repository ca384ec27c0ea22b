package emitter

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/internal/pulse"
	"github.com/acpcompact/acpcompact/internal/wiretest"
)

// The heartbeat re-sends progress only to a client in a turn that has seen
// the compaction start. (beat is called directly, on compactions made
// silent for two intervals: the timer's interval is an hour, so no tick
// races the assertions.)
func TestNoHeartbeatOutsideATurnOrForAnUnseenCompaction(t *testing.T) {
	ctx := context.Background()
	var on atomic.Bool
	rec := &wiretest.Recorder{}
	em := New(rec, WithNegotiation(capability.Negotiation{Version: 1, Compaction: true}), WithHeartbeat(time.Hour),
		WithTurns(func(string) bool { return on.Load() }, HoldOutsideTurn))
	s := em.Session("s1")

	held, err := s.Start(ctx, WithID("held"))
	if err != nil {
		t.Fatalf("Start held: %v", err)
	}
	on.Store(true)
	bg, err := s.Start(ctx, WithID("bg"), Background())
	if err != nil {
		t.Fatalf("Start bg: %v", err)
	}
	shown, err := s.Start(ctx, WithID("shown"))
	if err != nil {
		t.Fatalf("Start shown: %v", err)
	}
	if n := len(rec.Lines()); n != 1 {
		t.Fatalf("lines after the starts: got %d, want 1 (only the compaction started in the turn is shown)", n)
	}

	for _, c := range []*Compaction{held, bg, shown} {
		c.heartbeat.clock = pulse.Start(time.Hour, time.Now().Add(-2*time.Hour))
	}
	bg.beat()
	held.beat()
	shown.beat()
	if n := len(rec.Lines()); n != 2 {
		t.Errorf("lines after the beats: got %d, want 2 (the shown compaction's heartbeat only)", n)
	}

	on.Store(false)
	shown.heartbeat.clock = pulse.Start(time.Hour, time.Now().Add(-2*time.Hour))
	shown.beat()
	if n := len(rec.Lines()); n != 2 {
		t.Errorf("lines after a beat between turns: got %d, want 2 (no heartbeat between turns)", n)
	}
	for _, c := range []*Compaction{held, bg, shown} {
		c.heartbeat.timer.Stop()
	}
}
