package agentkit_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/sourcegraph/jsonrpc2"
)

// rpcError turns a runtime's error into the agent's JSON-RPC error.
func rpcError(err error) error {
	var e *jsonrpc2.Error
	if errors.As(err, &e) {
		return e
	}
	return &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidRequest, Message: err.Error()}
}

// TestSecondPromptRejectedWhileOneRunsEndsNothing: a session/prompt sent
// while the session's prompt runs, which the agent rejects with an error,
// ends nothing: only the running prompt's response ends the turn, so its
// compaction's later chunks and completion still reach the client.
func TestSecondPromptRejectedWhileOneRunsEndsNothing(t *testing.T) {
	sp := kittest.NewSecondPrompt()
	a := &agent{}
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		stop, err := sp.Prompt(ctx, agentkit.SessionFrom(ctx, sid))
		if err != nil {
			return nil, rpcError(err)
		}
		return map[string]any{"stopReason": stop}, nil
	}
	r := newRig(t, a)
	r.initialize(1, true)
	res := sp.Play(r.ctx, t, r.client, session)
	sp.Check(t, res, r.finish(1))
}

// TestRequestIDsMatchByValue: the client's ids need escaping, and
// jsonrpc2 answers them re-encoded. The re-encoded initialize answer still
// negotiates, and the prompt's open compaction is settled before its
// re-encoded response.
func TestRequestIDsMatchByValue(t *testing.T) {
	a := &agent{}
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		if _, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1")); err != nil {
			return nil, err
		}
		return endTurn() // left open: the turn's end settles it
	}
	a.kit = agentkit.New(quiet)
	agentSide, clientSide := net.Pipe()
	conn := a.kit.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(agentSide),
		agentkit.AsyncHandler(jsonrpc2.HandlerWithError(a.handle)), jsonrpc2.SetLogger(nopLogger{}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := kittest.NewPeer(clientSide, clientSide)
	kittest.PlayEscapedIDs(ctx, t, p, session, func() {
		_ = clientSide.Close()
		<-conn.DisconnectNotify()
	})
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
			a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
				stop, err := h.Prompt(ctx, agentkit.SessionFrom(ctx, sid))
				if err != nil {
					return nil, err
				}
				return map[string]any{"stopReason": stop}, nil
			}
			r := newRig(t, a, agentkit.WithCancelGrace(grace))
			r.initialize(1, true)
			h.Play(r.ctx, t, r.client, session, grace)
			r.finish(1)
		})
	}
}

// TestErrorsNameTheirPackage: the package's errors say agentkit and wrap
// its sentinels.
func TestErrorsNameTheirPackage(t *testing.T) {
	for _, err := range []error{agentkit.ErrNotInitialized, agentkit.ErrClosed, agentkit.ErrUnknownConn} {
		if !strings.HasPrefix(err.Error(), "agentkit: ") {
			t.Errorf("%q does not name the package", err)
		}
	}
	a := &agent{}
	r := newRig(t, a)
	ctx := context.Background()
	// A handler that runs before initialize.
	if err := r.client.Conn.Call(r.ctx, "session/load", map[string]any{"sessionId": session}, nil); err != nil {
		t.Fatal(err)
	}
	handlerCtx := a.lastCtx()
	_, before := agentkit.SessionFrom(handlerCtx, session).Start(ctx)
	_, unknown := agentkit.SessionFrom(ctx, session).Start(ctx)
	r.initialize(1, true)
	held := agentkit.SessionFrom(handlerCtx, session)
	r.close()
	_, after := held.Start(ctx)
	for _, tc := range []struct{ err, want error }{{before, agentkit.ErrNotInitialized}, {unknown, agentkit.ErrUnknownConn}, {after, agentkit.ErrClosed}} {
		if !errors.Is(tc.err, tc.want) || !strings.HasPrefix(tc.err.Error(), "agentkit: ") {
			t.Errorf("error %q: want one that wraps %q and names agentkit", tc.err, tc.want)
		}
	}
}

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
			a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
				stop, err := o.Prompt(ctx, agentkit.SessionFrom(ctx, sid))
				if err != nil {
					return nil, rpcError(err)
				}
				return map[string]any{"stopReason": stop}, nil
			}
			r := newRig(t, a)
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
	a := &agent{wrap: h.Conn}
	a.prompt = func(ctx context.Context, conn *jsonrpc2.Conn, sid string) (any, error) {
		stop, err := h.Prompt(ctx, agentkit.SessionFrom(ctx, sid))
		if err != nil {
			return nil, rpcError(err)
		}
		return map[string]any{"stopReason": stop}, nil
	}
	r := newRig(t, a)
	r.initialize(1, true)
	h.Play(r.ctx, t, r.client, session)
	h.Check(t, r.finish(1))
}

// TestSessionFromInAHandlerAndAGoroutineThatOutlivesIt: SessionFrom reads
// the connection from the prompt handler's context, and from that context
// in a goroutine that outlives the handler; there, with no turn running, a
// start is refused with emitter.ErrOutsideTurn unless it is a background
// one, which the client sees when the next turn begins.
func TestSessionFromInAHandlerAndAGoroutineThatOutlivesIt(t *testing.T) {
	answered := make(chan struct{})
	late := make(chan error, 1)
	a := &agent{}
	prompts := 0
	a.prompt = func(ctx context.Context, _ *jsonrpc2.Conn, sid string) (any, error) {
		if prompts++; prompts > 1 {
			return endTurn()
		}
		c, err := agentkit.SessionFrom(ctx, sid).Start(ctx, emitter.WithID("cmp_1"))
		if err != nil {
			return nil, err
		}
		if err := c.Complete(ctx); err != nil {
			return nil, err
		}
		go func() {
			<-answered
			late <- kittest.OutsideTheTurn(ctx, agentkit.SessionFrom(ctx, sid))
		}()
		return endTurn()
	}
	r := newRig(t, a)
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
