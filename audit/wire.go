package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/acpcompact/acpcompact/protocol"
)

// Side says which peer sent a message a Follower observes.
type Side int

// The two sides of an ACP connection.
const (
	FromClient Side = iota + 1
	FromAgent
)

// Report is the audit of one compaction that carried a summary.
type Report struct {
	// SessionID is the session the compaction belongs to.
	SessionID string `json:"sessionId"`
	// CompactionID is the compaction's ID; empty for a continuation
	// message, which names none.
	CompactionID string `json:"compactionId"`
	// Form says how the summary arrived: "compaction_update" (its summary
	// field, or its summary chunks) or "continuation" (a user message
	// beginning with one of ContinuationPrefixes).
	Form string `json:"form"`
	// Where is where the summary was complete (the observe call's where).
	Where string `json:"where"`
	// HistoryItems is the number of history items audited.
	HistoryItems int `json:"historyItems"`
	// KnownLoss is what the summary lost; never nil.
	KnownLoss []Loss `json:"knownLoss"`
}

// Follower rebuilds each session's history from the messages of one ACP
// connection, as a client holds it (prompts, agent messages, tool calls,
// compactions), and audits every compaction that carries a summary. The
// history a compaction replaced is what came before the prompt of the turn
// it runs in (the prompt it serves is kept by the agents observed), or
// everything before it outside a turn; after it, the summary stands for
// that history. A Follower is safe for concurrent use: a host feeds it
// from its two reading goroutines while its emitter calls Audit.
type Follower struct {
	mu       sync.Mutex
	opts     []Option
	sessions map[string]*followed
	prompts  map[string]string // request id key (skim.IDKey, as the engine pairs them) -> session ID
}

type followed struct {
	a      *Auditor
	inTurn bool
	mark   Mark
	items  int // history items added
	atMark int
	// the message being coalesced from chunks
	msgRole  Role
	msgID    string
	msgWhere string
	msg      strings.Builder
	comps    map[string]*followedCompaction
	compTool map[string]bool
}

type followedCompaction struct {
	summary  strings.Builder
	audited  bool
	terminal bool
}

// NewFollower returns a Follower whose Auditors take opts.
func NewFollower(opts ...Option) *Follower {
	return &Follower{opts: opts, sessions: map[string]*followed{}, prompts: map[string]string{}}
}

func (f *Follower) session(id string) *followed {
	s, ok := f.sessions[id]
	if !ok {
		s = &followed{a: NewAuditor(f.opts...), comps: map[string]*followedCompaction{}, compTool: map[string]bool{}}
		f.sessions[id] = s
	}
	return s
}

// wireMsg is the part of a JSON-RPC message the Follower reads.
type wireMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// Observe reads one message of the connection, in wire order; where names
// its place ("line 12") for the reports. It returns the reports of the
// compactions whose summary this message completed. A message it cannot
// read is skipped.
func (f *Follower) Observe(side Side, where string, raw []byte) []Report {
	var m wireMsg
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case side == FromClient && m.Method == "session/prompt" && len(m.ID) > 0:
		var p struct {
			SessionID string            `json:"sessionId"`
			Prompt    []json.RawMessage `json:"prompt"`
		}
		if json.Unmarshal(m.Params, &p) != nil || p.SessionID == "" {
			return nil
		}
		s := f.session(p.SessionID)
		reports := s.flush(p.SessionID)
		s.inTurn, s.mark, s.atMark = true, s.a.Mark(), s.items
		f.prompts[skim.IDKey(m.ID)] = p.SessionID
		s.add(Item{Role: User, Text: blocksText(p.Prompt), Where: where})
		return reports
	case side == FromAgent && m.Method == "" && len(m.ID) > 0:
		sid, ok := f.prompts[skim.IDKey(m.ID)]
		if !ok {
			// Another response (session/load's, say) ends the messages
			// replayed before it.
			return f.closeLocked()
		}
		delete(f.prompts, skim.IDKey(m.ID))
		s := f.session(sid)
		reports := s.flush(sid)
		s.a.EndTurn()
		s.inTurn = false
		return reports
	case side == FromAgent && m.Method == "session/update":
		var p struct {
			SessionID string          `json:"sessionId"`
			Update    json.RawMessage `json:"update"`
		}
		if json.Unmarshal(m.Params, &p) != nil || p.SessionID == "" {
			return nil
		}
		return f.session(p.SessionID).update(p.SessionID, where, p.Update)
	}
	return nil
}

type wireUpdate struct {
	Kind         string            `json:"sessionUpdate"`
	Content      json.RawMessage   `json:"content"`
	MessageID    string            `json:"messageId"`
	CompactionID string            `json:"compactionId"`
	Status       string            `json:"status"`
	Summary      json.RawMessage   `json:"summary"`
	ToolCallID   string            `json:"toolCallId"`
	Title        string            `json:"title"`
	Kind2        string            `json:"kind"`
	Locations    []json.RawMessage `json:"locations"`
	RawInput     json.RawMessage   `json:"rawInput"`
	Meta         struct {
		ClaudeCode struct {
			ToolName string `json:"toolName"`
		} `json:"claudeCode"`
	} `json:"_meta"`
}

func (s *followed) update(sid, where string, raw json.RawMessage) []Report {
	var u wireUpdate
	if json.Unmarshal(raw, &u) != nil {
		return nil
	}
	switch u.Kind {
	case "user_message_chunk", "agent_message_chunk":
		role := User
		if u.Kind == "agent_message_chunk" {
			role = Agent
		}
		text := blockText(u.Content)
		var reports []Report
		// A continuation message is a message of its own even where its
		// chunks carry no messageId to tell it from the one before.
		if s.msgRole != role || s.msgID != u.MessageID || (role == User && IsContinuation(text)) {
			reports = s.flush(sid)
			s.msgRole, s.msgID, s.msgWhere = role, u.MessageID, where
		}
		s.msg.WriteString(text)
		return reports
	case "user_message", "agent_message":
		reports := s.flush(sid)
		s.msgRole, s.msgID, s.msgWhere = User, u.MessageID, where
		if u.Kind == "agent_message" {
			s.msgRole = Agent
		}
		var blocks []json.RawMessage
		_ = json.Unmarshal(u.Content, &blocks)
		s.msg.WriteString(blocksText(blocks))
		return append(reports, s.flush(sid)...)
	case "tool_call", "tool_call_update":
		reports := s.flush(sid)
		if u.Title == "Compact conversation" || u.Meta.ClaudeCode.ToolName == "compact" ||
			(u.Kind2 == "think" && strings.HasPrefix(u.ToolCallID, "compact-")) {
			s.compTool[u.ToolCallID] = true
		}
		if s.compTool[u.ToolCallID] {
			return reports
		}
		it := Item{Role: Tool, Where: where, RawInput: u.RawInput}
		var text strings.Builder
		if u.Title != "" {
			text.WriteString(u.Title + "\n")
		}
		var contents []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
			Path    string          `json:"path"`
		}
		_ = json.Unmarshal(u.Content, &contents)
		for _, c := range contents {
			switch c.Type {
			case "content":
				text.WriteString(blockText(c.Content) + "\n")
			case "diff":
				if c.Path != "" {
					it.Locations = append(it.Locations, c.Path)
				}
			}
		}
		for _, l := range u.Locations {
			var loc struct {
				Path string `json:"path"`
			}
			if json.Unmarshal(l, &loc) == nil && loc.Path != "" {
				it.Locations = append(it.Locations, loc.Path)
			}
		}
		it.Text = text.String()
		s.add(it)
		return reports
	case "compaction_summary_chunk":
		s.comp(u.CompactionID).summary.WriteString(blockText(u.Content))
		return nil
	case "compaction_update":
		reports := s.flush(sid)
		c := s.comp(u.CompactionID)
		if len(u.Summary) > 0 {
			var blocks []json.RawMessage
			if bytes.Equal(bytes.TrimSpace(u.Summary), []byte("null")) || json.Unmarshal(u.Summary, &blocks) == nil {
				c.summary.Reset()
				c.summary.WriteString(blocksText(blocks))
			}
		}
		if u.Status == "completed" && !c.audited && strings.TrimSpace(c.summary.String()) != "" {
			c.audited = true
			reports = append(reports, s.report(sid, u.CompactionID, "compaction_update", where, c.summary.String()))
		}
		if u.Status == "completed" || u.Status == "failed" || u.Status == "cancelled" {
			c.terminal = true
			c.summary.Reset() // its text lives on in the Auditor as the summary item
		}
		return reports
	}
	return nil
}

// Close ends the connection: a message still being coalesced is complete,
// and a continuation message among them is audited.
func (f *Follower) Close() []Report {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closeLocked()
}

func (f *Follower) closeLocked() []Report {
	var out []Report
	for _, id := range slices.Sorted(maps.Keys(f.sessions)) {
		out = append(out, f.sessions[id].flush(id)...)
	}
	return out
}

func (s *followed) comp(id string) *followedCompaction {
	c, ok := s.comps[id]
	if !ok {
		c = &followedCompaction{}
		s.comps[id] = c
	}
	return c
}

func (s *followed) add(it Item) {
	s.a.Add(it)
	s.items++
}

// flush ends the message being coalesced; a user message that is a
// continuation message is audited as a summary.
func (s *followed) flush(sid string) []Report {
	if s.msgRole == "" {
		return nil
	}
	text, role, where := s.msg.String(), s.msgRole, s.msgWhere
	s.msg.Reset()
	s.msgRole, s.msgID, s.msgWhere = "", "", ""
	if role == User && IsContinuation(text) {
		return []Report{s.report(sid, "", "continuation", where, text)}
	}
	s.add(Item{Role: role, Text: text, Where: where})
	return nil
}

func (s *followed) report(sid, cid, form, where, summary string) Report {
	m, n := s.a.Mark(), s.items
	if s.inTurn {
		m, n = s.mark, s.atMark
	}
	loss := s.a.checkUntil(m, summary)
	if loss == nil {
		loss = []Loss{}
	}
	r := Report{SessionID: sid, CompactionID: cid, Form: form, Where: where, HistoryItems: n, KnownLoss: loss}
	s.a.Reset()
	s.items = 0
	s.add(Item{Role: Summary, Text: summary, Where: where})
	s.mark, s.atMark = s.a.Mark(), s.items
	return r
}

// blockText is a content block's text: a text block's text, a resource
// link's uri, an embedded resource's uri and text.
func blockText(raw json.RawMessage) string {
	var b struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		URI      string `json:"uri"`
		Resource struct {
			URI  string `json:"uri"`
			Text string `json:"text"`
		} `json:"resource"`
	}
	if json.Unmarshal(raw, &b) != nil {
		return ""
	}
	switch b.Type {
	case "text":
		return b.Text
	case "resource_link":
		return b.URI
	case "resource":
		return b.Resource.URI + "\n" + b.Resource.Text
	}
	return ""
}

func blocksText(blocks []json.RawMessage) string {
	var b strings.Builder
	for i, raw := range blocks {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(blockText(raw))
	}
	return b.String()
}

// Audit audits summary, the summary compaction info is about to settle with,
// against the history of its session as the Follower holds it now (see
// Follower), and returns what the summary lost as the record's known loss
// (emitter.Loss: kind, value, where). It is what a host gives
// emitter.WithAudit: the host feeds the Follower what it reads and writes,
// and its emitter asks, at each completion with a summary, before the
// terminal update goes out. A later observation of that terminal update
// does not audit the compaction a second time.
func (f *Follower) Audit(_ context.Context, info emitter.Info, summary []protocol.ContentBlock) []emitter.Loss {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.session(info.SessionID)
	// The message being coalesced is history; a continuation's report is
	// Observe's to return, and a host that asks Audit reads none.
	s.flush(info.SessionID)
	c := s.comp(string(info.ID))
	if c.audited {
		return nil
	}
	c.audited = true
	text := SummaryText(summary)
	if strings.TrimSpace(text) == "" {
		return nil
	}
	r := s.report(info.SessionID, string(info.ID), "compaction_update", "", text)
	return Known(r.KnownLoss)
}

// Forget drops what the Follower keeps of a session (it closed), so that
// its memory follows the sessions that are live.
func (f *Follower) Forget(sessionID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sessions, sessionID)
	for k, sid := range f.prompts {
		if sid == sessionID {
			delete(f.prompts, k)
		}
	}
}

// Known returns losses as a record's known loss.
func Known(losses []Loss) []emitter.Loss {
	if len(losses) == 0 {
		return nil
	}
	out := make([]emitter.Loss, len(losses))
	for i, l := range losses {
		out[i] = emitter.Loss{Kind: string(l.Kind), Value: l.Value, Where: l.Where}
	}
	return out
}
