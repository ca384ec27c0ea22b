package agentkit_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/sourcegraph/jsonrpc2"
)

// The whole integration on sourcegraph/jsonrpc2: the kit creates the
// connection, and the runtime reports through SessionFrom, from the
// handler's context. A stand-in client (driveClient, in this package's
// tests) initializes, prompts once and prints what it received.
func Example() {
	kit := agentkit.New(agentkit.WithCancelGrace(5 * time.Second))
	stdio, clientEnd := net.Pipe() // stands in for the agent's stdin/stdout

	handler := jsonrpc2.HandlerWithError(func(ctx context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
		switch req.Method {
		case "initialize":
			return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}}, nil
		case "session/prompt": // in the runtime, when the model starts compacting:
			c, err := agentkit.SessionFrom(ctx, "sess_1").Start(ctx, emitter.WithID("cmp_1"), emitter.WithTrigger(protocol.Auto),
				emitter.UserDisplayable()) // without it, Chunk sends nothing: emitter.ErrWithheld
			if c == nil {
				return nil, err
			}
			_ = c.Chunk(ctx, protocol.Text("## Retained context"))
			_ = c.Complete(ctx)
			return map[string]any{"stopReason": "end_turn"}, nil
		}
		return nil, nil
	})
	conn := kit.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(stdio), agentkit.AsyncHandler(handler))

	for _, line := range driveClient(clientEnd) {
		fmt.Println(line)
	}
	<-conn.DisconnectNotify()
	// Output:
	// compaction_update cmp_1 in_progress
	// compaction_summary_chunk cmp_1
	// compaction_update cmp_1 completed
	// response session/prompt end_turn
}

// A runtime that keeps compaction IDs rather than handles gets the handle
// back by ID; its calls pass the same turn guard as every handle's.
func ExampleSession_Compaction() {
	kit := agentkit.New()
	stdio, clientEnd := net.Pipe() // stands in for the agent's stdin/stdout

	handler := jsonrpc2.HandlerWithError(func(ctx context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
		switch req.Method {
		case "initialize":
			return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}}, nil
		case "session/prompt":
			s := agentkit.SessionFrom(ctx, "sess_1")
			if _, err := s.Start(ctx, emitter.WithID("cmp_7"), emitter.UserDisplayable()); err != nil {
				return nil, err
			}
			// Later, where only the ID is at hand:
			c, err := s.Compaction("cmp_7")
			if err != nil {
				return nil, err
			}
			_ = c.Chunk(ctx, protocol.Text("## Retained context"))
			if err := c.Complete(ctx); err != nil {
				return nil, err
			}
			return map[string]any{"stopReason": "end_turn"}, nil
		}
		return nil, nil
	})
	conn := kit.NewConn(context.Background(), agentkit.NewStream(stdio), agentkit.AsyncHandler(handler))

	for _, line := range driveClient(clientEnd) {
		fmt.Println(line)
	}
	<-conn.DisconnectNotify()
	// Output:
	// compaction_update cmp_7 in_progress
	// compaction_summary_chunk cmp_7
	// compaction_update cmp_7 completed
	// response session/prompt end_turn
}
