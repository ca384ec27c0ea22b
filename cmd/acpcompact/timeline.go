package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/acpcompact/acpcompact/audit"
	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/skim"
)

// timeline follows a transcript the way `check --html` shows it: per
// connection (each initialize begins one, whose client holds nothing yet),
// its handshake and, per session, the rows a client shows: the reference
// reducer's items (messages with their chunks joined, compactions and tool
// calls updated in place) and the rows a client shows from elsewhere (the
// user's prompts, cancels, turn ends, usage, fallback markers, history
// replays), each addressed entity with the history of its updates. Then the
// checker's violations and the audit's reports are placed at the rows their
// lines touched. A timeline holds what the page shows, so its memory is the
// page's; it is not safe for concurrent use.
type timeline struct {
	conns    []*tlConn
	follower *audit.Follower
	reports  []audit.Report
	// at is where each transcript line landed: its violations and audit
	// reports are shown there.
	at map[int]tlAt
	// unplaced are violations of lines that landed nowhere (none do when
	// the timeline saw every line the checker saw); shown at the top.
	unplaced []conformance.Violation
}

// tlAt is where one transcript line landed: the row it made or updated, or
// else the position in its session's rows after it, or else only its
// connection.
type tlAt struct {
	conn *tlConn
	sess *tlSession
	row  *tlRow
	pos  int
}

// tlConn is one connection of the transcript.
type tlConn struct {
	n        int // 1-based, in transcript order
	line     int // its initialize line; 0 for messages before any initialize
	hs       tlHandshake
	red      *conformance.Reducer // made at the first session/update, for the negotiated version
	sessions []*tlSession
	byID     map[string]*tlSession
	requests map[string]tlRequest // unanswered client requests by id
	// violations are the connection's own: lines no session's row holds.
	violations []conformance.Violation
}

// tlHandshake is what initialize said.
type tlHandshake struct {
	asked      int64 // the client's protocolVersion; -1 absent
	capability json.RawMessage
	capSet     bool // clientCapabilities.session.compaction is present
	client     string
	answered   int64 // the agent's protocolVersion; -1 absent
	answerLine int
	agent      string
	err        string
}

type tlRequest struct {
	method string
	sid    string
	line   int
	replay bool // a session/load, or a session/resume with replayFrom
}

// tlSession is one session's rows.
type tlSession struct {
	id      string
	how     string // how the client came to hold it: "session/new, line 5"
	rows    []*tlRow
	itemRow map[int]*tlRow    // reducer item index -> its row
	byKey   map[string]*tlRow // a session_info_update marker -> its row
	replay  *tlRequest        // the request replaying its history now, if any
	// inserts are violations of lines that touched no row: shown at the
	// position in rows after their line.
	inserts []tlInsert
}

type tlInsert struct {
	pos int
	v   conformance.Violation
}

// tlRow is one row of a session's timeline.
type tlRow struct {
	item     int // the reducer item's index; -1 for a row from elsewhere
	it       conformance.Item
	label    string // a row from elsewhere: its label and text
	text     string
	kind     string // a row from elsewhere: "prompt-end", "usage", "marker", "replay", "cancel", "state", "violation"
	line     int    // the line that made it
	replayed bool
	hist     *tlHistory
	markerID string // a fallback marker's ID, status and _meta key
	status   string
	metaKey  string
	vs       []conformance.Violation
	reports  []audit.Report
}

// tlHistory is the updates an addressed entity received: each status, with
// repeats (heartbeats) and runs of chunks counted.
type tlHistory struct{ steps []tlStep }

type tlStep struct {
	what        string // a status, "chunk", or "update"
	note        string // what else the update did: "summary", "summary cleared", "error"
	n           int
	first, last int // lines
	replayed    bool
}

func (h *tlHistory) add(what, note string, line int, replayed bool) {
	if k := len(h.steps); k > 0 {
		s := &h.steps[k-1]
		if s.what == what && s.note == note && s.replayed == replayed {
			s.n++
			s.last = line
			return
		}
	}
	h.steps = append(h.steps, tlStep{what: what, note: note, n: 1, first: line, last: line, replayed: replayed})
}

func newTimeline() *timeline {
	return &timeline{follower: audit.NewFollower(), at: map[int]tlAt{}}
}

// check reads a transcript, follows it and checks it as
// conformance.CheckTranscript does, and returns the same violations (a test
// holds the two equal). The error is the reader's.
func (t *timeline) check(r io.Reader, opts ...conformance.Option) ([]conformance.Violation, error) {
	c := conformance.NewChecker(opts...)
	var out []conformance.Violation
	err := conformance.NewScanner(r).Each(
		func(l conformance.Line) {
			out = append(out, c.Observe(l.Dir, l.N, l.Raw)...)
			t.observe(l)
		},
		func(le *conformance.LineError) {
			out = append(out, conformance.Violation{Line: le.N, Rule: conformance.RuleTranscript, Message: le.Err.Error()})
			t.at[le.N] = tlAt{conn: t.conn()}
		})
	if err == nil {
		out = append(out, c.Close()...)
	}
	slices.SortStableFunc(out, func(a, b conformance.Violation) int { return a.Line - b.Line })
	if err != nil {
		return out, err
	}
	t.finish(out)
	return out, nil
}

// conn returns the current connection, one for messages before any
// initialize if need be.
func (t *timeline) conn() *tlConn {
	if len(t.conns) == 0 {
		t.newConn(0)
	}
	return t.conns[len(t.conns)-1]
}

func (t *timeline) newConn(line int) *tlConn {
	c := &tlConn{n: len(t.conns) + 1, line: line, byID: map[string]*tlSession{}, requests: map[string]tlRequest{},
		hs: tlHandshake{asked: -1, answered: -1}}
	t.conns = append(t.conns, c)
	return c
}

// tlMsg is the part of a JSON-RPC message the timeline reads.
type tlMsg struct {
	ID     json.RawMessage `json:"id"`
	Method *string         `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// tlDecode decodes what it can: a member of the wrong type is left unset,
// as a client reads a malformed optional field as omitted, and the rest is
// read (encoding/json goes on past a type error). It is false only for
// JSON that cannot be read at all.
func tlDecode(raw json.RawMessage, v any) bool {
	var te *json.UnmarshalTypeError
	err := json.Unmarshal(raw, v)
	return err == nil || errors.As(err, &te)
}

// observe follows one message. What it cannot read it skips: the checker
// says what is wrong with it, and the violation is shown at the
// connection.
func (t *timeline) observe(l conformance.Line) {
	side := audit.FromAgent
	if l.Dir == conformance.FromClient {
		side = audit.FromClient
	}
	t.reports = append(t.reports, t.follower.Observe(side, fmt.Sprintf("line %d", l.N), l.Raw)...)

	var m tlMsg
	if !tlDecode(l.Raw, &m) {
		t.at[l.N] = tlAt{conn: t.conn()}
		return
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	method := ""
	if m.Method != nil {
		method = *m.Method
	}
	if l.Dir == conformance.FromClient && method == "initialize" && hasID {
		c := t.newConn(l.N)
		c.hs.read(m.Params)
		c.requests[skim.IDKey(m.ID)] = tlRequest{method: method, line: l.N}
		t.at[l.N] = tlAt{conn: c}
		return
	}
	c := t.conn()
	at := tlAt{conn: c}
	switch {
	case l.Dir == conformance.FromClient && m.Method != nil && hasID:
		at = c.clientRequest(l.N, method, skim.IDKey(m.ID), m.Params)
	case l.Dir == conformance.FromClient && m.Method != nil:
		at = c.clientNotification(l.N, method, m.Params)
	case l.Dir == conformance.FromAgent && method == "session/update":
		at = c.update(l.N, m.Params)
	case l.Dir == conformance.FromAgent && m.Method == nil && hasID:
		at = c.response(l.N, skim.IDKey(m.ID), m)
	}
	if at.conn == nil {
		at.conn = c
	}
	t.at[l.N] = at
}

// read takes the client's side of the handshake from initialize's params.
func (h *tlHandshake) read(params json.RawMessage) {
	var p struct {
		ProtocolVersion    json.RawMessage `json:"protocolVersion"`
		ClientCapabilities struct {
			Session map[string]json.RawMessage `json:"session"`
		} `json:"clientCapabilities"`
		ClientInfo *tlInfo `json:"clientInfo"`
		Info       *tlInfo `json:"info"` // v2
	}
	_ = json.Unmarshal(params, &p)
	h.asked = tlInt(p.ProtocolVersion)
	h.capability, h.capSet = p.ClientCapabilities.Session["compaction"]
	h.client = firstInfo(p.ClientInfo, p.Info).String()
}

type tlInfo struct {
	Name    string `json:"name"`
	Title   string `json:"title"`
	Version string `json:"version"`
}

func (i *tlInfo) String() string {
	if i == nil {
		return ""
	}
	return strings.TrimSpace(i.Name + " " + i.Version)
}

func firstInfo(a, b *tlInfo) *tlInfo {
	if a != nil {
		return a
	}
	return b
}

// tlInt reads an integer protocolVersion; -1 when it is not one.
func tlInt(raw json.RawMessage) int64 {
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// version is the negotiated protocol version: the agent's answer when it is
// an integer, else the client's request (as the checker reads it); 0 when
// neither says.
func (h *tlHandshake) version() int64 {
	if h.answered >= 0 {
		return h.answered
	}
	return max(h.asked, 0)
}

// reducer returns the connection's reducer, made for the negotiated
// version (v1 when there is none it applies).
func (c *tlConn) reducer() *conformance.Reducer {
	if c.red == nil {
		v := int(c.hs.version())
		if v != 1 && v != 2 {
			v = 1
		}
		c.red = conformance.NewReducer(v)
	}
	return c.red
}

func (c *tlConn) session(id, how string) *tlSession {
	s, ok := c.byID[id]
	if !ok {
		s = &tlSession{id: id, how: how, itemRow: map[int]*tlRow{}, byKey: map[string]*tlRow{}}
		c.byID[id] = s
		c.sessions = append(c.sessions, s)
	}
	return s
}

// extra appends a row from elsewhere.
func (s *tlSession) extra(line int, kind, label, text string) *tlRow {
	r := &tlRow{item: -1, kind: kind, label: label, text: text, line: line, replayed: s.replay != nil}
	s.rows = append(s.rows, r)
	return r
}

func (s *tlSession) here(c *tlConn, r *tlRow) tlAt {
	return tlAt{conn: c, sess: s, row: r, pos: len(s.rows)}
}

func tlSessionID(params json.RawMessage) string {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(params, &p)
	return p.SessionID
}

func (c *tlConn) clientRequest(line int, method, id string, params json.RawMessage) tlAt {
	sid := tlSessionID(params)
	req := tlRequest{method: method, sid: sid, line: line}
	switch method {
	case "session/prompt":
		if sid == "" {
			break
		}
		s := c.session(sid, fmt.Sprintf("its first prompt, line %d", line))
		c.requests[id] = req
		// A client shows the user's prompt itself (the agent does not echo
		// it in v1); its own message ID keeps it a row of its own.
		var p struct {
			Prompt []json.RawMessage `json:"prompt"`
		}
		_ = json.Unmarshal(params, &p)
		red := c.reducer()
		before := red.Len(sid)
		for _, blk := range p.Prompt {
			u, _ := json.Marshal(map[string]any{"sessionUpdate": "user_message_chunk", "messageId": fmt.Sprintf("prompt-line-%d", line), "content": blk})
			_ = red.Apply(sid, u)
		}
		r := s.newItems(before, red.Len(sid), line)
		return s.here(c, r)
	case "session/load", "session/resume":
		if sid == "" {
			break
		}
		var p struct {
			ReplayFrom json.RawMessage `json:"replayFrom"`
		}
		_ = json.Unmarshal(params, &p)
		req.replay = method == "session/load" || (len(p.ReplayFrom) > 0 && string(p.ReplayFrom) != "null")
		s := c.session(sid, fmt.Sprintf("%s, line %d", method, line))
		c.requests[id] = req
		text := method + ": the agent replays the session's history"
		if !req.replay {
			text = method + ": no history replay"
		}
		r := s.extra(line, "replay", "", text)
		if req.replay {
			s.replay = &req
		}
		return s.here(c, r)
	case "session/close":
		if s, ok := c.byID[sid]; ok {
			c.requests[id] = req
			return s.here(c, s.extra(line, "cancel", "you", "session/close"))
		}
	}
	c.requests[id] = req
	return tlAt{conn: c}
}

func (c *tlConn) clientNotification(line int, method string, params json.RawMessage) tlAt {
	if method != "session/cancel" {
		return tlAt{conn: c}
	}
	s, ok := c.byID[tlSessionID(params)]
	if !ok {
		return tlAt{conn: c}
	}
	return s.here(c, s.extra(line, "cancel", "you", "session/cancel"))
}

func (c *tlConn) response(line int, id string, m tlMsg) tlAt {
	req, ok := c.requests[id]
	if !ok {
		return tlAt{conn: c}
	}
	delete(c.requests, id)
	errText := ""
	if m.Error != nil {
		errText = fmt.Sprintf("%s (code %d)", m.Error.Message, m.Error.Code)
	}
	switch req.method {
	case "initialize":
		var r struct {
			ProtocolVersion json.RawMessage `json:"protocolVersion"`
			AgentInfo       *tlInfo         `json:"agentInfo"`
			Info            *tlInfo         `json:"info"`
		}
		_ = json.Unmarshal(m.Result, &r)
		c.hs.answered, c.hs.answerLine, c.hs.agent, c.hs.err = tlInt(r.ProtocolVersion), line, firstInfo(r.AgentInfo, r.Info).String(), errText
		return tlAt{conn: c}
	case "session/new":
		var r struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(m.Result, &r) == nil && r.SessionID != "" {
			s := c.session(r.SessionID, fmt.Sprintf("session/new, line %d", line))
			return s.here(c, nil)
		}
		return tlAt{conn: c}
	}
	s, ok := c.byID[req.sid]
	if !ok {
		return tlAt{conn: c}
	}
	switch req.method {
	case "session/prompt":
		var r struct {
			StopReason string `json:"stopReason"`
			MessageID  string `json:"messageId"`
		}
		_ = json.Unmarshal(m.Result, &r)
		switch {
		case errText != "":
			return s.here(c, s.extra(line, "turn", "", "turn ends with an error: "+errText))
		case c.hs.version() == 2:
			// In v2 the response only acknowledges the prompt; the idle
			// state_update ends the turn.
			return s.here(c, nil)
		}
		return s.here(c, s.extra(line, "turn", "", "turn ends: "+r.StopReason))
	case "session/load", "session/resume":
		if s.replay != nil && s.replay.line == req.line {
			s.replay = nil
		}
		text := req.method + " answered: the replay ends"
		if !req.replay {
			text = req.method + " answered"
		}
		if errText != "" {
			text = req.method + " failed: " + errText
		}
		return s.here(c, s.extra(line, "replay", "", text))
	case "session/close":
		return s.here(c, nil)
	}
	return tlAt{conn: c}
}

// newItems makes a row for each reducer item from..to-1 and returns the
// last of them, or nil.
func (s *tlSession) newItems(from, to, line int) *tlRow {
	var r *tlRow
	for i := from; i < to; i++ {
		r = &tlRow{item: i, line: line, replayed: s.replay != nil}
		s.rows = append(s.rows, r)
		s.itemRow[i] = r
	}
	return r
}

// tlUpdate is the part of a SessionUpdate the timeline reads.
type tlUpdate struct {
	Kind         string          `json:"sessionUpdate"`
	CompactionID string          `json:"compactionId"`
	ToolCallID   string          `json:"toolCallId"`
	Status       string          `json:"status"`
	State        string          `json:"state"`
	StopReason   string          `json:"stopReason"`
	Summary      json.RawMessage `json:"summary"`
	Error        json.RawMessage `json:"error"`
	Used         int64           `json:"used"`
	Size         int64           `json:"size"`
}

func (c *tlConn) update(line int, params json.RawMessage) tlAt {
	var p struct {
		SessionID string          `json:"sessionId"`
		Update    json.RawMessage `json:"update"`
	}
	var u tlUpdate
	if !tlDecode(params, &p) || p.SessionID == "" || !tlDecode(p.Update, &u) {
		return tlAt{conn: c}
	}
	s := c.session(p.SessionID, fmt.Sprintf("first update, line %d", line))
	red := c.reducer()
	before := red.Len(s.id)
	if red.Apply(s.id, p.Update) != nil {
		// A client drops it: no row changes.
		return s.here(c, nil)
	}
	s.newItems(before, red.Len(s.id), line)
	r := s.itemRow[red.Addressed(s.id)] // nil for none: -1 has no row
	replayed := s.replay != nil
	switch u.Kind {
	case "compaction_update":
		r.history().add(u.Status, tlNote(u), line, replayed)
	case "compaction_summary_chunk":
		r.history().add("chunk", "", line, replayed)
	case "tool_call", "tool_call_update":
		if r != nil && u.ToolCallID != "" {
			what := u.Status
			if what == "" {
				what = "update"
			}
			r.history().add(what, "", line, replayed)
		}
	case "usage_update":
		r = s.extra(line, "usage", "context", fmt.Sprintf("%s of %s tokens in use (usage_update)", demoNum(u.Used), demoNum(u.Size)))
	case "state_update":
		text := "state: " + u.State
		if u.State == "idle" {
			text = "turn ends: " + u.StopReason + " (state_update idle)"
		}
		r = s.extra(line, "turn", "", text)
	case "session_info_update":
		key, id, status := demoMarker(p.Update)
		if key == "" {
			break
		}
		if m, ok := s.byKey[key]; ok {
			r = m
		} else {
			r = s.extra(line, "marker", "marker", "")
			r.markerID, r.metaKey = id, strings.Split(key, "\x00")[0]
			s.byKey[key] = r
		}
		r.status = status
		r.history().add(status, "", line, replayed)
	}
	return s.here(c, r)
}

// history returns the row's update history, made on first use; a nil row
// (an update whose row cannot be told) records nothing.
func (r *tlRow) history() *tlHistory {
	if r == nil {
		return &tlHistory{}
	}
	if r.hist == nil {
		r.hist = &tlHistory{}
	}
	return r.hist
}

// tlNote says what a compaction_update did besides its status.
func tlNote(u tlUpdate) string {
	var notes []string
	switch s := bytes.TrimSpace(u.Summary); {
	case len(s) == 0:
	case string(s) == "null" || string(s) == "[]":
		notes = append(notes, "summary cleared")
	default:
		notes = append(notes, "summary")
	}
	switch e := bytes.TrimSpace(u.Error); {
	case len(e) == 0:
	case string(e) == "null":
		notes = append(notes, "error cleared")
	default:
		notes = append(notes, "error")
	}
	return strings.Join(notes, ", ")
}

// finish fills each item row from the reducer, and places the violations
// and the audit's reports at their lines.
func (t *timeline) finish(vs []conformance.Violation) {
	t.reports = append(t.reports, t.follower.Close()...)
	for _, c := range t.conns {
		for _, s := range c.sessions {
			var items []conformance.Item
			if c.red != nil {
				items = c.red.Timeline(s.id)
			}
			for _, r := range s.rows {
				if r.item >= 0 && r.item < len(items) {
					r.it = items[r.item]
				}
			}
		}
	}
	for _, v := range vs {
		at, ok := t.at[v.Line]
		switch {
		case !ok:
			t.unplaced = append(t.unplaced, v)
		case at.row != nil:
			at.row.vs = append(at.row.vs, v)
		case at.sess != nil:
			at.sess.inserts = append(at.sess.inserts, tlInsert{pos: at.pos, v: v})
		default:
			at.conn.violations = append(at.conn.violations, v)
		}
	}
	for _, rep := range t.reports {
		n, err := strconv.Atoi(strings.TrimPrefix(rep.Where, "line "))
		if at, ok := t.at[n]; err == nil && ok && at.row != nil {
			at.row.reports = append(at.row.reports, rep)
		}
	}
	for _, c := range t.conns {
		for _, s := range c.sessions {
			s.placeInserts()
		}
	}
}

// placeInserts puts each violation of a line that touched no row into the
// rows, after the rows made before it.
func (s *tlSession) placeInserts() {
	if len(s.inserts) == 0 {
		return
	}
	rows := make([]*tlRow, 0, len(s.rows)+len(s.inserts))
	next := 0
	for i := 0; i <= len(s.rows); i++ {
		for ; next < len(s.inserts) && s.inserts[next].pos <= i; next++ {
			in := s.inserts[next]
			rows = append(rows, &tlRow{item: -1, kind: "violation", line: in.v.Line, vs: []conformance.Violation{in.v}})
		}
		if i < len(s.rows) {
			rows = append(rows, s.rows[i])
		}
	}
	s.rows = rows
}
