package acpsdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/emitter"
	acp "github.com/coder/acp-go-sdk"
)

const helperEnv = "ACPSDK_TEST_AGENT"

// runHelperAgent is the agent process of the panic tests: its prompt opens
// a compaction, streams a chunk, then panics.
func runHelperAgent(mode string) {
	in, out := kittest.ChildStdio()
	kit := acpsdk.New(quiet)
	switch mode {
	case "raw":
		var conn *acp.Connection
		ready := make(chan struct{})
		conn = kit.NewConnection(func(ctx context.Context, method string, _ json.RawMessage) (any, *acp.RequestError) {
			<-ready
			switch method {
			case "initialize":
				return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}}, nil
			case "session/prompt":
				startThenPanic(ctx, kit.Session(conn, session))
			}
			return nil, nil
		}, out, in)
		conn.SetLogger(discard)
		close(ready)
		<-conn.Done()
	case "agent":
		a := &agent{kit: kit}
		a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
			defer kit.Recover(a.Conn())
			startThenPanic(ctx, a.session(p.SessionId))
			return endTurn()
		}
		a.mu.Lock()
		a.conn = kit.NewAgentSideConnection(a, out, in)
		a.conn.SetLogger(discard)
		a.mu.Unlock()
		<-a.Conn().Done()
	}
}

func startThenPanic(ctx context.Context, s *acpsdk.Session) {
	c, err := s.Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable())
	if err != nil {
		panic(err)
	}
	_ = c.Chunk(ctx, emitter.Text("partial"))
	panic("boom in the runtime")
}

func TestPanickingPromptSettlesAsFailedThenThePanicGoesOn(t *testing.T) {
	for _, mode := range []string{"raw", "agent"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			child := kittest.StartChild(t, helperEnv+"="+mode)
			if _, err := child.Client.Initialize(ctx, 1, true); err != nil {
				t.Fatal(err)
			}
			if _, err := child.Client.Conn.DispatchCall(ctx, "session/prompt", kittest.PromptParams(session, nil)); err != nil {
				t.Fatal(err)
			}
			stderr, err := child.Wait()
			if err == nil || !strings.Contains(stderr, "panic: boom in the runtime") {
				t.Fatalf("the agent did not crash with its panic: %v\n%s", err, stderr)
			}
			evs := child.Client.Wire.Events()
			if got := kittest.Statuses(evs, "cmp_1"); !equal(got, []string{"in_progress", "chunk", "failed"}) {
				t.Fatalf("statuses %v\n%s", got, kittest.Dump(evs))
			}
			if e := string(kittest.Field(kittest.Compactions(evs)[2], "error")); e != fmt.Sprintf("%q", emitter.ErrAgentCrashed.Error()) {
				t.Errorf("error = %s", e)
			}
			if err := kittest.CheckTurns(evs, 1); err != nil {
				t.Error(err)
			}
			kittest.Validate(t, evs, 1)
		})
	}
}
