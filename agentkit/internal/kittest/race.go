package kittest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The cancel race, shared by both stacks' tests: the fastest client sends
// session/cancel right behind its session/prompt, then, once that prompt is
// answered, a prompt it does not cancel. The cancel must reach the first
// prompt (else it is lost) and never the second (else it is stale: a late
// cancel applied to whichever prompt runs when it is handled).

// The texts of the race's prompts; the agent's runtime (raceRuntime) tells
// them apart by their text.
const (
	// cancelMe is a prompt with its session/cancel right behind it.
	cancelMe = "cancel me"
	// keepMe is a prompt with no cancel.
	keepMe = "keep me"
)

// CancelReachesItsPromptAndNeverTheNext plays 1,000 pairs: a
// session/prompt with its session/cancel right behind it, then, once it is
// answered, a prompt with no cancel. Every cancel must reach its prompt
// (none lost) and none the prompt after it (none stale).
func CancelReachesItsPromptAndNeverTheNext(t *testing.T, st Stack) {
	const pairs = 1000
	var rt raceRuntime
	a := &Agent{
		Cancel: func(string) { rt.cancelled() },
		Prompt: func(ctx context.Context, _ Conn, p Prompt) (string, error) {
			return rt.prompt(ctx, p.Text, st.SessionFrom(ctx, p.SessionID))
		},
	}
	r := Serve(t, st, Config{CancelGrace: Grace(-1)}, a)
	r.Within(100 * time.Second)
	r.Initialize(1, true)
	lost, stale := r.Client.cancelRace(r.Ctx, t, SessionID, pairs)
	evs := r.Finish(1)
	assert.Zero(t, lost, "of %d pairs: cancels lost", pairs)
	assert.Zero(t, stale, "of %d pairs: cancels applied to the next prompt", pairs)
	checkRaceStatuses(t, evs, pairs)
}

// cancelRace plays pairs of prompts on sessionID: cancelMe with its
// session/cancel written right behind it, then, once it is answered, keepMe
// with no cancel. It returns how many cancelMe prompts did not end with
// stop reason "cancelled" (lost cancels) and how many keepMe prompts did
// not end with "end_turn" (stale cancels).
func (c *Client) cancelRace(ctx context.Context, t testing.TB, sessionID string, pairs int) (lost, stale int) {
	t.Helper()
	for i := range pairs {
		call, err := c.Conn.DispatchCall(ctx, "session/prompt", PromptText(sessionID, cancelMe, nil))
		require.NoError(t, err)
		require.NoError(t, c.Cancel(ctx, sessionID))
		var res json.RawMessage
		require.NoError(t, call.Wait(ctx, &res), "pair %d, the cancelled prompt", i)
		if StopReason(res) != "cancelled" {
			lost++
		}
		require.NoError(t, c.Conn.Call(ctx, "session/prompt", PromptText(sessionID, keepMe, nil), &res), "pair %d, the prompt after it", i)
		if StopReason(res) != "end_turn" {
			stale++
		}
	}
	return lost, stale
}

// checkRaceStatuses checks that the wire of a cancelRace holds, for each
// pair, one compaction settled cancelled and one completed, and nothing
// else.
func checkRaceStatuses(t testing.TB, evs []Event, pairs int) {
	t.Helper()
	counts := map[string]int{}
	for _, e := range Compactions(evs) {
		counts[e.Status]++
	}
	assert.Equal(t, map[string]int{"in_progress": 2 * pairs, "cancelled": pairs, "completed": pairs}, counts, "statuses on the wire")
}

// raceRuntime is the agent's side of cancelRace, the same for both stacks:
// the stack's prompt handler calls prompt, and its session/cancel handler
// calls cancelled. Safe for concurrent use.
type raceRuntime struct {
	mu      sync.Mutex
	changed chan struct{}
	cancels int // session/cancel notifications the agent handled
	keeps   int // keepMe prompts seen
}

// cancelWork is how long the agent's session/cancel handler works (it
// stops its runtime, say) after cancelled counted it. A stack that handles
// notifications one at a time handles the next session/cancel only after
// it, so that a late one meets the next prompt running.
const cancelWork = 2 * time.Millisecond

// cancelled counts a session/cancel the agent handled, then does the
// handler's work (cancelWork).
func (r *raceRuntime) cancelled() {
	r.mu.Lock()
	r.cancels++
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
	r.mu.Unlock()
	time.Sleep(cancelWork)
}

// errCancelNeverHandled: the agent never handled a session/cancel the
// client sent before a keepMe prompt.
var errCancelNeverHandled = errors.New("kittest: the session/cancel before this prompt never reached the agent")

// prompt runs one race prompt and returns its stop reason. Both prompts
// open a compaction. cancelMe then waits for its context to end and
// reports the compaction cancelled ("cancelled"; a lost cancel ends the
// wait after 10 s and completes it, "end_turn"). keepMe first waits until
// the agent has handled every session/cancel sent before it, so a stack
// that would apply one of them late has done so by then; its context still
// ended means a stale cancel ("cancelled"), else it completes ("end_turn").
func (r *raceRuntime) prompt(ctx context.Context, text string, s Starter) (string, error) {
	c, err := s.Start(ctx)
	if err != nil {
		return "", err
	}
	switch text {
	case cancelMe:
		select {
		case <-ctx.Done():
			return "cancelled", c.Cancel(ctx)
		case <-time.After(10 * time.Second):
			return "end_turn", c.Complete(ctx)
		}
	case keepMe:
		if err := r.waitCancels(); err != nil {
			return "", err
		}
		if ctx.Err() != nil {
			return "cancelled", c.Cancel(ctx)
		}
		return "end_turn", c.Complete(ctx)
	}
	return "", fmt.Errorf("kittest: not a race prompt: %q", text)
}

// waitCancels waits, for the n-th keepMe prompt, until n session/cancel
// notifications have been handled.
func (r *raceRuntime) waitCancels() error {
	r.mu.Lock()
	r.keeps++
	want := r.keeps
	r.mu.Unlock()
	deadline := time.After(10 * time.Second) // a hang guard
	for {
		r.mu.Lock()
		if r.cancels >= want {
			r.mu.Unlock()
			return nil
		}
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			return errCancelNeverHandled
		}
	}
}
