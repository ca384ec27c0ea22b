package agents

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/acpcompact/acpcompact/protocol"
)

// Qwen Code (--acp): its /compress texts, marked by _meta (from 0.24.2 a
// _meta.contextCompression phase; before, only _meta.source
// "slash_command"), its automatic compression's note after the fact, and
// the prompt error of a failed automatic one.

// The translators of this file.
const (
	// Qwen: Qwen Code's agent_message_chunks whose
	// _meta.contextCompression.phase is "progress", "done" or "noop", its
	// automatic "IMPORTANT: This conversation approached the input token
	// limit…" text, and a prompt error about a failed automatic
	// compression.
	Qwen Translator = "qwen"
	// QwenText: Qwen Code's /compress texts before 0.24.2, marked only by
	// _meta.source "slash_command": "Compressing context...", then
	// "Context compressed (N -> ~M)." (or, for /compress-fast, "No
	// compression needed."), and their replay as one chunk.
	QwenText Translator = "qwen-text"
)

const (
	qwenSlashCommand = "slash_command"
	qwenAutoFail     = "Context is too large to send safely after automatic compression."
	qwenAutoHead     = "IMPORTANT: This conversation "

	qwenStart         = "Compressing context..."
	qwenStartFast     = "Compressing context (fast)..."
	qwenCompressed    = "Context compressed ("
	qwenReplayJoin    = "  \n" // how a replay joins a command's chunks (newlines are sent as "  \n")
	qwenWarningPrefix = "\u26a0\ufe0f "

	agentQwen = "qwen-code"
)

var (
	slashCommandMark = []byte(`"slash_command"`)
	compressionMark  = []byte(`"contextCompression"`)
)

func init() {
	register([]Def{
		{
			Name: Qwen, Kinds: []string{"agent_message_chunk"}, Update: qwenSignal,
			Prefixes: []string{qwenAutoHead}, Text: qwenAutoSignal, TurnError: qwenAutoFailed,
		},
		{Name: QwenText, Kinds: []string{"agent_message_chunk"}, Update: qwenTextSignal},
	},
		Profile{
			Name: "qwen-code-0.24.0", Agent: agentQwen, Range: "< 0.24.2", Seen: []string{"0.23.4", "0.24.0"},
			Sends: "ignores the capability; `/compress`: `agent_message_chunk` `Compressing context...`, then `Context compressed (N -> ~M).`, marked only by `_meta.source: \"slash_command\"` (no `_meta.contextCompression`); " +
				"on failure no closing update, a prompt error with `data.details`; a cancel is ignored; automatic: \"IMPORTANT: This conversation approached the input token limit…\" after the fact; " +
				"`session/load` replays a completed `/compress` as one chunk `Compressing context...  \\nContext compressed (N -> ~M).` with `_meta.qwenTranscript`",
			Gets: "as 0.24.2: one compaction entity per compression, its token counts in the record; `failed` with the error's details (a failed automatic one too); " +
				"replayed terminal-first with an ID stable across loads; the model's prose, which never carries `_meta.source`, stays prose",
			Translators: []Translator{QwenText, Qwen},
		},
		Profile{
			Name: "qwen-code", Agent: agentQwen, Range: ">= 0.24.2", Seen: []string{"0.24.2", "0.24.4"},
			Sends: "ignores the capability; `/compress`: `agent_message_chunk` `Compressing context...` with `_meta.contextCompression.phase` `progress`, then `done` (token counts) or `noop`; " +
				"on failure no closing update, a prompt error with `data.details`; automatic: \"IMPORTANT: This conversation approached the input token limit…\" after the fact; " +
				"`session/load` replays completed manual ones (`done` with `_meta.qwenTranscript`)",
			Gets:        "one compaction entity per compression, its token counts in the record; `failed` with the error's details (a failed automatic one too); replayed terminal-first with an ID stable across loads",
			Translators: []Translator{Qwen},
		},
	)
}

// qwenSignal reads Qwen Code's _meta.contextCompression chunk. A chunk
// that carries the member is Qwen's whatever it says: no text form is
// looked for in it.
func qwenSignal(s State, u *Update) (Signal, Verdict) {
	if !bytes.Contains(u.Raw, compressionMark) {
		return Signal{}, NotMine
	}
	if HasMessageID(u.Raw) {
		return Signal{}, Mine
	}
	var m struct {
		Meta struct {
			CC struct {
				Phase              string `json:"phase"`
				OriginalTokenCount int64  `json:"originalTokenCount"`
				NewTokenCount      int64  `json:"newTokenCount"`
				Warning            string `json:"warning"`
			} `json:"contextCompression"`
			Source     string          `json:"source"`
			Transcript *qwenTranscript `json:"qwenTranscript"`
		} `json:"_meta"`
	}
	if json.Unmarshal(u.Raw, &m) != nil {
		return Signal{}, Mine
	}
	var sig Signal
	if m.Meta.Source == qwenSlashCommand {
		sig.Trigger = protocol.Manual
	}
	switch m.Meta.CC.Phase {
	case "progress":
		sig.Kind = Start
		return sig, Found
	case "done":
		if b, a := m.Meta.CC.OriginalTokenCount, m.Meta.CC.NewTokenCount; b > 0 || a > 0 {
			sig.Facts = &Facts{TokensBefore: b, TokensAfter: a}
		}
		// A warning (0.24.4: the compaction model's window was too small)
		// is for the user: the chunk, which says it, stays.
		sig.Keep = m.Meta.CC.Warning != ""
	case "noop":
		// Nothing needed compressing: the request finished, so the
		// compaction completes, and its text, the only place that says
		// nothing was compressed, stays.
		sig.Keep = true
	default:
		return Signal{}, Mine
	}
	sig.Kind = Completed
	if s.Open(Qwen) == 0 {
		sig.Kind = Done
	}
	if id, ok := qwenReplayID(s, u, Qwen, m.Meta.Transcript); ok {
		sig.ID, sig.Kind = id, Done
	}
	return sig, Found
}

// qwenTranscript is the transcript record a Qwen Code replay names.
type qwenTranscript struct {
	SourceRecordIDs []string `json:"sourceRecordIds"`
	SegmentID       string   `json:"segmentId"`
}

// qwenReplayID is the ID of a compaction a Qwen Code replay shows: derived
// from the transcript record it names, an ID stable across loads. (The
// live wire names nothing a replay repeats.)
func qwenReplayID(s State, u *Update, tr Translator, t *qwenTranscript) (protocol.ID, bool) {
	if t == nil || !s.Replaying() {
		return "", false
	}
	key := t.SegmentID
	if len(t.SourceRecordIDs) > 0 {
		key = t.SourceRecordIDs[0]
	}
	if key == "" {
		return "", false
	}
	return DerivedID(u.Session, string(tr), key), true
}

// qwenAutoSignal reads Qwen Code's note of an automatic compression:
// "IMPORTANT: This conversation approached the input token limit for M.
// A compressed context will be sent for future messages (compressed from:
// N to ~K tokens)." (or "accumulated enough tool screenshots to trigger
// compaction for M"), optionally followed by a warning line.
func qwenAutoSignal(_ State, _ *Update, text string) (Signal, bool) {
	const (
		mid  = ". A compressed context will be sent for future messages (compressed from: "
		tail = " tokens)."
	)
	if !strings.HasPrefix(text, qwenAutoHead) {
		return Signal{}, false
	}
	rest := text[len(qwenAutoHead):]
	if !strings.HasPrefix(rest, "approached the input token limit for ") && !strings.HasPrefix(rest, "accumulated enough tool screenshots to trigger compaction for ") {
		return Signal{}, false
	}
	i := strings.Index(rest, mid)
	if i < 0 {
		return Signal{}, false
	}
	counts := rest[i+len(mid):]
	j := strings.Index(counts, tail)
	if j < 0 {
		return Signal{}, false
	}
	sig := Signal{Kind: Done, Trigger: protocol.Auto}
	// A warning after the note is for the user: the chunk stays.
	sig.Keep = strings.TrimSpace(counts[j+len(tail):]) != ""
	if from, to, ok := strings.Cut(counts[:j], " to "); ok {
		b, _ := strconv.ParseInt(strings.TrimPrefix(from, "~"), 10, 64)
		a, _ := strconv.ParseInt(strings.TrimPrefix(to, "~"), 10, 64)
		if b > 0 || a > 0 {
			sig.Facts = &Facts{TokensBefore: b, TokensAfter: a}
		}
	}
	return sig, true
}

// qwenAutoFailed recognises Qwen Code's prompt error about a failed
// automatic compression.
func qwenAutoFailed(text string) (protocol.Trigger, bool) {
	return protocol.Auto, strings.HasPrefix(text, qwenAutoFail) && strings.Contains(text, "FAILED")
}

// qwenTextSignal reads Qwen Code's /compress texts before 0.24.2, which
// carry no _meta.contextCompression: only _meta.source "slash_command"
// marks them (the model's text never carries it). "Compressing
// context..." opens a manual compaction; "Context compressed (N -> ~M)."
// completes it with its token counts (a warning behind it keeps the
// chunk); any other command text while one is open ("No compression
// needed.", in the user's language) completes it too, and stays, since it
// is the only place that says nothing was compressed. A replay joins the
// start and the result in one chunk and names its transcript record.
func qwenTextSignal(s State, u *Update) (Signal, Verdict) {
	if !bytes.Contains(u.Raw, slashCommandMark) || bytes.Contains(u.Raw, compressionMark) ||
		len(u.ContentText) > MaxSignalBytes || HasMessageID(u.Raw) {
		return Signal{}, NotMine
	}
	var m struct {
		Content struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Meta struct {
			Source     string          `json:"source"`
			Transcript *qwenTranscript `json:"qwenTranscript"`
		} `json:"_meta"`
	}
	if json.Unmarshal(u.Raw, &m) != nil || m.Meta.Source != qwenSlashCommand || m.Content.Type != "text" {
		return Signal{}, NotMine
	}
	text := m.Content.Text
	replayID, replayed := qwenReplayID(s, u, QwenText, m.Meta.Transcript)
	if replayed {
		rest, ok := strings.CutPrefix(text, qwenStart+qwenReplayJoin)
		if !ok {
			return Signal{}, NotMine // a replayed start alone: not the record of a compaction
		}
		text = rest
	}
	if text == qwenStart || text == qwenStartFast {
		return Signal{Kind: Start, Trigger: protocol.Manual}, Found
	}
	open := s.Open(QwenText) > 0
	sig := Signal{Kind: Completed, Trigger: protocol.Manual}
	if f, warning, ok := qwenCompression(text); ok {
		sig.Facts, sig.Keep = f, warning
	} else if !open || replayed {
		return Signal{}, NotMine
	} else {
		// The noop ("No compression needed.", localised): the request
		// finished, and its text stays.
		sig.Keep = true
	}
	if !open {
		sig.Kind = Done
	}
	if replayed {
		sig.ID, sig.Kind = replayID, Done
	}
	return sig, Found
}

// qwenCompression reads "Context compressed (N -> ~M)." and whether a
// warning line follows it.
func qwenCompression(text string) (f *Facts, warning, ok bool) {
	rest, ok := strings.CutPrefix(text, qwenCompressed)
	if !ok {
		return nil, false, false
	}
	counts, tail, ok := strings.Cut(rest, ").")
	if !ok {
		return nil, false, false
	}
	from, to, ok := strings.Cut(counts, " -> ")
	if !ok {
		return nil, false, false
	}
	b, berr := strconv.ParseInt(strings.TrimPrefix(from, "~"), 10, 64)
	a, aerr := strconv.ParseInt(strings.TrimPrefix(to, "~"), 10, 64)
	if berr != nil || aerr != nil {
		return nil, false, false
	}
	if tail = strings.TrimSpace(tail); tail != "" && !strings.HasPrefix(tail, qwenWarningPrefix) {
		return nil, false, false
	}
	if b > 0 || a > 0 {
		f = &Facts{TokensBefore: b, TokensAfter: a}
	}
	return f, tail != "", true
}
