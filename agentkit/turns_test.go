package agentkit_test

import (
	"testing"

	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
)

// TestSecondPromptRejectedWhileOneRunsEndsNothing: a session/prompt sent
// while the session's prompt runs, which the agent rejects with an error,
// ends nothing: only the running prompt's response ends the turn, so its
// compaction's later chunks and completion still reach the client.
func TestSecondPromptRejectedWhileOneRunsEndsNothing(t *testing.T) {
	kittest.SecondPromptRejectedWhileOneRunsEndsNothing(t, stack{})
}

// TestRequestIDsMatchByValue: the client's ids need escaping, and
// jsonrpc2 answers them re-encoded. The re-encoded initialize answer still
// negotiates, and the prompt's open compaction is settled before its
// re-encoded response.
func TestRequestIDsMatchByValue(t *testing.T) {
	kittest.RequestIDsMatchByValue(t, stack{})
}

// TestCancelGraceMeansTheSameEverywhere: with WithCancelGrace(d) a runtime
// that hangs after session/cancel has its compaction settled cancelled d
// after the cancel (0: at once), or, for d < 0, only at the turn's end.
func TestCancelGraceMeansTheSameEverywhere(t *testing.T) {
	kittest.CancelGraceMeansTheSameEverywhere(t, stack{})
}

// TestErrorsNameTheKit: the kit's errors say agentkit (acpsdk's are
// agentkit's, one surface) and wrap its sentinels.
func TestErrorsNameTheKit(t *testing.T) {
	kittest.ErrorsNameTheKit(t, stack{})
}

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
// the connection from the prompt handler's context, and from that context
// in a goroutine that outlives the handler; there, with no turn running, a
// start is refused with emitter.ErrOutsideTurn unless it is a background
// one, which the client sees when the next turn begins.
func TestSessionFromInAHandlerAndAGoroutineThatOutlivesIt(t *testing.T) {
	kittest.SessionFromInAHandlerAndAGoroutineThatOutlivesIt(t, stack{})
}

// TestStaleTurnOpensNothingInTheNextTurn: a goroutine of a turn that is
// over starts nothing in the session's next turn (hardening issue, 8).
func TestStaleTurnOpensNothingInTheNextTurn(t *testing.T) {
	kittest.StaleTurnOpensNothingInTheNextTurn(t, stack{})
}
