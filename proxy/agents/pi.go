package agents

import (
	"strconv"
	"strings"

	"github.com/acpcompact/acpcompact/protocol"
)

// pi-acp (over the pi coding agent): /compact's result, after the fact, as
// one text with the summary; a failed one only as the prompt's error.

// Pi: pi-acp's /compact result, in a /compact turn: one
// agent_message_chunk "Compaction completed.\nTokens before: N\n\n" and
// the summary; a prompt error "pi compact failed: <err>".
const Pi Translator = "pi"

const (
	piCompleted = "Compaction completed."
	piTokens    = "Tokens before: "
	piFailed    = "pi compact failed: "
	// piCancelled is how pi says a compaction was cancelled, in the
	// prompt's error, not as a cancelled stop reason.
	piCancelled = "Compaction cancelled"
)

func init() {
	register([]Def{{Name: Pi, Prefixes: []string{piCompleted}, Text: piTextSignal, TurnError: piFailedTurn}},
		Profile{
			Name: "pi-acp", Agent: "pi-acp", Range: "all", Seen: []string{"0.0.34"},
			Sends: "ignores the capability; `/compact` answers one `agent_message_chunk` without `messageId`, \"Compaction completed.\\nTokens before: N\\n\\n\" followed by the summary, then `end_turn`; " +
				"a failure is the prompt's error, `data.details` \"pi compact failed: <err>\"; a cancel is an error too (\"pi compact failed: Compaction cancelled\"), not `stopReason: cancelled`; " +
				"automatic compaction sends nothing (pi-acp 0.0.34 listens for events pi 0.87 does not emit); `session/load` replays only what pi kept after a compaction",
			Gets: "in a `/compact` turn, an after-the-fact `completed` compaction with pi's summary (shown to the user, so it passes) and the tokens before it in the record, in place of the text; " +
				"a failed `/compact` a `failed` one with pi's error; a cancelled one, and automatic compactions and those before a `session/load`, stay invisible: the wire says nothing of them",
			Translators: []Translator{Pi},
		})
}

// piTextSignal reads pi-acp's /compact result, in a turn whose prompt ran
// /compact: "Compaction completed.\nTokens before: N\n\n<summary>" (or
// "Compaction completed. (custom instructions applied)…").
func piTextSignal(s State, _ *Update, text string) (Signal, bool) {
	if s.Command() != compactCommand {
		return Signal{}, false
	}
	rest, ok := strings.CutPrefix(text, piCompleted)
	if !ok {
		return Signal{}, false
	}
	head, summary, _ := strings.Cut(rest, "\n\n")
	sig := Signal{Kind: Done, Trigger: protocol.Manual, Displayable: true}
	for _, l := range strings.Split(head, "\n") {
		if n, ok := strings.CutPrefix(l, piTokens); ok {
			b, err := strconv.ParseInt(strings.ReplaceAll(n, ",", ""), 10, 64)
			if err != nil {
				return Signal{}, false
			}
			sig.Facts = &Facts{TokensBefore: b}
		}
	}
	if summary = strings.TrimSpace(summary); summary != "" {
		sig.Summary = []protocol.ContentBlock{protocol.Text(summary)}
	}
	return sig, true
}

// piFailedTurn recognises pi-acp's failed /compact in its prompt error;
// a cancel, which pi reports so too, is not a failure of its own.
func piFailedTurn(text string) (protocol.Trigger, bool) {
	rest, ok := strings.CutPrefix(text, piFailed)
	return protocol.Manual, ok && rest != piCancelled
}
