package kittest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// The second prompt, shared by both stacks' tests: a client sends a
// session/prompt while the session's prompt still runs, and the agent
// rejects it with an error. Only the running prompt's response ends the
// turn, so the rejection must settle nothing.

// ErrPromptRunning is SecondPrompt's rejection of a prompt sent while one
// runs.
var ErrPromptRunning = errors.New("a prompt is already running in this session")

// SecondPrompt plays both sides. Safe for concurrent use.
type SecondPrompt struct {
	running  atomic.Bool
	once     sync.Once
	rejected chan struct{}
}

// NewSecondPrompt returns a SecondPrompt ready to play.
func NewSecondPrompt() *SecondPrompt { return &SecondPrompt{rejected: make(chan struct{})} }

// Prompt is the agent's runtime: the first prompt opens cmp_1, streams a
// chunk, waits until the client has seen the second prompt rejected,
// streams another chunk and completes; it honours its context, reporting
// the compaction cancelled if it ends. A prompt sent while it runs fails
// with ErrPromptRunning, which the stack turns into an error response.
func (p *SecondPrompt) Prompt(ctx context.Context, s Starter) (string, error) {
	if !p.running.CompareAndSwap(false, true) {
		return "", ErrPromptRunning
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

// Play is the client: it sends the first prompt, and once its first chunk
// is on the wire the second, which must be rejected; then it lets the
// runtime go on and returns the first prompt's result.
func (p *SecondPrompt) Play(ctx context.Context, t testing.TB, c *Client, sessionID string) json.RawMessage {
	t.Helper()
	first, err := c.Conn.DispatchCall(ctx, "session/prompt", PromptParams(sessionID, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wire.Wait(ctx, func(e Event) bool { return e.Kind == protocol.KindSummaryChunk }); err != nil {
		t.Fatal(err)
	}
	if err := c.Conn.Call(ctx, "session/prompt", PromptParams(sessionID, nil), nil); err == nil {
		t.Fatal("the second prompt was not rejected")
	}
	p.once.Do(func() { close(p.rejected) })
	var res json.RawMessage
	if err := first.Wait(ctx, &res); err != nil {
		t.Fatalf("the running prompt: %v", err)
	}
	return res
}

// Check checks the record: the running prompt ended end_turn, and cmp_1
// streamed both chunks and completed, none of it settled by the
// rejection.
func (p *SecondPrompt) Check(t testing.TB, res json.RawMessage, evs []Event) {
	t.Helper()
	if StopReason(res) != "end_turn" {
		t.Errorf("the running prompt's stop reason %s, want end_turn", res)
	}
	if got, want := Statuses(evs, "cmp_1"), []string{"in_progress", "chunk", "chunk", "completed"}; !slices.Equal(got, want) {
		t.Errorf("cmp_1: %v, want %v\n%s", got, want, Dump(evs))
	}
}
