package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/emitter"
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

	continuationIntro = "This session is being continued from a previous conversation"

	// maxSignalBytes bounds the updates inspected for a text signal: every
	// legacy text is short, so a long message chunk is never decoded.
	maxSignalBytes = 4 << 10
	// holdFor bounds how long codex's "Context compacted\n" waits for the
	// warning that confirms it before it is forwarded as prose.
	holdFor = 500 * time.Millisecond
	// rawOutputWait bounds how long a completed compaction tool call
	// waits for the rawOutput update that follows it (quirkRawOutput).
	rawOutputWait = 2 * time.Second
	// maxReplayChunks bounds the summary chunks of a replayed compaction
	// kept until its terminal update.
	maxReplayChunks = 1 << 20
)

var (
	headsUpMark      = []byte(codexHeadsUp)
	continuationMark = []byte(`"` + continuationIntro)
	compressionMark  = []byte(`"contextCompression"`)
	messageIDMark    = []byte(`"messageId"`)
)

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
}

// trSet is a set of translators, one bit each.
type trSet uint16

const (
	bitClaudeText trSet = 1 << iota
	bitToolCall
	bitOpencodeMarker
	bitCodexText
	bitCodexNotice
	bitQwen
	bitClaudeContinuation
)

func trBit(t Translator) trSet {
	switch t {
	case ClaudeText:
		return bitClaudeText
	case ToolCall:
		return bitToolCall
	case OpencodeMarker:
		return bitOpencodeMarker
	case CodexText:
		return bitCodexText
	case CodexNotice:
		return bitCodexNotice
	case Qwen:
		return bitQwen
	case ClaudeContinuation:
		return bitClaudeContinuation
	}
	return 0
}

// has reports whether t is in the set; the hot path tests the bits.
func (s trSet) has(t Translator) bool { return s&trBit(t) != 0 }

// profState is the connection's profile and what the profiles' signals
// need; guarded by conn.emu.
type profState struct {
	prof   *Profile
	on     trSet
	quirks quirk
	// raw is the agent line being handled, with its terminator.
	raw []byte
	// lastError is the error member of the agent message being handled,
	// until effect reads it.
	lastError []byte
	held      *heldLine
	hb        heartbeat
}

// heldLine is codex's "Context compacted\n" waiting for its confirmation.
type heldLine struct {
	sid   string
	n     int
	raw   []byte
	timer *time.Timer
}

// orphan is an ID-less compaction the proxy settled; its agent's outcome
// may still come, until the session's next turn begins.
type orphan struct{ turns int }

// transState is a session's translator state; guarded by conn.emu.
type transState struct {
	open    map[Translator][]protocol.ID // open compactions of ID-less forms, oldest first
	orphans map[Translator][]orphan      // ID-less ones the proxy settled, whose outcome may still come
	pending map[Translator][]protocol.ID // ID-less starts seen in a replay
	// live and replayed count the ID-less compactions of each form, live
	// and in the current replay, for their IDs.
	live, replayed map[Translator]int
	epoch          uint64          // the replay the counts and buffers belong to (turn.Engine.Replaying)
	tools          map[string]bool // tool call IDs recognised as compaction tool calls
	// toolErr is the provider's error text said while a compaction tool
	// call was open (quirkErrorText).
	toolErr string
	// deferred are completed compaction tool calls waiting for their
	// rawOutput (quirkRawOutput).
	deferred map[protocol.ID]*time.Timer
	// turns counts the session's turns that ended.
	turns int
	// chunks are the summary chunks of replayed standard compactions, kept
	// until their terminal update.
	chunks      map[protocol.ID][]json.RawMessage
	chunksBytes int
}

func (c *conn) transFor(sid string) *transState {
	ts, ok := c.trans[sid]
	if !ok {
		ts = &transState{
			open: map[Translator][]protocol.ID{}, orphans: map[Translator][]orphan{},
			pending: map[Translator][]protocol.ID{}, live: map[Translator]int{}, replayed: map[Translator]int{},
			tools: map[string]bool{},
		}
		c.trans[sid] = ts
	}
	return ts
}

// sync starts the session's count again when a new history replay began.
func (ts *transState) sync(replaying bool, epoch uint64) {
	if replaying && ts.epoch != epoch {
		ts.epoch = epoch
		clear(ts.replayed)
		clear(ts.pending)
		ts.chunks, ts.chunksBytes = nil, 0
	}
}

// mint returns the ID of the next ID-less compaction of tr in a session.
// It is derived from the session and the compaction's ordinal rather than
// random, so that a history replay, which recounts from the session's
// start, gives a compaction the same ID it had live and a client does not
// show it twice. Live ordinals continue after both the last live one and
// the last replayed one, so a replay that leaves a compaction out never
// makes a live ID come round again.
func (ts *transState) mint(sid string, tr Translator, replaying bool) protocol.ID {
	var n int
	if replaying {
		ts.replayed[tr]++
		n = ts.replayed[tr]
	} else {
		n = max(ts.live[tr], ts.replayed[tr]) + 1
		ts.live[tr] = n
	}
	return derivedID(sid, string(tr), strconv.Itoa(n))
}

// derivedID is a stable compaction ID made of a session and a key.
func derivedID(sid, kind, key string) protocol.ID {
	sum := sha256.Sum256([]byte(sid + "\x00" + kind + "\x00" + key))
	return protocol.ID("cmp_" + hex.EncodeToString(sum[:12]))
}

// turnEnded notes that a turn of session sid ended. Callers hold emu.
func (c *conn) turnEnded(sid string) {
	if ts, ok := c.trans[sid]; ok {
		ts.turns++
	}
}

// update handles an agent session/update. Callers hold emu.
func (c *conn) update(ctx context.Context, n int, env *envelope, msg []byte) action {
	sid, raw, kind := env.sessionID, env.v[aUpdate], env.kind
	switch kind {
	case protocol.KindUpdate, protocol.KindSummaryChunk:
		if sid == "" {
			// Which session it belongs to is unknown, so it can be neither
			// followed nor rewritten; forwarded, it would pass the gate.
			if !c.capable {
				c.log.Warn("dropped a malformed compaction update: its sessionId is missing or not a string, and the client lacks the capability",
					"side", sideAgent, "line", n)
				return drop
			}
			c.log.Warn("malformed compaction update (its sessionId is missing or not a string); forwarded as is",
				"side", sideAgent, "line", n)
			return forward
		}
		return c.standard(ctx, n, sid, kind, raw, env, msg)
	case "state_update":
		// The engine ends a v2 turn at idle; its settlement preceded this.
		return forward
	}
	if sid == "" || raw == nil || c.ps.on == 0 {
		return forward
	}
	tr, sig, ok := c.recognise(sid, kind, msg, env)
	if !ok {
		return forward
	}
	return c.apply(ctx, n, sid, tr, sig)
}

// recognise finds a legacy signal in one update. A text form is read only
// where the agent's profile (or WithTranslators) says the agent sends it,
// and never in a chunk with a messageId: every text form is ID-less, and
// the agents that tag chunks with one tag their model's prose so.
func (c *conn) recognise(sid, kind string, msg []byte, env *envelope) (Translator, signal, bool) {
	on := c.ps.on
	switch kind {
	case "agent_message_chunk":
		if on&bitQwen != 0 && bytes.Contains(env.v[aUpdate], compressionMark) {
			if hasMessageID(env.v[aUpdate]) {
				break
			}
			if sig, ok := c.qwenSignal(sid, env); ok {
				return Qwen, sig, true
			}
			break
		}
		t := env.v[aContentText]
		if c.ps.quirks&quirkErrorText != 0 && on&bitToolCall != 0 {
			c.noteToolError(sid, t, env.v[aUpdate])
		}
		// Every signal text starts with C (Compacting, Context), I
		// (IMPORTANT), H (Heads up), a \n escape or *; most message chunks
		// are rejected here, undecoded.
		if len(t) < 3 || len(t) > maxSignalBytes {
			break
		}
		switch t[1] {
		case 'C', '\\', '*', 'I', 'H':
		default:
			return "", signal{}, false
		}
		if typ, _ := skim.String(env.v[aContentType]); typ != "text" || hasMessageID(env.v[aUpdate]) {
			break
		}
		text, _ := skim.String(t)
		if on&bitClaudeText != 0 {
			// This project's text fallback ends an outcome with a
			// separator too, so that the next message does not run into it.
			outcome := strings.TrimSuffix(text, claudeSeparator)
			switch {
			case text == claudeStart:
				return ClaudeText, signal{kind: sigStart}, true
			case outcome == claudeCompleted:
				return ClaudeText, signal{kind: sigCompleted}, true
			case outcome == claudeFailedBare:
				return ClaudeText, signal{kind: sigFailed}, true
			case strings.HasPrefix(outcome, claudeFailedPrefix):
				return ClaudeText, signal{kind: sigFailed, reason: strings.TrimSpace(strings.TrimPrefix(outcome, claudeFailedPrefix))}, true
			case outcome == claudeCancelled:
				return ClaudeText, signal{kind: sigAborted}, true
			}
		}
		if on&bitCodexText != 0 {
			switch {
			case text == codexText:
				return CodexText, signal{kind: sigHold}, true
			case strings.HasPrefix(text, codexHeadsUp) && c.ps.held != nil:
				if c.ps.held.sid == sid {
					return CodexText, signal{kind: sigDone, keep: true}, true
				}
				c.releaseHeld()
			}
		}
		if on&bitCodexNotice != 0 && text == codexNoticeText {
			return CodexNotice, signal{kind: sigDone}, true
		}
		if on&bitQwen != 0 {
			if sig, ok := qwenAutoSignal(text); ok {
				return Qwen, sig, true
			}
		}
	case "user_message_chunk":
		if on&bitClaudeContinuation != 0 && bytes.HasPrefix(env.v[aContentText], continuationMark) {
			text, _ := skim.String(env.v[aContentText])
			var u struct {
				MessageID string `json:"messageId"`
			}
			_ = json.Unmarshal(env.v[aUpdate], &u)
			sig := signal{kind: sigContinuation, summary: continuationSummary(text)}
			if id := u.MessageID; id != "" {
				sig.id = derivedID(sid, string(ClaudeContinuation), id)
			}
			return ClaudeContinuation, sig, true
		}
	case "notice":
		if on&bitCodexNotice == 0 || len(env.v[aTitle]) > maxSignalBytes {
			break
		}
		if title, _ := skim.String(env.v[aTitle]); strings.TrimSpace(title) == codexNoticeTitle {
			return CodexNotice, signal{kind: sigDone}, true
		}
	case "tool_call", "tool_call_update":
		if on&bitToolCall != 0 {
			if sig, ok := c.toolSignal(sid, kind, env); ok {
				return ToolCall, sig, true
			}
		}
	case "session_info_update":
		if on&bitOpencodeMarker != 0 {
			if sig, ok := opencodeSignal(env.v[aMarker], msg); ok {
				return OpencodeMarker, sig, true
			}
		}
	}
	return "", signal{}, false
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

func (c *conn) toolSignal(sid, kind string, env *envelope) (signal, bool) {
	v := env.v
	toolID, _ := skim.String(v[aToolCallID])
	if toolID == "" {
		return signal{}, false
	}
	ts := c.transFor(sid)
	if kind == "tool_call" {
		title, _ := skim.String(v[aTitle])
		name, _ := skim.String(v[aToolName])
		if title == compactToolTitle || name == compactToolName {
			ts.tools[toolID] = true
		}
	}
	if !ts.tools[toolID] {
		return signal{}, false
	}
	// A compaction tool call's updates are few: read them whole, for what
	// a rewriting must keep.
	var u struct {
		Meta      json.RawMessage `json:"_meta"`
		RawOutput json.RawMessage `json:"rawOutput"`
		Content   []toolContent   `json:"content"`
	}
	_ = json.Unmarshal(v[aUpdate], &u) // what is unreadable is simply not kept
	sig := signal{id: protocol.ID(toolID), toolMeta: u.Meta}
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
	switch status, _ := skim.String(v[aStatus]); status {
	case "completed":
		sig.kind = sigCompleted
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
		if kind == "tool_call" {
			sig.kind = sigStart
		}
	}
	return sig, true
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

// noteToolError keeps the text of a message chunk said while a compaction
// tool call of the session is open (quirkErrorText): codex-acp's provider
// error, which a failure the proxy settles then carries.
func (c *conn) noteToolError(sid string, raw, update []byte) {
	ts, ok := c.trans[sid]
	if !ok || len(ts.tools) == 0 || len(raw) < 3 || len(raw) > maxSignalBytes || hasMessageID(update) {
		return
	}
	for id := range ts.tools {
		if c.router.status(trackKey{sid, protocol.ID(id)}) == trackOpen {
			text, _ := skim.String(raw)
			if text = strings.TrimSpace(text); text != "" {
				ts.toolErr = text
			}
			return
		}
	}
}

// opencodeSignal reads the marker, mraw (params.update._meta's
// "opencode/compaction"), of message msg.
func opencodeSignal(mraw, msg []byte) (signal, bool) {
	if mraw == nil {
		return signal{}, false
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
		return signal{}, false
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
		return signal{}, false
	}
	sig.rest = withoutMetaKey(msg, opencodeMarkerKey)
	return sig, true
}

// qwenSignal reads Qwen Code's _meta.contextCompression chunk.
func (c *conn) qwenSignal(sid string, env *envelope) (signal, bool) {
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
	if json.Unmarshal(env.v[aUpdate], &u) != nil {
		return signal{}, false
	}
	var sig signal
	if u.Meta.Source == qwenSlashCommand {
		sig.trigger = protocol.Manual
	}
	switch u.Meta.CC.Phase {
	case "progress":
		sig.kind = sigStart
		return sig, true
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
		return signal{}, false
	}
	sig.kind = sigCompleted
	if ts, ok := c.trans[sid]; !ok || len(ts.open[Qwen]) == 0 {
		sig.kind = sigDone
	}
	if t := u.Meta.Transcript; t != nil && c.replaying(sid) {
		// The replay names the transcript record: an ID stable across
		// loads. (The live wire names nothing a replay repeats.)
		key := t.SegmentID
		if len(t.SourceRecordIDs) > 0 {
			key = t.SourceRecordIDs[0]
		}
		if key != "" {
			sig.id, sig.kind = derivedID(sid, string(Qwen), key), sigDone
		}
	}
	return sig, true
}

// qwenAutoSignal reads Qwen Code's note of an automatic compression:
// "IMPORTANT: This conversation approached the input token limit for M.
// A compressed context will be sent for future messages (compressed from:
// N to ~K tokens)." (or "accumulated enough tool screenshots to trigger
// compaction for M"), optionally followed by a warning line.
func qwenAutoSignal(text string) (signal, bool) {
	const (
		head = "IMPORTANT: This conversation "
		mid  = ". A compressed context will be sent for future messages (compressed from: "
		tail = " tokens)."
	)
	if !strings.HasPrefix(text, head) {
		return signal{}, false
	}
	rest := text[len(head):]
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

// legacyForm is how a translated compaction of tr is shown: standard
// updates to a capable client, the configured fallback to one without the
// capability, else the agent's own legacy lines (verbatim), with r
// rendering only a terminal form the proxy must add.
func (c *conn) legacyForm(tr Translator) (r emitter.Renderer, verbatim bool) {
	switch {
	case c.capable:
		return emitter.Standard{}, false
	case c.p.cfg.fallback != nil:
		return c.p.cfg.fallback, false
	}
	if r, ok := c.synth[tr]; ok {
		return r, true
	}
	return emitter.None{}, true
}

// apply carries out one legacy signal. Callers hold emu.
func (c *conn) apply(ctx context.Context, n int, sid string, tr Translator, sig signal) action {
	ts := c.transFor(sid)
	form, verbatim := c.legacyForm(tr)
	replaying, epoch := c.e.Replaying(sid)
	cancelled := c.e.Cancelled(sid)
	ts.sync(replaying, epoch)
	// pass is what becomes of the agent's own line once the signal is
	// carried out.
	pass := func() action {
		if verbatim || sig.keep {
			return forward
		}
		if sig.rest != nil {
			_ = c.writeToClient(sig.rest) // a failed write is sticky and ends the pump
		}
		return drop
	}
	log := c.log.With("session", sid, "translator", string(tr), "side", sideAgent, "line", n)

	switch sig.kind {
	case sigHold:
		if verbatim {
			return forward // it already reads as finished; there is nothing to settle
		}
		c.hold(sid, n)
		return drop
	case sigContinuation:
		if !c.capable || !replaying {
			return forward // a client without the capability gets the agent's lines unchanged
		}
		if sig.id == "" {
			sig.id = ts.mint(sid, tr, true)
		}
		c.replay(ctx, trackKey{sid, sig.id}, tr, emitter.Standard{}, protocol.Completed, "", sig, false)
		log.Info("replayed Claude's continuation message as the completed compaction it stands for", "compaction", string(sig.id))
		return drop
	}
	if tr == CodexText && sig.kind == sigDone && c.ps.held != nil && c.ps.held.sid == sid {
		// Confirmed: the held text was codex's; the warning stays.
		c.dropHeld()
	}

	id, idless := sig.id, sig.id == ""
	if idless {
		switch sig.kind {
		case sigStart, sigDone:
			id = ts.mint(sid, tr, replaying)
		default:
			switch {
			case replaying && len(ts.pending[tr]) > 0:
				id = ts.pending[tr][len(ts.pending[tr])-1]
				ts.pending[tr] = ts.pending[tr][:len(ts.pending[tr])-1]
			case len(ts.open[tr]) > 0:
				id = ts.open[tr][len(ts.open[tr])-1]
			case c.orphaned(sid, ts, tr):
				log.Info("dropped the agent's late outcome of a compaction the proxy already settled")
				return drop
			default:
				return forward // prose that only looks like an outcome: nothing of this kind is open
			}
		}
	}
	k := trackKey{sid, id}
	if replaying {
		if verbatim {
			return forward
		}
		switch sig.kind {
		case sigStart:
			if idless {
				ts.pending[tr] = append(ts.pending[tr], id)
			}
		case sigProgress:
		default:
			// History knows no user cancel; an interrupted compaction
			// is replayed as the cancel opencode itself records.
			status, reason := outcome(sig, true)
			c.replay(ctx, k, tr, form, status, reason, sig, true)
		}
		return pass()
	}
	st := c.router.status(k)
	switch st {
	case trackByProxy:
		log.Info("dropped the agent's update of a compaction the proxy already settled", "compaction", string(id))
		return drop
	case trackByAgent:
		// The agent settled it already: the client holds its one
		// terminal form. A later update (Claude's rawOutput, a repeat)
		// adds nothing.
		if verbatim {
			return forward
		}
		return drop
	}
	open := st == trackOpen
	if !open && sig.kind != sigProgress && c.straggler(sid, id, n, string(tr)) {
		return drop
	}
	t := &track{source: string(tr), idless: idless, r: form, verbatim: verbatim, trigger: sig.trigger, facts: sig.facts}
	if tr == ToolCall {
		t.toolID, t.toolMeta, t.rawOutput = string(id), sig.toolMeta, sig.rawOutput
	}

	switch sig.kind {
	case sigStart:
		if open {
			c.router.learn(k, sig)
			return pass() // a repeated start (a re-sent tool call or marker)
		}
		if err := c.open(ctx, k, t, false, nil); err != nil {
			log.Warn("compaction not followed", "compaction", string(id), "error", err)
			if verbatim {
				return forward
			}
			return drop
		}
		if idless {
			ts.open[tr] = append(ts.open[tr], id)
		}
		return pass()
	case sigProgress:
		if open {
			c.router.learn(k, sig)
			if sig.facts != nil && ts.deferred[id] != nil {
				c.completeDeferred(ctx, k)
			}
		}
		return pass()
	case sigDone:
		if verbatim {
			return forward // it already reads as finished; there is nothing to settle
		}
		t.afterFact = true
		if err := c.open(ctx, k, t, false, nil); err != nil {
			log.Warn("compaction not followed", "compaction", string(id), "error", err)
			return drop
		}
		c.settle(ctx, k, protocol.Completed, "")
		return pass()
	}
	status, reason := outcome(sig, cancelled)
	if !open {
		if verbatim {
			return forward // the client saw no start, and the line is a complete outcome
		}
		// An outcome without a start: the client still sees a lifecycle,
		// in_progress then the outcome, since a live first update is
		// never terminal.
		if err := c.open(ctx, k, t, false, nil); err != nil {
			log.Warn("compaction not followed", "compaction", string(id), "error", err)
			return drop
		}
	} else {
		c.router.learn(k, sig)
	}
	if status == protocol.Completed && tr == ToolCall && c.ps.quirks&quirkRawOutput != 0 && !verbatim && sig.facts == nil && !c.router.hasFacts(k) {
		// Its facts follow in the next tool_call_update: the completion
		// waits for them, briefly, so that the record carries them.
		c.deferComplete(k)
		return pass()
	}
	c.settle(ctx, k, status, reason)
	if idless {
		ts.open[tr] = slices.DeleteFunc(ts.open[tr], func(x protocol.ID) bool { return x == id })
	}
	return pass()
}

// orphaned reports, and uses up, an ID-less compaction of tr the proxy
// settled whose outcome may still come: within the turn it was settled in
// and until the session's next turn begins. A later outcome text is prose.
func (c *conn) orphaned(sid string, ts *transState, tr Translator) bool {
	inTurn := c.e.InTurn(sid)
	os := ts.orphans[tr]
	for len(os) > 0 {
		o := os[len(os)-1]
		os = os[:len(os)-1]
		if !inTurn || o.turns == ts.turns {
			ts.orphans[tr] = os
			return true
		}
	}
	ts.orphans[tr] = os
	return false
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

// open starts following compaction k, shown as t says. Callers hold emu.
func (c *conn) open(ctx context.Context, k trackKey, t *track, displayable bool, meta protocol.Meta) error {
	c.router.add(k, t)
	opts := []emitter.StartOption{emitter.WithID(k.id)}
	if t.trigger != "" {
		opts = append(opts, emitter.WithTrigger(t.trigger))
	}
	if displayable {
		opts = append(opts, emitter.UserDisplayable())
	}
	if meta != nil {
		opts = append(opts, emitter.WithStartMeta(meta))
	}
	_, err := c.em.Session(k.session).Start(ctx, opts...)
	if err != nil && !errors.Is(err, emitter.ErrUndeliverable) {
		c.router.remove(k)
		return err
	}
	// Started in a cancelled turn whose grace ran out, it gets one of its
	// own.
	c.e.Started(k.session)
	c.armHeartbeat()
	return nil
}

// settle applies the agent's own outcome of open compaction k.
func (c *conn) settle(ctx context.Context, k trackKey, status protocol.Status, reason string, opts ...emitter.SettleOption) {
	if c.router.markAgent(k) {
		// The emitter times it, for the record.
		opts = append(opts, emitter.WithDetails(emitter.Details{}))
	}
	c.stopDeferred(k)
	s := c.em.Session(k.session)
	var err error
	switch status {
	case protocol.Completed:
		err = s.Complete(ctx, k.id, opts...)
	case protocol.Cancelled:
		err = s.Cancel(ctx, k.id, opts...)
	default:
		err = s.Fail(ctx, k.id, errors.New(reason), opts...)
	}
	if err != nil {
		c.log.Debug("settling failed", "session", k.session, "compaction", string(k.id), "error", err)
	}
}

// replay shows a settled compaction of a history replay: one terminal-first
// update in form r, no start. displayable says the summary is the agent's
// own (it passes); a summary the proxy derived goes through the summary
// policy.
func (c *conn) replay(ctx context.Context, k trackKey, tr Translator, r emitter.Renderer, status protocol.Status, reason string, sig signal, displayable bool) {
	t := &track{source: string(tr), r: r, trigger: sig.trigger, facts: sig.facts, afterFact: true}
	if tr == ToolCall {
		t.toolID, t.toolMeta, t.rawOutput = string(k.id), sig.toolMeta, sig.rawOutput
	}
	defer c.router.addTemp(k, t)()
	rec := emitter.Record{ID: k.id, Status: status, Error: reason, Trigger: sig.trigger, Displayable: displayable, Summary: sig.summary}
	if err := c.em.Session(k.session).Replay(ctx, rec); err != nil {
		c.log.Debug("replay failed", "session", k.session, "compaction", string(k.id), "error", err)
	}
}

// settledByProxy is the router's report of a compaction the proxy settled
// because the agent did not. Callers hold emu.
func (c *conn) settledByProxy(ev emitter.Event, source string, idless bool) {
	errText, _ := ev.Error.Get()
	c.log.Warn("settled a compaction the agent left open",
		"session", ev.SessionID, "compaction", string(ev.ID), "source", source,
		"status", string(ev.Status), "error", errText, "when", c.settleWhy)
	c.stopDeferred(trackKey{ev.SessionID, ev.ID})
	if idless {
		tr := Translator(source)
		ts := c.transFor(ev.SessionID)
		ts.open[tr] = slices.DeleteFunc(ts.open[tr], func(x protocol.ID) bool { return x == ev.ID })
		ts.orphans[tr] = append(ts.orphans[tr], orphan{turns: ts.turns})
	}
}

// ---- codex's text, held for its confirmation ----

// hold keeps the agent line being handled (codex's "Context compacted\n")
// until the next line says whether it was codex's signal or the model's
// prose. Callers hold emu.
func (c *conn) hold(sid string, n int) {
	c.releaseHeld()
	h := &heldLine{sid: sid, n: n, raw: bytes.Clone(c.ps.raw)}
	h.timer = time.AfterFunc(holdFor, func() {
		c.emu.Lock()
		defer c.emu.Unlock()
		if c.ps.held != h || c.stopped.Load() {
			return
		}
		c.releaseHeld()
		_ = c.out.flush() // a failure is sticky: the agent pump reports it
	})
	c.ps.held = h
}

// releaseHeld forwards a held line as it came: nothing confirmed it.
// Callers hold emu.
func (c *conn) releaseHeld() {
	h := c.ps.held
	if h == nil {
		return
	}
	c.dropHeld()
	if err := c.out.forward(h.raw); err == nil && c.check.clientSide() {
		c.check.observe(conformance.FromAgent, sideAgent, h.n, trimEOL(h.raw))
	}
}

// dropHeld forgets a held line: what it said is replaced.
func (c *conn) dropHeld() {
	if h := c.ps.held; h != nil {
		h.timer.Stop()
		c.ps.held = nil
	}
}

// beforeLine runs before an agent line is handled: a held line is
// released unless this line may confirm it. Callers hold emu.
func (c *conn) beforeLine(line []byte) {
	c.ps.raw = line
	if c.ps.held != nil && !bytes.Contains(line, headsUpMark) {
		c.releaseHeld()
	}
}

// ---- completions waiting for their facts ----

// deferComplete holds back the completion of compaction k until its facts
// arrive, the turn ends, or rawOutputWait passes. Callers hold emu.
func (c *conn) deferComplete(k trackKey) {
	ts := c.transFor(k.session)
	if ts.deferred == nil {
		ts.deferred = map[protocol.ID]*time.Timer{}
	}
	if ts.deferred[k.id] != nil {
		return
	}
	ts.deferred[k.id] = time.AfterFunc(rawOutputWait, func() {
		c.emu.Lock()
		defer c.emu.Unlock()
		if c.stopped.Load() || c.em == nil {
			return
		}
		c.completeDeferred(context.Background(), k)
		_ = c.out.flush()
	})
}

// completeDeferred completes a compaction whose completion waited.
func (c *conn) completeDeferred(ctx context.Context, k trackKey) {
	ts, ok := c.trans[k.session]
	if !ok || ts.deferred[k.id] == nil {
		return
	}
	c.settle(ctx, k, protocol.Completed, "")
}

// stopDeferred forgets a waiting completion.
func (c *conn) stopDeferred(k trackKey) {
	if ts, ok := c.trans[k.session]; ok && ts.deferred[k.id] != nil {
		ts.deferred[k.id].Stop()
		delete(ts.deferred, k.id)
	}
}

// beforeSettle runs before the proxy settles what is open in session sid
// for reason: completions that waited for their facts complete (the agent
// did complete them), a held text is forwarded, and a compaction tool call
// whose provider error the agent told in text fails with it. Callers hold
// emu.
func (c *conn) beforeSettle(ctx context.Context, sid string, reason error) {
	if c.ps.held != nil && c.ps.held.sid == sid {
		c.releaseHeld()
	}
	ts, ok := c.trans[sid]
	if !ok {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(ts.deferred)) {
		c.completeDeferred(ctx, trackKey{sid, id})
	}
	if ts.toolErr != "" && !errors.Is(reason, emitter.ErrCancelled) {
		text := ts.toolErr
		ts.toolErr = ""
		for _, id := range slices.Sorted(maps.Keys(ts.tools)) {
			k := trackKey{sid, protocol.ID(id)}
			if c.router.status(k) != trackOpen {
				continue
			}
			// Not the agent's own settlement (it never sent one): the
			// proxy's, with the agent's words.
			if err := c.em.Session(sid).Fail(ctx, k.id, errors.New(text)); err != nil {
				c.log.Debug("settling failed", "session", sid, "compaction", id, "error", err)
			}
		}
	}
}

// ---- a turn that ends with an error ----

// failedTurn is the reason a failed prompt response gives the compactions
// it leaves open: the error's own text (data.details, data.message or
// message) rather than a generic one. For Qwen Code, an error that says
// its automatic compression failed is that compaction, failed. Callers
// hold emu.
func (c *conn) failedTurn(ctx context.Context, sid string, errMember []byte, reason error) error {
	text := promptErrorText(errMember)
	if text == "" {
		return reason
	}
	if c.ps.on.has(Qwen) && strings.HasPrefix(text, qwenAutoFail) && strings.Contains(text, "FAILED") {
		ts := c.transFor(sid)
		if form, verbatim := c.legacyForm(Qwen); !verbatim && len(ts.open[Qwen]) == 0 {
			k := trackKey{sid, ts.mint(sid, Qwen, false)}
			t := &track{source: string(Qwen), idless: true, r: form, trigger: protocol.Auto, afterFact: true}
			if err := c.open(ctx, k, t, false, nil); err == nil {
				c.settle(ctx, k, protocol.Failed, text)
			}
		}
	}
	return errors.New(text)
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
