package agentkit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/sourcegraph/jsonrpc2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// silentClient is a client that records the agent's requests and never
// answers them.
type silentClient chan *jsonrpc2.Request

func (c silentClient) Handle(_ context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) {
	if !req.Notif {
		c <- req
	}
}

// TestAsyncHandlerBoundHoldsWhenTheClientNeverAnswers (issue 18, item 5):
// with MaxConcurrent(2), six prompts whose handlers each ask the client
// (fs/read_text_file) and wait; the client never answers, and cancels the
// six prompts instead, so their handlers return. A handler's exemption
// from the limit while it waits for the client ends when it returns: the
// eight prompts that come next run at most two at once. (Before the fix,
// each unanswered request lifted the limit by one for good, and all eight
// ran at once.)
//
// Progress is driven by the limiter's own report that the read loop waits
// for a slot: only then does the test let the oldest running handler
// return. A limiter that admitted a third handler would not wait, and
// more prompts would be handled at once.
func TestAsyncHandlerBoundHoldsWhenTheClientNeverAnswers(t *testing.T) {
	const (
		limit = 2
		asks  = 6 // prompts whose request the client never answers
		works = 8 // prompts after them
	)
	kit := agentkit.New(quiet)
	// busy counts the handlers that run and are not waiting for the
	// client; most is its maximum.
	var busy, most atomic.Int32
	enter := func() {
		n := busy.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
	}
	asked := make(chan error, asks)            // a cancelled handler's Call error
	started := make(chan chan struct{}, works) // a work handler's release
	h := jsonrpc2.HandlerWithError(func(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
		switch req.Method {
		case "initialize":
			return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}}, nil
		case "session/prompt":
		default:
			return nil, nil
		}
		var p struct {
			SessionID string `json:"sessionId"`
		}
		if err := json.Unmarshal(*req.Params, &p); err != nil {
			return nil, err
		}
		if strings.HasPrefix(p.SessionID, "ask_") {
			enter()
			busy.Add(-1)
			var res any
			err := conn.Call(ctx, "fs/read_text_file", map[string]any{"sessionId": p.SessionID, "path": "/tmp/notes.txt"}, &res)
			asked <- err
			return map[string]any{"stopReason": "cancelled"}, nil
		}
		enter()
		defer busy.Add(-1)
		release := make(chan struct{})
		started <- release
		select {
		case <-release:
		case <-ctx.Done():
		}
		return map[string]any{"stopReason": "end_turn"}, nil
	})
	agentSide, clientSide := net.Pipe()
	conn := kit.NewConn(context.Background(), agentkit.NewStream(agentSide), agentkit.AsyncHandler(h, agentkit.MaxConcurrent(limit)), jsonrpc2.SetLogger(nopLogger{}))
	parked := make(chan struct{}, 1)
	agentkit.OnLimiterWait(kit, conn, func() {
		select {
		case parked <- struct{}{}:
		default:
		}
	})
	requests := make(silentClient, asks)
	client := jsonrpc2.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(clientSide), requests, jsonrpc2.SetLogger(nopLogger{}))
	defer func() {
		_ = clientSide.Close()
		<-conn.DisconnectNotify()
		<-client.DisconnectNotify()
	}()
	// A failure bound only: nothing below depends on how long anything takes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, client.Call(ctx, "initialize", map[string]any{"protocolVersion": 1, "clientCapabilities": map[string]any{}}, nil))

	// Six prompts, each waiting for the client's answer to its request.
	var waits []jsonrpc2.Waiter
	for i := range asks {
		w, err := client.DispatchCall(ctx, "session/prompt", kittest.PromptParams(fmt.Sprintf("ask_%d", i), nil))
		require.NoError(t, err)
		waits = append(waits, w)
	}
	for range asks {
		select {
		case req := <-requests:
			require.Equal(t, "fs/read_text_file", req.Method, "what the agent asked")
		case <-ctx.Done():
			require.FailNow(t, "the agent did not send its six requests")
		}
	}
	// The client cancels them instead of answering: the handlers return.
	for i := range asks {
		require.NoError(t, client.Notify(ctx, "session/cancel", map[string]any{"sessionId": fmt.Sprintf("ask_%d", i)}))
	}
	for _, w := range waits {
		var res map[string]any
		require.NoError(t, w.Wait(ctx, &res), "cancelled prompt")
		require.Equal(t, "cancelled", res["stopReason"], "cancelled prompt")
	}
	for range asks {
		require.Error(t, <-asked, "a request the client never answered returned no error")
	}

	// Eight more prompts. The writes block while the agent does not read:
	// dispatch them aside. (A wait of the six prompts' is no news.)
	select {
	case <-parked:
	default:
	}
	dispatched := make(chan jsonrpc2.Waiter, works)
	go func() {
		defer close(dispatched)
		for i := range works {
			w, err := client.DispatchCall(ctx, "session/prompt", kittest.PromptParams(fmt.Sprintf("work_%d", i), nil))
			if !assert.NoError(t, err) { // not the test's goroutine: assert
				return
			}
			dispatched <- w
		}
	}()
	// Let the oldest running handler return only while the read loop waits
	// for a slot; once all eight have started, let them all return.
	var held []chan struct{}
	wantsSlot, seen := false, 0
	for seen < works {
		select {
		case r := <-started:
			held = append(held, r)
			seen++
		case <-parked:
			wantsSlot = true
		case <-ctx.Done():
			require.Failf(t, "the limit was never released", "%d of %d prompts handled, %d running, %d at most", seen, works, len(held), most.Load())
		}
		if wantsSlot && len(held) > 0 {
			close(held[0])
			held = held[1:]
			wantsSlot = false
		}
	}
	for _, r := range held {
		close(r)
	}
	for w := range dispatched {
		var res map[string]any
		require.NoError(t, w.Wait(ctx, &res), "prompt")
		require.Equal(t, "end_turn", res["stopReason"], "prompt")
	}
	m := most.Load()
	assert.LessOrEqual(t, m, int32(limit), "handlers at once with MaxConcurrent(%d), after %d requests the client never answered", limit, asks)
	t.Logf("at most %d handlers ran at once", m)
}
