package acpsdk_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/acpcompact/acpcompact/agentkit/acpsdk"
	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/emitter"
	acp "github.com/coder/acp-go-sdk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSecondPromptRejectedWhileOneRunsEndsNothing: a session/prompt sent
// while the session's prompt runs, which the agent rejects with an error,
// ends nothing: only the running prompt's response ends the turn, so its
// compaction's later chunks and completion still reach the client. (The
// SDK itself cancels a session's running prompt when the next one arrives;
// the prompt's context is the kit's, which only the client's cancel ends.)
func TestSecondPromptRejectedWhileOneRunsEndsNothing(t *testing.T) {
	kittest.SecondPromptRejectedWhileOneRunsEndsNothing(t, stack{})
}

// TestRequestIDsMatchByValue: the client's ids need escaping, and the SDK
// answers them re-encoded. The re-encoded initialize answer still
// negotiates, and the prompt's open compaction is settled before its
// re-encoded response.
func TestRequestIDsMatchByValue(t *testing.T) {
	kittest.RequestIDsMatchByValue(t, stack{})
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
		assert.ErrorIs(t, cause, emitter.ErrCancelled, "the prompt context's cause")
		assert.Equal(t, []string{"in_progress", "cancelled"}, kittest.Statuses(evs, "cmp_1"), "statuses")
	}
	t.Run("Agent", func(t *testing.T) {
		var cause error
		a := &kittest.Agent{Prompt: func(ctx context.Context, _ kittest.Conn, p kittest.Prompt) (string, error) {
			cause = runtime(ctx, acpsdk.SessionFrom(ctx, p.SessionID))
			return "cancelled", nil
		}}
		_, evs := kittest.CancelScenario(t, stack{}, kittest.Config{}, a) // a typed acp.Agent
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
		r.Initialize(1, true)
		call := r.StartPrompt()
		require.NoError(t, r.Client.Cancel(r.Ctx, session))
		require.NoError(t, call.Wait(r.Ctx, nil))
		check(t, cause, r.Finish(1))
	})
}

// TestErrorsNameTheKit: the kit's errors say agentkit (acpsdk's are
// agentkit's, one surface) and wrap its sentinels.
func TestErrorsNameTheKit(t *testing.T) {
	kittest.ErrorsNameTheKit(t, stack{})
}

// TestCancelGraceMeansTheSameEverywhere: with WithCancelGrace(d) a runtime
// that hangs after session/cancel has its compaction settled cancelled d
// after the cancel (0: at once), or, for d < 0, only at the turn's end.
func TestCancelGraceMeansTheSameEverywhere(t *testing.T) {
	kittest.CancelGraceMeansTheSameEverywhere(t, stack{})
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
	kittest.NothingAboutCompactionBetweenTurns(t, stack{})
}

// TestHandleCallsAreHeldWhileTheTurnEndIsSettled: the turn guard holds the
// calls on a compaction's handle, not only those by ID: while the turn's
// end is settled and the prompt's response written, the handle's Chunk,
// Complete, Fail and Cancel wait, and are then refused (emitter.ErrSettled),
// so nothing changes between the settlement and the response.
func TestHandleCallsAreHeldWhileTheTurnEndIsSettled(t *testing.T) {
	kittest.HandleCallsAreHeldWhileTheTurnEndIsSettled(t, stack{})
}

// TestSessionFromInAHandlerAndAGoroutineThatOutlivesIt: SessionFrom reads
// the connection from Prompt's context, and from that context in a
// goroutine that outlives Prompt; there, with no turn running, a start is
// refused with emitter.ErrOutsideTurn unless it is a background one, which
// the client sees when the next turn begins.
func TestSessionFromInAHandlerAndAGoroutineThatOutlivesIt(t *testing.T) {
	kittest.SessionFromInAHandlerAndAGoroutineThatOutlivesIt(t, stack{})
}

// TestStaleTurnOpensNothingInTheNextTurn: a goroutine of a turn that is
// over starts nothing in the session's next turn (hardening issue, 8).
func TestStaleTurnOpensNothingInTheNextTurn(t *testing.T) {
	kittest.StaleTurnOpensNothingInTheNextTurn(t, stack{})
}
