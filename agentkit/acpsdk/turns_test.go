package acpsdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/emitter"
	acp "github.com/coder/acp-go-sdk"
)

// TestSecondPromptRejectedWhileOneRunsEndsNothing: a session/prompt sent
// while the session's prompt runs, which the agent rejects with an error,
// ends nothing: only the running prompt's response ends the turn, so its
// compaction's later chunks and completion still reach the client. (The
// SDK itself cancels a session's running prompt when the next one arrives;
// the prompt's context is the kit's, which only the client's cancel ends.)
func TestSecondPromptRejectedWhileOneRunsEndsNothing(t *testing.T) {
	sp := kittest.NewSecondPrompt()
	a := &agent{}
	a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
		stop, err := sp.Prompt(ctx, acpsdk.SessionFrom(ctx, string(p.SessionId)))
		return acp.PromptResponse{StopReason: acp.StopReason(stop)}, err
	}
	r := newRig(t)
	r.serve(a)
	r.initialize(1, true)
	res := sp.Play(r.ctx, t, r.client, session)
	sp.Check(t, res, r.finish(1))
}

// TestRequestIDsMatchByValue: the client's ids need escaping, and the SDK
// answers them re-encoded. The re-encoded initialize answer still
// negotiates, and the prompt's open compaction is settled before its
// re-encoded response.
func TestRequestIDsMatchByValue(t *testing.T) {
	a := &agent{}
	a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
		if _, err := acpsdk.SessionFrom(ctx, string(p.SessionId)).Start(ctx, emitter.WithID("cmp_1")); err != nil {
			return acp.PromptResponse{}, err
		}
		return endTurn() // left open: the turn's end settles it
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := newPipes()
	a.kit = acpsdk.New(quiet)
	a.mu.Lock()
	a.conn = a.kit.NewAgentSideConnection(a, p.fromAgentW, p.toAgentR)
	a.conn.SetLogger(discard)
	a.mu.Unlock()
	peer := kittest.NewPeer(p.fromAgentR, p.toAgentW)
	kittest.PlayEscapedIDs(ctx, t, peer, session, func() {
		_ = p.toAgentW.Close()
		<-a.Conn().Done()
		_ = p.fromAgentW.Close()
	})
}

// TestUserCancelEndsThePromptContextWithErrCancelled: the prompt's context
// ends on the client's session/cancel with cause emitter.ErrCancelled, as
// with package agentkit, so a runtime tells a user's cancel from other
// ends; for an acp.Agent and for a raw MethodHandler.
func TestUserCancelEndsThePromptContextWithErrCancelled(t *testing.T) {
	// runtime opens cmp_1, waits for the context to end, reports the
	// cancel, and returns the context's cause.
	runtime := func(ctx context.Context, s *acpsdk.Session) error {
		c, err := s.Start(ctx, emitter.WithID("cmp_1"))
		if err != nil {
			return err
		}
		<-ctx.Done()
		_ = c.Cancel(ctx)
		return context.Cause(ctx)
	}
	check := func(t *testing.T, cause error, evs []kittest.Event) {
		t.Helper()
		if !errors.Is(cause, emitter.ErrCancelled) {
			t.Errorf("prompt context cause = %v, want emitter.ErrCancelled", cause)
		}
		if got := kittest.Statuses(evs, "cmp_1"); !equal(got, []string{"in_progress", "cancelled"}) {
			t.Errorf("statuses %v", got)
		}
	}
	t.Run("Agent", func(t *testing.T) {
		a := &agent{}
		var cause error
		a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
			cause = runtime(ctx, acpsdk.SessionFrom(ctx, string(p.SessionId)))
			return cancelled()
		}
		_, evs := cancelScenario(t, a)
		check(t, cause, evs)
	})
	t.Run("MethodHandler", func(t *testing.T) {
		r := newRig(t)
		var cause error
		r.serveRaw(func(conn *acpsdk.Conn) acp.MethodHandler {
			return func(ctx context.Context, method string, _ json.RawMessage) (any, *acp.RequestError) {
				switch method {
				case "initialize":
					return map[string]any{"protocolVersion": 1, "agentCapabilities": map[string]any{}, "authMethods": []any{}}, nil
				case "session/prompt":
					cause = runtime(ctx, acpsdk.SessionFrom(ctx, session))
					return map[string]any{"stopReason": "cancelled"}, nil
				}
				return nil, nil
			}
		})
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
		if err := call.Wait(r.ctx, nil); err != nil {
			t.Fatal(err)
		}
		check(t, cause, r.finish(1))
	})
}

// TestErrorsNameTheirPackage: the package's errors say acpsdk, not
// agentkit, and still wrap its sentinels.
func TestErrorsNameTheirPackage(t *testing.T) {
	for _, err := range []error{acpsdk.ErrNotInitialized, acpsdk.ErrClosed, acpsdk.ErrUnknownConn} {
		if !strings.HasPrefix(err.Error(), "acpsdk: ") {
			t.Errorf("%q does not name the package", err)
		}
	}
	a := &agent{}
	r := newRig(t)
	r.serve(a)
	ctx := context.Background()
	handlerCtx := loadBeforeInitialize(t, r, a)
	_, before := acpsdk.SessionFrom(handlerCtx, session).Start(ctx)
	_, unknown := acpsdk.SessionFrom(ctx, session).Start(ctx)
	r.initialize(1, true)
	held := acpsdk.SessionFrom(handlerCtx, session)
	r.close()
	_, after := held.Start(ctx)
	for _, tc := range []struct {
		err, want error
	}{{before, acpsdk.ErrNotInitialized}, {unknown, acpsdk.ErrUnknownConn}, {after, acpsdk.ErrClosed}} {
		if !errors.Is(tc.err, tc.want) || !strings.HasPrefix(tc.err.Error(), "acpsdk: ") || strings.Contains(tc.err.Error(), "agentkit") {
			t.Errorf("error %q: want one that wraps %q and names acpsdk only", tc.err, tc.want)
		}
	}
}

// TestCancelGraceMeansTheSameEverywhere: with WithCancelGrace(d) a runtime
// that hangs after session/cancel has its compaction settled cancelled d
// after the cancel (0: at once), or, for d < 0, only at the turn's end.
func TestCancelGraceMeansTheSameEverywhere(t *testing.T) {
	for _, grace := range []time.Duration{0, 300 * time.Millisecond, -1} {
		t.Run(grace.String(), func(t *testing.T) {
			t.Parallel()
			h := kittest.NewHang()
			a := &agent{}
			a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
				stop, err := h.Prompt(ctx, acpsdk.SessionFrom(ctx, string(p.SessionId)))
				return acp.PromptResponse{StopReason: acp.StopReason(stop)}, err
			}
			r := newRig(t, acpsdk.WithCancelGrace(grace))
			r.serve(a)
			r.initialize(1, true)
			h.Play(r.ctx, t, r.client, session, grace)
			r.finish(1)
		})
	}
}

// The connection handle is a concrete type: only a *Conn compiles where
// the kit wants one; a runtime needs none (SessionFrom, Recover).
var (
	_ func(context.Context, *acpsdk.Conn) error     = (*acpsdk.Kit)(nil).CloseConn
	_ func(context.Context, string) *acpsdk.Session = acpsdk.SessionFrom
	_ func(*acpsdk.Conn) (*emitter.Emitter, error)  = (*acpsdk.Kit)(nil).Emitter
)

// TestNothingAboutCompactionBetweenTurns: a runtime whose event pump
// outlives its prompt's handler reports after the prompt's response. A
// plain start is refused (emitter.ErrOutsideTurn), the handle the turn's
// end settled refuses more, and a compaction started with
// emitter.Background reaches the client terminal-first when the next turn
// begins; nothing about compaction is on the wire between turns.
func TestNothingAboutCompactionBetweenTurns(t *testing.T) {
	for _, capable := range []bool{true, false} {
		t.Run(map[bool]string{true: "capable", false: "fallback"}[capable], func(t *testing.T) {
			o := kittest.NewOutlive()
			a := &agent{}
			a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
				stop, err := o.Prompt(ctx, acpsdk.SessionFrom(ctx, string(p.SessionId)))
				return acp.PromptResponse{StopReason: acp.StopReason(stop)}, err
			}
			r := newRig(t)
			r.serve(a)
			r.initialize(1, capable)
			o.Play(r.ctx, t, r.client, session)
			evs := r.finish(1)
			if capable {
				o.Check(t, evs, 1)
			}
		})
	}
}

// TestHandleCallsAreHeldWhileTheTurnEndIsSettled: the turn guard holds the
// calls on a compaction's handle, not only those by ID: while the turn's
// end is settled and the prompt's response written, the handle's Chunk,
// Complete, Fail and Cancel wait, and are then refused (emitter.ErrSettled),
// so nothing changes between the settlement and the response.
func TestHandleCallsAreHeldWhileTheTurnEndIsSettled(t *testing.T) {
	h := kittest.NewHeldEnd()
	a := &agent{}
	a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
		stop, err := h.Prompt(ctx, acpsdk.SessionFrom(ctx, string(p.SessionId)))
		return acp.PromptResponse{StopReason: acp.StopReason(stop)}, err
	}
	r := newRig(t)
	r.wrapOut = h.Writer
	r.serve(a)
	r.initialize(1, true)
	h.Play(r.ctx, t, r.client, session)
	h.Check(t, r.finish(1))
}

// TestSessionFromInAHandlerAndAGoroutineThatOutlivesIt: SessionFrom reads
// the connection from Prompt's context, and from that context in a
// goroutine that outlives Prompt; there, with no turn running, a start is
// refused with emitter.ErrOutsideTurn unless it is a background one, which
// the client sees when the next turn begins.
func TestSessionFromInAHandlerAndAGoroutineThatOutlivesIt(t *testing.T) {
	answered := make(chan struct{})
	late := make(chan error, 1)
	a := &agent{}
	var prompts atomic.Int32
	a.prompt = func(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
		if prompts.Add(1) > 1 {
			return endTurn()
		}
		sid := string(p.SessionId)
		c, err := acpsdk.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1"))
		if err != nil {
			return acp.PromptResponse{}, err
		}
		if err := c.Complete(ctx); err != nil {
			return acp.PromptResponse{}, err
		}
		go func() {
			<-answered
			late <- kittest.OutsideTheTurn(ctx, acpsdk.SessionFrom(ctx, sid))
		}()
		return endTurn()
	}
	r := newRig(t)
	r.serve(a)
	r.initialize(1, true)
	if _, err := r.client.Prompt(r.ctx, session, nil); err != nil {
		t.Fatal(err)
	}
	close(answered)
	if err := <-late; err != nil {
		t.Error(err)
	}
	if _, err := r.client.Prompt(r.ctx, session, nil); err != nil {
		t.Fatal(err)
	}
	kittest.CheckOutsideTheTurn(t, r.finish(1))
}
