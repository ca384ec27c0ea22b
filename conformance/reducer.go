package conformance

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ItemKind classifies a timeline item.
type ItemKind string

// Item kinds the Reducer gives their own meaning. Any other timeline update
// (tool_call, plan, notice, ...) becomes an item whose kind is its
// sessionUpdate discriminator.
const (
	KindUserMessage  ItemKind = "user_message"
	KindAgentMessage ItemKind = "agent_message"
	KindAgentThought ItemKind = "agent_thought"
	KindCompaction   ItemKind = "compaction"
)

// StatusInProgress is the status a client gives a first-seen compaction ID
// before applying the notification that introduced it.
const StatusInProgress = "in_progress"

// Item is one row of a session timeline as a conforming client holds it.
type Item struct {
	// Kind is one of the Kind constants or, for other timeline updates,
	// their sessionUpdate discriminator.
	Kind ItemKind
	// ID addresses the item: a compaction's compactionId, the messageId of
	// a message that carried one, a generic item's toolCallId, terminalId
	// or planId. It is empty for unaddressed items.
	ID string
	// Text concatenates the text blocks of a message; for a generic item
	// it is the latest title.
	Text string
	// Content holds a message's content blocks in arrival order.
	Content []json.RawMessage
	// Status is a compaction's status, kept verbatim even when unknown, or
	// a generic item's latest status.
	Status string
	// Summary is a compaction's summary; nil when unset or cleared.
	Summary []json.RawMessage
	// Error is a compaction's error; nil when unset or cleared.
	Error *string
	// Meta is a compaction's _meta; nil when unset or cleared.
	Meta map[string]json.RawMessage
	// Raw is the latest update applied to a generic item.
	Raw json.RawMessage
}

// Reducer applies session/update notifications of one connection in
// receive order and keeps each session's timeline, following the RFD's
// client rules. It is the reference the project's client code and tests
// compare against. A Reducer is not safe for concurrent use.
type Reducer struct {
	version  int
	sessions map[string]*timeline
	order    []string
}

type timeline struct {
	items []Item
	// index maps an addressed item's key to its position, which never
	// changes once assigned.
	index map[string]int
	// last is the position of the item the last applied update made or
	// patched; -1 for none (Reducer.Addressed).
	last int
}

// NewReducer returns a Reducer for a connection that negotiated the given
// protocol version. Only versions 1 and 2 are supported; with any other the
// Reducer rejects every update.
func NewReducer(version int) *Reducer {
	return &Reducer{version: version, sessions: map[string]*timeline{}}
}

// Version reports the protocol version the Reducer applies.
func (r *Reducer) Version() int { return r.version }

// isStateUpdate reports updates that describe session state rather than
// timeline content; a client shows them elsewhere, so they neither create
// items nor split coalescing message chunks.
func isStateUpdate(kind string) bool {
	switch kind {
	case "usage_update", "available_commands_update", "current_mode_update",
		"config_option_update", "session_info_update", "state_update":
		return true
	}
	return false
}

// chunkKind maps a content chunk update to the message kind it builds.
func chunkKind(kind string) ItemKind {
	switch kind {
	case "user_message_chunk":
		return KindUserMessage
	case "agent_message_chunk":
		return KindAgentMessage
	case "agent_thought_chunk":
		return KindAgentThought
	}
	return ""
}

// messageKind maps a v2 whole-message update to its message kind.
func messageKind(kind string) ItemKind {
	switch kind {
	case "user_message", "agent_message", "agent_thought":
		return ItemKind(kind)
	}
	return ""
}

// ApplyMessage applies a JSON-RPC message if it is a session/update
// notification and ignores any other message.
func (r *Reducer) ApplyMessage(raw json.RawMessage) error {
	m, ok := decodeObject(raw)
	if !ok {
		return errors.New("conformance: message is not a JSON object")
	}
	if method, _ := m.str("method"); method != "session/update" {
		return nil
	}
	p, ok := m.obj("params")
	if !ok {
		return errors.New("conformance: session/update without params object")
	}
	sid, ok := p.str("sessionId")
	if !ok {
		return errors.New("conformance: session/update without string sessionId")
	}
	return r.Apply(sid, p["update"])
}

// Apply applies one SessionUpdate (the params.update of a session/update)
// to the session's timeline. An update a client must drop (not an object, a
// compaction_update without status, a chunk whose content is not a content
// block) is not applied and yields an error. A malformed optional field is
// read as omitted, as the official SDK does.
func (r *Reducer) Apply(sessionID string, update json.RawMessage) error {
	if r.version != 1 && r.version != 2 {
		return fmt.Errorf("conformance: unsupported protocol version %d", r.version)
	}
	u, ok := decodeObject(update)
	if !ok {
		return errors.New("conformance: update is not a JSON object")
	}
	kind, ok := u.str("sessionUpdate")
	if !ok {
		return errors.New("conformance: update without string sessionUpdate")
	}
	t := r.timeline(sessionID)
	t.last = -1
	n := len(t.items)
	err := r.apply(t, kind, u, update)
	switch {
	case err != nil:
		t.last = -1
	case len(t.items) > n:
		t.last = len(t.items) - 1
	}
	return err
}

func (r *Reducer) apply(t *timeline, kind string, u object, update json.RawMessage) error {
	switch {
	case kind == "compaction_update":
		return r.applyCompactionUpdate(t, u)
	case kind == "compaction_summary_chunk":
		return applySummaryChunk(t, u)
	case chunkKind(kind) != "":
		return applyMessageChunk(t, chunkKind(kind), u)
	case messageKind(kind) != "":
		return applyMessage(t, messageKind(kind), u)
	case isStateUpdate(kind):
		return nil
	default:
		applyGeneric(t, kind, u, update)
		return nil
	}
}

// Addressed returns the position in Timeline(sessionID) of the item the
// session's last applied update made or patched (a chunk without an ID
// joining the message before it patches that one), or -1 when it touched
// none: a state update, a refused one, or no update yet. A client that
// shows each update in place finds its row by it.
func (r *Reducer) Addressed(sessionID string) int {
	if t, ok := r.sessions[sessionID]; ok {
		return t.last
	}
	return -1
}

func (r *Reducer) timeline(sessionID string) *timeline {
	t, ok := r.sessions[sessionID]
	if !ok {
		t = &timeline{index: map[string]int{}, last: -1}
		r.sessions[sessionID] = t
		r.order = append(r.order, sessionID)
	}
	return t
}

// addressed returns the position of the item with key, appending a new
// item made by mk when the key is first seen: the first notification fixes
// the position, later ones patch in place.
func (t *timeline) addressed(key string, mk func() Item) int {
	if i, ok := t.index[key]; ok {
		t.last = i
		return i
	}
	t.items = append(t.items, mk())
	t.index[key] = len(t.items) - 1
	return len(t.items) - 1
}

func compactionKey(id string) string { return "compaction\x00" + id }

func (t *timeline) compaction(id string) *Item {
	i := t.addressed(compactionKey(id), func() Item {
		return Item{Kind: KindCompaction, ID: id, Status: StatusInProgress}
	})
	return &t.items[i]
}

func (r *Reducer) applyCompactionUpdate(t *timeline, u object) error {
	id, ok := u.str("compactionId")
	if !ok {
		return errors.New("conformance: compaction_update without string compactionId")
	}
	status, ok := u.str("status")
	if !ok {
		return fmt.Errorf("conformance: compaction_update %q without string status", id)
	}
	it := t.compaction(id)
	it.Status = status
	if raw, ok := u["summary"]; ok {
		if blocks, ok := contentBlocks(raw); ok {
			// null and [] both clear; nil is the one "unset" form.
			it.Summary = blocks
		}
	}
	if raw, ok := u["error"]; ok {
		var s string
		switch {
		case isNull(raw):
			it.Error = nil
		case json.Unmarshal(raw, &s) == nil:
			it.Error = &s
		}
	}
	if raw, ok := u["_meta"]; ok {
		it.Meta = r.patchMeta(it.Meta, raw)
	}
	return nil
}

// patchMeta applies a compaction_update _meta patch: v1 replaces the whole
// object, v2 merges by top-level key and removes keys set to null. Nested
// objects are values, not merged, in both.
func (r *Reducer) patchMeta(cur map[string]json.RawMessage, raw json.RawMessage) map[string]json.RawMessage {
	if isNull(raw) {
		return nil
	}
	patch, ok := decodeObject(raw)
	if !ok {
		return cur
	}
	if r.version == 1 {
		out := make(map[string]json.RawMessage, len(patch))
		for k, v := range patch {
			out[k] = compact(v)
		}
		return out
	}
	out := make(map[string]json.RawMessage, len(cur)+len(patch))
	for k, v := range cur {
		out[k] = v
	}
	for k, v := range patch {
		if isNull(v) {
			delete(out, k)
		} else {
			out[k] = compact(v)
		}
	}
	return out
}

func applySummaryChunk(t *timeline, u object) error {
	id, ok := u.str("compactionId")
	if !ok {
		return errors.New("conformance: compaction_summary_chunk without string compactionId")
	}
	block, ok := contentBlock(u["content"])
	if !ok {
		return fmt.Errorf("conformance: compaction_summary_chunk %q: content is not a content block", id)
	}
	it := t.compaction(id)
	it.Summary = append(it.Summary, block)
	return nil
}

func messageKey(kind ItemKind, id string) string { return string(kind) + "\x00" + id }

func applyMessageChunk(t *timeline, kind ItemKind, u object) error {
	block, ok := contentBlock(u["content"])
	if !ok {
		return fmt.Errorf("conformance: %s chunk: content is not a content block", kind)
	}
	if id, ok := u.str("messageId"); ok {
		i := t.addressed(messageKey(kind, id), func() Item { return Item{Kind: kind, ID: id} })
		t.items[i].appendBlock(block)
		return nil
	}
	// Unaddressed chunks coalesce only with the item right before them, so
	// a compaction (or any other item) received in between starts a new
	// message: text keeps its side of the boundary.
	if n := len(t.items); n > 0 && t.items[n-1].Kind == kind && t.items[n-1].ID == "" {
		t.items[n-1].appendBlock(block)
		t.last = n - 1
		return nil
	}
	t.items = append(t.items, Item{Kind: kind})
	t.items[len(t.items)-1].appendBlock(block)
	return nil
}

// applyMessage applies a v2 whole-message update, whose content patches the
// message addressed by messageId.
func applyMessage(t *timeline, kind ItemKind, u object) error {
	id, ok := u.str("messageId")
	if !ok {
		return fmt.Errorf("conformance: %s without string messageId", kind)
	}
	it := &t.items[t.addressed(messageKey(kind, id), func() Item { return Item{Kind: kind, ID: id} })]
	if raw, ok := u["content"]; ok {
		if blocks, ok := contentBlocks(raw); ok {
			it.Content, it.Text = nil, ""
			for _, b := range blocks {
				it.appendBlock(b)
			}
		}
	}
	return nil
}

func (it *Item) appendBlock(block json.RawMessage) {
	it.Content = append(it.Content, block)
	b, _ := decodeObject(block)
	if typ, _ := b.str("type"); typ == "text" {
		s, _ := b.str("text")
		it.Text += s
	}
}

func applyGeneric(t *timeline, kind string, u object, raw json.RawMessage) {
	i := -1
	for _, f := range [...]string{"toolCallId", "terminalId", "planId"} {
		if id, ok := u.str(f); ok {
			i = t.addressed(f+"\x00"+id, func() Item { return Item{Kind: ItemKind(kind), ID: id} })
			break
		}
	}
	if i < 0 {
		t.items = append(t.items, Item{Kind: ItemKind(kind)})
		i = len(t.items) - 1
	}
	it := &t.items[i]
	it.Raw = compact(raw)
	if s, ok := u.str("status"); ok {
		it.Status = s
	}
	if s, ok := u.str("title"); ok {
		it.Text = s
	}
}

// contentBlock accepts what a client can hold as a ContentBlock: an object
// with a string type. Full validation is the schema's job.
func contentBlock(raw json.RawMessage) (json.RawMessage, bool) {
	b, ok := decodeObject(raw)
	if !ok {
		return nil, false
	}
	if _, ok := b.str("type"); !ok {
		return nil, false
	}
	return compact(raw), true
}

// contentBlocks reads a nullable ContentBlock array patch. ok is false when
// the value is neither, which a client reads as an omitted field. Invalid
// items are skipped, as the schema's x-deserialize-skip-invalid-items says.
func contentBlocks(raw json.RawMessage) (blocks []json.RawMessage, ok bool) {
	if isNull(raw) {
		return nil, true
	}
	var arr []json.RawMessage
	if json.Unmarshal(raw, &arr) != nil {
		return nil, false
	}
	for _, a := range arr {
		if b, ok := contentBlock(a); ok {
			blocks = append(blocks, b)
		}
	}
	return blocks, true
}

// Sessions returns the IDs of the sessions that received updates, in the
// order they were first seen.
func (r *Reducer) Sessions() []string { return append([]string(nil), r.order...) }

// Len returns the number of items in a session's timeline without copying
// them, so a caller that follows a connection message by message can tell
// which message made a new row.
func (r *Reducer) Len(sessionID string) int {
	if t, ok := r.sessions[sessionID]; ok {
		return len(t.items)
	}
	return 0
}

// Timeline returns a copy of a session's timeline; the caller may modify it.
func (r *Reducer) Timeline(sessionID string) []Item {
	t, ok := r.sessions[sessionID]
	if !ok {
		return nil
	}
	out := make([]Item, len(t.items))
	for i, it := range t.items {
		out[i] = it.clone()
	}
	return out
}

func (it Item) clone() Item {
	c := it
	c.Content = cloneBlocks(it.Content)
	c.Summary = cloneBlocks(it.Summary)
	c.Raw = append(json.RawMessage(nil), it.Raw...)
	if it.Error != nil {
		e := *it.Error
		c.Error = &e
	}
	if it.Meta != nil {
		c.Meta = make(map[string]json.RawMessage, len(it.Meta))
		for k, v := range it.Meta {
			c.Meta[k] = append(json.RawMessage(nil), v...)
		}
	}
	return c
}

func cloneBlocks(in []json.RawMessage) []json.RawMessage {
	if in == nil {
		return nil
	}
	out := make([]json.RawMessage, len(in))
	for i, b := range in {
		out[i] = append(json.RawMessage(nil), b...)
	}
	return out
}

// Render writes a session's timeline as plain text, one row per item, e.g.
//
//	[agent] Let me look.
//	[compaction cmp_1] completed  summary: ## Retained context
//	[tool_call call_1] in_progress  Read file
//
// Newlines inside text are shown as \n so each item stays on one row.
func (r *Reducer) Render(w io.Writer, sessionID string) error {
	bw := bufio.NewWriter(w)
	for _, it := range r.Timeline(sessionID) {
		bw.WriteString(renderItem(it))
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

func renderItem(it Item) string {
	var b strings.Builder
	switch it.Kind {
	case KindUserMessage, KindAgentMessage, KindAgentThought:
		fmt.Fprintf(&b, "[%s] %s", messageLabel(it.Kind), renderBlocks(it.Content))
	case KindCompaction:
		fmt.Fprintf(&b, "[compaction %s] %s", it.ID, it.Status)
		if it.Summary != nil {
			b.WriteString("  summary: " + renderBlocks(it.Summary))
		}
		if it.Error != nil {
			b.WriteString("  error: " + *it.Error)
		}
		if it.Meta != nil {
			// Marshalling a map sorts its keys, so the row is stable.
			m, _ := json.Marshal(it.Meta)
			b.WriteString("  _meta: " + string(m))
		}
	default:
		b.WriteString("[" + string(it.Kind))
		if it.ID != "" {
			b.WriteString(" " + it.ID)
		}
		b.WriteString("]")
		if it.Status != "" {
			b.WriteString(" " + it.Status)
		}
		if it.Text != "" {
			b.WriteString("  " + it.Text)
		}
	}
	return strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(b.String())
}

func messageLabel(k ItemKind) string {
	switch k {
	case KindUserMessage:
		return "user"
	case KindAgentThought:
		return "thought"
	}
	return "agent"
}

func renderBlocks(blocks []json.RawMessage) string {
	var b strings.Builder
	for _, raw := range blocks {
		o, _ := decodeObject(raw)
		typ, _ := o.str("type")
		if typ == "text" {
			s, _ := o.str("text")
			b.WriteString(s)
			continue
		}
		b.WriteString("[" + typ + "]")
	}
	return b.String()
}
