//go:build turndefect

package turn

// A defect found by the rules tables (rules_test.go), reported rather than
// fixed: this file is built only with the tag, so that the package's tests
// stay green until the engine is changed. Reproduce with
//
//	go test -tags turndefect -run TestDefect ./internal/turn/
//
// In v2, a session/prompt that arrives while the idle state_update ending
// the turn is settled and not yet written begins a new turn at once
// (promptLocked checks only s.active, where v1 also checks s.ending):
//   - OnBegin fires before the idle line is written, so the host delivers
//     what it held for the session into a turn the client has not seen end;
//   - Admit admits a start in that window, against its documented promise
//     that nothing opens between the settlement and the message that ends
//     the turn;
//   - Ended of the old end ends the new turn's bound handler (the prompt's,
//     moved to the session when it was answered) with ErrTurnEnded while
//     that turn runs.
//
// The row expects what v1 does: the prompt waits for the end to be
// written, then its turn begins (steps 4 and 8). Whether a v2 prompt in
// that window should instead belong to the ending turn is the engine's
// choice; under either, step 5 (a start admitted before the idle line is
// written) is wrong, and so is what step 8 gets today: the prompt's turn
// runs (InTurn) while its handler's context has ended with ErrTurnEnded.

import "testing"

func TestDefectV2PromptWhileIdleIsWritten(t *testing.T) {
	runRows(t, []row{
		{name: "a prompt sent while the idle state is written", setup: initV2, steps: []step{
			client(prompt1, "begin s"),
			agent(`{"jsonrpc":"2.0","id":1,"result":{}}`, "answers session/prompt s"),
			agentHeld(v2Idle, "end s: turn ended"),
			client(prompt2).then("s=idle"),
			admit("s", false, "waited until its context ended"),
			bind(`2`),
			agent(`{"jsonrpc":"2.0","id":2,"result":{}}`, "answers session/prompt s"),
			written("s", "begin s").then("s=turn"),
		}},
	})
}
