package agentkit_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/sourcegraph/jsonrpc2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runSignalAgent is the agent process of the signal tests: a
// kittest.SignalAgent on agentkit.
func runSignalAgent() {
	kit := agentkit.New(quiet)
	a := &agent{kit: kit}
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		return nil, kittest.OpenUntilEnd(ctx, agentkit.SessionFrom(ctx, sid))
	}
	kittest.SignalAgent(func(in io.ReadCloser, out io.WriteCloser) <-chan struct{} {
		conn := kit.NewConn(context.Background(), agentkit.NewStream(rwc{in, out}), agentkit.AsyncHandler(jsonrpc2.HandlerWithError(a.handle)))
		return conn.DisconnectNotify()
	}, kit.Shutdown, agentkit.CloseTimeout)
}

// TestSignalSettlesThenTheAgentExits: an agent on agentkit that gets SIGINT
// or SIGTERM with a compaction open writes its terminal update before it
// exits (a real process, real pipes, a real signal).
func TestSignalSettlesThenTheAgentExits(t *testing.T) {
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			kittest.CheckSignalSettles(t, helperEnv+"=signal", session, sig)
		})
	}
}

// hangPrompt runs kittest.OpenUntilEnd, and sends the cause it returns on
// cause.
func hangPrompt(cause chan<- error) func(context.Context, *jsonrpc2.Conn, string) (any, error) {
	return func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		err := kittest.OpenUntilEnd(ctx, agentkit.SessionFrom(ctx, sid))
		cause <- err
		return nil, err
	}
}

// TestShutdownSettlesWritesThenCloses: Shutdown settles the open
// compaction as failed (emitter.ErrConnectionClosed), ends the prompt
// handler's context with that cause after the settlement, writes it, and
// closes the connection, before it returns; the kit then forgets the
// connection, and a connection made after Shutdown closes at once.
func TestShutdownSettlesWritesThenCloses(t *testing.T) {
	cause := make(chan error, 1)
	a := &agent{}
	r := newRig(t, a)
	a.prompt = hangPrompt(cause)
	r.Initialize(1, true)
	r.StartPrompt()
	require.NoError(t, r.kit.Shutdown(r.Ctx), "Shutdown")
	select {
	case <-r.agent.DisconnectNotify():
	default:
		assert.Fail(t, "the connection is still open after Shutdown")
	}
	assert.ErrorIs(t, <-cause, emitter.ErrConnectionClosed, "the prompt's context ended with")
	<-r.Client.Conn.DisconnectNotify()
	evs := r.Client.Wire.Events()
	assert.Equal(t, []string{"in_progress", "failed"}, kittest.Statuses(evs, "cmp_1"), "statuses\n%s", kittest.Dump(evs))
	_, err := agentkit.SessionFrom(a.lastCtx(), session).Start(r.Ctx)
	assert.ErrorIs(t, err, agentkit.ErrClosed, "Start after Shutdown")
	kittest.Validate(t, evs, 1)

	agentSide, clientSide := net.Pipe()
	defer clientSide.Close()
	late := r.kit.NewConn(context.Background(), agentkit.NewStream(agentSide), agentkit.AsyncHandler(jsonrpc2.HandlerWithError(a.handle)))
	select {
	case <-late.DisconnectNotify():
	case <-r.Ctx.Done():
		assert.Fail(t, "a connection made after Shutdown stays open")
	}
}

// TestHangUpSettlesBeforeHandlersSeeTheEnd: when the client's input ends,
// the kit settles and writes before jsonrpc2 ends its handlers' contexts,
// so the prompt handler's context ends with ErrConnectionClosed (not
// jsonrpc2's context.Canceled), and CloseConn, called once
// DisconnectNotify fires, returns once the stream is closed.
func TestHangUpSettlesBeforeHandlersSeeTheEnd(t *testing.T) {
	kit := agentkit.New(quiet)
	cause := make(chan error, 1)
	a := &agent{kit: kit, prompt: hangPrompt(cause)}
	inR, inW := io.Pipe()   // client -> agent
	outR, outW := io.Pipe() // agent -> client
	conn := kit.NewConn(context.Background(), agentkit.NewStream(rwc{inR, outW}),
		agentkit.AsyncHandler(jsonrpc2.HandlerWithError(a.handle)), jsonrpc2.SetLogger(nopLogger{}))
	client := kittest.NewClient(context.Background(), rwc{outR, inW})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := client.Initialize(ctx, 1, true)
	require.NoError(t, err)
	_, err = client.Conn.DispatchCall(ctx, "session/prompt", kittest.PromptParams(session, nil))
	require.NoError(t, err)
	_, err = client.Wire.Wait(ctx, func(e kittest.Event) bool { return e.CompactionID == "cmp_1" })
	require.NoError(t, err)
	_ = inW.Close() // the client's end of input; it still reads
	<-conn.DisconnectNotify()
	if err := kit.CloseConn(ctx, conn); err != nil {
		assert.ErrorIs(t, err, agentkit.ErrUnknownConn, "CloseConn: nil, or the close already completed")
	}
	assert.ErrorIs(t, <-cause, emitter.ErrConnectionClosed, "the prompt's context ended with")
	<-client.Conn.DisconnectNotify()
	assert.Equal(t, []string{"in_progress", "failed"}, kittest.Statuses(client.Wire.Events(), "cmp_1"), "statuses")
}

// pausedReader stops passing reads on once paused: a client that stops
// reading.
type pausedReader struct {
	io.ReadCloser
	paused atomic.Bool
	resume chan struct{}
}

func (p *pausedReader) Read(b []byte) (int, error) {
	if p.paused.Load() {
		<-p.resume
	}
	return p.ReadCloser.Read(b)
}

// TestShutdownIsBoundedWhenTheClientDoesNotRead: the client stops reading
// while a runtime streams chunks as fast as it can; Shutdown returns once
// its context ends, with an error, and the runtime's calls return.
func TestShutdownIsBoundedWhenTheClientDoesNotRead(t *testing.T) {
	kit := agentkit.New(quiet)
	flooded := make(chan error, 1)
	a := &agent{kit: kit}
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		c, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable())
		if c == nil {
			return nil, err
		}
		for {
			if err := c.Chunk(ctx, protocol.Text("chunk of a flood\n")); err != nil {
				flooded <- err
				return nil, err
			}
		}
	}
	agentSide, clientSide := net.Pipe()
	conn := kit.NewConn(context.Background(), agentkit.NewStream(agentSide),
		agentkit.AsyncHandler(jsonrpc2.HandlerWithError(a.handle)), jsonrpc2.SetLogger(nopLogger{}))
	in := &pausedReader{ReadCloser: clientSide, resume: make(chan struct{})}
	client := kittest.NewClient(context.Background(), rwcConn{in, clientSide})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := client.Initialize(ctx, 1, true)
	require.NoError(t, err)
	_, err = client.Conn.DispatchCall(ctx, "session/prompt", kittest.PromptParams(session, nil))
	require.NoError(t, err)
	_, err = client.Wire.Wait(ctx, func(e kittest.Event) bool { return e.CompactionID == "cmp_1" })
	require.NoError(t, err)
	in.paused.Store(true)
	time.Sleep(50 * time.Millisecond) // the pipe and the queue fill
	sctx, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer scancel()
	start := time.Now()
	err = kit.Shutdown(sctx)
	assert.LessOrEqual(t, time.Since(start), agentkit.CloseTimeout, "how long Shutdown took with a client that does not read")
	assert.Error(t, err, "Shutdown reported everything written to a client that reads nothing")
	select {
	case <-flooded:
	case <-ctx.Done():
		require.FailNow(t, "the runtime is still blocked after Shutdown")
	}
	close(in.resume)
	_ = clientSide.Close()
	<-client.Conn.DisconnectNotify()
	<-conn.DisconnectNotify()
}

type rwcConn struct {
	io.Reader
	net.Conn
}

func (r rwcConn) Read(p []byte) (int, error) { return r.Reader.Read(p) }

// TestAsyncHandlerBoundsConcurrentHandlers: with MaxConcurrent(2), a third
// request is handled only once one of the first two returns: the read
// loop waits meanwhile.
func TestAsyncHandlerBoundsConcurrentHandlers(t *testing.T) {
	kit := agentkit.New(quiet)
	var running, most atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 16)
	h := jsonrpc2.HandlerWithError(func(ctx context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
		if req.Method != "x/block" {
			return nil, nil
		}
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		started <- struct{}{}
		<-release
		running.Add(-1)
		return "ok", nil
	})
	agentSide, clientSide := net.Pipe()
	conn := kit.NewConn(context.Background(), agentkit.NewStream(agentSide), agentkit.AsyncHandler(h, agentkit.MaxConcurrent(2)), jsonrpc2.SetLogger(nopLogger{}))
	client := kittest.NewClient(context.Background(), clientSide)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The writes block once the agent stops reading: dispatch them aside.
	calls := make(chan jsonrpc2.Waiter, 5)
	go func() {
		defer close(calls)
		for range 5 {
			c, err := client.Conn.DispatchCall(ctx, "x/block", nil)
			if !assert.NoError(t, err) { // not the test's goroutine: assert
				return
			}
			calls <- c
		}
	}()
	<-started
	<-started
	select {
	case <-started:
		require.FailNow(t, "a third handler started while two ran with MaxConcurrent(2)")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	for c := range calls {
		var res string
		require.NoError(t, c.Wait(ctx, &res), "answer")
		require.Equal(t, "ok", res, "answer")
	}
	assert.Equal(t, int32(2), most.Load(), "handlers at once at most")
	_ = clientSide.Close()
	<-conn.DisconnectNotify()
	<-client.Conn.DisconnectNotify()
}

// TestAsyncHandlerDoesNotCountHandlersWaitingForTheClient: with
// MaxConcurrent(1), two prompts whose handlers each ask the client
// (session/request_permission) before they answer, and a client that
// answers only once it has both requests. The first request frees its
// handler's slot while unanswered, so the second prompt is read and
// handled, and the read loop then reads both answers: no deadlock.
func TestAsyncHandlerDoesNotCountHandlersWaitingForTheClient(t *testing.T) {
	kit := agentkit.New(quiet)
	h := jsonrpc2.HandlerWithError(func(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
		switch req.Method {
		case "initialize":
			return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}}, nil
		case "session/prompt":
			var p struct {
				SessionID string `json:"sessionId"`
			}
			if err := json.Unmarshal(*req.Params, &p); err != nil {
				return nil, err
			}
			var res struct {
				Outcome string `json:"outcome"`
			}
			// About its own session, as ACP has it: that is how the kit
			// knows which handler waits.
			if err := conn.Call(ctx, "session/request_permission", map[string]any{"sessionId": p.SessionID}, &res); err != nil {
				return nil, err
			}
			return map[string]any{"stopReason": "end_turn"}, nil
		}
		return nil, nil
	})
	agentSide, clientSide := net.Pipe()
	conn := kit.NewConn(context.Background(), agentkit.NewStream(agentSide), agentkit.AsyncHandler(h, agentkit.MaxConcurrent(1)), jsonrpc2.SetLogger(nopLogger{}))
	// The client answers the agent's requests once it has two of them.
	var mu sync.Mutex
	asked := 0
	both := make(chan struct{})
	ch := jsonrpc2.AsyncHandler(jsonrpc2.HandlerWithError(func(ctx context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
		mu.Lock()
		if asked++; asked == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both:
		case <-ctx.Done():
		}
		return map[string]any{"outcome": "allowed"}, nil
	}))
	client := jsonrpc2.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(clientSide), ch, jsonrpc2.SetLogger(nopLogger{}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, client.Call(ctx, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}, nil))
	var waits []jsonrpc2.Waiter
	for _, sid := range []string{"sess_a", "sess_b"} {
		w, err := client.DispatchCall(ctx, "session/prompt", kittest.PromptParams(sid, nil))
		require.NoError(t, err)
		waits = append(waits, w)
	}
	for _, w := range waits {
		var res map[string]any
		const deadlock = "prompt (a deadlock: the read loop waited for a slot while both handlers waited for the client)"
		require.NoError(t, w.Wait(ctx, &res), deadlock)
		require.Equal(t, "end_turn", res["stopReason"], deadlock)
	}
	_ = clientSide.Close()
	<-conn.DisconnectNotify()
	<-client.DisconnectNotify()
}
