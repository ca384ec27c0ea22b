package proxy

// The translators: one table entry per legacy signal, with everything the
// proxy knows of it (its name and bit, where and how it is recognised, the
// terminal form the proxy adds to it), and the recognisers themselves.
// Recognisers read; they change nothing: what a signal means to the
// connection is carried out by act.

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/acpcompact/acpcompact/protocol"
)

// The legacy wire forms, exactly as the peers send them.
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

	codexText        = "Context compacted\n"
	codexNoticeText  = "*Context compacted to fit the model's context window.*\n\n"
	codexNoticeTitle = "Context compacted"
	// codexHeadsUp begins the warning codex sends right after every
	// compaction; it is what tells its "Context compacted\n" from the same
	// text written by the model.
	codexHeadsUp = "Heads up: Long threads and multiple compactions"

	compactToolTitle  = "Compact conversation"
	compactToolName   = "compact"
	toolFailedPrefix  = "Compaction failed: "
	toolFailedBare    = "Compaction failed"
	toolCancelled     = "Compaction cancelled"
	opencodeMarkerKey = "opencode/compaction"

	qwenSlashCommand = "slash_command"
	qwenAutoFail     = "Context is too large to send safely after automatic compression."
	qwenAutoHead     = "IMPORTANT: This conversation "

	continuationIntro = "This session is being continued from a previous conversation"

	// maxSignalBytes bounds the updates inspected for a text signal: every
	// legacy text is short, so a long message chunk is never decoded.
	maxSignalBytes = 4 << 10
	// maxReplayChunks bounds the summary chunks of a replayed compaction
	// kept until its terminal update.
	maxReplayChunks = 1 << 20
)

var (
	continuationMark = []byte(`"` + continuationIntro)
	compressionMark  = []byte(`"contextCompression"`)
	messageIDMark    = []byte(`"messageId"`)
)

// translatorDef is one translator. Adding a translator is adding an entry
// to translatorTable: nothing else dispatches on translator names.
type translatorDef struct {
	name Translator
	// bit is the translator's bit in a trSet: its position in the table.
	bit trSet
	// kinds are the sessionUpdate kinds whose updates update reads.
	kinds []string
	// update recognises the translator's signal in the members of an
	// update of one of kinds.
	update func(v view, r *reading) (signal, verdict)
	// prefixes begin the texts of the translator's agent_message_chunk
	// forms, decoded. text is handed exactly the texts that begin with
	// one of them, and the cheap check that passes a chunk on to the text
	// recognisers at all is derived from them (translation.first), so a
	// form whose prefix is not declared is never recognised, whatever its
	// first letter.
	prefixes []string
	text     func(v view, r *reading, text string) (signal, bool)
	// synth renders the terminal form the proxy adds to the translator's
	// own lines when they are forwarded as they came (a client without the
	// capability, and no fallback configured): nil when it has none.
	synth emitter.Renderer
	// toolCall: the compaction is the agent's own tool call, with the
	// compaction's ID as its tool call ID, which a tool call fallback
	// renders in place of its own (keeping its _meta and rawOutput).
	toolCall bool
	// turnError recognises, in the error text of a failed prompt, the
	// failure of a compaction reported only that way (after the fact);
	// nil when the translator has none.
	turnError func(text string) bool
}

// verdict is what an update recogniser says of an update.
type verdict uint8

const (
	notMine verdict = iota // not this translator's: the others look
	found                  // a signal
	mine                   // this translator's, but not a signal: nobody else looks
	noted                  // not a signal, but a fact act keeps (a sigNote)
)

// translatorTable lists every translator, in the order Translators returns
// them: the order in which they look at an update.
var translatorTable = func() []translatorDef {
	t := []translatorDef{
		{
			name: ClaudeText, prefixes: []string{claudeStart, claudeOutcome},
			text: claudeTextSignal, synth: fallback.Text(),
		},
		{
			name: ToolCall, kinds: []string{"tool_call", "tool_call_update", "agent_message_chunk"},
			update: toolCallSignal, synth: toolCallSynth{}, toolCall: true,
		},
		{
			name: OpencodeMarker, kinds: []string{"session_info_update"},
			update: opencodeSignal, synth: fallback.OpencodeMarker(),
		},
		{name: CodexText, prefixes: []string{codexText, codexHeadsUp}, text: codexTextSignal},
		{
			name: CodexNotice, kinds: []string{"notice"}, update: codexNoticeSignal,
			prefixes: []string{codexNoticeText}, text: codexNoticeTextSignal,
		},
		{
			name: Qwen, kinds: []string{"agent_message_chunk"}, update: qwenSignal,
			prefixes: []string{qwenAutoHead}, text: qwenAutoSignal, turnError: qwenAutoFailed,
		},
		{name: ClaudeContinuation, kinds: []string{"user_message_chunk"}, update: continuationSignal},
	}
	for i := range t {
		t[i].bit = 1 << i
	}
	return t
}()

// translatorOf finds a translator's entry; nil for a name no entry has.
func translatorOf(name Translator) *translatorDef {
	for i := range translatorTable {
		if translatorTable[i].name == name {
			return &translatorTable[i]
		}
	}
	return nil
}

// trSet is a set of translators, one bit each.
type trSet uint32

func trBit(t Translator) trSet {
	if d := translatorOf(t); d != nil {
		return d.bit
	}
	return 0
}

// has reports whether t is in the set.
func (s trSet) has(t Translator) bool { return s&trBit(t) != 0 }

// translation is the connection's translators, as its profile (and
// WithTranslators) chose them, arranged for the hot path.
type translation struct {
	prof   *Profile
	on     trSet
	quirks quirk
	// byKind lists, per sessionUpdate kind, the translators whose update
	// recogniser reads it; text, those with text forms; both in table
	// order. A handful of kinds: a scan costs less than a map's hash.
	byKind []kindReaders
	text   []*translatorDef
	// first marks the bytes a JSON string may begin with (after its
	// quote) when its text begins with a prefix of text's: each prefix's
	// first character as JSON spells it, and a backslash, since any
	// character may be spelt as an escape. Most message chunks are turned
	// away by it undecoded.
	first [256]bool
}

// kindReaders are the translators that read updates of one kind.
type kindReaders struct {
	kind string
	trs  []*translatorDef
}

// readers returns the translators that read updates of kind.
func (tl *translation) readers(kind string) []*translatorDef {
	for i := range tl.byKind {
		if tl.byKind[i].kind == kind {
			return tl.byKind[i].trs
		}
	}
	return nil
}

func newTranslation(p *Profile, on trSet) translation {
	tl := translation{prof: p, on: on}
	if p != nil {
		tl.quirks = p.quirks
	}
	for i := range translatorTable {
		d := &translatorTable[i]
		if on&d.bit == 0 {
			continue
		}
		if d.update != nil {
			for _, k := range d.kinds {
				i := slices.IndexFunc(tl.byKind, func(r kindReaders) bool { return r.kind == k })
				if i < 0 {
					tl.byKind, i = append(tl.byKind, kindReaders{kind: k}), len(tl.byKind)
				}
				tl.byKind[i].trs = append(tl.byKind[i].trs, d)
			}
		}
		if d.text != nil {
			tl.text = append(tl.text, d)
			tl.first['\\'] = true
			for _, p := range d.prefixes {
				if b, _ := json.Marshal(p); len(b) > 2 {
					tl.first[b[1]] = true
				}
			}
		}
	}
	return tl
}

// hasMessageID reports whether an update carries a messageId. It is asked
// only of the few chunks that may be a signal, so the line's one pick does
// not read it for every chunk. Inside a JSON string a quote is escaped, so
// the quoted name matches only a member name (or a value spelt so, which
// only makes the check more careful).
func hasMessageID(update []byte) bool { return bytes.Contains(update, messageIDMark) }

type sigKind int

const (
	sigStart     sigKind = iota + 1
	sigProgress          // a non-terminal update of a started compaction
	sigDone              // a compaction reported only after the fact
	sigCompleted         // outcomes
	sigFailed
	sigAborted      // interrupted: cancelled if the user cancelled, else failed
	sigHold         // codex's text, which the next line confirms or not
	sigContinuation // Claude's continuation message on session/load
	sigNote         // no signal: a provider's error text (quirkErrorText), in reason
)

// facts is what the agent reported about a compaction beyond its status.
type facts struct {
	tokensBefore, tokensAfter int64
	durationMs                *int64
}

// signal is one recognised legacy signal.
type signal struct {
	kind    sigKind
	id      protocol.ID // "" for forms without an ID (text)
	trigger protocol.Trigger
	reason  string
	// rest is the message to send instead of the suppressed one when it
	// carried more than the signal (nil: nothing is left to send).
	rest []byte
	// keep: the agent's line is forwarded as well, after what the proxy
	// writes for it (it says more than the signal).
	keep  bool
	facts *facts
	// toolMeta and rawOutput are the agent's own, kept for a tool call
	// fallback.
	toolMeta, rawOutput json.RawMessage
	summary             []protocol.ContentBlock
	// newTool: the update is a tool call that makes id a compaction tool
	// call, whose later updates are its signals.
	newTool bool
	// confirms: the signal confirms the line held for it (codex's
	// warning after its text).
	confirms bool
	// factsFollow: a completion whose facts the agent sends in its next
	// update (quirkRawOutput): it waits for them, briefly, so that the
	// record carries them.
	factsFollow bool
}

// reading is the update a recogniser reads.
type reading struct {
	sid, kind string
	env       *envelope
	msg       []byte
	turn      *turnView
}

// recognised is what the translators found in an update.
type recognised struct {
	tr  *translatorDef // nil: no signal
	sig signal
	// toolErr is a provider's error text said while a compaction tool
	// call was open (quirkErrorText), for act to keep.
	toolErr string
}

// recognise finds a legacy signal in one update: first in the members the
// translators read by kind, then in a message chunk's text. A text form is
// read only where the agent's profile (or WithTranslators) says the agent
// sends it, and never in a chunk with a messageId: every text form is
// ID-less, and the agents that tag chunks with one tag their model's prose
// so.
func (v view) recognise(r *reading) recognised {
	tl := &v.c.tl
	var out recognised
	for _, d := range tl.readers(r.kind) {
		sig, vd := d.update(v, r)
		switch vd {
		case found:
			return recognised{tr: d, sig: sig}
		case mine:
			return recognised{}
		case noted:
			out.toolErr = sig.reason
		}
	}
	if r.kind != "agent_message_chunk" || len(tl.text) == 0 {
		return out
	}
	t := r.env.v[aContentText]
	if len(t) < 3 || len(t) > maxSignalBytes || !tl.first[t[1]] {
		return out
	}
	if typ, _ := skim.String(r.env.v[aContentType]); typ != "text" || hasMessageID(r.env.v[aUpdate]) {
		return out
	}
	text, _ := skim.String(t)
	for _, d := range tl.text {
		if !hasPrefix(text, d.prefixes) {
			continue
		}
		if sig, ok := d.text(v, r, text); ok {
			out.tr, out.sig = d, sig
			return out
		}
	}
	return out
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// ---- the recognisers ----

func claudeTextSignal(_ view, _ *reading, text string) (signal, bool) {
	// This project's text fallback ends an outcome with a separator too, so
	// that the next message does not run into it.
	outcome := strings.TrimSuffix(text, claudeSeparator)
	switch {
	case text == claudeStart:
		return signal{kind: sigStart}, true
	case outcome == claudeCompleted:
		return signal{kind: sigCompleted}, true
	case outcome == claudeFailedBare:
		return signal{kind: sigFailed}, true
	case strings.HasPrefix(outcome, claudeFailedPrefix):
		return signal{kind: sigFailed, reason: strings.TrimSpace(strings.TrimPrefix(outcome, claudeFailedPrefix))}, true
	case outcome == claudeCancelled:
		return signal{kind: sigAborted}, true
	}
	return signal{}, false
}

// codexTextSignal: codex's "Context compacted\n" is held until the next
// line, which confirms it when it is the warning codex sends after it for
// the same session.
func codexTextSignal(v view, r *reading, text string) (signal, bool) {
	switch {
	case text == codexText:
		return signal{kind: sigHold}, true
	case strings.HasPrefix(text, codexHeadsUp):
		if h := v.c.held; h != nil && h.sid == r.sid {
			return signal{kind: sigDone, keep: true, confirms: true}, true
		}
	}
	return signal{}, false
}

func codexNoticeTextSignal(_ view, _ *reading, text string) (signal, bool) {
	if text == codexNoticeText {
		return signal{kind: sigDone}, true
	}
	return signal{}, false
}

func codexNoticeSignal(_ view, r *reading) (signal, verdict) {
	title := r.env.v[aTitle]
	if len(title) > maxSignalBytes {
		return signal{}, notMine
	}
	if t, _ := skim.String(title); strings.TrimSpace(t) == codexNoticeTitle {
		return signal{kind: sigDone}, found
	}
	return signal{}, notMine
}

func continuationSignal(_ view, r *reading) (signal, verdict) {
	env := r.env
	if !bytes.HasPrefix(env.v[aContentText], continuationMark) {
		return signal{}, notMine
	}
	text, _ := skim.String(env.v[aContentText])
	var u struct {
		MessageID string `json:"messageId"`
	}
	_ = json.Unmarshal(env.v[aUpdate], &u)
	sig := signal{kind: sigContinuation, summary: continuationSummary(text)}
	if id := u.MessageID; id != "" {
		sig.id = derivedID(r.sid, string(ClaudeContinuation), id)
	}
	return sig, found
}

type toolContent struct {
	Type    string `json:"type"`
	Content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// claudeRawOutput is the rawOutput Claude ACP sends with its compaction
// tool call: the facts after completion, the error on failure.
type claudeRawOutput struct {
	Trigger    string `json:"trigger"`
	PreTokens  int64  `json:"preTokens"`
	PostTokens int64  `json:"postTokens"`
	DurationMs *int64 `json:"durationMs"`
}

// toolCallSignal reads the compaction tool call ("Compact conversation")
// and its updates; in a message chunk, the provider's error text said
// while one is open (quirkErrorText).
func toolCallSignal(v view, r *reading) (signal, verdict) {
	if r.kind == "agent_message_chunk" {
		if v.c.tl.quirks&quirkErrorText == 0 {
			return signal{}, notMine
		}
		if text, ok := v.toolErrorText(r.sid, r.env.v[aContentText], r.env.v[aUpdate]); ok {
			return signal{kind: sigNote, reason: text}, noted
		}
		return signal{}, notMine
	}
	vals := r.env.v
	toolID, _ := skim.String(vals[aToolCallID])
	if toolID == "" {
		return signal{}, notMine
	}
	sig := signal{id: protocol.ID(toolID)}
	if r.kind == "tool_call" {
		title, _ := skim.String(vals[aTitle])
		name, _ := skim.String(vals[aToolName])
		sig.newTool = title == compactToolTitle || name == compactToolName
	}
	if !sig.newTool && !v.isTool(r.sid, toolID) {
		return signal{}, notMine
	}
	// A compaction tool call's updates are few: read them whole, for what
	// a rewriting must keep.
	var u struct {
		Meta      json.RawMessage `json:"_meta"`
		RawOutput json.RawMessage `json:"rawOutput"`
		Content   []toolContent   `json:"content"`
	}
	_ = json.Unmarshal(vals[aUpdate], &u) // what is unreadable is simply not kept
	sig.toolMeta = u.Meta
	if len(u.RawOutput) > 0 && !skim.IsNull(u.RawOutput) {
		sig.rawOutput = u.RawOutput
		var ro claudeRawOutput
		if json.Unmarshal(u.RawOutput, &ro) == nil {
			switch ro.Trigger {
			case "manual":
				sig.trigger = protocol.Manual
			case "auto", "automatic":
				sig.trigger = protocol.Auto
			}
			if ro.PreTokens > 0 || ro.PostTokens > 0 || ro.DurationMs != nil {
				sig.facts = &facts{tokensBefore: ro.PreTokens, tokensAfter: ro.PostTokens, durationMs: ro.DurationMs}
			}
		}
	}
	switch status, _ := skim.String(vals[aStatus]); status {
	case "completed":
		sig.kind = sigCompleted
		sig.factsFollow = v.c.tl.quirks&quirkRawOutput != 0
	case "failed":
		sig.kind, sig.reason = sigFailed, toolFailure(u.Content)
		if sig.reason == toolCancelled || sig.reason == toolCancelled+"." {
			// This project's tool call fallback (and an agent built on
			// it) says a cancel so, since ACP tool calls have no
			// cancelled status.
			sig.kind, sig.reason = sigAborted, ""
		}
	default:
		sig.kind = sigProgress
		if r.kind == "tool_call" {
			sig.kind = sigStart
		}
	}
	return sig, found
}

// toolFailure extracts <err> from the peers' "Compaction failed: <err>".
func toolFailure(content []toolContent) string {
	for _, tc := range content {
		if tc.Content.Type != "text" {
			continue
		}
		t := strings.TrimSpace(tc.Content.Text)
		if t == toolFailedBare || t == toolFailedBare+"." {
			return ""
		}
		return strings.TrimSpace(strings.TrimPrefix(t, toolFailedPrefix))
	}
	return ""
}

// opencodeSignal reads the marker, params.update._meta's
// "opencode/compaction".
func opencodeSignal(_ view, r *reading) (signal, verdict) {
	mraw := r.env.v[aMarker]
	if mraw == nil {
		return signal{}, notMine
	}
	var m struct {
		Status    string `json:"status"`
		MessageID string `json:"messageId"`
		Reason    string `json:"reason"`
		Error     *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(mraw, &m) != nil || m.MessageID == "" {
		return signal{}, notMine
	}
	sig := signal{id: protocol.ID(m.MessageID)}
	switch m.Reason {
	case "auto":
		sig.trigger = protocol.Auto
	case "manual":
		sig.trigger = protocol.Manual
	}
	switch m.Status {
	case "started":
		sig.kind = sigStart
	case "completed":
		sig.kind = sigCompleted
	case "failed":
		sig.kind = sigFailed
		if m.Error != nil {
			sig.reason = m.Error.Message
			if m.Error.Type == "aborted" || m.Error.Type == "compaction.interrupted" {
				sig.kind = sigAborted
			}
		}
	default:
		return signal{}, notMine
	}
	sig.rest = withoutMetaKey(r.msg, opencodeMarkerKey)
	return sig, found
}

// qwenSignal reads Qwen Code's _meta.contextCompression chunk. A chunk
// that carries the member is Qwen's whatever it says: no text form is
// looked for in it.
func qwenSignal(v view, r *reading) (signal, verdict) {
	update := r.env.v[aUpdate]
	if !bytes.Contains(update, compressionMark) {
		return signal{}, notMine
	}
	if hasMessageID(update) {
		return signal{}, mine
	}
	var u struct {
		Meta struct {
			CC struct {
				Phase              string `json:"phase"`
				OriginalTokenCount int64  `json:"originalTokenCount"`
				NewTokenCount      int64  `json:"newTokenCount"`
			} `json:"contextCompression"`
			Source     string `json:"source"`
			Transcript *struct {
				SourceRecordIDs []string `json:"sourceRecordIds"`
				SegmentID       string   `json:"segmentId"`
			} `json:"qwenTranscript"`
		} `json:"_meta"`
	}
	if json.Unmarshal(update, &u) != nil {
		return signal{}, mine
	}
	var sig signal
	if u.Meta.Source == qwenSlashCommand {
		sig.trigger = protocol.Manual
	}
	switch u.Meta.CC.Phase {
	case "progress":
		sig.kind = sigStart
		return sig, found
	case "done":
		if b, a := u.Meta.CC.OriginalTokenCount, u.Meta.CC.NewTokenCount; b > 0 || a > 0 {
			sig.facts = &facts{tokensBefore: b, tokensAfter: a}
		}
	case "noop":
		// Nothing needed compressing: the request finished, so the
		// compaction completes, and its text, the only place that says
		// nothing was compressed, stays.
		sig.keep = true
	default:
		return signal{}, mine
	}
	sig.kind = sigCompleted
	if ts := v.c.trans[r.sid]; ts == nil || len(ts.open[Qwen]) == 0 {
		sig.kind = sigDone
	}
	if t := u.Meta.Transcript; t != nil {
		if replaying, _ := r.turn.replay(); replaying {
			// The replay names the transcript record: an ID stable across
			// loads. (The live wire names nothing a replay repeats.)
			key := t.SegmentID
			if len(t.SourceRecordIDs) > 0 {
				key = t.SourceRecordIDs[0]
			}
			if key != "" {
				sig.id, sig.kind = derivedID(r.sid, string(Qwen), key), sigDone
			}
		}
	}
	return sig, found
}

// qwenAutoSignal reads Qwen Code's note of an automatic compression:
// "IMPORTANT: This conversation approached the input token limit for M.
// A compressed context will be sent for future messages (compressed from:
// N to ~K tokens)." (or "accumulated enough tool screenshots to trigger
// compaction for M"), optionally followed by a warning line.
func qwenAutoSignal(_ view, _ *reading, text string) (signal, bool) {
	const (
		mid  = ". A compressed context will be sent for future messages (compressed from: "
		tail = " tokens)."
	)
	if !strings.HasPrefix(text, qwenAutoHead) {
		return signal{}, false
	}
	rest := text[len(qwenAutoHead):]
	if !strings.HasPrefix(rest, "approached the input token limit for ") && !strings.HasPrefix(rest, "accumulated enough tool screenshots to trigger compaction for ") {
		return signal{}, false
	}
	i := strings.Index(rest, mid)
	if i < 0 {
		return signal{}, false
	}
	counts := rest[i+len(mid):]
	j := strings.Index(counts, tail)
	if j < 0 {
		return signal{}, false
	}
	sig := signal{kind: sigDone, trigger: protocol.Auto}
	// A warning after the note is for the user: the chunk stays.
	sig.keep = strings.TrimSpace(counts[j+len(tail):]) != ""
	if from, to, ok := strings.Cut(counts[:j], " to "); ok {
		b, _ := strconv.ParseInt(strings.TrimPrefix(from, "~"), 10, 64)
		a, _ := strconv.ParseInt(strings.TrimPrefix(to, "~"), 10, 64)
		if b > 0 || a > 0 {
			sig.facts = &facts{tokensBefore: b, tokensAfter: a}
		}
	}
	return sig, true
}

// qwenAutoFailed recognises Qwen Code's prompt error about a failed
// automatic compression.
func qwenAutoFailed(text string) bool {
	return strings.HasPrefix(text, qwenAutoFail) && strings.Contains(text, "FAILED")
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

// withoutMetaKey returns msg with key removed from params.update._meta, or
// nil when the update carries nothing else (the peers' marker is an update
// of its own, but the key may ride on a real session_info_update).
func withoutMetaKey(msg []byte, key string) []byte {
	var top, params, upd, meta map[string]json.RawMessage
	if json.Unmarshal(msg, &top) != nil || json.Unmarshal(top["params"], &params) != nil ||
		json.Unmarshal(params["update"], &upd) != nil || json.Unmarshal(upd["_meta"], &meta) != nil {
		return nil
	}
	delete(meta, key)
	if len(meta) == 0 {
		delete(upd, "_meta")
	} else {
		upd["_meta"] = marshalRaw(meta)
	}
	if len(upd) <= 1 {
		return nil
	}
	params["update"] = marshalRaw(upd)
	top["params"] = marshalRaw(params)
	return marshalRaw(top)
}

// marshalRaw encodes a JSON object without HTML escaping, so that a
// rewritten line keeps the agent's text as close to the original as a
// re-encoding can.
func marshalRaw(m map[string]json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(m) // raw values came from json.Unmarshal, so they are valid
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// outcome maps an outcome signal to a status. Only a user cancel is a
// cancel: an interruption in a turn the client did not cancel is a failure.
func outcome(sig signal, userCancelled bool) (protocol.Status, string) {
	switch sig.kind {
	case sigCompleted, sigDone:
		return protocol.Completed, ""
	case sigAborted:
		if userCancelled {
			return protocol.Cancelled, ""
		}
		if sig.reason == "" {
			return protocol.Failed, "Compaction interrupted"
		}
	}
	return protocol.Failed, sig.reason
}

// promptErrorText reads the user-facing text of a JSON-RPC error member.
func promptErrorText(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var e struct {
		Message string `json:"message"`
		Data    struct {
			Details string `json:"details"`
			Message string `json:"message"`
		} `json:"data"`
	}
	if json.Unmarshal(raw, &e) != nil {
		// data may be a string or absent in another shape.
		var e2 struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(raw, &e2)
		return strings.TrimSpace(e2.Message)
	}
	for _, s := range []string{e.Data.Details, e.Data.Message, e.Message} {
		if s = strings.TrimSpace(s); s != "" {
			return s
		}
	}
	return ""
}

// toolCallSynth renders the terminal form the proxy adds to an agent's own
// "Compact conversation" tool call: a tool_call_update of the agent's tool
// call ID (the compaction ID here) to failed, since ACP tool calls have no
// cancelled status.
type toolCallSynth struct{}

type toolCallUpdate struct {
	SessionUpdate string            `json:"sessionUpdate"`
	ToolCallID    string            `json:"toolCallId"`
	Status        string            `json:"status"`
	Content       []toolCallContent `json:"content,omitempty"`
}

type toolCallContent struct {
	Type    string                `json:"type"`
	Content protocol.ContentBlock `json:"content"`
}

// Render implements emitter.Renderer.
func (toolCallSynth) Render(ctx context.Context, ev emitter.Event, n emitter.Notifier) error {
	switch ev.Kind {
	case emitter.EventHeartbeat:
		return n.Notify(ctx, ev.SessionID, toolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: string(ev.ID), Status: "in_progress"})
	case emitter.EventSettled:
	default:
		return nil
	}
	u := toolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: string(ev.ID), Status: "completed"}
	if ev.Status != protocol.Completed {
		text := toolCancelled
		if ev.Status != protocol.Cancelled {
			text = toolFailedBare
			if e, _ := ev.Error.Get(); e != "" && e != toolFailedBare {
				text = toolFailedPrefix + e
			}
		}
		u.Status = "failed"
		u.Content = []toolCallContent{{Type: "content", Content: protocol.Text(text)}}
	}
	return n.Notify(ctx, ev.SessionID, u)
}
