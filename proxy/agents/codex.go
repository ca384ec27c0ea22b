package agents

import "strings"

// codex-acp: the TypeScript adapter (@agentclientprotocol/codex-acp: its
// compaction tool call, toolcall.go, and standard updates to a capable
// client) and the Rust one (codex-acp: "Context compacted" text after the
// fact).

// The translators of this file.
const (
	// CodexText: agent_message_chunk text "Context compacted\n", sent
	// after the fact and followed at once by codex's "Heads up: Long
	// threads and multiple compactions…" warning (codex-acp, Rust): the
	// same text from the model, without the warning behind it, is prose.
	CodexText Translator = "codex-text"
	// CodexNotice: a notice update titled "Context compacted", or
	// agent_message_chunk text "*Context compacted to fit the model's
	// context window.*\n\n", sent after the fact (described for
	// codex-acp TypeScript; 2.6.0 never sent either).
	CodexNotice Translator = "codex-notice"
)

const (
	codexText        = "Context compacted\n"
	codexNoticeText  = "*Context compacted to fit the model's context window.*\n\n"
	codexNoticeTitle = "Context compacted"
	// codexHeadsUp begins the warning codex sends right after every
	// compaction; it is what tells its "Context compacted\n" from the same
	// text written by the model.
	codexHeadsUp = "Heads up: Long threads and multiple compactions"

	agentCodexTS = "@agentclientprotocol/codex-acp"
	agentCodexRS = "codex-acp"
)

func init() {
	register([]Def{
		{Name: CodexText, Prefixes: []string{codexText, codexHeadsUp}, Text: codexTextSignal},
		{
			Name: CodexNotice, Kinds: []string{"notice"}, Update: codexNoticeSignal,
			Prefixes: []string{codexNoticeText}, Text: codexNoticeTextSignal,
		},
	},
		Profile{
			Name: "codex-acp", Agent: agentCodexTS, Range: "all", Seen: []string{"2.0.0", "2.4.0", "2.6.0"},
			Sends: "capable client: `compaction_update` `in_progress` then `completed` (never a summary), `failed` with the provider's error, `cancelled`; replays completed ones terminal-first (not failed or cancelled ones). " +
				"Otherwise: the `Compact conversation` tool call, left `in_progress` on failure, cancel or a dropped stream; the error as a message chunk. " +
				"2.0.0 also sends \"Warning: Heads up: Long threads and multiple compactions…\" after every completed compaction",
			Gets:        "standard updates instead of the tool call; the tool call settled (failed with the provider's own error text, or cancelled) before the turn ends; the warning as it came",
			Translators: []Translator{ToolCall},
			Quirks:      ErrorText,
		},
		Profile{
			Name: "codex-acp-rs", Agent: agentCodexRS, Range: "all", Seen: []string{"0.14.0", "0.16.0"},
			Sends:       "ignores the capability; after the fact, `agent_message_chunk` `Context compacted\\n` then \"Heads up: Long threads and multiple compactions…\"; nothing on failure (a prompt error), cancel or replay",
			Gets:        "a completed compaction in place of the `Context compacted` text (the warning kept); the same reply from the model, not followed by the warning, stays prose; failures, cancels and replays stay invisible: the wire says nothing of them",
			Translators: []Translator{CodexText},
		},
	)
}

// codexTextSignal: codex's "Context compacted\n" waits for the next
// line, which confirms it when it is the warning codex sends after it for
// the same session.
func codexTextSignal(s State, _ *Update, text string) (Signal, bool) {
	switch {
	case text == codexText:
		return Signal{Kind: Await}, true
	case strings.HasPrefix(text, codexHeadsUp):
		if s.Awaiting() == CodexText {
			return Signal{Kind: Done, Keep: true, Confirms: true}, true
		}
	}
	return Signal{}, false
}

func codexNoticeTextSignal(_ State, _ *Update, text string) (Signal, bool) {
	if text == codexNoticeText {
		return Signal{Kind: Done}, true
	}
	return Signal{}, false
}

func codexNoticeSignal(_ State, u *Update) (Signal, Verdict) {
	if len(u.Title) > MaxSignalBytes {
		return Signal{}, NotMine
	}
	if t := stringOf(u.Title); strings.TrimSpace(t) == codexNoticeTitle {
		return Signal{Kind: Done}, Found
	}
	return Signal{}, NotMine
}
