package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
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

	codexText        = "Context compacted\n"
	codexNoticeText  = "*Context compacted to fit the model's context window.*\n\n"
	codexNoticeTitle = "Context compacted"

	compactToolTitle  = "Compact conversation"
	compactToolName   = "compact"
	toolFailedPrefix  = "Compaction failed: "
	toolFailedBare    = "Compaction failed"
	opencodeMarkerKey = "opencode/compaction"

	// maxSignalBytes bounds the updates inspected for a text signal: every
	// legacy text is short, so a long message chunk is never decoded.
	maxSignalBytes = 4 << 10
)

type sigKind int

const (
	sigStart     sigKind = iota + 1
	sigProgress          // a non-terminal update of a started compaction
	sigDone              // a compaction reported only after the fact
	sigCompleted         // outcomes
	sigFailed
	sigAborted // interrupted: cancelled if the user cancelled, else failed
)

// signal is one recognised legacy signal.
type signal struct {
	kind    sigKind
	id      emitter.ID // "" for forms without an ID (text)
	trigger emitter.Trigger
	reason  string
	// rest is the message to send instead of the suppressed one when it
	// carried more than the signal (nil: nothing is left to send).
	rest []byte
}

// transState is a session's translator state; guarded by conn.emu.
type transState struct {
	open    map[Translator][]emitter.ID // open compactions of ID-less forms, oldest first
	orphans map[Translator]int          // ID-less ones the proxy settled, whose outcome may still come
	pending map[Translator][]emitter.ID // ID-less starts seen in a replay
	ordinal map[Translator]int
	loads   int             // the replay the ordinals count in
	tools   map[string]bool // tool call IDs recognised as compaction tool calls
}

func (c *conn) transFor(sid string) *transState {
	ts, ok := c.trans[sid]
	if !ok {
		ts = &transState{
			open: map[Translator][]emitter.ID{}, orphans: map[Translator]int{},
			pending: map[Translator][]emitter.ID{}, ordinal: map[Translator]int{},
			tools: map[string]bool{},
		}
		c.trans[sid] = ts
	}
	return ts
}

// mint returns the ID of the next ID-less compaction of tr in a session.
// It is derived from the session and the compaction's ordinal rather than
// random, so that a history replay, which recounts from the session's
// start, gives a compaction the same ID it had live and a client does not
// show it twice.
func (ts *transState) mint(sid string, tr Translator) emitter.ID {
	ts.ordinal[tr]++
	sum := sha256.Sum256([]byte(sid + "\x00" + string(tr) + "\x00" + strconv.Itoa(ts.ordinal[tr])))
	return emitter.ID("cmp_" + hex.EncodeToString(sum[:12]))
}

// update handles an agent session/update. Callers hold emu.
func (c *conn) update(ctx context.Context, n int, env *envelope, msg []byte) action {
	sid, raw, kind := env.sessionID, env.update, env.updateKind
	if sid == "" || raw == nil {
		return forward
	}
	switch kind {
	case emitter.KindUpdate, emitter.KindSummaryChunk:
		return c.standard(ctx, n, sid, kind, raw, env)
	case "state_update":
		if c.version() == capability.V2 {
			c.stateUpdate(ctx, sid, raw)
		}
		return forward
	}
	tr, sig, ok := c.recognise(sid, kind, raw, msg, env)
	if !ok {
		return forward
	}
	return c.apply(ctx, n, sid, tr, sig)
}

// stateUpdate ends a v2 turn: every compaction update must precede the
// idle state_update, so the open ones are settled before it is forwarded.
func (c *conn) stateUpdate(ctx context.Context, sid string, raw []byte) {
	if state, _ := stringValue(field(raw, "state")); state != "idle" {
		return
	}
	c.mu.Lock()
	f := c.flagsLocked(sid)
	cancelled := f.cancelled
	c.endTurnLocked(f)
	c.mu.Unlock()
	reason := c.p.cfg.turnReason
	if cancelled {
		reason = emitter.ErrCancelled
	}
	c.settleSession(ctx, sid, reason, "the agent reported the idle state_update")
}

// recognise finds a legacy signal in one update.
func (c *conn) recognise(sid, kind string, raw, msg []byte, env *envelope) (Translator, signal, bool) {
	on := c.p.cfg.translators
	switch kind {
	case "agent_message_chunk":
		if !(on[ClaudeText] || on[CodexText] || on[CodexNotice]) {
			break
		}
		// Every signal text starts with C (Compacting, Context), a \n
		// escape or *; most message chunks are rejected here, undecoded.
		t := env.contentText
		if len(t) < 3 || len(t) > maxSignalBytes || (t[1] != 'C' && t[1] != '\\' && t[1] != '*') {
			break
		}
		if typ, _ := stringValue(env.contentType); typ != "text" {
			break
		}
		text, _ := stringValue(t)
		if on[ClaudeText] {
			switch {
			case text == claudeStart:
				return ClaudeText, signal{kind: sigStart}, true
			case text == claudeCompleted:
				return ClaudeText, signal{kind: sigCompleted}, true
			case text == claudeFailedBare:
				return ClaudeText, signal{kind: sigFailed}, true
			case strings.HasPrefix(text, claudeFailedPrefix):
				return ClaudeText, signal{kind: sigFailed, reason: strings.TrimSpace(strings.TrimPrefix(text, claudeFailedPrefix))}, true
			case text == claudeCancelled:
				return ClaudeText, signal{kind: sigAborted}, true
			}
		}
		if on[CodexText] && text == codexText {
			return CodexText, signal{kind: sigDone}, true
		}
		if on[CodexNotice] && text == codexNoticeText {
			return CodexNotice, signal{kind: sigDone}, true
		}
	case "notice":
		if !on[CodexNotice] || len(raw) > maxSignalBytes {
			break
		}
		var u struct {
			Title string `json:"title"`
		}
		if json.Unmarshal(raw, &u) == nil && strings.TrimSpace(u.Title) == codexNoticeTitle {
			return CodexNotice, signal{kind: sigDone}, true
		}
	case "tool_call", "tool_call_update":
		if on[ToolCall] {
			if sig, ok := c.toolSignal(sid, kind, raw); ok {
				return ToolCall, sig, true
			}
		}
	case "session_info_update":
		if on[OpencodeMarker] {
			if sig, ok := opencodeSignal(raw, msg); ok {
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

func (c *conn) toolSignal(sid, kind string, raw []byte) (signal, bool) {
	v, err := members(raw, "toolCallId", "title", "status", "_meta", "content")
	if err != nil {
		return signal{}, false
	}
	toolID, _ := stringValue(v[0])
	if toolID == "" {
		return signal{}, false
	}
	ts := c.transFor(sid)
	if kind == "tool_call" {
		title, _ := stringValue(v[1])
		name, _ := stringValue(field(field(v[3], "claudeCode"), "toolName"))
		if title == compactToolTitle || name == compactToolName {
			ts.tools[toolID] = true
		}
	}
	if !ts.tools[toolID] {
		return signal{}, false
	}
	sig := signal{id: emitter.ID(toolID)}
	switch status, _ := stringValue(v[2]); status {
	case "completed":
		sig.kind = sigCompleted
	case "failed":
		var content []toolContent
		_ = json.Unmarshal(v[4], &content) // no readable reason is the generic failure
		sig.kind, sig.reason = sigFailed, toolFailure(content)
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

func opencodeSignal(raw, msg []byte) (signal, bool) {
	mraw := field(field(raw, "_meta"), opencodeMarkerKey)
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
	sig := signal{id: emitter.ID(m.MessageID), trigger: emitter.Manual}
	if m.Reason == "auto" {
		sig.trigger = emitter.Auto
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
	c.mu.Lock()
	f := c.flagsLocked(sid)
	replaying, cancelled, loads := f.replaying > 0, f.cancelled, f.loads
	c.mu.Unlock()
	if ts.loads != loads {
		// A new history replay recounts the session's compactions.
		ts.loads = loads
		clear(ts.ordinal)
		clear(ts.pending)
	}
	suppress := func() action {
		if verbatim {
			return forward
		}
		if sig.rest != nil {
			_ = c.writeToClient(sig.rest) // a failed write is sticky and ends the pump
		}
		return drop
	}
	log := c.log.With("session", sid, "translator", string(tr), "side", sideAgent, "line", n)

	id, idless := sig.id, sig.id == ""
	if idless {
		switch sig.kind {
		case sigStart, sigDone:
			id = ts.mint(sid, tr)
		default:
			switch {
			case replaying && len(ts.pending[tr]) > 0:
				id = ts.pending[tr][len(ts.pending[tr])-1]
				ts.pending[tr] = ts.pending[tr][:len(ts.pending[tr])-1]
			case len(ts.open[tr]) > 0:
				id = ts.open[tr][len(ts.open[tr])-1]
			case ts.orphans[tr] > 0:
				ts.orphans[tr]--
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
			c.replay(ctx, sid, id, tr, form, status, reason, sig.trigger)
		}
		return suppress()
	}
	open, settledByProxy := c.router.state(k)
	if settledByProxy {
		log.Info("dropped the agent's update of a compaction the proxy already settled", "compaction", string(id))
		return drop
	}

	switch sig.kind {
	case sigStart:
		if open {
			return suppress() // a repeated start (a re-sent tool call or marker)
		}
		if err := c.open(ctx, k, string(tr), idless, form, verbatim, sig.trigger, false, nil); err != nil {
			log.Warn("compaction not followed", "compaction", string(id), "error", err)
			if verbatim {
				return forward
			}
			return drop
		}
		if idless {
			ts.open[tr] = append(ts.open[tr], id)
		}
		return suppress()
	case sigProgress:
		return suppress()
	case sigDone:
		if verbatim {
			return forward // it already reads as finished; there is nothing to settle
		}
		if err := c.open(ctx, k, string(tr), idless, form, false, sig.trigger, false, nil); err != nil {
			log.Warn("compaction not followed", "compaction", string(id), "error", err)
			return drop
		}
		c.settle(ctx, k, emitter.Completed, "")
		return suppress()
	}
	status, reason := outcome(sig, cancelled)
	if !open {
		if verbatim {
			return forward // the client saw no start, and the line is a complete outcome
		}
		// An outcome without a start: the client still sees a lifecycle,
		// in_progress then the outcome, since a live first update is
		// never terminal.
		if err := c.open(ctx, k, string(tr), idless, form, false, sig.trigger, false, nil); err != nil {
			log.Warn("compaction not followed", "compaction", string(id), "error", err)
			return drop
		}
	}
	c.settle(ctx, k, status, reason)
	if idless {
		ts.open[tr] = slices.DeleteFunc(ts.open[tr], func(x emitter.ID) bool { return x == id })
	}
	return suppress()
}

// outcome maps an outcome signal to a status. Only a user cancel is a
// cancel: an interruption in a turn the client did not cancel is a failure.
func outcome(sig signal, userCancelled bool) (emitter.Status, string) {
	switch sig.kind {
	case sigCompleted:
		return emitter.Completed, ""
	case sigAborted:
		if userCancelled {
			return emitter.Cancelled, ""
		}
		if sig.reason == "" {
			return emitter.Failed, "Compaction interrupted"
		}
	}
	return emitter.Failed, sig.reason
}

// open starts following compaction k in form r. Callers hold emu.
func (c *conn) open(ctx context.Context, k trackKey, source string, idless bool, r emitter.Renderer, verbatim bool, trigger emitter.Trigger, displayable bool, meta emitter.Meta) error {
	c.router.add(k, &track{source: source, idless: idless, r: r, verbatim: verbatim})
	opts := []emitter.StartOption{emitter.WithID(k.id)}
	if trigger != "" {
		opts = append(opts, emitter.WithTrigger(trigger))
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
	return nil
}

// settle applies the agent's own outcome of open compaction k.
func (c *conn) settle(ctx context.Context, k trackKey, status emitter.Status, reason string, opts ...emitter.SettleOption) {
	c.router.markAgent(k)
	s := c.em.Session(k.session)
	var err error
	switch status {
	case emitter.Completed:
		err = s.Complete(ctx, k.id, opts...)
	case emitter.Cancelled:
		err = s.Cancel(ctx, k.id, opts...)
	default:
		err = s.Fail(ctx, k.id, errors.New(reason), opts...)
	}
	if err != nil {
		c.log.Debug("settling failed", "session", k.session, "compaction", string(k.id), "error", err)
	}
}

// replay shows a settled compaction of a history replay: one terminal-first
// update in form r, no start.
func (c *conn) replay(ctx context.Context, sid string, id emitter.ID, tr Translator, r emitter.Renderer, status emitter.Status, reason string, trigger emitter.Trigger) {
	k := trackKey{sid, id}
	defer c.router.addTemp(k, &track{source: string(tr), r: r})()
	rec := emitter.Record{ID: id, Status: status, Error: reason, Trigger: trigger, Displayable: true}
	if err := c.em.Session(sid).Replay(ctx, rec); err != nil {
		c.log.Debug("replay failed", "session", sid, "compaction", string(id), "error", err)
	}
}

// settledByProxy is the router's report of a compaction the proxy settled
// because the agent did not. Callers hold emu.
func (c *conn) settledByProxy(ev emitter.Event, source string, idless bool) {
	errText, _ := ev.Error.Get()
	c.log.Warn("settled a compaction the agent left open",
		"session", ev.SessionID, "compaction", string(ev.ID), "source", source,
		"status", string(ev.Status), "error", errText, "when", c.settleWhy)
	if idless {
		tr := Translator(source)
		ts := c.transFor(ev.SessionID)
		ts.open[tr] = slices.DeleteFunc(ts.open[tr], func(x emitter.ID) bool { return x == ev.ID })
		ts.orphans[tr]++
	}
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
	Type    string               `json:"type"`
	Content emitter.ContentBlock `json:"content"`
}

// Render implements emitter.Renderer.
func (toolCallSynth) Render(ctx context.Context, ev emitter.Event, n emitter.Notifier) error {
	if ev.Kind != emitter.EventSettled {
		return nil
	}
	u := toolCallUpdate{SessionUpdate: "tool_call_update", ToolCallID: string(ev.ID), Status: "completed"}
	if ev.Status != emitter.Completed {
		text := "Compaction cancelled"
		if ev.Status != emitter.Cancelled {
			text = toolFailedBare
			if e, _ := ev.Error.Get(); e != "" && e != toolFailedBare {
				text = toolFailedPrefix + e
			}
		}
		u.Status = "failed"
		u.Content = []toolCallContent{{Type: "content", Content: emitter.Text(text)}}
	}
	return n.Notify(ctx, ev.SessionID, u)
}
