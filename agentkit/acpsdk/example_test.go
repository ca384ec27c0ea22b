package acpsdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	acp "github.com/coder/acp-go-sdk"
)

// exampleAgent is an acp.Agent; stubAgent (in this package's tests)
// answers every method but Prompt.
type exampleAgent struct {
	stubAgent
}

func (a *exampleAgent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	// ctx is the kit's: a session/cancel ends it with cause
	// emitter.ErrCancelled, and it carries the connection. In the
	// runtime, when the model starts compacting:
	c, err := acpsdk.SessionFrom(ctx, string(p.SessionId)).Start(ctx, emitter.WithID("cmp_1"), emitter.WithTrigger(protocol.Auto))
	if err != nil {
		return acp.PromptResponse{}, err
	}
	_ = c.Complete(ctx)
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

// The integration for acp.Agent implementations: the kit creates the
// AgentSideConnection. A stand-in client (in this package's tests)
// initializes, prompts once and prints what it received.
func ExampleKit_NewAgentSideConnection() {
	kit := acpsdk.New(acpsdk.WithCancelGrace(5 * time.Second))
	stdin, stdout, client := stdio() // stands in for os.Stdin, os.Stdout and the client

	conn := kit.NewAgentSideConnection(&exampleAgent{}, stdout, stdin)

	for _, line := range client(conn.Done()) {
		fmt.Println(line)
	}
	// Output:
	// compaction_update cmp_1 in_progress
	// compaction_update cmp_1 completed
	// response session/prompt end_turn
}

// The integration for agents that dispatch methods themselves with a raw
// acp.MethodHandler: the kit creates the Connection.
func ExampleKit_NewConnection() {
	kit := acpsdk.New(acpsdk.WithCancelGrace(5 * time.Second))
	stdin, stdout, client := stdio() // stands in for os.Stdin, os.Stdout and the client

	conn := kit.NewConnection(func(ctx context.Context, method string, params json.RawMessage) (any, *acp.RequestError) {
		switch method {
		case "initialize":
			return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}}, nil
		case "session/prompt": // in the runtime, when the model starts compacting:
			c, err := acpsdk.SessionFrom(ctx, "sess_1").Start(ctx, emitter.WithID("cmp_1"))
			if err != nil {
				return nil, acp.NewInternalError(map[string]any{"error": err.Error()})
			}
			_ = c.Fail(ctx, fmt.Errorf("context window still exceeded"))
			return map[string]any{"stopReason": "end_turn"}, nil
		}
		return nil, nil
	}, stdout, stdin)

	for _, line := range client(conn.Done()) {
		fmt.Println(line)
	}
	// Output:
	// compaction_update cmp_1 in_progress
	// compaction_update cmp_1 failed
	// response session/prompt end_turn
}

// A runtime that keeps compaction IDs rather than handles gets the handle
// back by ID; its calls pass the same turn guard as every handle's.
func ExampleSession_Compaction() {
	kit := acpsdk.New()
	stdin, stdout, client := stdio() // stands in for os.Stdin, os.Stdout and the client

	conn := kit.NewConnection(func(ctx context.Context, method string, _ json.RawMessage) (any, *acp.RequestError) {
		switch method {
		case "initialize":
			return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}}, nil
		case "session/prompt":
			s := acpsdk.SessionFrom(ctx, "sess_1")
			if _, err := s.Start(ctx, emitter.WithID("cmp_9")); err != nil {
				return nil, acp.NewInternalError(map[string]any{"error": err.Error()})
			}
			// Later, where only the ID is at hand:
			if c, err := s.Compaction("cmp_9"); err == nil {
				_ = c.Fail(ctx, fmt.Errorf("summarizer unavailable"))
			}
			return map[string]any{"stopReason": "end_turn"}, nil
		}
		return nil, nil
	}, stdout, stdin)

	for _, line := range client(conn.Done()) {
		fmt.Println(line)
	}
	// Output:
	// compaction_update cmp_9 in_progress
	// compaction_update cmp_9 failed
	// response session/prompt end_turn
}
