package agents

import (
	"strconv"
	"strings"

	"github.com/acpcompact/acpcompact/protocol"
)

// GitHub Copilot CLI (copilot --acp): only /compact's result, as text,
// after the fact.

// Copilot: Copilot CLI's /compact results, in a /compact turn:
// "Compacted conversation history and removed …" and "Failed to run
// /compact: Error: <err>", both after the fact.
const Copilot Translator = "copilot"

const (
	copilotCompacted = "Compacted conversation history and removed "
	copilotFailed    = "Failed to run /compact: "
	// compactCommand is the slash command that runs a manual compaction
	// (Kimi Code, Copilot CLI).
	compactCommand = "compact"
)

func init() {
	register([]Def{{Name: Copilot, Prefixes: []string{copilotCompacted, copilotFailed}, Text: copilotTextSignal}},
		Profile{
			Name: "copilot-cli", Agent: "Copilot", Range: "all", Seen: []string{"1.0.102"},
			Sends: "ignores the capability; only `/compact`'s result, after the fact, as `agent_message_chunk` without `messageId`: \"Compacted conversation history and removed N message(s) and M tokens.\" or " +
				"\"Failed to run /compact: Error: <err>\" (also \"…Error: Nothing to compact.\"); a cancelled `/compact` says nothing; " +
				"automatic compaction (in the background) sends nothing, and in the recordings did not even lower `usage_update.used`; `session/load` replays the history with no trace of a compaction",
			Gets: "in a `/compact` turn, an after-the-fact `completed` compaction (the messages removed in the record's `source.count`; the tokens removed have no record key) or a `failed` one with Copilot's error text, in place of the text; " +
				"\"Nothing to compact.\" stays text: nothing ran; cancelled and automatic compactions, and compactions on `session/load`, stay invisible: the wire says nothing of them",
			Translators: []Translator{Copilot},
		})
}

// copilotTextSignal reads Copilot CLI's /compact results, in a turn whose
// prompt ran /compact (its model's prose carries no messageId either):
// "Compacted conversation history and removed N message(s) and M
// tokens." is a completed compaction reported after the fact; "Failed to
// run /compact: Error: <err>" a failed one, with Copilot's error text,
// except the refusals that say nothing ran ("Nothing to compact."), which
// stay text.
func copilotTextSignal(s State, _ *Update, text string) (Signal, bool) {
	if s.Command() != compactCommand {
		return Signal{}, false
	}
	if rest, ok := strings.CutPrefix(text, copilotCompacted); ok {
		n, ok := copilotRemoved(rest)
		if !ok {
			return Signal{}, false
		}
		sig := Signal{Kind: Done, Trigger: protocol.Manual}
		if n > 0 {
			sig.Facts = &Facts{Messages: n}
		}
		return sig, true
	}
	rest, ok := strings.CutPrefix(text, copilotFailed)
	if !ok {
		return Signal{}, false
	}
	reason := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), "Error: "))
	if reason == "" || copilotRefusal(reason) {
		return Signal{}, false
	}
	return Signal{Kind: Done, Status: protocol.Failed, Reason: reason, Trigger: protocol.Manual}, true
}

// copilotRemoved reads "N message(s) and M token(s)." and returns N.
func copilotRemoved(rest string) (int, bool) {
	msgs, tokens, ok := strings.Cut(rest, " and ")
	if !ok || !strings.HasSuffix(tokens, ".") {
		return 0, false
	}
	n, unit, ok := strings.Cut(msgs, " ")
	if !ok || (unit != "message" && unit != "messages") {
		return 0, false
	}
	count, err := strconv.Atoi(strings.ReplaceAll(n, ",", ""))
	if err != nil {
		return 0, false
	}
	m, unit, ok := strings.Cut(strings.TrimSuffix(tokens, "."), " ")
	if !ok || (unit != "token" && unit != "tokens") {
		return 0, false
	}
	if _, err := strconv.ParseInt(strings.ReplaceAll(m, ",", ""), 10, 64); err != nil {
		return 0, false
	}
	return count, true
}

// copilotRefusal reports the /compact errors that say no compaction ran:
// nothing to compact, no conversation yet, one already running.
func copilotRefusal(reason string) bool {
	switch {
	case reason == "Nothing to compact.",
		strings.HasPrefix(reason, "Cannot compact: "),
		reason == "Compaction already in progress.":
		return true
	}
	return false
}
