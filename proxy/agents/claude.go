package agents

import (
	"encoding/json"
	"strings"

	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/protocol"
)

// The Claude adapters: @agentclientprotocol/claude-agent-acp (its text
// form up to 0.74, its compaction tool call from 0.75 (toolcall.go),
// standard updates to a capable client from 0.78, the continuation message
// on session/load) and the old @zed-industries/claude-code-acp (nothing
// live; the continuation and the /compact command's result on load).

// The translators of this file.
const (
	// ClaudeText: agent_message_chunk text "Compacting...", then
	// "\n\nCompacting completed.", "\n\nCompacting failed: <err>" or
	// "\n\nCompacting failed." (Claude Agent ACP up to 0.74 and Go
	// adapters modelled on it, this project's text fallback among them).
	ClaudeText Translator = "claude-text"
	// ClaudeContinuation: on session/load, Claude ACP's replayed "This
	// session is being continued from a previous conversation…" user
	// message, which stands for the compaction it does not replay.
	ClaudeContinuation Translator = "claude-continuation"
	// ClaudeLocalCommand: on session/load, the old Claude package's
	// (@zed-industries/claude-code-acp) replayed /compact results:
	// "<local-command-stdout>Compacted …</local-command-stdout>" and
	// "<local-command-stderr>Error: …</local-command-stderr>".
	ClaudeLocalCommand Translator = "claude-local-command"
)

// The legacy wire forms, exactly as the adapters send them.
const (
	claudeStart        = "Compacting..."
	claudeCompleted    = "\n\nCompacting completed."
	claudeFailedBare   = "\n\nCompacting failed."
	claudeFailedPrefix = "\n\nCompacting failed: "
	// claudeCancelled is not Claude's, but fallback.Text's: an agent built
	// on this project's text fallback is recognised too.
	claudeCancelled = "\n\nCompacting cancelled."
	// claudeSeparator may end an outcome of fallback.Text's.
	claudeSeparator = "\n\n"
	// claudeOutcome begins every outcome text.
	claudeOutcome = "\n\nCompacting "
	// The @zed-industries/claude-agent-acp 0.20.0 outcomes: Claude Code's
	// local command output, as text.
	claudeLocalFailed   = "Error: Error during compaction: "
	claudeLocalCanceled = "Error: Compaction canceled."

	continuationIntro = "This session is being continued from a previous conversation"

	localStdout      = "<local-command-stdout>"
	localStdoutEnd   = "</local-command-stdout>"
	localStderr      = "<local-command-stderr>"
	localStderrEnd   = "</local-command-stderr>"
	localCompacted   = "Compacted"
	localCanceled    = "Compaction canceled."
	localDuring      = "Error during compaction: "
	localNotEnough   = "Not enough messages to compact."
	localNoMessages  = "No messages to compact"
	localCommandHead = "<local-command-std"

	agentClaude    = "@agentclientprotocol/claude-agent-acp"
	agentClaudeOld = "@zed-industries/claude-code-acp"
	// agentClaudeZed is the Claude adapter's name from 0.17 to 0.23, before
	// it moved to @agentclientprotocol (not the older claude-code-acp).
	agentClaudeZed = "@zed-industries/claude-agent-acp"
)

func init() {
	register([]Def{
		{
			Name: ClaudeText, Prefixes: []string{claudeStart, claudeOutcome, claudeLocalFailed, claudeLocalCanceled},
			Text: claudeTextSignal, Synth: fallback.Text(),
		},
		{Name: ClaudeContinuation, Kinds: []string{"user_message_chunk"}, Update: continuationSignal},
		{Name: ClaudeLocalCommand, Kinds: []string{"user_message_chunk"}, Update: localCommandSignal},
	},
		Profile{
			Name: "claude-acp-text", Agent: agentClaude, Range: "< 0.75", Seen: []string{"0.74.0"},
			Sends: "whatever the capability, `agent_message_chunk` texts without `messageId`: `Compacting...`, then `\\n\\nCompacting completed.` or `\\n\\nCompacting failed: <err>` " +
				"(then the error again, as a chunk with a `messageId`; one exchange is refused: `Compacting failed: Not enough messages to compact.`); " +
				"after a cancelled turn a late `Compacting failed: API Error: Request was aborted.`; no automatic compaction was seen; " +
				"`session/load`: the continuation message (a user message \"This session is being continued from a previous conversation…\")",
			Gets: "one compaction entity per compaction instead of the texts (`cancelled` at the cancelled response, the late text dropped); " +
				"without the capability the texts, settled in their own form if left open, or the `--fallback` form; " +
				"on `session/load`, the continuation as one terminal-first `completed` compaction (capable client)",
			Translators: []Translator{ClaudeText, ClaudeContinuation},
		},
		Profile{
			Name: "claude-acp-toolcall", Agent: agentClaude, Range: ">= 0.75, < 0.78", Seen: []string{"0.75.0"},
			Sends: "whatever the capability, the `Compact conversation` tool call (`in_progress`; `completed`, then a `tool_call_update` with `rawOutput {trigger, preTokens, postTokens, durationMs}`; " +
				"`failed` with \"Compaction failed: <err>\", also for one exchange: \"Not enough messages to compact.\"), each line with `_meta.contextCompaction`; " +
				"on cancel it stays `in_progress` past the `cancelled` response, then a late `failed` update of the same ID; no automatic compaction was seen; " +
				"`session/load`: the continuation message",
			Gets: "standard updates instead of the tool call, trigger, tokens and duration in the record (`_meta[\"acpcompact/record\"]`); " +
				"a cancel `cancelled` at the response, the late update dropped; without the capability the tool call, settled at the response if left open; " +
				"on `session/load`, the continuation as one `completed` compaction (capable client)",
			Translators: []Translator{ToolCall, ClaudeContinuation},
			Quirks:      RawOutputFollows,
		},
		Profile{
			Name: "claude-acp-replay", Agent: agentClaude, Range: ">= 0.78, < 0.97", Seen: []string{"0.78.0", "0.80.0", "0.88.0"},
			Sends: "capable client: `compaction_update` `in_progress`, `completed` with the summary, then a second `completed` " +
				"(0.78–0.87: with trigger and tokens in `_meta.contextCompaction`; 0.88: field-less); on cancel 0.78–0.79 leave it `in_progress` and send `failed` after the turn, 0.80 and later `cancelled`. " +
				"Otherwise: the tool call, as 0.75; after a cancelled turn a late failed update (0.78–0.79: of the same ID; 0.80 and later: a new tool call with another ID). " +
				"`session/load`: to a capable client its own `compaction_update` `completed` with the summary, terminal-first; otherwise the continuation message. " +
				"Automatic compaction was seen from 0.88 only",
			Gets: "exactly one terminal update per compaction (the second `completed` dropped, and with it 0.78–0.87's trigger and tokens: the first already went out); " +
				"a cancel `cancelled` before the response, the late update dropped; without the capability the tool call, settled at the response if left open, trigger, tokens and duration in the record under `--fallback`; " +
				"on `session/load`, its own replayed compaction with its summary (capable client), the continuation message unchanged otherwise",
			Translators: []Translator{ToolCall, ClaudeContinuation},
			Quirks:      RawOutputFollows,
		},
		Profile{
			Name: "claude-acp", Agent: agentClaude, Range: ">= 0.97", Seen: []string{"0.97.0", "0.100.0", "0.101.0"},
			Sends: "capable client: `compaction_update` `in_progress`, `completed` with the summary, then a second, field-less `completed`; `failed` with the provider's error (181 s of silence first, with default retries); `cancelled` on cancel. " +
				"Otherwise: the `Compact conversation` tool call, `completed`, then a `tool_call_update` with `rawOutput {trigger, preTokens, postTokens, durationMs}`; " +
				"left `in_progress` on cancel, and a terminal-first failed tool call with another ID after the cancelled turn. " +
				"`session/load` replays no compaction, only the continuation message, a user message \"This session is being continued…\" with the summary, model-facing instructions and the transcript's path",
			Gets: "exactly one terminal update per compaction; trigger, tokens and duration in the record (`_meta[\"acpcompact/record\"]`); the cancelled tool call settled before the response and the late one dropped; heartbeats during the silent retries; " +
				"on `session/load`, the continuation as one terminal-first `completed` compaction at its position for a capable client (no summary unless `--summaries=all`, never the framing), the message unchanged for a client without the capability",
			Translators: []Translator{ToolCall, ClaudeContinuation},
			Quirks:      RawOutputFollows,
		},
		Profile{
			Name: "claude-code-acp", Agent: agentClaudeOld, Range: "all", Seen: []string{"0.16.2"},
			Sends: "nothing about compaction live, for a manual, failed, cancelled or automatic one, whatever the capability. " +
				"`session/load` replays, as `user_message_chunk`s without `messageId`, the continuation message, then `<local-command-caveat>…`, the `/compact` command and its result: " +
				"`<local-command-stdout>Compacted …</local-command-stdout>`, or for a failed or cancelled one `<local-command-stderr>Error: …</local-command-stderr>` (`Error during compaction: …`, `Compaction canceled.`)",
			Gets: "live, the universal rules only: the wire says nothing to translate; on `session/load`, for a capable client, one terminal-first compaction per compaction in place of the continuation and the results: " +
				"`completed` (the `Compacted` result folded into the continuation before it), `failed` with the error, or `cancelled`; the caveat and the command stay; a client without the capability gets the lines unchanged",
			Translators: []Translator{ClaudeContinuation, ClaudeLocalCommand},
		},
		Profile{
			Name: "claude-agent-acp-0.17", Agent: agentClaudeZed, Range: "< 0.20", Seen: []string{"0.17.1", "0.19.1"},
			Sends: "nothing about compaction live, for a manual, failed, cancelled or automatic one, whatever the capability (0.19.1 precedes a `/compact` answer with a `usage_update` `used: 0`). " +
				"`session/load` (0.17.1) replays, as `user_message_chunk`s without `messageId`, the continuation message, the `/compact` command and `<local-command-stdout>Compacted </local-command-stdout>`; 0.19.1's `session/load` of a compacted session fails (\"content is not iterable\")",
			Gets:        "live, the universal rules only: the wire says nothing to translate; on `session/load`, for a capable client, the continuation and the command's result as one terminal-first `completed` compaction; a client without the capability gets the lines unchanged",
			Translators: []Translator{ClaudeContinuation, ClaudeLocalCommand},
		},
		Profile{
			Name: "claude-agent-acp", Agent: agentClaudeZed, Range: ">= 0.20", Seen: []string{"0.20.0", "0.23.1"},
			Sends: "whatever the capability, `agent_message_chunk` texts without `messageId`: `Compacting...`, then `\\n\\nCompacting completed.`; a failed `/compact`: `Compacting...` then nothing (0.23.1) or `Error: Error during compaction: <err>` (0.20.0); a cancelled one: `Compacting...`, then `cancelled` (0.20.0 first says `Error: Compaction canceled.`); an automatic one: both texts as the first lines of the next turn. " +
				"The model's own text always begins with an empty chunk, so a reply exactly `Compacting...` comes right after one. `session/load`: from the last compaction on, the continuation message, the `/compact` command and `<local-command-stdout>Compacted </local-command-stdout>`",
			Gets: "one compaction entity per compaction instead of the texts: `completed`; `failed` with the error (0.20.0) or at the turn's end; `cancelled` at the cancelled response; without the capability the texts, settled in their own form if left open, or the `--fallback` form; " +
				"the same texts from the model, right after its empty chunk, stay prose; on `session/load`, the continuation and the command's result as one terminal-first `completed` compaction (capable client)",
			Translators: []Translator{ClaudeText, ClaudeContinuation, ClaudeLocalCommand},
			Quirks:      ProseAfterEmptyChunk,
		},
	)
}

func claudeTextSignal(s State, u *Update, text string) (Signal, bool) {
	if u.Quirks&ProseAfterEmptyChunk != 0 && s.AfterEmptyChunk() {
		return Signal{}, false // the model's reply, which begins with an empty chunk
	}
	// This project's text fallback ends an outcome with a separator too, so
	// that the next message does not run into it.
	outcome := strings.TrimSuffix(text, claudeSeparator)
	switch {
	case strings.HasPrefix(text, claudeLocalFailed):
		return Signal{Kind: Failed, Reason: strings.TrimSpace(strings.TrimPrefix(text, claudeLocalFailed)), Foreign: true}, true
	case text == claudeLocalCanceled:
		return Signal{Kind: Aborted, Foreign: true}, true
	case text == claudeStart:
		return Signal{Kind: Start}, true
	case outcome == claudeCompleted:
		return Signal{Kind: Completed}, true
	case outcome == claudeFailedBare:
		return Signal{Kind: Failed}, true
	case strings.HasPrefix(outcome, claudeFailedPrefix):
		return Signal{Kind: Failed, Reason: strings.TrimSpace(strings.TrimPrefix(outcome, claudeFailedPrefix))}, true
	case outcome == claudeCancelled:
		return Signal{Kind: Aborted}, true
	}
	return Signal{}, false
}

// continuationSignal reads Claude's continuation message, which a replay
// shows in place of the compaction it stands for.
func continuationSignal(_ State, u *Update) (Signal, Verdict) {
	text, ok := textWithPrefix(u.ContentText, continuationIntro, 0)
	if !ok {
		return Signal{}, NotMine
	}
	var m struct {
		MessageID string `json:"messageId"`
	}
	_ = json.Unmarshal(u.Raw, &m)
	sig := Signal{Kind: Continuation, StandIn: true, Summary: continuationSummary(text), Pairs: true}
	if id := m.MessageID; id != "" {
		sig.ID = DerivedID(u.Session, string(ClaudeContinuation), id)
	}
	return sig, Found
}

// continuationSummary is the summary of Claude's continuation message,
// without the framing written for the model: the introduction, the
// instructions that follow the summary, the transcript's path, system
// reminders.
func continuationSummary(text string) []protocol.ContentBlock {
	const marker = "\nSummary:\n"
	i := strings.Index(text, marker)
	if i < 0 {
		return nil
	}
	s := text[i+len(marker):]
	for _, end := range []string{
		"\nIf you need specific details from before compaction",
		"\nPlease continue the conversation",
		"\nContinue the conversation from where it left off",
	} {
		if j := strings.Index(s, end); j >= 0 {
			s = s[:j]
		}
	}
	for {
		a := strings.Index(s, "<system-reminder>")
		if a < 0 {
			break
		}
		b := strings.Index(s[a:], "</system-reminder>")
		if b < 0 {
			s = s[:a]
			break
		}
		s = s[:a] + s[a+b+len("</system-reminder>"):]
	}
	if s = strings.TrimSpace(s); s == "" {
		return nil
	}
	return []protocol.ContentBlock{protocol.Text(s)}
}

// localCommandSignal reads, in a session/load replay, the old Claude
// package's replayed /compact results: its "<local-command-stdout>Compacted
// …" belongs to the continuation message replayed just before it (the
// compaction it stands for, already shown), or, with none, is a completed
// compaction of its own; a "<local-command-stderr>Error: …" says a
// /compact failed or was cancelled. Other commands' results are not its.
// Live, the agent never sends them. Each is a stand-in: a client without
// the capability gets the lines as they came, as it gets the continuation.
func localCommandSignal(s State, u *Update) (Signal, Verdict) {
	text, ok := textWithPrefix(u.ContentText, localCommandHead, MaxSignalBytes)
	if !ok || !s.Replaying() {
		return Signal{}, NotMine
	}
	text = strings.TrimSpace(text)
	if inner, ok := enclosed(text, localStdout, localStdoutEnd); ok {
		if !strings.HasPrefix(stripANSI(inner), localCompacted) {
			return Signal{}, NotMine
		}
		if s.PendingReplay(ClaudeContinuation) {
			return Signal{Kind: Absorb, StandIn: true, Claims: true}, Found
		}
		return Signal{Kind: Done, StandIn: true, Trigger: protocol.Manual}, Found
	}
	inner, ok := enclosed(text, localStderr, localStderrEnd)
	if !ok {
		return Signal{}, NotMine
	}
	inner = strings.TrimSpace(strings.TrimPrefix(stripANSI(inner), "Error: "))
	switch {
	case inner == localCanceled:
		return Signal{Kind: Done, StandIn: true, Status: protocol.Cancelled, Trigger: protocol.Manual}, Found
	case strings.HasPrefix(inner, localDuring), inner == localNotEnough, strings.HasPrefix(inner, localNoMessages):
		return Signal{Kind: Done, StandIn: true, Status: protocol.Failed, Reason: inner, Trigger: protocol.Manual}, Found
	}
	return Signal{}, NotMine
}

// enclosed returns what lies between open and end, when s is exactly that.
func enclosed(s, open, end string) (string, bool) {
	if !strings.HasPrefix(s, open) || !strings.HasSuffix(s, end) || len(s) < len(open)+len(end) {
		return "", false
	}
	return s[len(open) : len(s)-len(end)], true
}

// stripANSI removes the terminal colour sequences (ESC [ … m) Claude Code
// wraps command output in.
func stripANSI(s string) string {
	if !strings.Contains(s, "\x1b[") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < '@' || s[j] > '~') {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
