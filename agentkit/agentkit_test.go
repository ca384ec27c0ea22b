package agentkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/sourcegraph/jsonrpc2"
)

func endTurn() (any, error)   { return map[string]any{"stopReason": "end_turn"}, nil }
func cancelled() (any, error) { return map[string]any{"stopReason": "cancelled"}, nil }

func TestStreamedCompactionReachesTheClientInOrderWithTheAgentsOwnUpdates(t *testing.T) {
	a := &agent{}
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		_ = agentMessage(ctx, conn, sid, "before")
		c, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1"), emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable())
		if err != nil {
			return nil, err
		}
		_ = c.Chunk(ctx, protocol.Text("## Retained"))
		_ = agentMessage(ctx, conn, sid, "between")
		_ = c.Chunk(ctx, protocol.Text(" context"))
		if err := c.Complete(ctx, emitter.Summary(protocol.Text("## Retained context"))); err != nil {
			return nil, err
		}
		_ = agentMessage(ctx, conn, sid, "after")
		return endTurn()
	}
	r := newRig(t, a)
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
	last := kittest.Compactions(evs)[3]
	if !kittest.SameJSON(kittest.Field(last, "summary"), `[{"type":"text","text":"## Retained context"}]`) {
		t.Errorf("completed summary = %s", kittest.Field(last, "summary"))
	}
}

func TestRuntimeFailureReachesTheClientAsFailedWithItsMessage(t *testing.T) {
	a := &agent{}
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		c, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1"))
		if err != nil {
			return nil, err
		}
		_ = c.Fail(ctx, errors.New("provider overloaded"))
		return endTurn()
	}
	r := newRig(t, a)
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
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		if _, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1")); err != nil {
			return nil, err
		}
		return endTurn() // the runtime forgot its handle
	}
	r := newRig(t, a)
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

// TestRuntimeReportingAfterItsTurnEndedSendsNothing: clients read a
// terminal update after the turn as a new turn; the kit settled the
// compaction at the turn's end, so late reports are dropped.
func TestRuntimeReportingAfterItsTurnEndedSendsNothing(t *testing.T) {
	a := &agent{}
	responded := make(chan struct{})
	var chunkErr, completeErr error
	var wg sync.WaitGroup
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		c, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable())
		if err != nil {
			return nil, err
		}
		wg.Go(func() { // the runtime, still working after the handler returned
			<-responded
			chunkErr = c.Chunk(context.Background(), protocol.Text("late"))
			completeErr = c.Complete(context.Background())
		})
		return endTurn()
	}
	r := newRig(t, a)
	r.initialize(1, true)
	if _, err := r.client.Prompt(r.ctx, session, nil); err != nil {
		t.Fatal(err)
	}
	close(responded)
	wg.Wait()
	evs := r.finish(1) // CheckTurns: nothing after the response
	if !errors.Is(chunkErr, emitter.ErrSettled) || !errors.Is(completeErr, emitter.ErrSettled) {
		t.Errorf("late Chunk = %v, Complete = %v; want ErrSettled", chunkErr, completeErr)
	}
	if got := kittest.Statuses(evs, "cmp_1"); !equal(got, []string{"in_progress", "failed"}) {
		t.Errorf("statuses %v", got)
	}
}

// cancelScenario runs one prompt that the client cancels once the
// compaction is on the wire.
func cancelScenario(t *testing.T, a *agent, opts ...agentkit.Option) (json.RawMessage, []kittest.Event) {
	t.Helper()
	r := newRig(t, a, opts...)
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
	var cause error
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		c, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1"))
		if err != nil {
			return nil, err
		}
		<-ctx.Done() // session/cancel cancels the prompt's context
		cause = context.Cause(ctx)
		_ = c.Cancel(ctx)
		return cancelled()
	}
	res, evs := cancelScenario(t, a)
	if kittest.StopReason(res) != "cancelled" {
		t.Errorf("stopReason %s", res)
	}
	if !errors.Is(cause, emitter.ErrCancelled) {
		t.Errorf("prompt context cause = %v, want emitter.ErrCancelled", cause)
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
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		c, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1"))
		if err != nil {
			return nil, err
		}
		<-ctx.Done()
		<-settled // the kit, not the runtime, settles it; the turn is still open
		late = c.Complete(ctx)
		return cancelled()
	}
	_, evs := cancelScenario(t, a, agentkit.WithCancelGrace(50*time.Millisecond), agentkit.WithEmitterOptions(emitter.WithObserver(obs)))
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
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		if _, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1")); err != nil {
			return nil, err
		}
		<-ctx.Done()
		return cancelled() // returns promptly but never settles
	}
	_, evs := cancelScenario(t, a, agentkit.WithCancelGrace(-1))
	want := []string{"compaction_update:in_progress", "compaction_update:cancelled", "response:session/prompt"}
	if got := kittest.Summary(evs); !equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
}

func TestAgentClosingTheConnectionSettlesOpenCompactionsOnTheWire(t *testing.T) {
	a := &agent{}
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		if _, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1")); err != nil {
			return nil, err
		}
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	r := newRig(t, a)
	r.initialize(1, true)
	if _, err := r.client.Conn.DispatchCall(r.ctx, "session/prompt", kittest.PromptParams(session, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Wire.Wait(r.ctx, func(e kittest.Event) bool { return e.Status == "in_progress" }); err != nil {
		t.Fatal(err)
	}
	evs := r.finish(1) // closes from the agent's side
	if got := kittest.Statuses(evs, "cmp_1"); !equal(got, []string{"in_progress", "failed"}) {
		t.Fatalf("statuses %v\n%s", got, kittest.Dump(evs))
	}
	if e := string(kittest.Field(kittest.Compactions(evs)[1], "error")); e != fmt.Sprintf("%q", emitter.ErrConnectionClosed.Error()) {
		t.Errorf("error = %s", e)
	}
}

func TestConnectionContextEndingSettlesOpenCompactionsOnTheWire(t *testing.T) {
	connCtx, stop := context.WithCancel(context.Background())
	defer stop()
	a := &agent{connCtx: connCtx}
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		if _, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1")); err != nil {
			return nil, err
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	r := newRig(t, a)
	r.initialize(1, true)
	if _, err := r.client.Conn.DispatchCall(r.ctx, "session/prompt", kittest.PromptParams(session, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Wire.Wait(r.ctx, func(e kittest.Event) bool { return e.Status == "in_progress" }); err != nil {
		t.Fatal(err)
	}
	stop() // the host shuts the connection down through its context
	<-r.client.Conn.DisconnectNotify()
	evs := r.finish(1)
	if got := kittest.Statuses(evs, "cmp_1"); !equal(got, []string{"in_progress", "failed"}) {
		t.Fatalf("statuses %v\n%s", got, kittest.Dump(evs))
	}
}

func TestPeerHangingUpSettlesWhatIsOpen(t *testing.T) {
	settled := make(chan emitter.Event, 1)
	obs := emitter.ObserverFunc(func(_ context.Context, ev emitter.Event) {
		if ev.Kind == emitter.EventSettled {
			settled <- ev
		}
	})
	a := &agent{}
	var late, open error
	done := make(chan struct{})
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		defer close(done)
		s := agentkit.SessionFrom(ctx, sid)
		c, err := s.Start(ctx, emitter.WithID("cmp_1"))
		if err != nil {
			return nil, err
		}
		<-ctx.Done()
		<-settled
		late = c.Complete(ctx)
		_, open = s.Compaction("cmp_1")
		return nil, ctx.Err()
	}
	r := newRig(t, a, agentkit.WithEmitterOptions(emitter.WithObserver(obs)))
	r.initialize(1, true)
	if _, err := r.client.Conn.DispatchCall(r.ctx, "session/prompt", kittest.PromptParams(session, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Wire.Wait(r.ctx, func(e kittest.Event) bool { return e.Status == "in_progress" }); err != nil {
		t.Fatal(err)
	}
	_ = r.client.Conn.Close()
	<-done
	r.close()
	if !errors.Is(late, agentkit.ErrClosed) || !errors.Is(open, agentkit.ErrClosed) {
		t.Errorf("after hang-up: Complete = %v, Compaction = %v; want ErrClosed", late, open)
	}
}

func TestReplayOnLoadPrecedesTheLoadResponse(t *testing.T) {
	a := &agent{}
	var reuse error
	a.load = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) error {
		_ = agentMessage(ctx, conn, sid, "earlier")
		if err := agentkit.SessionFrom(ctx, sid).Replay(ctx, emitter.Record{
			ID: "cmp_old", Status: protocol.Completed, Trigger: protocol.Auto,
			Summary: []protocol.ContentBlock{protocol.Text("Retained")}, Displayable: true,
		}); err != nil {
			return err
		}
		return agentMessage(ctx, conn, sid, "later")
	}
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		_, reuse = agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_old"))
		return endTurn()
	}
	r := newRig(t, a)
	r.initialize(1, true)
	if err := r.client.Conn.Call(r.ctx, "session/load", map[string]any{"sessionId": session, "cwd": "/", "mcpServers": []any{}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Prompt(r.ctx, session, nil); err != nil {
		t.Fatal(err)
	}
	evs := r.finish(1)
	want := []string{"agent_message_chunk", "compaction_update:completed", "agent_message_chunk", "response:session/load", "response:session/prompt"}
	if got := kittest.Summary(evs); !equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	if !errors.Is(reuse, emitter.ErrIDReused) {
		t.Errorf("starting a replayed ID again = %v, want ErrIDReused", reuse)
	}
}

func TestV2TurnEndsAtTheIdleStateUpdateNotAtThePromptAcknowledgement(t *testing.T) {
	a := &agent{version: 2}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		wg.Go(func() {
			_ = stateUpdate(ctx, conn, sid, "running", "")
			c, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable())
			if err != nil {
				t.Error(err)
				return
			}
			_ = c.Chunk(ctx, protocol.Text("partial"))
			_ = agentMessage(ctx, conn, sid, "working")
			_ = stateUpdate(ctx, conn, sid, "idle", "end_turn") // the runtime forgot its handle
		})
		return map[string]any{"messageId": "msg_1"}, nil
	}
	r := newRig(t, a)
	r.initialize(2, false)
	if _, err := r.client.Prompt(r.ctx, session, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Wire.Wait(r.ctx, func(e kittest.Event) bool { return e.State == "idle" }); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	evs := r.finish(2)
	var updates []string
	for _, s := range kittest.Summary(evs) {
		if s != "response:session/prompt" {
			updates = append(updates, s)
		}
	}
	want := []string{"state_update:running", "compaction_update:in_progress", "compaction_summary_chunk", "agent_message_chunk", "compaction_update:failed", "state_update:idle"}
	if !equal(updates, want) {
		t.Fatalf("got %v want %v", updates, want)
	}
}

func TestV2CancelSettlesAsCancelledBeforeIdle(t *testing.T) {
	a := &agent{version: 2}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		wg.Go(func() {
			_ = stateUpdate(ctx, conn, sid, "running", "")
			if _, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1")); err != nil {
				t.Error(err)
				return
			}
			<-ctx.Done()
			_ = stateUpdate(context.WithoutCancel(ctx), conn, sid, "idle", "cancelled")
		})
		return map[string]any{"messageId": "msg_1"}, nil
	}
	r := newRig(t, a, agentkit.WithCancelGrace(-1))
	r.initialize(2, false)
	if _, err := r.client.Prompt(r.ctx, session, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Wire.Wait(r.ctx, func(e kittest.Event) bool { return e.Status == "in_progress" }); err != nil {
		t.Fatal(err)
	}
	if err := r.client.Cancel(r.ctx, session); err != nil {
		t.Fatal(err)
	}
	if _, err := r.client.Wire.Wait(r.ctx, func(e kittest.Event) bool { return e.State == "idle" }); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	evs := r.finish(2)
	want := []string{"state_update:running", "compaction_update:in_progress", "compaction_update:cancelled", "state_update:idle"}
	var got []string
	for _, s := range kittest.Summary(evs) {
		if strings.HasPrefix(s, "state_update") || strings.HasPrefix(s, "compaction") {
			got = append(got, s)
		}
	}
	if !equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
}

func stateUpdate(ctx context.Context, conn *jsonrpc2.Conn, sid, state, stop string) error {
	u := map[string]any{"sessionUpdate": "state_update", "state": state}
	if stop != "" {
		u["stopReason"] = stop
	}
	return conn.Notify(ctx, "session/update", map[string]any{"sessionId": sid, "update": u})
}

func TestV1ClientWithoutTheCapabilitySeesNoStandardUpdates(t *testing.T) {
	marker := rendererFunc(func(ctx context.Context, ev emitter.Event, n emitter.Notifier) error {
		text := map[emitter.EventKind]string{emitter.EventStarted: "Compacting...", emitter.EventSettled: "\n\nCompacting " + string(ev.Status) + "."}[ev.Kind]
		if text == "" {
			return nil
		}
		return n.Notify(ctx, ev.SessionID, map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}})
	})
	for _, tc := range []struct {
		name string
		opts []agentkit.Option
		mode capability.Mode
		want []string
	}{
		{"default: the tool call", nil, capability.Fallback, []string{"tool_call", "tool_call_update", "response:session/prompt"}},
		{"fallback.None", []agentkit.Option{agentkit.WithFallback(fallback.None{})}, capability.Off, []string{"response:session/prompt"}},
		{"nil restores the default", []agentkit.Option{agentkit.WithFallback(fallback.None{}), agentkit.WithFallback(nil)}, capability.Fallback, []string{"tool_call", "tool_call_update", "response:session/prompt"}},
		{"fallback", []agentkit.Option{agentkit.WithFallback(marker)}, capability.Fallback, []string{"agent_message_chunk", "agent_message_chunk", "response:session/prompt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &agent{}
			var mode capability.Mode
			a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
				em, err := a.kit.Emitter(conn)
				if err != nil {
					return nil, err
				}
				mode = em.Mode()
				c, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable())
				if err != nil {
					return nil, err
				}
				_ = c.Chunk(ctx, protocol.Text("x"))
				return endTurn() // left open: the fallback must still end
			}
			r := newRig(t, a, tc.opts...)
			r.initialize(1, false)
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

func TestSessionErrorsAreSentinels(t *testing.T) {
	a := &agent{}
	var handlerCtx context.Context
	a.load = func(ctx context.Context, _ *jsonrpc2.Conn, _ string) error {
		handlerCtx = ctx
		return nil
	}
	r := newRig(t, a)
	ctx := context.Background()
	// A handler that runs before initialize.
	if err := r.client.Conn.Call(r.ctx, "session/load", map[string]any{"sessionId": session}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := agentkit.SessionFrom(handlerCtx, session).Start(ctx); !errors.Is(err, agentkit.ErrNotInitialized) {
		t.Errorf("before initialize: %v", err)
	}
	if _, err := a.kit.Emitter(r.agent); !errors.Is(err, agentkit.ErrNotInitialized) {
		t.Errorf("Emitter before initialize: %v", err)
	}
	for _, c := range []context.Context{context.Background(), context.WithValue(ctx, otherKey{}, 1)} {
		if _, err := agentkit.SessionFrom(c, session).Start(ctx); !errors.Is(err, agentkit.ErrUnknownConn) {
			t.Errorf("a context no kit handler derived: %v", err)
		}
		if _, err := agentkit.SessionFrom(c, session).Compaction("cmp_1"); !errors.Is(err, agentkit.ErrUnknownConn) {
			t.Errorf("a context no kit handler derived, Compaction: %v", err)
		}
	}
	r.initialize(1, true)
	held := agentkit.SessionFrom(handlerCtx, session)
	r.close()
	if _, err := held.Start(ctx); !errors.Is(err, agentkit.ErrClosed) {
		t.Errorf("after close, held session: %v", err)
	}
	if _, err := agentkit.SessionFrom(handlerCtx, session).Start(ctx); !errors.Is(err, agentkit.ErrClosed) {
		t.Errorf("after close, new lookup: %v", err)
	}
}

func TestPromptContextCarriesTheTraceContextOfItsMeta(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var traces []string
	var mu sync.Mutex
	obs := emitter.ObserverFunc(func(ctx context.Context, ev emitter.Event) {
		tc, _ := emitter.TraceFrom(ctx)
		mu.Lock()
		traces = append(traces, ev.Kind.String()+" "+tc.Traceparent)
		mu.Unlock()
	})
	a := &agent{}
	var inHandler string
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		tc, _ := emitter.TraceFrom(ctx)
		inHandler = tc.Traceparent
		// A runtime may pass a context of its own; the turn's trace is
		// attached anyway.
		_, err := agentkit.SessionFrom(ctx, sid).Start(context.Background(), emitter.WithID("cmp_1"))
		if err != nil {
			return nil, err
		}
		return endTurn()
	}
	r := newRig(t, a, agentkit.WithEmitterOptions(emitter.WithObserver(obs)))
	r.initialize(1, true)
	if _, err := r.client.Prompt(r.ctx, session, map[string]any{"traceparent": tp}); err != nil {
		t.Fatal(err)
	}
	r.finish(1)
	if inHandler != tp {
		t.Errorf("handler trace %q", inHandler)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"started " + tp, "settled " + tp}; !equal(traces, want) {
		t.Errorf("observer saw %v, want %v", traces, want)
	}
}

func TestStartIsRefusedWhileTheTurnIsBeingSettled(t *testing.T) {
	var (
		a          = &agent{}
		handlerCtx context.Context
		refused    error
	)
	obs := emitter.ObserverFunc(func(ctx context.Context, ev emitter.Event) {
		if ev.Kind == emitter.EventSettled && errors.Is(ev.Err, emitter.ErrTurnEnded) {
			// Between the settlement and the prompt response. (Observers
			// must not call back into the emitter; the refused Start never
			// reaches it, which is what this checks.)
			_, refused = agentkit.SessionFrom(handlerCtx, session).Start(ctx, emitter.WithID("cmp_late"))
		}
	})
	a.prompt = func(ctx context.Context, _ *jsonrpc2.Conn, sid string) (any, error) {
		handlerCtx = ctx
		if _, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1")); err != nil {
			return nil, err
		}
		return endTurn()
	}
	r := newRig(t, a, agentkit.WithEmitterOptions(emitter.WithObserver(obs)))
	r.initialize(1, true)
	if _, err := r.client.Prompt(r.ctx, session, nil); err != nil {
		t.Fatal(err)
	}
	evs := r.finish(1)
	if !errors.Is(refused, emitter.ErrTurnEnded) {
		t.Errorf("Start during settlement = %v, want ErrTurnEnded", refused)
	}
	if got := kittest.Statuses(evs, "cmp_late"); len(got) != 0 {
		t.Errorf("cmp_late reached the wire: %v", got)
	}
}

// TestCancelReachesItsPromptAndNeverTheNext plays 1,000 pairs: a
// session/prompt with its session/cancel right behind it, then, once it is
// answered, a prompt with no cancel. Every cancel must reach its prompt
// (none lost) and none the prompt after it (none stale).
func TestCancelReachesItsPromptAndNeverTheNext(t *testing.T) {
	const pairs = 1000
	var rt kittest.RaceRuntime
	a := &agent{cancel: func(string) { rt.Cancelled() }}
	a.promptText = func(ctx context.Context, conn *jsonrpc2.Conn, sid, text string) (any, error) {
		stop, err := rt.Prompt(ctx, text, agentkit.SessionFrom(ctx, sid))
		if err != nil {
			return nil, err
		}
		return map[string]any{"stopReason": stop}, nil
	}
	r := newRig(t, a, agentkit.WithCancelGrace(-1))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	r.ctx = ctx
	r.initialize(1, true)
	lost, stale := r.client.CancelRace(r.ctx, t, session, pairs)
	evs := r.finish(1)
	if lost != 0 || stale != 0 {
		t.Errorf("of %d pairs: %d cancels lost, %d applied to the next prompt", pairs, lost, stale)
	}
	kittest.CheckRaceStatuses(t, evs, pairs)
}

// rendererFunc adapts a function to emitter.Renderer.
type rendererFunc func(ctx context.Context, ev emitter.Event, n emitter.Notifier) error

func (f rendererFunc) Render(ctx context.Context, ev emitter.Event, n emitter.Notifier) error {
	return f(ctx, ev, n)
}

// otherKey is a context key of the test's own.
type otherKey struct{}
