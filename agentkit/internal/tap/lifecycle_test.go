package tap

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests pin the bounds of a connection's end: a close settles and
// writes within its context and CloseTimeout whatever the client does, and
// the emitter keeps no state for sessions that never had a compaction.

// stuck is a transport whose writes block until it is released.
type stuck struct {
	mu      sync.Mutex
	entered chan struct{}
	once    sync.Once
	release chan struct{}
	wrote   []string
}

func newStuck() *stuck { return &stuck{entered: make(chan struct{}), release: make(chan struct{})} }

func (s *stuck) Write(p []byte) (int, error) {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	s.mu.Lock()
	s.wrote = append(s.wrote, string(p))
	s.mu.Unlock()
	return len(p), nil
}

func initialized(t *testing.T, tp *Tap) {
	t.Helper()
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`))
	done := make(chan error, 1)
	go func() { done <- tp.Send([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the initialize answer was not written")
	}
}

// TestShutdownIsBoundedByItsContextWhenTheClientDoesNotRead: the transport
// takes nothing, the queue is full and a runtime is blocked streaming into
// it. Shutdown still returns once its context ends, with an error that
// says the output was abandoned; the blocked runtime's call returns too,
// and so do later writes.
func TestShutdownIsBoundedByItsContextWhenTheClientDoesNotRead(t *testing.T) {
	w := newStuck()
	defer close(w.release)
	tp := NewWriter(quietConfig(), w)
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`))
	go func() { _ = tp.Send([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)) }()
	<-w.entered // the answer's write is stuck: the client reads nothing
	for tp.Emitter() == nil {
		time.Sleep(time.Millisecond)
	}
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`))
	c, err := tp.Start(context.Background(), "s", emitter.WithID("cmp_1"), emitter.UserDisplayable())
	require.NotNil(t, c, "Start: %v", err)
	flooded := make(chan error, 1)
	go func() {
		for {
			if err := c.Chunk(context.Background(), protocol.Text(strings.Repeat("x", 1024))); err != nil {
				flooded <- err
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = tp.Shutdown(ctx, emitter.ErrConnectionClosed)
	assert.LessOrEqual(t, time.Since(start), CloseTimeout, "how long Shutdown took")
	assert.ErrorIs(t, err, errAbandoned, "Shutdown: the output abandoned")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "Shutdown: at the context's deadline")
	select {
	case err := <-flooded:
		assert.Error(t, err, "the flood's Chunk returned no error")
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the runtime blocked in Chunk is still blocked after Shutdown")
	}
	assert.ErrorIs(t, tp.Send(response(9)), errAbandoned, "a write after the abandoned close")
	// A second close returns at once.
	assert.ErrorIs(t, tp.Shutdown(context.Background(), emitter.ErrConnectionClosed), errAbandoned, "second Shutdown")
}

// TestCloseDoesNotWaitAgainForAClientStuckSinceBefore: a write has been in
// progress for the whole timeout already when the close begins, so the
// close gives up at once rather than a full timeout later.
func TestCloseDoesNotWaitAgainForAClientStuckSinceBefore(t *testing.T) {
	w := newStuck()
	defer close(w.release)
	q := newLineQueue(w)
	require.NoError(t, q.write(note(0), false))
	<-w.entered
	const timeout = 200 * time.Millisecond
	time.Sleep(timeout)
	start := time.Now()
	stop := q.abandonAt(context.Background(), timeout)
	defer stop()
	assert.ErrorIs(t, q.drain(), errAbandoned, "drain")
	assert.LessOrEqual(t, time.Since(start), timeout/2, "how long the close waited for a client stuck for %v already", timeout)
}

// TestCloseWaitsForAReadingClient: the transport is slow but takes what it
// is given, so the close writes everything (no abandonment before the
// timeout).
func TestCloseWaitsForAReadingClient(t *testing.T) {
	var s sink
	tp := NewWriter(quietConfig(), &s)
	entered, release := s.holdNext()
	require.NoError(t, tp.Send(note(0)))
	<-entered
	for i := 1; i < 50; i++ {
		require.NoError(t, tp.Send(note(i)))
	}
	time.AfterFunc(50*time.Millisecond, release)
	require.NoError(t, tp.Shutdown(context.Background(), emitter.ErrConnectionClosed))
	assert.Len(t, s.lines(), 50, "lines written by the close")
}

// TestTurnsWithoutCompactionsLeaveNothingInTheEmitter: prompts for
// sessions that never had a compaction (an unknown session the agent
// refuses, a plain echo) end their turns without creating emitter state; a
// session with a compaction keeps its tracker until session/close.
func TestTurnsWithoutCompactionsLeaveNothingInTheEmitter(t *testing.T) {
	tp := New(quietConfig(), func([]byte) error { return nil })
	defer tp.Close(emitter.ErrConnectionClosed)
	initialized(t, tp)
	for i, sid := range []string{"unknown", "plain"} {
		id := []byte{byte('1' + i)}
		tp.Receive([]byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[]}}`))
		require.NoError(t, tp.Send([]byte(`{"jsonrpc":"2.0","id":`+string(id)+`,"error":{"code":-32002,"message":"not found"}}`)))
	}
	assert.Zero(t, touched(tp), "sessions the emitter keeps after turns without compactions")
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`))
	c, err := tp.Start(context.Background(), "s", emitter.WithID("cmp_1"))
	require.NoError(t, err)
	require.NoError(t, tp.Send([]byte(`{"jsonrpc":"2.0","id":5,"result":{"stopReason":"end_turn"}}`)))
	assert.True(t, settled(c), "the turn's end left the compaction open")
	assert.Equal(t, 1, touched(tp), "sessions the emitter keeps: the one with a compaction")
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":6,"method":"session/close","params":{"sessionId":"s"}}`))
	require.NoError(t, tp.Send([]byte(`{"jsonrpc":"2.0","id":6,"result":{}}`)))
	assert.Zero(t, touched(tp), "sessions the emitter keeps after session/close")
}

// TestSharedEmitterSettlesEverySession: once the host holds the emitter,
// a compaction it opened directly is still settled at its turn's end.
func TestSharedEmitterSettlesEverySession(t *testing.T) {
	tp := New(quietConfig(), func([]byte) error { return nil })
	defer tp.Close(emitter.ErrConnectionClosed)
	initialized(t, tp)
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`))
	c, err := tp.SharedEmitter().Session("s").Start(context.Background(), emitter.WithID("cmp_1"))
	require.NoError(t, err)
	require.NoError(t, tp.Send([]byte(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)))
	assert.Equal(t, protocol.Failed, c.Record().Status, "the host's compaction after its turn")
}

// touched returns how many sessions the tap has asked the emitter for: the
// only ones the emitter keeps state for.
func touched(tp *Tap) int {
	return tp.h.KnownSessions()
}
