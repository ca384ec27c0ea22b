package kittest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The cancel grace, shared by both stacks' tests: after session/cancel the
// runtime has the grace to report; with d > 0 the kit settles what is open
// d after the cancel, with 0 at once, with d < 0 when the turn ends. The
// runtime here hangs, so only the kit can settle.

// CancelGraceMeansTheSameEverywhere: with WithCancelGrace(d) a runtime
// that hangs after session/cancel has its compaction settled cancelled d
// after the cancel (0: at once), or, for d < 0, only at the turn's end.
func CancelGraceMeansTheSameEverywhere(t *testing.T, st Stack) {
	for _, grace := range []time.Duration{0, 300 * time.Millisecond, -1} {
		t.Run(grace.String(), func(t *testing.T) {
			t.Parallel()
			h := &hang{release: make(chan struct{})}
			a := &Agent{Prompt: func(ctx context.Context, _ Conn, p Prompt) (string, error) {
				return h.prompt(ctx, st.SessionFrom(ctx, p.SessionID))
			}}
			r := Serve(t, st, Config{CancelGrace: Grace(grace)}, a)
			r.Initialize(1, true)
			h.play(r.Ctx, t, r.Client, SessionID, grace)
			r.Finish(1)
		})
	}
}

// hang is a runtime that opens cmp_1 and then hangs, whatever its context
// says, until the client side lets it go. Safe for concurrent use.
type hang struct {
	once    sync.Once
	release chan struct{}
}

// prompt is the agent's runtime; it answers "cancelled" once let go.
func (h *hang) prompt(ctx context.Context, s Starter) (string, error) {
	if _, err := s.Start(ctx, emitter.WithID("cmp_1")); err != nil {
		return "", err
	}
	<-h.release
	return "cancelled", nil
}

func (h *hang) letGo() { h.once.Do(func() { close(h.release) }) }

// nothingSettledFor is how long a negative grace is watched for a
// settlement that must not come before the turn's end. (A kit that settled
// early would most likely do it within it; one that does not is never
// reported wrongly.)
const nothingSettledFor = 200 * time.Millisecond

// play is the client for a kit configured with the cancel grace grace: it
// prompts, cancels once cmp_1 is in progress, and checks when cmp_1 is
// settled cancelled while the runtime hangs: for grace >= 0 no sooner than
// grace after the cancel (0: at once), and only then lets the runtime go;
// for grace < 0 not before the runtime is let go and the turn ends. It
// returns once the prompt is answered.
func (h *hang) play(ctx context.Context, t testing.TB, c *Client, sessionID string, grace time.Duration) {
	t.Helper()
	defer h.letGo()
	call, err := c.Conn.DispatchCall(ctx, "session/prompt", PromptParams(sessionID, nil))
	require.NoError(t, err)
	_, err = c.Wire.Wait(ctx, func(e Event) bool { return e.CompactionID == "cmp_1" && e.Status == "in_progress" })
	require.NoError(t, err)
	cancelledAt := time.Now()
	require.NoError(t, c.Cancel(ctx, sessionID))
	settled := func(e Event) bool { return e.CompactionID == "cmp_1" && e.Status == "cancelled" }
	if grace >= 0 {
		_, err := c.Wire.Wait(ctx, settled)
		require.NoError(t, err, "cancel grace %v: cmp_1 was not settled while the runtime hung", grace)
		assert.GreaterOrEqual(t, time.Since(cancelledAt), grace, "cancel grace %v: how long after the cancel cmp_1 was settled", grace)
	} else {
		wait, stop := context.WithTimeout(ctx, nothingSettledFor)
		_, err := c.Wire.Wait(wait, settled)
		stop()
		assert.Error(t, err, "cancel grace %v: cmp_1 was settled before the turn's end", grace)
	}
	h.letGo()
	var res json.RawMessage
	require.NoError(t, call.Wait(ctx, &res))
	evs := c.Wire.Events()
	assert.Equal(t, []string{"in_progress", "cancelled"}, Statuses(evs, "cmp_1"), "cancel grace %v: cmp_1\n%s", grace, Dump(evs))
}
