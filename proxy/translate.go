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

	// Qwen Code before 0.24.2: its /compress texts, marked only by
	// _meta.source "slash_command".
	qwenStart         = "Compressing context..."
	qwenStartFast     = "Compressing context (fast)..."
	qwenCompressed    = "Context compressed ("
	qwenReplayJoin    = "  \n" // how a replay joins a command's chunks (newlines are sent as "  \n")
	qwenWarningPrefix = "\u26a0\ufe0f "

	// The old Claude package's replayed /compact results.
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

	// Kimi Code's texts, exactly as it sends them.
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
	// compactCommand is the slash command that runs a manual compaction
	// (Kimi Code, Copilot CLI).
	compactCommand = "compact"

	// Copilot CLI's /compact results.
	copilotCompacted = "Compacted conversation history and removed "
	copilotFailed    = "Failed to run /compact: "

	// maxSignalBytes bounds the updates inspected for a text signal: every
	// legacy text is short, so a long message chunk is never decoded.
	maxSignalBytes = 4 << 10
	// maxReplayChunks bounds the summary chunks of a replayed compaction
	// kept until its terminal update.
	maxReplayChunks = 1 << 20
)

var (
	slashCommandMark = []byte(`"slash_command"`)
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
		{name: QwenText, kinds: []string{"agent_message_chunk"}, update: qwenTextSignal},
		{name: ClaudeLocalCommand, kinds: []string{"user_message_chunk"}, update: localCommandSignal},
		{
			name: Kimi, kinds: []string{"user_message_chunk"}, update: kimiSummarySignal,
			prefixes: []string{kimiManualStart, kimiAutoPrefix, kimiBlocked, kimiCompleted, kimiCancelled}, text: kimiTextSignal,
		},
		{name: Copilot, prefixes: []string{copilotCompacted, copilotFailed}, text: copilotTextSignal},
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
	tl := translation{on: on}
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
	sigContinuation // a replayed message that stands for a compaction (Claude's continuation, Kimi's summary)
	sigNote         // no signal: a provider's error text (quirkErrorText), in reason
	sigAbsorb       // no signal: a replayed line that belongs to one already shown (left out for a capable client)
)

// facts is what the agent reported about a compaction beyond its status.
type facts struct {
	tokensBefore, tokensAfter int64
	durationMs                *int64
	// messages is how many messages the compaction replaced (the record's
	// source.count); 0 when the agent did not say.
	messages int
}

// signal is one recognised legacy signal.
type signal struct {
	kind    sigKind
	id      protocol.ID // "" for forms without an ID (text)
	trigger protocol.Trigger
	reason  string
	// status is the outcome of a compaction reported only after the fact
	// (sigDone): "" is completed, else failed (with reason) or cancelled.
	status protocol.Status
	// background: a start of a compaction that outlives its turn (Kimi
	// Code's /compact): the client sees it once it settled
	// (emitter.Background).
	background bool
	// pairs: a sigContinuation that a command result replayed after it
	// may claim (see claims).
	pairs bool
	// claims: a sigAbsorb that uses up the newest unclaimed replayed
	// continuation of the session (the old Claude package's "Compacted"
	// result, which belongs to the continuation before it).
	claims bool
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

// textWithPrefix decodes raw, a JSON string, when its text begins with
// prefix, spelt as is or with escapes (a Go agent's encoder writes "<" as
// "\u003c"). Only a string that begins so, or with an escape, is decoded;
// one longer than limit (0: any length) is not.
func textWithPrefix(raw []byte, prefix string, limit int) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || (limit > 0 && len(raw) > limit) {
		return "", false
	}
	if raw[1] != '\\' && !bytes.HasPrefix(raw[1:], []byte(prefix[:1])) {
		return "", false
	}
	text, ok := skim.String(raw)
	if !ok || !strings.HasPrefix(text, prefix) {
		return "", false
	}
	return text, true
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
		if h := v.c.held; h != nil && h.sid == r.sid && h.tr == CodexText {
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
	text, ok := textWithPrefix(env.v[aContentText], continuationIntro, 0)
	if !ok {
		return signal{}, notMine
	}
	var u struct {
		MessageID string `json:"messageId"`
	}
	_ = json.Unmarshal(env.v[aUpdate], &u)
	sig := signal{kind: sigContinuation, summary: continuationSummary(text), pairs: true}
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
			Source     string          `json:"source"`
			Transcript *qwenTranscript `json:"qwenTranscript"`
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
	if id, ok := qwenReplayID(r, Qwen, u.Meta.Transcript); ok {
		sig.id, sig.kind = id, sigDone
	}
	return sig, found
}

// qwenTranscript is the transcript record a Qwen Code replay names.
type qwenTranscript struct {
	SourceRecordIDs []string `json:"sourceRecordIds"`
	SegmentID       string   `json:"segmentId"`
}

// qwenReplayID is the ID of a compaction a Qwen Code replay shows: derived
// from the transcript record it names, an ID stable across loads. (The
// live wire names nothing a replay repeats.)
func qwenReplayID(r *reading, tr Translator, t *qwenTranscript) (protocol.ID, bool) {
	if t == nil {
		return "", false
	}
	if replaying, _ := r.turn.replay(); !replaying {
		return "", false
	}
	key := t.SegmentID
	if len(t.SourceRecordIDs) > 0 {
		key = t.SourceRecordIDs[0]
	}
	if key == "" {
		return "", false
	}
	return derivedID(r.sid, string(tr), key), true
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

// qwenTextSignal reads Qwen Code's /compress texts before 0.24.2, which
// carry no _meta.contextCompression: only _meta.source "slash_command"
// marks them (the model's text never carries it). "Compressing
// context..." opens a manual compaction; "Context compressed (N -> ~M)."
// completes it with its token counts (a warning behind it keeps the
// chunk); any other command text while one is open ("No compression
// needed.", in the user's language) completes it too, and stays, since it
// is the only place that says nothing was compressed. A replay joins the
// start and the result in one chunk and names its transcript record.
func qwenTextSignal(v view, r *reading) (signal, verdict) {
	update := r.env.v[aUpdate]
	if !bytes.Contains(update, slashCommandMark) || bytes.Contains(update, compressionMark) ||
		len(r.env.v[aContentText]) > maxSignalBytes || hasMessageID(update) {
		return signal{}, notMine
	}
	var u struct {
		Content struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Meta struct {
			Source     string          `json:"source"`
			Transcript *qwenTranscript `json:"qwenTranscript"`
		} `json:"_meta"`
	}
	if json.Unmarshal(update, &u) != nil || u.Meta.Source != qwenSlashCommand || u.Content.Type != "text" {
		return signal{}, notMine
	}
	text := u.Content.Text
	replayID, replayed := qwenReplayID(r, QwenText, u.Meta.Transcript)
	if replayed {
		rest, ok := strings.CutPrefix(text, qwenStart+qwenReplayJoin)
		if !ok {
			return signal{}, notMine // a replayed start alone: not the record of a compaction
		}
		text = rest
	}
	if text == qwenStart || text == qwenStartFast {
		return signal{kind: sigStart, trigger: protocol.Manual}, found
	}
	ts := v.c.trans[r.sid]
	open := ts != nil && len(ts.open[QwenText]) > 0
	sig := signal{kind: sigCompleted, trigger: protocol.Manual}
	if f, warning, ok := qwenCompression(text); ok {
		sig.facts, sig.keep = f, warning
	} else if !open || replayed {
		return signal{}, notMine
	} else {
		// The noop ("No compression needed.", localised): the request
		// finished, and its text stays.
		sig.keep = true
	}
	if !open {
		sig.kind = sigDone
	}
	if replayed {
		sig.id, sig.kind = replayID, sigDone
	}
	return sig, found
}

// qwenCompression reads "Context compressed (N -> ~M)." and whether a
// warning line follows it.
func qwenCompression(text string) (f *facts, warning, ok bool) {
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
		f = &facts{tokensBefore: b, tokensAfter: a}
	}
	return f, tail != "", true
}

// localCommandSignal reads, in a session/load replay to a capable client,
// the old Claude package's replayed /compact results: its
// "<local-command-stdout>Compacted …" belongs to the continuation message
// replayed just before it (the compaction it stands for, already shown),
// or, with none, is a completed compaction of its own; a
// "<local-command-stderr>Error: …" says a /compact failed or was
// cancelled. Other commands' results are not its. Live, the agent never
// sends them. A client without the capability gets the lines as they
// came, as it gets the continuation.
func localCommandSignal(v view, r *reading) (signal, verdict) {
	if !v.c.capable {
		return signal{}, notMine
	}
	text, ok := textWithPrefix(r.env.v[aContentText], localCommandHead, maxSignalBytes)
	if !ok {
		return signal{}, notMine
	}
	replaying, epoch := r.turn.replay()
	if !replaying {
		return signal{}, notMine
	}
	text = strings.TrimSpace(text)
	if inner, ok := enclosed(text, localStdout, localStdoutEnd); ok {
		if !strings.HasPrefix(stripANSI(inner), localCompacted) {
			return signal{}, notMine
		}
		if ts := v.c.trans[r.sid]; ts != nil {
			if _, ok := ts.pendingTop(ClaudeContinuation, epoch); ok {
				return signal{kind: sigAbsorb, claims: true}, found
			}
		}
		return signal{kind: sigDone, trigger: protocol.Manual}, found
	}
	inner, ok := enclosed(text, localStderr, localStderrEnd)
	if !ok {
		return signal{}, notMine
	}
	inner = strings.TrimSpace(strings.TrimPrefix(stripANSI(inner), "Error: "))
	switch {
	case inner == localCanceled:
		return signal{kind: sigDone, status: protocol.Cancelled, trigger: protocol.Manual}, found
	case strings.HasPrefix(inner, localDuring), inner == localNotEnough, strings.HasPrefix(inner, localNoMessages):
		return signal{kind: sigDone, status: protocol.Failed, reason: inner, trigger: protocol.Manual}, found
	}
	return signal{}, notMine
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

// kimiTextSignal reads Kimi Code's texts (none carries a messageId, nor
// does its model's prose, so each is read only where nothing else can
// have written it):
//   - in a /compact turn, "Context compaction started — it runs in the
//     background…" starts a manual compaction that outlives the turn
//     (Background: the client sees it once it settled); the text stays;
//   - "Compacting conversation context…" (automatic) is held until the
//     next line: Kimi's "Compaction is blocked by the current turn…"
//     confirms it and starts the compaction; anything else lets it go as
//     the prose it then is;
//   - "Compaction completed.\n- Messages compacted: N\n- Tokens before:
//     A\n- Tokens after: B" completes the open one, with its counts;
//     "Compaction cancelled." ends it: cancelled after a user cancel,
//     otherwise failed, since Kimi reports a failure so. With none open
//     they are prose (codex's rule for outcomes).
func kimiTextSignal(v view, r *reading, text string) (signal, bool) {
	switch {
	case text == kimiManualStart:
		if r.turn.command() != compactCommand {
			return signal{}, false
		}
		return signal{kind: sigStart, trigger: protocol.Manual, background: true, keep: true}, true
	case text == kimiAutoStart || strings.HasPrefix(text, kimiAutoWith):
		return signal{kind: sigHold}, true
	case text == kimiBlocked:
		if h := v.c.held; h != nil && h.sid == r.sid && h.tr == Kimi {
			return signal{kind: sigStart, trigger: protocol.Auto, confirms: true}, true
		}
	case text == kimiCancelled:
		return signal{kind: sigAborted, reason: kimiCancelledReason}, true
	case text == kimiCompleted || strings.HasPrefix(text, kimiCompleted+"\n"):
		f, ok := kimiFacts(text[len(kimiCompleted):])
		if !ok {
			return signal{}, false
		}
		return signal{kind: sigCompleted, facts: f}, true
	}
	return signal{}, false
}

// kimiFacts reads the lines after "Compaction completed.": "- Messages
// compacted: N", "- Tokens before: A", "- Tokens after: B" (numbers with
// thousands separators). A line it does not know makes it not Kimi's.
func kimiFacts(rest string) (*facts, bool) {
	var f facts
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
			f.messages = int(n)
		case "- Tokens before":
			f.tokensBefore = n
		case "- Tokens after":
			f.tokensAfter = n
		default:
			return nil, false
		}
	}
	if f == (facts{}) {
		return nil, true
	}
	return &f, true
}

// kimiSummarySignal reads, in a session/load replay, Kimi Code's summary
// message ("The conversation so far has been compacted to free up
// context…"), which stands for the last compaction (Kimi replays no
// other trace of it), and the system reminder that follows it, which a
// capable client does not get either.
func kimiSummarySignal(_ view, r *reading) (signal, verdict) {
	raw := r.env.v[aContentText]
	if text, ok := textWithPrefix(raw, kimiSummary, 0); ok {
		return signal{kind: sigContinuation, summary: kimiSummaryOf(text)}, found
	}
	if text, ok := textWithPrefix(raw, kimiReminder, maxSignalBytes); ok && text == kimiReminder {
		return signal{kind: sigAbsorb}, found
	}
	return signal{}, notMine
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

// copilotTextSignal reads Copilot CLI's /compact results, in a turn whose
// prompt ran /compact (its model's prose carries no messageId either):
// "Compacted conversation history and removed N message(s) and M
// tokens." is a completed compaction reported after the fact; "Failed to
// run /compact: Error: <err>" a failed one, with Copilot's error text,
// except the refusals that say nothing ran ("Nothing to compact."), which
// stay text.
func copilotTextSignal(_ view, r *reading, text string) (signal, bool) {
	if r.turn.command() != compactCommand {
		return signal{}, false
	}
	if rest, ok := strings.CutPrefix(text, copilotCompacted); ok {
		n, ok := copilotRemoved(rest)
		if !ok {
			return signal{}, false
		}
		sig := signal{kind: sigDone, trigger: protocol.Manual}
		if n > 0 {
			sig.facts = &facts{messages: n}
		}
		return sig, true
	}
	rest, ok := strings.CutPrefix(text, copilotFailed)
	if !ok {
		return signal{}, false
	}
	reason := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), "Error: "))
	if reason == "" || copilotRefusal(reason) {
		return signal{}, false
	}
	return signal{kind: sigDone, status: protocol.Failed, reason: reason, trigger: protocol.Manual}, true
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
	return editUpdate(msg, func(upd map[string]json.RawMessage) bool {
		var meta map[string]json.RawMessage
		if json.Unmarshal(upd["_meta"], &meta) != nil {
			return false
		}
		delete(meta, key)
		if len(meta) == 0 {
			delete(upd, "_meta")
		} else {
			upd["_meta"] = marshalRaw(meta)
		}
		return len(upd) > 1
	})
}

// editUpdate returns msg, a session/update, with its params.update as
// edit leaves it; nil when msg cannot be read so, or when edit reports
// that nothing is left to send. Only the objects on the way to the update
// are decoded: every other member keeps its value as it came.
func editUpdate(msg []byte, edit func(upd map[string]json.RawMessage) bool) []byte {
	var top, params, upd map[string]json.RawMessage
	if json.Unmarshal(msg, &top) != nil || json.Unmarshal(top["params"], &params) != nil ||
		json.Unmarshal(params["update"], &upd) != nil || !edit(upd) {
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
	case sigDone:
		switch sig.status {
		case "", protocol.Completed:
			return protocol.Completed, ""
		case protocol.Cancelled:
			return protocol.Cancelled, ""
		}
		return protocol.Failed, sig.reason
	case sigCompleted:
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
