package conformance

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Rule names one agent obligation the Checker enforces.
type Rule string

// The rules. Each Violation carries exactly one.
const (
	// RuleTranscript: a transcript line is not "client|agent <JSON object>".
	RuleTranscript Rule = "transcript"
	// RuleMalformed: a message lacks what the checker needs to follow it,
	// e.g. a compaction_update without a string compactionId or status,
	// which a client would drop.
	RuleMalformed Rule = "malformed"
	// RuleProtocol: the initialize handshake is missing or broken, e.g. the
	// agent answers a protocolVersion above the client's, or sends
	// session/update before any handshake.
	RuleProtocol Rule = "protocol"
	// RuleCapability: a v1 agent sent compaction_update or
	// compaction_summary_chunk, live or in replay, to a client whose
	// clientCapabilities.session.compaction is not a JSON object. When the
	// initialize response has no integer protocolVersion, the client's
	// request decides the version and the capability.
	RuleCapability Rule = "capability"
	// RuleSettlement: a compaction first seen in a turn had no terminal
	// status when the turn ended (v1: the session/prompt response; v2: the
	// idle state_update), or had none at the end of the transcript.
	RuleSettlement Rule = "settlement"
	// RuleAfterTurn: a compaction update or chunk arrived for a session with
	// no open turn and outside a history replay; so did a fallback
	// compaction tool call that started, or changed status before it
	// settled, with no open turn.
	RuleAfterTurn Rule = "after-turn"
	// RuleTerminal: an update or chunk arrived for a compaction ID after its
	// terminal update (chunk after terminal, second terminal, ID reused).
	RuleTerminal Rule = "terminal"
	// RuleReplay: during a history replay a compaction_summary_chunk
	// appended to summary content the client already held for that
	// compaction on this connection, with no clearing or replacing summary
	// patch before it in the replay, so the summary shows twice. Replay
	// otherwise has the same update, chunk and patch semantics as live
	// delivery: re-streaming (in_progress, chunks, then the terminal) is
	// legal. With WithStrictReplay a compaction must also be replayed
	// terminal-first (its first replayed message is a terminal
	// compaction_update, and nothing follows it).
	RuleReplay Rule = "replay"
	// RuleCancel: a compaction ended cancelled in a turn where the client
	// had sent no session/cancel for the session; a provider failure or
	// other interruption is failed. A cancel cancels the running turn and
	// the prompts waiting behind it, not a prompt sent after it.
	RuleCancel Rule = "cancel"
	// RuleFallback: a fallback form sent to a v1 client without the
	// capability (the compaction tool call, an opencode/compaction or
	// acpcompact/compaction marker) never reached a terminal form before
	// the turn ended or the connection did; or a text fallback (an
	// agent_message_chunk that is exactly "Compacting...") had no outcome
	// text ("Compacting completed.", "Compacting failed[: …]",
	// "Compacting cancelled.") when the connection ended.
	//
	// The tool call is recognised by its title "Compact conversation", by
	// _meta.claudeCode.toolName "compact", or by kind "think" with a
	// toolCallId starting "compact-" (this project's fallback.ToolCall under
	// another title). Text chunks carrying a messageId are model prose
	// (opencode and codex tag their model text so, never their compaction
	// forms) and are not read as fallback text.
	RuleFallback Rule = "fallback"
	// RuleSchema: an agent session/update does not validate against the
	// official schema of the negotiated version (only WithSchema).
	RuleSchema Rule = "schema"
)

// Violation is one broken obligation.
type Violation struct {
	// Line is the transcript line the violation is about: the offending
	// message, the message that ended a turn too early, or for an
	// unsettled compaction at the end of the transcript the line where it
	// was first seen.
	Line int
	// Rule is the broken obligation.
	Rule Rule
	// Message explains the violation, naming the session and compaction
	// (or fallback) ID concerned.
	Message string
}

// String formats the violation as "line N: rule: message".
func (v Violation) String() string { return fmt.Sprintf("line %d: %s: %s", v.Line, v.Rule, v.Message) }

// SchemaValidator validates session/update params ({sessionId, update,
// _meta}) against one protocol version's official schema.
// *acpschema.Validator satisfies it; an interface keeps this package usable
// where the schema is not installed.
type SchemaValidator interface {
	Notification(params []byte) error
}

// Option configures a Checker.
type Option func(*config)

type config struct {
	schema       [3]SchemaValidator // indexed by protocol version
	assumed      *protocol
	strictReplay bool
}

// WithSchema validates every agent session/update against the validator
// of the negotiated version and reports failures as RuleSchema. A nil
// validator disables validation for that version.
func WithSchema(v1, v2 SchemaValidator) Option {
	return func(c *config) { c.schema[1], c.schema[2] = v1, v2 }
}

// WithAssumedProtocol sets the protocol state to use until an initialize
// handshake is seen, for transcripts or proxies that start mid-connection.
// compaction says whether a v1 client advertised the capability; it is
// ignored for v2. Without this option, a session/update before any
// handshake is a RuleProtocol violation and checking continues as v1 with
// the capability.
func WithAssumedProtocol(version int, compaction bool) Option {
	return func(c *config) {
		c.assumed = &protocol{known: true, version: version, compaction: compaction || version == 2}
	}
}

// WithStrictReplay holds history replays (session/load, v2 session/resume
// with replayFrom) to this project's own rule for what it sends: every
// replayed compaction is one terminal compaction_update, with no
// in_progress, no chunks and nothing after it. A replay that re-streams is
// legal under the RFD ("the same update, chunk, and patch semantics as
// live delivery"), so without this option it is not a violation.
func WithStrictReplay() Option {
	return func(c *config) { c.strictReplay = true }
}

// Checker follows one connection's messages in wire order and reports the
// agent's broken compaction obligations. Feed it every message of both
// directions with Observe, then call Close. A Checker is not safe for
// concurrent use.
type Checker struct {
	cfg      config
	proto    protocol
	warned   bool // the missing-handshake violation is reported once
	closed   bool
	requests map[string]*request
	sessions map[jsID]*session
	order    []*session
}

type protocol struct {
	known      bool
	version    int
	compaction bool // clients of v2 count as capable: it needs no capability
}

// request is a client request awaiting the agent's response.
type request struct {
	method    string
	sessionID jsID
	requested int64 // initialize: the client's protocolVersion, -1 if absent
	capable   bool  // initialize: v1 clientCapabilities.session.compaction is an object
}

type turn struct {
	// prompts are the v1 prompt request ids (idKey) still unanswered, in
	// the order sent: the first is the prompt that runs the turn, and only
	// its answer ends it; the others wait behind it (an agent answers them
	// with an error, or runs them as the turns that follow).
	prompts []pending
	// cancelled: the client cancelled this turn (session/cancel,
	// $/cancel_request, session/close) while it ran.
	cancelled bool
	// What was first seen in this turn, so ending it costs its own size,
	// not the session's history.
	comps     []*compaction
	fallbacks []*fallback
}

// pending is a v1 prompt request still unanswered: its id (idKey), and
// whether a cancel for its session came after it was sent, which cancels
// its turn too, whenever that runs (as the engine holds a cancel).
type pending struct {
	key       string
	cancelled bool
}

type replay struct {
	method string
	id     string        // the request's idKey
	seen   map[jsID]bool // compaction IDs already replayed in this replay
}

type session struct {
	id          jsID
	turn        *turn
	replay      *replay
	lastTurnEnd int
	comps       map[jsID]*compaction
	compOrder   []*compaction
	fallbacks   map[string]*fallback
	fbOrder     []*fallback
	texts       []*fallback // open text fallbacks, oldest first
}

type compaction struct {
	id           jsID
	status       string
	firstLine    int
	terminalLine int
	terminal     bool
	reported     bool // an unsettled violation was already reported
	// What the client's summary for this ID holds: summary says it is not
	// empty (last filled at summaryLine); stale says it holds content from
	// before the current replay that the replay has not yet cleared or
	// replaced.
	summary     bool
	summaryLine int
	stale       bool
}

// patchSummary applies an update's or chunk's effect on the client's
// summary: a chunk appends, a summary patch (null, [] or blocks) replaces,
// an omitted or unreadable summary leaves it as it is.
func (cp *compaction) patchSummary(line int, kind string, u object) {
	if kind == "compaction_summary_chunk" {
		cp.summary, cp.summaryLine, cp.stale = true, line, false
		return
	}
	raw, ok := u["summary"]
	if !ok {
		return
	}
	blocks, ok := contentBlocks(raw)
	if !ok {
		return
	}
	cp.summary, cp.stale = len(blocks) > 0, false
	if cp.summary {
		cp.summaryLine = line
	}
}

// apply applies an update or chunk to what the client holds of an
// unsettled compaction: the summary patch and, for an update, the status.
// It reports whether the update settled the compaction. Of a settled one
// only the summary patch counts.
func (cp *compaction) apply(line int, kind, status string, u object) (settled bool) {
	cp.patchSummary(line, kind, u)
	if cp.terminal || kind != "compaction_update" {
		return false
	}
	cp.status = status
	if !isTerminal(status) {
		return false
	}
	cp.terminal, cp.terminalLine = true, line
	return true
}

type fallback struct {
	what      string
	status    string
	firstLine int
	settled   bool
	reported  bool
	terminals string // the statuses that settle it, for messages
	text      bool   // the text fallback, settled by an outcome text
}

// NewChecker returns a Checker for one connection.
func NewChecker(opts ...Option) *Checker {
	c := &Checker{requests: map[string]*request{}, sessions: map[jsID]*session{}}
	for _, o := range opts {
		if o != nil {
			o(&c.cfg)
		}
	}
	if c.cfg.assumed != nil {
		c.proto = *c.cfg.assumed
	}
	return c
}

func (c *Checker) version() int {
	if c.proto.known && c.proto.version == 2 {
		return 2
	}
	return 1
}

// capable reports whether compaction updates may be sent; before any
// handshake the checker gives the agent the benefit of the doubt.
func (c *Checker) capable() bool { return !c.proto.known || c.proto.compaction }

func (c *Checker) session(id jsID) *session {
	s, ok := c.sessions[id]
	if !ok {
		s = &session{id: id, comps: map[jsID]*compaction{}, fallbacks: map[string]*fallback{}}
		c.sessions[id] = s
		c.order = append(c.order, s)
	}
	return s
}

// Observe checks one message. line is its transcript line number (or any
// increasing sequence number); raw is the JSON-RPC message. It returns the
// violations this message reveals.
func (c *Checker) Observe(dir Direction, line int, raw json.RawMessage) []Violation {
	m, ok := decodeObject(raw)
	if !ok {
		return []Violation{{line, RuleMalformed, fmt.Sprintf("%s message is not a JSON object", dir)}}
	}
	method, hasMethod := m.str("method")
	idRaw, hasID := m["id"]
	// A null id correlates nothing, so it is treated as absent.
	hasID = hasID && !isNull(idRaw)
	// Ids correlate by JSON value; messages show them as written.
	var id rpcID
	if hasID {
		id = rpcID{key: idKey(idRaw), text: string(compact(idRaw))}
	}
	switch dir {
	case FromClient:
		var out []Violation
		switch {
		case hasMethod && hasID:
			if method == "initialize" {
				// A transcript may hold several connections in a row
				// (a reconnect before session/load); each initialize
				// starts a new one, whose client holds nothing yet.
				out = c.endConnection("the connection ended (a new initialize began)")
			}
			c.clientRequest(line, method, id, m)
		case hasMethod:
			c.clientNotification(method, m)
		}
		return out
	case FromAgent:
		switch {
		case method == "session/update":
			return c.update(line, m["params"])
		case !hasMethod && hasID:
			return c.agentResponse(line, id, m)
		}
		return nil
	}
	return []Violation{{line, RuleMalformed, fmt.Sprintf("unknown direction %v", dir)}}
}

// rpcID is a JSON-RPC request id: key compares it by JSON value (idKey),
// text is how it was written, for messages.
type rpcID struct{ key, text string }

func (c *Checker) clientRequest(line int, method string, id rpcID, m object) {
	p, _ := m.obj("params")
	sid, _ := p.jsStr("sessionId")
	req := &request{method: method, sessionID: sid}
	switch method {
	case "initialize":
		req.requested = -1
		if v, ok := p.integer("protocolVersion"); ok {
			req.requested = v
		}
		req.capable = v1Capability(p)
	case "session/prompt":
		if sid == "" {
			return
		}
		s := c.session(sid)
		if s.turn == nil {
			s.turn = &turn{}
		}
		s.turn.prompts = append(s.turn.prompts, pending{key: id.key})
	case "session/load":
		if sid != "" {
			c.session(sid).replay = &replay{method: method, id: id.key, seen: map[jsID]bool{}}
		}
	case "session/resume":
		// Only a v2 resume with a replay cursor replays history; v1 resume
		// explicitly returns no previous messages.
		if rf, ok := p["replayFrom"]; ok && !isNull(rf) && sid != "" {
			c.session(sid).replay = &replay{method: method, id: id.key, seen: map[jsID]bool{}}
		}
	case "session/close":
		// Closing cancels the session's work as session/cancel does.
		c.cancel(sid)
	default:
		return
	}
	c.requests[id.key] = req
}

// v1Capability reads clientCapabilities.session.compaction, which counts
// only as a JSON object: opencode's false and codex's "any non-null" (true,
// "", 0, []) readings are the defects this guards against.
func v1Capability(params object) bool {
	cc, ok := params.obj("clientCapabilities")
	if !ok {
		return false
	}
	sess, ok := cc.obj("session")
	if !ok {
		return false
	}
	_, ok = sess.obj("compaction")
	return ok
}

func (c *Checker) clientNotification(method string, m object) {
	p, _ := m.obj("params")
	switch method {
	case "session/cancel":
		sid, _ := p.jsStr("sessionId")
		c.cancel(sid)
	case "$/cancel_request":
		if rid, ok := p["requestId"]; ok {
			if req := c.requests[idKey(rid)]; req != nil && req.method == "session/prompt" {
				c.cancel(req.sessionID)
			}
		}
	}
}

// cancel records a user cancel of the session's turn and of the prompts
// waiting behind it; a prompt sent after it is not cancelled.
func (c *Checker) cancel(sid jsID) {
	if s, ok := c.sessions[sid]; ok && s.turn != nil {
		s.turn.cancelled = true
		for i := range s.turn.prompts {
			s.turn.prompts[i].cancelled = true
		}
	}
}

func (c *Checker) agentResponse(line int, id rpcID, m object) []Violation {
	req, ok := c.requests[id.key]
	if !ok {
		return nil
	}
	delete(c.requests, id.key)
	_, isResult := m["result"]
	switch req.method {
	case "initialize":
		if isResult {
			return c.negotiate(line, req, m)
		}
	case "session/prompt":
		s, ok := c.sessions[req.sessionID]
		if !ok || c.version() != 1 || s.turn == nil {
			return nil
		}
		i := slices.IndexFunc(s.turn.prompts, func(p pending) bool { return p.key == id.key })
		switch {
		case i < 0:
			return nil
		case i > 0:
			// A prompt sent while another runs, answered before its turn
			// came: it ends nothing.
			s.turn.prompts = slices.Delete(s.turn.prompts, i, i+1)
			return nil
		}
		how := ""
		if _, isErr := m["error"]; isErr {
			how = " with an error"
		}
		out := c.settle(s, line, fmt.Sprintf("when the agent answered session/prompt id %s%s", id.text, how))
		rest := s.turn.prompts[1:]
		s.turn, s.lastTurnEnd = nil, line
		if len(rest) > 0 {
			// The next prompt's turn begins, cancelled if a cancel came
			// while it waited: one sent before the prompt was is the
			// previous turn's, and does not carry over.
			s.turn = &turn{prompts: rest, cancelled: rest[0].cancelled}
		}
		return out
	case "session/load", "session/resume":
		if s, ok := c.sessions[req.sessionID]; ok && s.replay != nil && s.replay.id == id.key {
			s.replay = nil
		}
	}
	return nil
}

func (c *Checker) negotiate(line int, req *request, m object) []Violation {
	res, _ := m.obj("result")
	v, ok := res.integer("protocolVersion")
	if !ok {
		// The agent's answer says nothing the client can use, so the
		// client's request decides: assuming the capability would let
		// compaction updates to a client that never asked for them pass.
		v = req.requested
		if v != 1 && v != 2 {
			v = 1
		}
		c.proto = protocol{known: true, version: int(v), compaction: v == 2 || req.capable}
		gate := "without"
		if c.proto.compaction {
			gate = "with"
		}
		if v == 2 {
			gate = "v2, no capability needed"
		} else {
			gate = "v1, " + gate + " the compaction capability"
		}
		return []Violation{{line, RuleProtocol, fmt.Sprintf(
			"initialize response has no integer result.protocolVersion; checking as the client's request says (%s)", gate)}}
	}
	var out []Violation
	if req.requested >= 0 && v > req.requested {
		out = append(out, Violation{line, RuleProtocol, fmt.Sprintf(
			"agent answered protocolVersion %d to a client that asked for %d; it may only pick the client's version or a lower one (checking with the client's version)", v, req.requested)})
		// The client speaks what it asked for: its gate holds.
		v = req.requested
	} else if req.requested < 0 && v == 2 {
		out = append(out, Violation{line, RuleProtocol,
			"agent answered protocolVersion 2 to a client that named no version; checking with v1 rules"})
		v = 1
	}
	if v != 1 && v != 2 {
		out = append(out, Violation{line, RuleProtocol, fmt.Sprintf(
			"negotiated protocolVersion %d is neither 1 nor 2; checking with v1 rules", v)})
		v = 1
	}
	c.proto = protocol{known: true, version: int(v), compaction: v == 2 || req.capable}
	return out
}

func (c *Checker) update(line int, params json.RawMessage) []Violation {
	var out []Violation
	if !c.proto.known && !c.warned {
		c.warned = true
		out = append(out, Violation{line, RuleProtocol,
			"agent sent session/update before any initialize handshake; checking with v1 rules and the compaction capability assumed"})
	}
	schemaFailed := false
	if v := c.cfg.schema[c.version()]; v != nil {
		if err := v.Notification(params); err != nil {
			schemaFailed = true
			out = append(out, Violation{line, RuleSchema, fmt.Sprintf("session/update fails the v%d schema: %s", c.version(), oneLine(err))})
		}
	}
	p, _ := decodeObject(params)
	sid, okS := p.jsStr("sessionId")
	u, okU := p.obj("update")
	kind, okK := u.str("sessionUpdate")
	if !okS || !okU || !okK {
		if !schemaFailed {
			out = append(out, Violation{line, RuleMalformed,
				"session/update params need a string sessionId and an update object with a string sessionUpdate"})
		}
		return out
	}
	s := c.session(sid)
	// The kinds are spelt out here, not taken from package protocol
	// (protocol.KindStateUpdate and the rest), on purpose: the checker is
	// an independent oracle and shares no code with the engine it judges.
	switch kind {
	case "compaction_update", "compaction_summary_chunk":
		return append(out, c.compactionUpdate(line, s, kind, u, schemaFailed)...)
	case "agent_message_chunk":
		if c.fallbackApplies() {
			c.fallbackText(line, s, u)
		}
	case "state_update":
		if c.version() == 2 {
			return append(out, c.stateUpdate(line, s, u)...)
		}
	case "tool_call", "tool_call_update":
		if c.fallbackApplies() {
			return append(out, c.fallbackTool(line, s, u)...)
		}
	case "session_info_update":
		if c.fallbackApplies() {
			return append(out, c.fallbackMarkers(line, s, u)...)
		}
	}
	return out
}

// fallbackApplies reports a v1 client without the capability, the only
// client an agent should send fallback forms to.
func (c *Checker) fallbackApplies() bool {
	return c.proto.known && c.proto.version == 1 && !c.proto.compaction
}

func (c *Checker) stateUpdate(line int, s *session, u object) []Violation {
	state, _ := u.str("state")
	if state != "idle" {
		// running, requires_action and unknown states all mean busy; an
		// agent-initiated one opens a turn without a prompt.
		if s.turn == nil {
			s.turn = &turn{}
		}
		return nil
	}
	if s.turn == nil {
		return nil
	}
	out := c.settle(s, line, "when the agent reported the idle state_update")
	s.turn, s.lastTurnEnd = nil, line
	return out
}

// settle reports the compactions and fallbacks of the session's current
// turn that have not reached a terminal form.
func (c *Checker) settle(s *session, line int, when string) []Violation {
	var out []Violation
	for _, cp := range s.turn.comps {
		if !cp.terminal && !cp.reported {
			cp.reported = true
			out = append(out, Violation{line, RuleSettlement, fmt.Sprintf(
				"session %q: compaction %q is still %q %s; it must reach completed, failed or cancelled first (first seen at line %d)",
				s.id, cp.id, cp.status, when, cp.firstLine)})
		}
	}
	for _, f := range s.turn.fallbacks {
		if !f.settled && !f.reported {
			f.reported = true
			out = append(out, Violation{line, RuleFallback, fmt.Sprintf(
				"session %q: %s is still %q %s; a fallback must reach %s (first seen at line %d)",
				s.id, f.what, f.status, when, f.terminals, f.firstLine)})
		}
	}
	return out
}

func isTerminal(status string) bool {
	switch status {
	case "completed", "failed", "cancelled":
		return true
	}
	return false
}

func (c *Checker) compactionUpdate(line int, s *session, kind string, u object, schemaFailed bool) []Violation {
	malformed := func(msg string) []Violation {
		if schemaFailed {
			return nil
		}
		return []Violation{{line, RuleMalformed, fmt.Sprintf("session %q: %s", s.id, msg)}}
	}
	id, ok := u.jsStr("compactionId")
	if !ok {
		return malformed(kind + " without a string compactionId; a client drops it")
	}
	var status string
	if kind == "compaction_update" {
		if status, ok = u.str("status"); !ok {
			return malformed(fmt.Sprintf("compaction_update for compaction %q without a string status; a client drops it", id))
		}
	} else if _, ok := contentBlock(u["content"]); !ok {
		return malformed(fmt.Sprintf("compaction_summary_chunk for compaction %q whose content is not a content block; a client drops it", id))
	}
	if !c.capable() {
		where := ""
		if s.replay != nil {
			where = " during " + s.replay.method + " replay"
		}
		// The lifecycle of an update the client cannot read is moot, so
		// the gate is the only thing reported for it.
		return []Violation{{line, RuleCapability, fmt.Sprintf(
			"session %q: %s for compaction %q sent%s to a v1 client that did not advertise clientCapabilities.session.compaction as an object",
			s.id, kind, id, where)}}
	}
	if s.replay != nil {
		if c.cfg.strictReplay {
			return c.replayedStrict(line, s, kind, id, status, u)
		}
		return c.replayed(line, s, kind, id, status, u)
	}
	var out []Violation
	cp := s.comps[id]
	if cp != nil && cp.terminal {
		out = append(out, afterTerminal(line, s, cp, kind, status, ""))
	}
	if s.turn == nil {
		ended := "no turn has started"
		if s.lastTurnEnd > 0 {
			ended = fmt.Sprintf("the turn ended at line %d", s.lastTurnEnd)
		}
		out = append(out, Violation{line, RuleAfterTurn, fmt.Sprintf(
			"session %q: %s for compaction %q%s arrived with no turn open (%s); a client reads it as a new turn",
			s.id, kind, id, statusSuffix(status), ended)})
	}
	if cp == nil {
		cp = s.track(id, line)
		if s.turn != nil {
			s.turn.comps = append(s.turn.comps, cp)
		}
	}
	if !cp.apply(line, kind, status, u) {
		return out
	}
	if status == "cancelled" && s.turn != nil && !s.turn.cancelled {
		out = append(out, Violation{line, RuleCancel, fmt.Sprintf(
			"session %q: compaction %q ended cancelled but the client sent no session/cancel for this session in the turn; only a user cancel is a cancel, an interruption or provider failure is failed",
			s.id, id)})
	}
	return out
}

func statusSuffix(status string) string {
	if status == "" {
		return ""
	}
	return fmt.Sprintf(" (status %q)", status)
}

func (s *session) track(id jsID, line int) *compaction {
	cp := &compaction{id: id, status: StatusInProgress, firstLine: line}
	s.comps[id] = cp
	s.compOrder = append(s.compOrder, cp)
	return cp
}

func afterTerminal(line int, s *session, cp *compaction, kind, status, where string) Violation {
	var msg string
	switch {
	case kind == "compaction_summary_chunk":
		msg = fmt.Sprintf("chunk after terminal: compaction_summary_chunk for compaction %q after its terminal %q at line %d",
			cp.id, cp.status, cp.terminalLine)
	case isTerminal(status):
		msg = fmt.Sprintf("second terminal: compaction %q got status %q after its terminal %q at line %d; report exactly one terminal status",
			cp.id, status, cp.status, cp.terminalLine)
	default:
		msg = fmt.Sprintf("ID reused: compaction %q got status %q after its terminal %q at line %d; a compaction ID is never reused",
			cp.id, status, cp.status, cp.terminalLine)
	}
	return Violation{line, RuleTerminal, fmt.Sprintf("session %q: %s%s", s.id, msg, where)}
}

// replayed checks a compaction update inside a history replay, which has
// the same update, chunk and patch semantics as live delivery: each replay
// is judged on its own, and a compaction may be replayed terminal-first or
// re-streamed (in_progress, chunks, then its terminal). Only its summary
// needs care: a replay that appends chunks to content the client already
// holds on this connection, without clearing or replacing it first, makes
// the summary show twice.
func (c *Checker) replayed(line int, s *session, kind string, id jsID, status string, u object) []Violation {
	r := s.replay
	where := " during " + r.method + " replay"
	cp := s.comps[id]
	if !r.seen[id] {
		r.seen[id] = true
		// History overrides whatever the connection held for this ID,
		// except the summary content the client still holds.
		held, heldLine := false, 0
		if cp != nil {
			cp.reported = true
			held, heldLine = cp.summary, cp.summaryLine
		}
		cp = s.track(id, line)
		cp.summary, cp.summaryLine, cp.stale = held, heldLine, held
	} else if cp.terminal {
		return []Violation{afterTerminal(line, s, cp, kind, status, where)}
	}
	var out []Violation
	if kind == "compaction_summary_chunk" && cp.stale {
		out = append(out, Violation{line, RuleReplay, fmt.Sprintf(
			"session %q: compaction_summary_chunk for compaction %q%s appends to the summary the client already holds (received at line %d); clear or replace it first (summary null or a concrete summary) or it shows twice",
			s.id, id, where, cp.summaryLine)})
	}
	cp.apply(line, kind, status, u)
	return out
}

// replayedStrict checks a compaction update inside a history replay by this
// project's own rule (WithStrictReplay): every replayed compaction is one
// terminal compaction_update. Each replay is judged on its own: a settled
// compaction is replayed as one terminal compaction_update even if the
// connection saw it live, since the client may be rebuilding its view.
func (c *Checker) replayedStrict(line int, s *session, kind string, id jsID, status string, u object) []Violation {
	r := s.replay
	where := " during " + r.method + " replay"
	if r.seen[id] {
		cp := s.comps[id]
		if cp.terminal {
			return []Violation{afterTerminal(line, s, cp, kind, status, where)}
		}
		if cp.apply(line, kind, status, u) {
			return nil
		}
		return []Violation{{line, RuleReplay, fmt.Sprintf(
			"session %q: %s for compaction %q%s%s; a replayed compaction is one terminal compaction_update (strict replay)",
			s.id, kind, id, statusSuffix(status), where)}}
	}
	r.seen[id] = true
	// History overrides whatever the connection held for this ID.
	if old := s.comps[id]; old != nil {
		old.reported = true
	}
	cp := s.track(id, line)
	if cp.apply(line, kind, status, u) {
		return nil
	}
	// The replay violation already says it; it is not reported again as
	// never settled.
	cp.reported = true
	if kind == "compaction_update" {
		return []Violation{{line, RuleReplay, fmt.Sprintf(
			"session %q: first replayed update for compaction %q has status %q%s; strict replay must be terminal-first (no in_progress, no chunks)",
			s.id, id, status, where)}}
	}
	return []Violation{{line, RuleReplay, fmt.Sprintf(
		"session %q: compaction_summary_chunk for compaction %q%s; strict replay must be terminal-first, and chunks append to a summary the client may already hold",
		s.id, id, where)}}
}

// isCompactTool recognises the fallback compaction tool call: Claude's and
// codex's "Compact conversation" (Claude's also by its claudeCode
// toolName), and this project's fallback.ToolCall, whose title an agent may
// change but whose kind is "think" and whose ID is "compact-<compaction
// ID>". Kind "think" alone is not enough: agents use it for other tools.
// The "compact-" prefix is spelt out here rather than taken from
// fallback.ToolCallIDPrefix on purpose: the checker is an independent
// oracle and shares no code with the engine it judges.
func isCompactTool(id jsID, u object) bool {
	if t, _ := u.str("title"); t == "Compact conversation" {
		return true
	}
	if k, _ := u.str("kind"); k == "think" && strings.HasPrefix(string(id), "compact-") {
		return true
	}
	meta, _ := u.obj("_meta")
	cc, _ := meta.obj("claudeCode")
	name, _ := cc.str("toolName")
	return name == "compact"
}

func (c *Checker) fallbackTool(line int, s *session, u object) []Violation {
	id, ok := u.jsStr("toolCallId")
	if !ok {
		return nil
	}
	key := "tool\x00" + string(id)
	f := s.fallbacks[key]
	started := f == nil
	if started {
		if !isCompactTool(id, u) {
			return nil
		}
		f = &fallback{
			what:      fmt.Sprintf("fallback tool call %q (Compact conversation)", id),
			status:    "pending",
			firstLine: line,
			terminals: "completed or failed via tool_call_update",
		}
		s.addFallback(key, f)
	}
	st, hasStatus := u.str("status")
	// A tool call that starts, or moves on before it settled, outside a
	// turn reads as a new turn, as a standard update does. What follows
	// its settlement (Claude's rawOutput update) changes no state a client
	// shows as running.
	var out []Violation
	if s.turn == nil && s.replay == nil && (started || (hasStatus && !f.settled)) {
		ended := "no turn has started"
		if s.lastTurnEnd > 0 {
			ended = fmt.Sprintf("the turn ended at line %d", s.lastTurnEnd)
		}
		what := "started"
		if !started {
			what = "changed status"
		}
		out = append(out, Violation{line, RuleAfterTurn, fmt.Sprintf(
			"session %q: %s %s%s with no turn open (%s); a client reads it as a new turn",
			s.id, f.what, what, statusSuffix(st), ended)})
	}
	if hasStatus && !f.settled {
		f.status = st
		f.settled = st == "completed" || st == "failed"
	}
	return out
}

// The text fallback's start and outcomes: Claude's legacy text and this
// project's fallback.Text. Outcomes follow a separator ("\n\n") and may be
// followed by one before a summary, so surrounding whitespace is ignored.
const (
	textStarted       = "Compacting..."
	textCompleted     = "Compacting completed."
	textFailedBare    = "Compacting failed."
	textFailedPrefix  = "Compacting failed:" // then the error, if any
	textCancelled     = "Compacting cancelled."
	textOutcomesQuote = `"Compacting completed.", "Compacting failed: …", "Compacting failed." or "Compacting cancelled."`
)

// chunkText returns the text of an agent_message_chunk that may be a
// fallback text: a text block, in a chunk without a messageId (opencode's
// and codex's model text carries one, their compaction forms never do).
func chunkText(u object) (string, bool) {
	if raw, ok := u["messageId"]; ok && !isNull(raw) {
		return "", false
	}
	content, ok := u.obj("content")
	if !ok {
		return "", false
	}
	if t, _ := content.str("type"); t != "text" {
		return "", false
	}
	return content.str("text")
}

func isTextOutcome(text string) bool {
	switch text {
	case textCompleted, textFailedBare, textCancelled:
		return true
	}
	return strings.HasPrefix(text, textFailedPrefix)
}

// fallbackText follows the text fallback: a chunk that is exactly
// "Compacting..." opens one, the next outcome chunk settles the oldest open
// one of the session (text carries no ID). Prose that merely contains the
// words is neither. An outcome with nothing open is a replayed outcome,
// which never shows the start.
func (c *Checker) fallbackText(line int, s *session, u object) {
	text, ok := chunkText(u)
	if !ok {
		return
	}
	text = strings.TrimSpace(text)
	switch {
	case text == textStarted:
		// Only the connection's end judges it, so it joins no turn.
		f := &fallback{what: fmt.Sprintf("text fallback %q", textStarted), status: textStarted, firstLine: line, text: true}
		s.fbOrder = append(s.fbOrder, f)
		s.texts = append(s.texts, f)
	case isTextOutcome(text):
		if len(s.texts) > 0 {
			f := s.texts[0]
			s.texts = s.texts[1:]
			f.status, f.settled = text, true
		}
	}
}

func (s *session) addFallback(key string, f *fallback) {
	s.fallbacks[key] = f
	s.fbOrder = append(s.fbOrder, f)
	if s.turn != nil {
		s.turn.fallbacks = append(s.turn.fallbacks, f)
	}
}

func (c *Checker) fallbackMarkers(line int, s *session, u object) []Violation {
	meta, ok := u.obj("_meta")
	if !ok {
		return nil
	}
	var out []Violation
	for _, mk := range [...]struct{ key, idField string }{
		{"opencode/compaction", "messageId"},
		{"acpcompact/compaction", "compactionId"},
	} {
		val, ok := meta.obj(mk.key)
		if !ok {
			continue
		}
		status, _ := val.str("status")
		id, _ := val.jsStr(mk.idField)
		key := mk.key + "\x00" + string(id)
		f := s.fallbacks[key]
		switch {
		case status == "started":
			if f != nil && !f.settled {
				continue
			}
			s.addFallback(key, &fallback{
				what:      fmt.Sprintf("%s marker for %s %q", mk.key, mk.idField, id),
				status:    status,
				firstLine: line,
				terminals: "a completed, failed or cancelled marker",
			})
		case isTerminal(status):
			if f != nil && !f.settled {
				f.status, f.settled = status, true
			}
			if mk.key == "acpcompact/compaction" && status == "cancelled" && s.turn != nil && !s.turn.cancelled {
				out = append(out, Violation{line, RuleCancel, fmt.Sprintf(
					"session %q: acpcompact/compaction marker for compactionId %q is cancelled but the client sent no session/cancel for this session in the turn; an interruption or provider failure is failed",
					s.id, id)})
			}
		}
	}
	return out
}

// Close ends the stream and reports what was never settled. A prompt still
// unanswered is not a violation by itself: the transcript may simply stop.
// Later calls return nothing.
func (c *Checker) Close() []Violation {
	if c.closed {
		return nil
	}
	c.closed = true
	return c.endConnection("the transcript ended")
}

// endConnection reports what the connection left unsettled and forgets its
// requests and sessions, so the next connection starts from nothing.
func (c *Checker) endConnection(when string) []Violation {
	var out []Violation
	for _, s := range c.order {
		for _, cp := range s.compOrder {
			if !cp.terminal && !cp.reported {
				cp.reported = true
				out = append(out, Violation{cp.firstLine, RuleSettlement, fmt.Sprintf(
					"session %q: compaction %q never settled: still %q when %s", s.id, cp.id, cp.status, when)})
			}
		}
		for _, f := range s.fbOrder {
			if f.settled || f.reported {
				continue
			}
			f.reported = true
			if f.text {
				out = append(out, Violation{f.firstLine, RuleFallback, fmt.Sprintf(
					"session %q: %s never settled: no outcome text (%s) followed it when %s", s.id, f.what, textOutcomesQuote, when)})
				continue
			}
			out = append(out, Violation{f.firstLine, RuleFallback, fmt.Sprintf(
				"session %q: %s never settled: still %q when %s", s.id, f.what, f.status, when)})
		}
	}
	sortViolations(out)
	// The protocol stays until the new initialize is answered: a failed
	// re-initialize changes nothing.
	c.requests, c.sessions, c.order = map[string]*request{}, map[jsID]*session{}, nil
	return out
}

func sortViolations(vs []Violation) {
	slices.SortStableFunc(vs, func(a, b Violation) int { return cmp.Compare(a.Line, b.Line) })
}

// CheckTranscript reads a whole transcript and returns its violations in
// line order, malformed lines included as RuleTranscript. The error is the
// reader's; the violations found before it are still returned.
func CheckTranscript(r io.Reader, opts ...Option) ([]Violation, error) {
	c := NewChecker(opts...)
	var out []Violation
	err := NewScanner(r).Each(
		func(l Line) { out = append(out, c.Observe(l.Dir, l.N, l.Raw)...) },
		func(le *LineError) { out = append(out, Violation{le.N, RuleTranscript, le.Err.Error()}) })
	if err == nil {
		out = append(out, c.Close()...)
	}
	sortViolations(out)
	return out, err
}
