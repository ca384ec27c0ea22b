package agents

import (
	"strconv"
	"strings"

	"github.com/acpcompact/acpcompact/protocol"
)

// Kimi Code (kimi acp): every form is an agent_message_chunk without a
// messageId; its /compact runs in the background past its turn.

// Kimi: Kimi Code's texts: in a /compact turn "Context compaction started
// — it runs in the background…" (a compaction that outlives its turn);
// automatic "Compacting conversation context…" confirmed by "Compaction is
// blocked by the current turn…"; then "Compaction completed.\n- Messages
// compacted: N…" or "Compaction cancelled."; on session/load its summary
// message.
const Kimi Translator = "kimi"

const (
	kimiManualStart = "Context compaction started — it runs in the background and the compacted context applies once it finishes."
	kimiAutoStart   = "Compacting conversation context…"
	kimiAutoWith    = "Compacting conversation context with instruction: "
	kimiAutoPrefix  = "Compacting conversation context"
	kimiBlocked     = "Compaction is blocked by the current turn; retry when the turn is idle."
	kimiCompleted   = "Compaction completed."
	kimiCancelled   = "Compaction cancelled."
	kimiSummary     = "The conversation so far has been compacted to free up context."
	kimiReminder    = "<system-reminder>\nContext compaction is complete — continue the work that was in progress when it began.\n</system-reminder>"
	// kimiCancelledReason is what a "Compaction cancelled." nobody asked
	// for fails with: Kimi Code reports a failed compaction so.
	kimiCancelledReason = "Kimi Code reported the compaction cancelled, but no cancel was asked for: it reports a failed compaction so"
)

func init() {
	register([]Def{{
		Name: Kimi, Kinds: []string{"user_message_chunk"}, Update: kimiSummarySignal,
		Prefixes: []string{kimiManualStart, kimiAutoPrefix, kimiBlocked, kimiCompleted, kimiCancelled}, Text: kimiTextSignal,
	}},
		Profile{
			Name: "kimi-code", Agent: "Kimi Code CLI", Range: "all", Seen: []string{"2.1.0"},
			Sends: "ignores the capability; every form an `agent_message_chunk` without `messageId`. `/compact`: \"Context compaction started — it runs in the background…\", `end_turn`, " +
				"then **after the turn** \"Compaction completed.\\n- Messages compacted: N\\n- Tokens before: A\\n- Tokens after: B\", or, for a failure, \"Compaction cancelled.\" (no error text); a cancel between turns changes nothing. " +
				"Automatic, inside the turn: \"Compacting conversation context…\", \"Compaction is blocked by the current turn; retry when the turn is idle.\", then the outcome (a failed one ends the turn with no reply). " +
				"`session/load`: the user's prompts, the last summary as a user message \"The conversation so far has been compacted…\" and a `<system-reminder>`",
			Gets: "a `/compact` compaction runs in the background: the client sees it once it settled, terminal-first, when the session's next turn begins (or in the turn running then), " +
				"tokens and messages compacted in the record; the started text stays, the only word in its turn that one runs; an automatic one `in_progress`, then its outcome; " +
				"\"Compaction cancelled.\" is `cancelled` only after a user cancel, otherwise `failed` (Kimi Code reports a failure so); " +
				"on `session/load`, the summary as one terminal-first `completed` compaction, its text and the reminder left out (capable client); " +
				"the texts are read only in a `/compact` turn or after Kimi's own start, so the same text from the model stays prose",
			Translators: []Translator{Kimi},
		})
}

// kimiTextSignal reads Kimi Code's texts (none carries a messageId, nor
// does its model's prose, so each is read only where nothing else can
// have written it):
//   - in a /compact turn, "Context compaction started — it runs in the
//     background…" starts a manual compaction that outlives the turn
//     (Background: the client sees it once it settled); the text stays;
//   - "Compacting conversation context…" (automatic) waits for the
//     next line: Kimi's "Compaction is blocked by the current turn…"
//     confirms it and starts the compaction; anything else lets it go as
//     the prose it then is;
//   - "Compaction completed.\n- Messages compacted: N\n- Tokens before:
//     A\n- Tokens after: B" completes the open one, with its counts;
//     "Compaction cancelled." ends it: cancelled after a user cancel,
//     otherwise failed, since Kimi reports a failure so. With none open
//     they are prose (codex's rule for outcomes).
func kimiTextSignal(s State, _ *Update, text string) (Signal, bool) {
	switch {
	case text == kimiManualStart:
		if s.Command() != compactCommand {
			return Signal{}, false
		}
		return Signal{Kind: Start, Trigger: protocol.Manual, Background: true, Keep: true}, true
	case text == kimiAutoStart || strings.HasPrefix(text, kimiAutoWith):
		return Signal{Kind: Await}, true
	case text == kimiBlocked:
		if s.Awaiting() == Kimi {
			return Signal{Kind: Start, Trigger: protocol.Auto, Confirms: true}, true
		}
	case text == kimiCancelled:
		return Signal{Kind: Aborted, Reason: kimiCancelledReason}, true
	case text == kimiCompleted || strings.HasPrefix(text, kimiCompleted+"\n"):
		f, ok := kimiFacts(text[len(kimiCompleted):])
		if !ok {
			return Signal{}, false
		}
		return Signal{Kind: Completed, Facts: f}, true
	}
	return Signal{}, false
}

// kimiFacts reads the lines after "Compaction completed.": "- Messages
// compacted: N", "- Tokens before: A", "- Tokens after: B" (numbers with
// thousands separators). A line it does not know makes it not Kimi's.
func kimiFacts(rest string) (*Facts, bool) {
	var f Facts
	for _, l := range strings.Split(strings.TrimPrefix(rest, "\n"), "\n") {
		if l == "" {
			continue
		}
		key, val, ok := strings.Cut(l, ": ")
		if !ok {
			return nil, false
		}
		n, err := strconv.ParseInt(strings.ReplaceAll(val, ",", ""), 10, 64)
		if err != nil {
			return nil, false
		}
		switch key {
		case "- Messages compacted":
			f.Messages = int(n)
		case "- Tokens before":
			f.TokensBefore = n
		case "- Tokens after":
			f.TokensAfter = n
		default:
			return nil, false
		}
	}
	if f == (Facts{}) {
		return nil, true
	}
	return &f, true
}

// kimiSummarySignal reads, in a session/load replay, Kimi Code's summary
// message ("The conversation so far has been compacted to free up
// context…"), which stands for the last compaction (Kimi replays no
// other trace of it), and the system reminder that follows it, which a
// capable client does not get either.
func kimiSummarySignal(_ State, u *Update) (Signal, Verdict) {
	if text, ok := textWithPrefix(u.ContentText, kimiSummary, 0); ok {
		return Signal{Kind: Continuation, StandIn: true, Summary: kimiSummaryOf(text)}, Found
	}
	if text, ok := textWithPrefix(u.ContentText, kimiReminder, MaxSignalBytes); ok && text == kimiReminder {
		return Signal{Kind: Absorb, StandIn: true}, Found
	}
	return Signal{}, NotMine
}

// kimiSummaryOf is the summary in Kimi's summary message: what follows
// its introduction, up to the "## Context Recovery" note written for the
// model.
func kimiSummaryOf(text string) []protocol.ContentBlock {
	_, s, ok := strings.Cut(text, "\n")
	if !ok {
		return nil
	}
	if i := strings.Index(s, "\n## Context Recovery\n"); i >= 0 {
		s = s[:i]
	}
	if s = strings.TrimSpace(s); s == "" {
		return nil
	}
	return []protocol.ContentBlock{protocol.Text(s)}
}
