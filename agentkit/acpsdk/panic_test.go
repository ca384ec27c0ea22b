package acpsdk_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	acp "github.com/coder/acp-go-sdk"
)

const helperEnv = "ACPSDK_TEST_AGENT"

// runCrashAgent is the agent process of the panic tests: its prompt runs
// kittest.StartThenPanic, in a raw MethodHandler (mode "raw"), in an
// acp.Agent's Prompt ("agent"), or on a goroutine of the agent's own that
// opts in with acpsdk.Recover ("recover").
func runCrashAgent(mode string) {
	in, out := kittest.ChildStdio()
	kit := acpsdk.New(quiet)
	switch mode {
	case "raw":
		var conn *acpsdk.Conn
		ready := make(chan struct{})
		conn = kit.NewConnection(func(ctx context.Context, method string, _ json.RawMessage) (any, *acp.RequestError) {
			<-ready
			switch method {
			case "initialize":
				return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}}, nil
			case "session/prompt":
				kittest.StartThenPanic(ctx, acpsdk.SessionFrom(ctx, session))
			}
			return nil, nil
		}, out, in)
		conn.SetLogger(discard)
		close(ready)
		<-conn.Done()
	case "agent", "recover":
		a := &agent{kit: kit}
		a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
			if mode == "recover" {
				// A goroutine of the agent's own opts in.
				done := make(chan struct{})
				go func() {
					defer close(done)
					defer acpsdk.Recover(ctx)
					kittest.StartThenPanic(ctx, acpsdk.SessionFrom(ctx, string(p.SessionId)))
				}()
				<-done
				return endTurn()
			}
			// The kit guards the agent's methods itself.
			kittest.StartThenPanic(ctx, acpsdk.SessionFrom(ctx, string(p.SessionId)))
			return endTurn()
		}
		a.mu.Lock()
		a.conn = kit.NewAgentSideConnection(a, out, in)
		a.conn.SetLogger(discard)
		a.mu.Unlock()
		<-a.Conn().Done()
	}
}

func TestPanickingPromptSettlesAsFailedThenThePanicGoesOn(t *testing.T) {
	for _, mode := range []string{"raw", "agent", "recover"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			kittest.CheckCrashSettles(t, helperEnv+"="+mode, session)
		})
	}
}
