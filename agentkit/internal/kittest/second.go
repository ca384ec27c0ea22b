package kittest

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The second prompt, shared by both stacks' tests: a client sends a
// session/prompt while the session's prompt still runs, and the agent
// rejects it with an error. Only the running prompt's response ends the
// turn, so the rejection must settle nothing.

// errPromptRunning is secondPrompt's rejection of a prompt sent while one
// runs.
var errPromptRunning = errors.New("a prompt is already running in this session")

// SecondPromptRejectedWhileOneRunsEndsNothing: a session/prompt sent while
// the session's prompt runs, which the agent rejects with an error, ends
// nothing: only the running prompt's response ends the turn, so its
// compaction's later chunks and completion still reach the client.
func SecondPromptRejectedWhileOneRunsEndsNothing(t *testing.T, st Stack) {
	sp := &secondPrompt{rejected: make(chan struct{})}
	a := &Agent{Prompt: func(ctx context.Context, _ Conn, p Prompt) (string, error) {
		return sp.prompt(ctx, st.SessionFrom(ctx, p.SessionID))
	}}
	r := Serve(t, st, Config{}, a)
	r.Initialize(1, true)
	res := sp.play(r.Ctx, t, r.Client, SessionID)
	sp.check(t, res, r.Finish(1))
}

// secondPrompt plays both sides. Safe for concurrent use.
type secondPrompt struct {
	running  atomic.Bool
	once     sync.Once
	rejected chan struct{}
}

// prompt is the agent's runtime: the first prompt opens cmp_1, streams a
// chunk, waits until the client has seen the second prompt rejected,
// streams another chunk and completes; it honours its context, reporting
// the compaction cancelled if it ends. A prompt sent while it runs fails
// with errPromptRunning, which the stack turns into an error response.
func (p *secondPrompt) prompt(ctx context.Context, s Starter) (string, error) {
	if !p.running.CompareAndSwap(false, true) {
		return "", errPromptRunning
	}
	defer p.running.Store(false)
	c, err := s.Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable())
	if err != nil {
		return "", err
	}
	if err := c.Chunk(ctx, protocol.Text("before the second prompt")); err != nil {
		return "", err
	}
	select {
	case <-p.rejected:
	case <-ctx.Done():
		return "cancelled", c.Cancel(ctx)
	}
	if err := c.Chunk(ctx, protocol.Text(", and after it")); err != nil {
		return "", err
	}
	return "end_turn", c.Complete(ctx)
}

// play is the client: it sends the first prompt, and once its first chunk
// is on the wire the second, which must be rejected; then it lets the
// runtime go on and returns the first prompt's result.
func (p *secondPrompt) play(ctx context.Context, t testing.TB, c *Client, sessionID string) json.RawMessage {
	t.Helper()
	first, err := c.Conn.DispatchCall(ctx, "session/prompt", PromptParams(sessionID, nil))
	require.NoError(t, err)
	_, err = c.Wire.Wait(ctx, func(e Event) bool { return e.Kind == protocol.KindSummaryChunk })
	require.NoError(t, err)
	require.Error(t, c.Conn.Call(ctx, "session/prompt", PromptParams(sessionID, nil), nil), "the second prompt was not rejected")
	p.once.Do(func() { close(p.rejected) })
	var res json.RawMessage
	require.NoError(t, first.Wait(ctx, &res), "the running prompt")
	return res
}

// check checks the record: the running prompt ended end_turn, and cmp_1
// streamed both chunks and completed, none of it settled by the
// rejection.
func (p *secondPrompt) check(t testing.TB, res json.RawMessage, evs []Event) {
	t.Helper()
	assert.Equal(t, "end_turn", StopReason(res), "the running prompt's stop reason (%s)", res)
	assert.Equal(t, []string{"in_progress", "chunk", "chunk", "completed"}, Statuses(evs, "cmp_1"), "cmp_1\n%s", Dump(evs))
}
