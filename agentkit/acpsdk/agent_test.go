package acpsdk_test

import (
	"context"
	"encoding/json"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/assert"
)

// minimalAgent has no optional method: no LoadSession, no extensions.
type minimalAgent struct{ stubAgent }

func (minimalAgent) Prompt(context.Context, acp.PromptRequest) (acp.PromptResponse, error) {
	return endTurn()
}

// extAgent has an extension method.
type extAgent struct{ minimalAgent }

func (extAgent) HandleExtensionMethod(_ context.Context, method string, _ json.RawMessage) (any, error) {
	return map[string]any{"echo": method}, nil
}

// TestKitKeepsTheAgentsOptionalMethods: the kit stands between the SDK and
// the agent, and the SDK finds optional methods by type assertion. A method
// the agent lacks is still "method not found", one it has still answers.
func TestKitKeepsTheAgentsOptionalMethods(t *testing.T) {
	for _, tc := range []struct {
		name   string
		agent  acp.Agent
		method string
		want   string // a result's JSON, or "code N"
	}{
		{"no LoadSession", minimalAgent{}, "session/load", "code -32601"},
		{"no extensions", minimalAgent{}, "_acme/ping", "code -32601"},
		{"an extension", extAgent{}, "_acme/ping", `{"echo":"_acme/ping"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			conn := r.kit.NewAgentSideConnection(tc.agent, r.pipes.fromAgentW, r.pipes.toAgentR)
			conn.SetLogger(discard)
			r.done = conn.Done()
			r.Initialize(1, true)
			var res json.RawMessage
			err := r.Client.Conn.Call(r.Ctx, tc.method, map[string]any{"sessionId": session, "cwd": "/", "mcpServers": []any{}}, &res)
			got := string(res)
			if err != nil {
				got = err.Error()
			}
			assert.Contains(t, got, tc.want, tc.method)
			r.Close()
		})
	}
}
