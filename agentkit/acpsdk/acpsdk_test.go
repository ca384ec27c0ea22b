package acpsdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/protocol"
	acp "github.com/coder/acp-go-sdk"
)

func TestStreamedCompactionReachesTheClientInOrderWithTheSDKsOwnUpdates(t *testing.T) {
	a := &agent{}
	a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
		a.message(ctx, p.SessionId, "before")
		c, err := acpsdk.SessionFrom(ctx, string(p.SessionId)).Start(ctx, emitter.WithID("cmp_1"), emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable())
		if err != nil {
			return acp.PromptResponse{}, err
		}
		_ = c.Chunk(ctx, protocol.Text("## Retained"))
		a.message(ctx, p.SessionId, "between")
		_ = c.Chunk(ctx, protocol.Text(" context"))
		if err := c.Complete(ctx); err != nil {
			return acp.PromptResponse{}, err
		}
		a.message(ctx, p.SessionId, "after")
		return endTurn()
	}
	r := newRig(t)
	r.serve(a)
	r.initialize(1, true)
	res, err := r.client.Prompt(r.ctx, session, nil)
	if err != nil || kittest.StopReason(res) != "end_turn" {
		t.Fatalf("prompt: %s, %v", res, err)
	}
	evs := r.finish(1)
	want := []string{
		"agent_message_chunk", "compaction_update:in_progress", "compaction_summary_chunk", "agent_message_chunk",
		"compaction_summary_chunk", "compaction_update:completed", "agent_message_chunk", "response:session/prompt",
	}
	if got := kittest.Summary(evs); !equal(got, want) {
		t.Fatalf("wire order\n got %v\nwant %v", got, want)
	}
}

// TestCapabilityIsReadFromTheRawInitialize: the SDK's typed
// ClientCapabilities drops `session`, so a typed Initialize never sees the
// compaction capability; the kit reads the raw line.
func TestCapabilityIsReadFromTheRawInitialize(t *testing.T) {
	for _, tc := range []struct {
		capable bool
		opts    []acpsdk.Option
		mode    capability.Mode
		want    []string
	}{
		{true, nil, capability.Standard, []string{"compaction_update:in_progress", "compaction_update:completed", "response:session/prompt"}},
		// Without the capability a v1 client sees the kit's default
		// fallback, the tool call; fallback.None shows it nothing.
		{false, nil, capability.Fallback, []string{"tool_call", "tool_call_update", "response:session/prompt"}},
		{false, []acpsdk.Option{acpsdk.WithFallback(fallback.None{})}, capability.Off, []string{"response:session/prompt"}},
	} {
		t.Run(fmt.Sprintf("capable=%v,options=%d", tc.capable, len(tc.opts)), func(t *testing.T) {
			a := &agent{}
			var mode capability.Mode
			a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
				em, err := a.kit.Emitter(a.Conn())
				if err != nil {
					return acp.PromptResponse{}, err
				}
				mode = em.Mode()
				c, err := acpsdk.SessionFrom(ctx, string(p.SessionId)).Start(ctx, emitter.WithID("cmp_1"))
				if err != nil {
					return acp.PromptResponse{}, err
				}
				_ = c.Complete(ctx)
				return endTurn()
			}
			r := newRig(t, tc.opts...)
			r.serve(a)
			r.initialize(1, tc.capable)
			if _, err := r.client.Prompt(r.ctx, session, nil); err != nil {
				t.Fatal(err)
			}
			evs := r.finish(1)
			if mode != tc.mode {
				t.Errorf("mode %v want %v", mode, tc.mode)
			}
			if got := kittest.Summary(evs); !equal(got, tc.want) {
				t.Fatalf("got %v want %v", got, tc.want)
			}
		})
	}
}

func TestRuntimeFailureReachesTheClientAsFailedWithItsMessage(t *testing.T) {
	a := &agent{}
	a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
		c, err := acpsdk.SessionFrom(ctx, string(p.SessionId)).Start(ctx, emitter.WithID("cmp_1"))
		if err != nil {
			return acp.PromptResponse{}, err
		}
		_ = c.Fail(ctx, errors.New("provider overloaded"))
		return endTurn()
	}
	r := newRig(t)
	r.serve(a)
	r.initialize(1, true)
	if _, err := r.client.Prompt(r.ctx, session, nil); err != nil {
		t.Fatal(err)
	}
	evs := r.finish(1)
	if got := kittest.Statuses(evs, "cmp_1"); !equal(got, []string{"in_progress", "failed"}) {
		t.Fatalf("statuses %v", got)
	}
	if e := string(kittest.Field(kittest.Compactions(evs)[1], "error")); e != `"provider overloaded"` {
		t.Errorf("error = %s", e)
	}
}

func TestTurnEndingWithAnOpenCompactionSettlesItAsFailedBeforeTheResponse(t *testing.T) {
	a := &agent{}
	a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
		if _, err := acpsdk.SessionFrom(ctx, string(p.SessionId)).Start(ctx, emitter.WithID("cmp_1")); err != nil {
			return acp.PromptResponse{}, err
		}
		return endTurn() // the runtime forgot its handle
	}
	r := newRig(t)
	r.serve(a)
	r.initialize(1, true)
	if _, err := r.client.Prompt(r.ctx, session, nil); err != nil {
		t.Fatal(err)
	}
	evs := r.finish(1)
	want := []string{"compaction_update:in_progress", "compaction_update:failed", "response:session/prompt"}
	if got := kittest.Summary(evs); !equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	if e := string(kittest.Field(kittest.Compactions(evs)[1], "error")); e != fmt.Sprintf("%q", emitter.ErrTurnEnded.Error()) {
		t.Errorf("error = %s", e)
	}
}

// cancelScenario runs one prompt that the client cancels once the
// compaction is on the wire.
func cancelScenario(t *testing.T, a *agent, opts ...acpsdk.Option) (json.RawMessage, []kittest.Event) {
	t.Helper()
	r := newRig(t, opts...)
	r.serve(a)
	r.initialize(1, true)
	call, err := r.client.Conn.DispatchCall(r.ctx, "session/prompt", kittest.PromptParams(session, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Wire.Wait(r.ctx, func(e kittest.Event) bool { return e.Status == "in_progress" }); err != nil {
		t.Fatal(err)
	}
	if err := r.client.Cancel(r.ctx, session); err != nil {
		t.Fatal(err)
	}
	var res json.RawMessage
	if err := call.Wait(r.ctx, &res); err != nil {
		t.Fatal(err)
	}
	return res, r.finish(1)
}

func TestCancelReportedByTheRuntimeReachesTheClientBeforeTheResponse(t *testing.T) {
	a := &agent{}
	a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
		c, err := acpsdk.SessionFrom(ctx, string(p.SessionId)).Start(ctx, emitter.WithID("cmp_1"))
		if err != nil {
			return acp.PromptResponse{}, err
		}
		<-ctx.Done()
		_ = c.Cancel(ctx)
		return cancelled()
	}
	res, evs := cancelScenario(t, a)
	if kittest.StopReason(res) != "cancelled" {
		t.Errorf("stopReason %s", res)
	}
	want := []string{"compaction_update:in_progress", "compaction_update:cancelled", "response:session/prompt"}
	if got := kittest.Summary(evs); !equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
}

func TestCancelTheRuntimeNeverReportsIsSettledAsCancelledAtTheGraceDeadline(t *testing.T) {
	settled := make(chan emitter.Event, 1)
	obs := emitter.ObserverFunc(func(_ context.Context, ev emitter.Event) {
		if ev.Kind == emitter.EventSettled {
			settled <- ev
		}
	})
	a := &agent{}
	var late error
	a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
		c, err := acpsdk.SessionFrom(ctx, string(p.SessionId)).Start(ctx, emitter.WithID("cmp_1"))
		if err != nil {
			return acp.PromptResponse{}, err
		}
		<-ctx.Done()
		<-settled // the kit, not the runtime, settles it; the turn is still open
		late = c.Complete(ctx)
		return cancelled()
	}
	_, evs := cancelScenario(t, a, acpsdk.WithCancelGrace(50*time.Millisecond), acpsdk.WithEmitterOptions(emitter.WithObserver(obs)))
	if !errors.Is(late, emitter.ErrSettled) {
		t.Errorf("the runtime's late Complete = %v, want ErrSettled", late)
	}
	want := []string{"compaction_update:in_progress", "compaction_update:cancelled", "response:session/prompt"}
	if got := kittest.Summary(evs); !equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
}

func TestCancelledTurnEndingWithAnOpenCompactionSettlesItAsCancelled(t *testing.T) {
	a := &agent{}
	a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
		if _, err := acpsdk.SessionFrom(ctx, string(p.SessionId)).Start(ctx, emitter.WithID("cmp_1")); err != nil {
			return acp.PromptResponse{}, err
		}
		<-ctx.Done()
		return cancelled() // returns promptly but never settles
	}
	_, evs := cancelScenario(t, a, acpsdk.WithCancelGrace(-1))
	want := []string{"compaction_update:in_progress", "compaction_update:cancelled", "response:session/prompt"}
	if got := kittest.Summary(evs); !equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
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
	r.initialize(1, true)
	if _, err := r.client.Conn.DispatchCall(r.ctx, "session/prompt", kittest.PromptParams(session, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Wire.Wait(r.ctx, func(e kittest.Event) bool { return e.Status == "in_progress" }); err != nil {
		t.Fatal(err)
	}
	_ = r.pipes.toAgentW.Close() // the client hangs up its sending half
	<-done
	evs := r.finish(1)
	if got := kittest.Statuses(evs, "cmp_1"); !equal(got, []string{"in_progress", "failed"}) {
		t.Fatalf("statuses %v\n%s", got, kittest.Dump(evs))
	}
	if e := string(kittest.Field(kittest.Compactions(evs)[1], "error")); e != fmt.Sprintf("%q", emitter.ErrConnectionClosed.Error()) {
		t.Errorf("error = %s", e)
	}
	if !errors.Is(late, emitter.ErrSettled) {
		t.Errorf("the runtime's Complete after the hang-up = %v, want ErrSettled", late)
	}
}

func TestReplayOnLoadPrecedesTheLoadResponse(t *testing.T) {
	a := &agent{}
	a.load = func(ctx context.Context, p acp.LoadSessionRequest) error {
		a.message(ctx, p.SessionId, "earlier")
		if err := acpsdk.SessionFrom(ctx, string(p.SessionId)).Replay(ctx, emitter.Record{
			ID: "cmp_old", Status: protocol.Completed, Trigger: protocol.Auto,
			Summary: []protocol.ContentBlock{protocol.Text("Retained")}, Displayable: true,
		}); err != nil {
			return err
		}
		a.message(ctx, p.SessionId, "later")
		return nil
	}
	r := newRig(t)
	r.serve(a)
	r.initialize(1, true)
	if err := r.client.Conn.Call(r.ctx, "session/load", map[string]any{"sessionId": session, "cwd": "/", "mcpServers": []any{}}, nil); err != nil {
		t.Fatal(err)
	}
	evs := r.finish(1)
	want := []string{"agent_message_chunk", "compaction_update:completed", "agent_message_chunk", "response:session/load"}
	if got := kittest.Summary(evs); !equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	if !kittest.SameJSON(kittest.Field(kittest.Compactions(evs)[0], "summary"), `[{"type":"text","text":"Retained"}]`) {
		t.Errorf("replayed summary %s", kittest.Field(kittest.Compactions(evs)[0], "summary"))
	}
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
					if err != nil {
						t.Error(err)
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
	r.initialize(2, false)
	if _, err := r.client.Prompt(r.ctx, session, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Wire.Wait(r.ctx, func(e kittest.Event) bool { return e.State == "idle" }); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	evs := r.finish(2)
	var got []string
	for _, s := range kittest.Summary(evs) {
		if strings.HasPrefix(s, "state_update") || strings.HasPrefix(s, "compaction") {
			got = append(got, s)
		}
	}
	want := []string{"state_update:running", "compaction_update:in_progress", "compaction_update:failed", "state_update:idle"}
	if !equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
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
				tc, _ := emitter.TraceFrom(ctx)
				seen = tc.Traceparent
				return map[string]any{"stopReason": "end_turn"}, nil
			}
			return nil, nil
		}
	})
	r.initialize(1, true)
	if _, err := r.client.Prompt(r.ctx, session, map[string]any{"traceparent": tp}); err != nil {
		t.Fatal(err)
	}
	r.finish(1)
	if seen != tp {
		t.Errorf("handler trace %q, want %q", seen, tp)
	}
}

func TestSessionErrorsAreSentinels(t *testing.T) {
	a := &agent{}
	r := newRig(t)
	r.serve(a)
	ctx := context.Background()
	handlerCtx := loadBeforeInitialize(t, r, a)
	if _, err := acpsdk.SessionFrom(handlerCtx, session).Start(ctx); !errors.Is(err, acpsdk.ErrNotInitialized) {
		t.Errorf("before initialize: %v", err)
	}
	for _, c := range []context.Context{context.Background(), context.WithValue(ctx, otherKey{}, 1)} {
		if _, err := acpsdk.SessionFrom(c, session).Start(ctx); !errors.Is(err, acpsdk.ErrUnknownConn) {
			t.Errorf("a context no kit handler derived: %v", err)
		}
		if _, err := acpsdk.SessionFrom(c, session).Compaction("cmp_1"); !errors.Is(err, acpsdk.ErrUnknownConn) {
			t.Errorf("a context no kit handler derived, Compaction: %v", err)
		}
	}
	r.initialize(1, true)
	held := acpsdk.SessionFrom(handlerCtx, session)
	r.close()
	if _, err := held.Start(ctx); !errors.Is(err, acpsdk.ErrClosed) {
		t.Errorf("after close, held session: %v", err)
	}
	if _, err := acpsdk.SessionFrom(handlerCtx, session).Start(ctx); !errors.Is(err, acpsdk.ErrClosed) {
		t.Errorf("after close, new lookup: %v", err)
	}
}

// loadBeforeInitialize sends session/load before initialize and returns
// the context the agent's LoadSession ran with.
func loadBeforeInitialize(t *testing.T, r *rig, a *agent) context.Context {
	t.Helper()
	if err := r.client.Conn.Call(r.ctx, "session/load", map[string]any{"sessionId": session, "cwd": "/", "mcpServers": []any{}}, nil); err != nil {
		t.Fatal(err)
	}
	return a.lastCtx()
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
	const pairs = 1000
	var rt kittest.RaceRuntime
	a := &agent{cancel: func(acp.CancelNotification) { rt.Cancelled() }}
	a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
		text := ""
		if len(p.Prompt) > 0 && p.Prompt[0].Text != nil {
			text = p.Prompt[0].Text.Text
		}
		stop, err := rt.Prompt(ctx, text, acpsdk.SessionFrom(ctx, string(p.SessionId)))
		return acp.PromptResponse{StopReason: acp.StopReason(stop)}, err
	}
	r := newRig(t, acpsdk.WithCancelGrace(-1))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	r.ctx = ctx
	r.serve(a)
	r.initialize(1, true)
	lost, stale := r.client.CancelRace(r.ctx, t, session, pairs)
	evs := r.finish(1)
	if lost != 0 || stale != 0 {
		t.Errorf("of %d pairs: %d cancels lost, %d applied to the next prompt", pairs, lost, stale)
	}
	kittest.CheckRaceStatuses(t, evs, pairs)
}

// otherKey is a context key of the test's own.
type otherKey struct{}
