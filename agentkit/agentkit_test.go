package agentkit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/observe"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/sourcegraph/jsonrpc2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStreamedCompactionReachesTheClientInOrderWithTheAgentsOwnUpdates(t *testing.T) {
	kittest.StreamedCompactionReachesTheClientInOrder(t, stack{}, "## Retained context")
}

func TestRuntimeFailureReachesTheClientAsFailedWithItsMessage(t *testing.T) {
	kittest.RuntimeFailureReachesTheClientAsFailedWithItsMessage(t, stack{})
}

func TestTurnEndingWithAnOpenCompactionSettlesItAsFailedBeforeTheResponse(t *testing.T) {
	kittest.TurnEndingWithAnOpenCompactionSettlesItAsFailedBeforeTheResponse(t, stack{})
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
	r.Initialize(1, true)
	_, err := r.Client.Prompt(r.Ctx, session, nil)
	require.NoError(t, err)
	close(responded)
	wg.Wait()
	evs := r.Finish(1) // CheckTurns: nothing after the response
	assert.ErrorIs(t, chunkErr, emitter.ErrSettled, "late Chunk")
	assert.ErrorIs(t, completeErr, emitter.ErrSettled, "late Complete")
	assert.Equal(t, []string{"in_progress", "failed"}, kittest.Statuses(evs, "cmp_1"), "statuses")
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
	r.Initialize(1, true)
	r.StartPrompt()
	evs := r.Finish(1) // closes from the agent's side
	require.Equal(t, []string{"in_progress", "failed"}, kittest.Statuses(evs, "cmp_1"), "statuses\n%s", kittest.Dump(evs))
	assert.Equal(t, fmt.Sprintf("%q", emitter.ErrConnectionClosed.Error()), string(kittest.Field(kittest.Compactions(evs)[1], "error")), "the failed update's error")
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
	r.Initialize(1, true)
	r.StartPrompt()
	stop() // the host shuts the connection down through its context
	<-r.Client.Conn.DisconnectNotify()
	evs := r.Finish(1)
	require.Equal(t, []string{"in_progress", "failed"}, kittest.Statuses(evs, "cmp_1"), "statuses\n%s", kittest.Dump(evs))
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
	r.Initialize(1, true)
	r.StartPrompt()
	_ = r.Client.Conn.Close()
	<-done
	r.Close()
	assert.ErrorIs(t, late, agentkit.ErrClosed, "Complete after hang-up")
	assert.ErrorIs(t, open, agentkit.ErrClosed, "Compaction after hang-up")
}

func TestReplayOnLoadPrecedesTheLoadResponse(t *testing.T) {
	kittest.ReplayOnLoadPrecedesTheLoadResponse(t, stack{})
}

func TestV2TurnEndsAtTheIdleStateUpdateNotAtThePromptAcknowledgement(t *testing.T) {
	a := &agent{version: 2}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		wg.Go(func() {
			_ = stateUpdate(ctx, conn, sid, "running", "")
			c, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable())
			if !assert.NoError(t, err) { // the runtime's goroutine: assert, never require
				return
			}
			_ = c.Chunk(ctx, protocol.Text("partial"))
			_ = agentMessage(ctx, conn, sid, "working")
			_ = stateUpdate(ctx, conn, sid, "idle", "end_turn") // the runtime forgot its handle
		})
		return map[string]any{"messageId": "msg_1"}, nil
	}
	var updates []string
	for _, s := range newRig(t, a).V2Turn(wg.Wait) {
		if s != "response:session/prompt" {
			updates = append(updates, s)
		}
	}
	want := []string{"state_update:running", "compaction_update:in_progress", "compaction_summary_chunk", "agent_message_chunk", "compaction_update:failed", "state_update:idle"}
	require.Equal(t, want, updates)
}

func TestV2CancelSettlesAsCancelledBeforeIdle(t *testing.T) {
	a := &agent{version: 2}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		wg.Go(func() {
			_ = stateUpdate(ctx, conn, sid, "running", "")
			if _, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1")); !assert.NoError(t, err) {
				return
			}
			<-ctx.Done()
			_ = stateUpdate(context.WithoutCancel(ctx), conn, sid, "idle", "cancelled")
		})
		return map[string]any{"messageId": "msg_1"}, nil
	}
	r := newRig(t, a, agentkit.WithCancelGrace(-1))
	r.Initialize(2, false)
	_, err := r.Client.Prompt(r.Ctx, session, nil)
	require.NoError(t, err)
	_, err = r.Client.Wire.Wait(r.Ctx, func(e kittest.Event) bool { return e.Status == "in_progress" })
	require.NoError(t, err)
	require.NoError(t, r.Client.Cancel(r.Ctx, session))
	_, err = r.Client.Wire.Wait(r.Ctx, func(e kittest.Event) bool { return e.State == "idle" })
	require.NoError(t, err)
	wg.Wait()
	evs := r.Finish(2)
	want := []string{"state_update:running", "compaction_update:in_progress", "compaction_update:cancelled", "state_update:idle"}
	var got []string
	for _, s := range kittest.Summary(evs) {
		if strings.HasPrefix(s, "state_update") || strings.HasPrefix(s, "compaction") {
			got = append(got, s)
		}
	}
	require.Equal(t, want, got)
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
	// The compaction is left open: the fallback must still end.
	runtime := func(ctx context.Context, s kittest.Session) error {
		c, err := s.Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable())
		if err != nil {
			return err
		}
		_ = c.Chunk(ctx, protocol.Text("x"))
		return nil
	}
	kittest.CheckModes(t, stack{}, runtime, []kittest.ModeCase{
		{Name: "default: the tool call", Mode: capability.Fallback, Want: []string{"tool_call", "tool_call_update", "response:session/prompt"}},
		{Name: "fallback.None", Fallbacks: []emitter.Renderer{fallback.None{}}, Mode: capability.Off, Want: []string{"response:session/prompt"}},
		{Name: "nil restores the default", Fallbacks: []emitter.Renderer{fallback.None{}, nil}, Mode: capability.Fallback, Want: []string{"tool_call", "tool_call_update", "response:session/prompt"}},
		{Name: "fallback", Fallbacks: []emitter.Renderer{marker}, Mode: capability.Fallback, Want: []string{"agent_message_chunk", "agent_message_chunk", "response:session/prompt"}},
	})
}

func TestSessionErrorsAreSentinels(t *testing.T) {
	kittest.SessionErrorsAreSentinels(t, stack{})
}

func TestPromptContextCarriesTheTraceContextOfItsMeta(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var traces []string
	var mu sync.Mutex
	obs := emitter.ObserverFunc(func(ctx context.Context, ev emitter.Event) {
		tc, _ := observe.TraceFrom(ctx)
		mu.Lock()
		traces = append(traces, ev.Kind.String()+" "+tc.Traceparent)
		mu.Unlock()
	})
	a := &agent{}
	var inHandler string
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		tc, _ := observe.TraceFrom(ctx)
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
	r.Initialize(1, true)
	_, err := r.Client.Prompt(r.Ctx, session, map[string]any{"traceparent": tp})
	require.NoError(t, err)
	r.Finish(1)
	assert.Equal(t, tp, inHandler, "the handler's trace")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"started " + tp, "settled " + tp}, traces, "what the observer saw")
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
	r.Initialize(1, true)
	_, err := r.Client.Prompt(r.Ctx, session, nil)
	require.NoError(t, err)
	evs := r.Finish(1)
	assert.ErrorIs(t, refused, emitter.ErrTurnEnded, "Start during settlement")
	assert.Empty(t, kittest.Statuses(evs, "cmp_late"), "cmp_late reached the wire")
}

// TestCancelReachesItsPromptAndNeverTheNext plays 1,000 pairs: a
// session/prompt with its session/cancel right behind it, then, once it is
// answered, a prompt with no cancel. Every cancel must reach its prompt
// (none lost) and none the prompt after it (none stale).
func TestCancelReachesItsPromptAndNeverTheNext(t *testing.T) {
	kittest.CancelReachesItsPromptAndNeverTheNext(t, stack{})
}

// rendererFunc adapts a function to emitter.Renderer.
type rendererFunc func(ctx context.Context, ev emitter.Event, n emitter.Notifier) error

func (f rendererFunc) Render(ctx context.Context, ev emitter.Event, n emitter.Notifier) error {
	return f(ctx, ev, n)
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
