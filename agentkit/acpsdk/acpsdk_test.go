package acpsdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/observe"
	"github.com/acpcompact/acpcompact/protocol"
	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStreamedCompactionReachesTheClientInOrderWithTheSDKsOwnUpdates(t *testing.T) {
	kittest.StreamedCompactionReachesTheClientInOrder(t, stack{}, "")
}

// TestCapabilityIsReadFromTheRawInitialize: the SDK's typed
// ClientCapabilities drops `session`, so a typed Initialize never sees the
// compaction capability; the kit reads the raw line.
func TestCapabilityIsReadFromTheRawInitialize(t *testing.T) {
	runtime := func(ctx context.Context, s kittest.Session) error {
		c, err := s.Start(ctx, emitter.WithID("cmp_1"))
		if err != nil {
			return err
		}
		_ = c.Complete(ctx)
		return nil
	}
	kittest.CheckModes(t, stack{}, runtime, []kittest.ModeCase{
		{Name: "capable=true,options=0", Capable: true, Mode: capability.Standard, Want: []string{"compaction_update:in_progress", "compaction_update:completed", "response:session/prompt"}},
		// Without the capability a v1 client sees the kit's default
		// fallback, the tool call; fallback.None shows it nothing.
		{Name: "capable=false,options=0", Mode: capability.Fallback, Want: []string{"tool_call", "tool_call_update", "response:session/prompt"}},
		{Name: "capable=false,options=1", Fallbacks: []emitter.Renderer{fallback.None{}}, Mode: capability.Off, Want: []string{"response:session/prompt"}},
	})
}

func TestRuntimeFailureReachesTheClientAsFailedWithItsMessage(t *testing.T) {
	kittest.RuntimeFailureReachesTheClientAsFailedWithItsMessage(t, stack{})
}

func TestTurnEndingWithAnOpenCompactionSettlesItAsFailedBeforeTheResponse(t *testing.T) {
	kittest.TurnEndingWithAnOpenCompactionSettlesItAsFailedBeforeTheResponse(t, stack{})
}

func TestCancelReportedByTheRuntimeReachesTheClientBeforeTheResponse(t *testing.T) {
	kittest.CancelReportedByTheRuntimeReachesTheClientBeforeTheResponse(t, stack{})
}

func TestCancelTheRuntimeNeverReportsIsSettledAsCancelledAtTheGraceDeadline(t *testing.T) {
	kittest.CancelTheRuntimeNeverReportsIsSettledAsCancelledAtTheGraceDeadline(t, stack{})
}

func TestCancelledTurnEndingWithAnOpenCompactionSettlesItAsCancelled(t *testing.T) {
	kittest.CancelledTurnEndingWithAnOpenCompactionSettlesItAsCancelled(t, stack{})
}

func TestPeerHangingUpSettlesOpenCompactionsOnTheWire(t *testing.T) {
	a := &agent{}
	var late error
	done := make(chan struct{})
	a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
		defer close(done)
		c, err := acpsdk.SessionFrom(ctx, string(p.SessionId)).Start(ctx, emitter.WithID("cmp_1"))
		if err != nil {
			return acp.PromptResponse{}, err
		}
		<-ctx.Done() // the SDK cancels requests once its input ends
		late = c.Complete(ctx)
		return acp.PromptResponse{}, ctx.Err()
	}
	r := newRig(t)
	r.serve(a)
	r.Initialize(1, true)
	r.StartPrompt()
	_ = r.pipes.toAgentW.Close() // the client hangs up its sending half
	<-done
	evs := r.Finish(1)
	require.Equal(t, []string{"in_progress", "failed"}, kittest.Statuses(evs, "cmp_1"), "statuses\n%s", kittest.Dump(evs))
	assert.Equal(t, fmt.Sprintf("%q", emitter.ErrConnectionClosed.Error()), string(kittest.Field(kittest.Compactions(evs)[1], "error")), "the failed update's error")
	assert.ErrorIs(t, late, emitter.ErrSettled, "the runtime's Complete after the hang-up")
}

func TestReplayOnLoadPrecedesTheLoadResponse(t *testing.T) {
	kittest.ReplayOnLoadPrecedesTheLoadResponse(t, stack{})
}

// TestV2TurnEndsAtTheIdleStateUpdate drives a raw MethodHandler, since the
// SDK's typed API is v1 only.
func TestV2TurnEndsAtTheIdleStateUpdate(t *testing.T) {
	r := newRig(t)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	update := func(ctx context.Context, conn *acpsdk.Conn, u map[string]any) {
		_ = conn.Connection().SendNotification(ctx, "session/update", map[string]any{"sessionId": session, "update": u})
	}
	r.serveRaw(func(conn *acpsdk.Conn) acp.MethodHandler {
		return func(ctx context.Context, method string, params json.RawMessage) (any, *acp.RequestError) {
			switch method {
			case "initialize":
				return map[string]any{"protocolVersion": 2, "info": map[string]any{"name": "agent", "version": "1"}}, nil
			case "session/prompt":
				// The SDK ends a request's context when its handler returns;
				// a v2 turn outlives the acknowledgement.
				ctx := context.WithoutCancel(ctx)
				wg.Go(func() {
					update(ctx, conn, map[string]any{"sessionUpdate": "state_update", "state": "running"})
					c, err := acpsdk.SessionFrom(ctx, session).Start(ctx, emitter.WithID("cmp_1"))
					if !assert.NoError(t, err) { // the runtime's goroutine: assert, never require
						return
					}
					_ = c.Chunk(ctx, protocol.Text("partial")) // withheld: not user-displayable
					update(ctx, conn, map[string]any{"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})
				})
				return map[string]any{"messageId": "msg_1"}, nil
			}
			return nil, nil
		}
	})
	var got []string
	for _, s := range r.V2Turn(wg.Wait) {
		if strings.HasPrefix(s, "state_update") || strings.HasPrefix(s, "compaction") {
			got = append(got, s)
		}
	}
	want := []string{"state_update:running", "compaction_update:in_progress", "compaction_update:failed", "state_update:idle"}
	require.Equal(t, want, got)
}

func TestRawHandlerGetsThePromptsTraceContext(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	r := newRig(t)
	var seen string
	r.serveRaw(func(conn *acpsdk.Conn) acp.MethodHandler {
		return func(ctx context.Context, method string, params json.RawMessage) (any, *acp.RequestError) {
			switch method {
			case "initialize":
				return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}}, nil
			case "session/prompt":
				tc, _ := observe.TraceFrom(ctx)
				seen = tc.Traceparent
				return map[string]any{"stopReason": "end_turn"}, nil
			}
			return nil, nil
		}
	})
	r.Initialize(1, true)
	_, err := r.Client.Prompt(r.Ctx, session, map[string]any{"traceparent": tp})
	require.NoError(t, err)
	r.Finish(1)
	assert.Equal(t, tp, seen, "the handler's trace")
}

func TestSessionErrorsAreSentinels(t *testing.T) {
	kittest.SessionErrorsAreSentinels(t, stack{})
}

// TestCancelReachesItsPromptAndNeverTheNext plays 1,000 pairs: a
// session/prompt with its session/cancel right behind it, then, once it is
// answered, a prompt with no cancel. Every cancel must reach its prompt
// (none lost) and none the prompt after it (none stale). The SDK alone
// loses most cancels, since it handles the prompt on a new goroutine and
// the cancel on another, and applies some late to the next prompt: its
// session/cancel handling cancels whichever prompt of the session runs
// when it gets to it.
func TestCancelReachesItsPromptAndNeverTheNext(t *testing.T) {
	kittest.CancelReachesItsPromptAndNeverTheNext(t, stack{})
}

// TestShutdownIsBoundedWhenASinkBlocks: a final-record sink that blocks
// holds neither Shutdown past its context nor the terminal updates
// (hardening issue, 7).
func TestShutdownIsBoundedWhenASinkBlocks(t *testing.T) {
	kittest.ShutdownIsBoundedWhenASinkBlocks(t, stack{})
}

// TestAuditedLossReachesTheRecord: WithAudit names what a summary lost in
// the compaction's record (issue: what no peer shows).
func TestAuditedLossReachesTheRecord(t *testing.T) {
	kittest.AuditedLossReachesTheRecord(t, stack{})
}
