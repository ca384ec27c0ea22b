package emitter

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/internal/pulse"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, err, "Start held")
	on.Store(true)
	bg, err := s.Start(ctx, WithID("bg"), Background())
	require.NoError(t, err, "Start bg")
	shown, err := s.Start(ctx, WithID("shown"))
	require.NoError(t, err, "Start shown")
	require.Equal(t, 1, len(rec.Lines()), "lines after the starts (only the compaction started in the turn is shown)")

	for _, c := range []*Compaction{held, bg, shown} {
		c.heartbeat.clock = pulse.Start(time.Hour, time.Now().Add(-2*time.Hour))
	}
	bg.beat()
	held.beat()
	shown.beat()
	assert.Equal(t, 2, len(rec.Lines()), "lines after the beats (the shown compaction's heartbeat only)")

	on.Store(false)
	shown.heartbeat.clock = pulse.Start(time.Hour, time.Now().Add(-2*time.Hour))
	shown.beat()
	assert.Equal(t, 2, len(rec.Lines()), "lines after a beat between turns (no heartbeat between turns)")
	for _, c := range []*Compaction{held, bg, shown} {
		c.heartbeat.timer.Stop()
	}
}
