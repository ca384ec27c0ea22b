package kittest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// HandleCallsAreHeldWhileTheTurnEndIsSettled: the turn guard holds the
// calls on a compaction's handle, not only those by ID. The agent's output
// holds the prompt's response (the message that ends the turn) once the
// turn's settlement has run, and the runtime, which kept the handle of the
// compaction the end settled, calls its methods meanwhile. The docs promise
// that nothing opens or changes between the settlement and the message
// that ends the turn: the handle's Chunk, Complete, Fail and Cancel must
// wait until the response is written, and then be refused
// (emitter.ErrSettled), sending nothing.
func HandleCallsAreHeldWhileTheTurnEndIsSettled(t *testing.T, st Stack) {
	h := &heldEnd{held: make(chan struct{}), release: make(chan struct{}),
		handle: make(chan *emitter.Compaction, 1), ctx: make(chan context.Context, 1)}
	a := &Agent{Prompt: func(ctx context.Context, _ Conn, p Prompt) (string, error) {
		return h.prompt(ctx, st.SessionFrom(ctx, p.SessionID))
	}}
	r := Serve(t, st, Config{WrapOutput: h.writer}, a)
	r.Initialize(1, true)
	h.play(r.Ctx, t, r.Client, SessionID)
	h.check(t, r.Finish(1))
}

// heldEnd plays both sides of HandleCallsAreHeldWhileTheTurnEndIsSettled.
// Safe for concurrent use.
type heldEnd struct {
	held    chan struct{} // closed when the response's write has begun
	release chan struct{} // closed by play to let it go on
	once    sync.Once
	handle  chan *emitter.Compaction
	ctx     chan context.Context
}

// responseMark is in the bytes of the prompt's response alone.
var responseMark = []byte(`"stopReason"`)

// hold blocks a write of the prompt's response until play releases it.
func (h *heldEnd) hold(p []byte) {
	if bytes.Contains(p, responseMark) {
		h.once.Do(func() {
			close(h.held)
			<-h.release
		})
	}
}

// writer wraps the agent's output (Config.WrapOutput).
func (h *heldEnd) writer(w io.Writer) io.Writer { return heldWriter{w, h} }

type heldWriter struct {
	w io.Writer
	h *heldEnd
}

func (w heldWriter) Write(p []byte) (int, error) {
	w.h.hold(p)
	return w.w.Write(p)
}

// prompt is the agent's runtime: it opens cmp_1, keeps the handle (for
// play) and ends the turn with it open.
func (h *heldEnd) prompt(ctx context.Context, s Starter) (string, error) {
	c, err := s.Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable())
	if err != nil {
		return "", err
	}
	h.handle <- c
	h.ctx <- ctx
	return "end_turn", nil
}

// holdFor is how long play waits for a handle's call that the guard must
// hold: it cannot return before the release, so the wait adds no
// flakiness; an unguarded call returns within microseconds.
const holdFor = 300 * time.Millisecond

// play is the client and the runtime's goroutine: a prompt; once its
// response is held, the handle's Chunk, Complete, Fail and Cancel, none of
// which may return before the response is written; then the release.
func (h *heldEnd) play(ctx context.Context, t testing.TB, c *Client, sessionID string) {
	t.Helper()
	call, err := c.Conn.DispatchCall(ctx, "session/prompt", PromptParams(sessionID, nil))
	require.NoError(t, err)
	var handle *emitter.Compaction
	var hctx context.Context
	select {
	case handle = <-h.handle:
		hctx = <-h.ctx
	case <-ctx.Done():
		require.FailNow(t, "the prompt never opened its compaction")
	}
	select {
	case <-h.held:
	case <-ctx.Done():
		require.FailNow(t, "the prompt's response was never written")
	}
	type result struct {
		name string
		err  error
	}
	calls := map[string]func() error{
		"Chunk":    func() error { return handle.Chunk(hctx, protocol.Text("late")) },
		"Complete": func() error { return handle.Complete(hctx) },
		"Fail":     func() error { return handle.Fail(hctx, errors.New("late")) },
		"Cancel":   func() error { return handle.Cancel(hctx) },
	}
	results := make(chan result, len(calls))
	for name, f := range calls {
		go func() { results <- result{name, f()} }()
	}
	var early []string
	wait := time.After(holdFor)
	for waiting := true; waiting; {
		select {
		case r := <-results:
			early = append(early, fmt.Sprintf("%s returned %v", r.name, r.err))
		case <-wait:
			waiting = false
		}
	}
	close(h.release)
	slices.Sort(early)
	assert.Empty(t, early, "while the turn's end was settled and written, the handle's calls were not held by the turn guard")
	for range len(calls) - len(early) {
		r := <-results
		assert.ErrorIs(t, r.err, emitter.ErrSettled, "%s after the turn's end", r.name)
	}
	var res json.RawMessage
	require.NoError(t, call.Wait(ctx, &res), "prompt")
	assert.Equal(t, "end_turn", StopReason(res), "stop reason")
}

// check checks the record: cmp_1 settled failed by the turn's end, before
// the response, and nothing of it after.
func (h *heldEnd) check(t testing.TB, evs []Event) {
	t.Helper()
	assert.Equal(t, []string{"in_progress", "failed"}, Statuses(evs, "cmp_1"), "cmp_1\n%s", Dump(evs))
	answered := false
	for _, e := range evs {
		switch {
		case e.Response && e.Method == "session/prompt":
			answered = true
		case answered && e.CompactionID == "cmp_1":
			assert.Failf(t, "cmp_1 reported after the turn's end", "%v", e)
		case !answered && e.CompactionID == "cmp_1" && e.Kind == protocol.KindSummaryChunk:
			assert.Failf(t, "a late chunk reached the client", "%v", e)
		}
	}
}
