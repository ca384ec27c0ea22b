// Package tap is the transport-neutral core that agentkit (sourcegraph/jsonrpc2)
// and agentkit/acpsdk (coder/acp-go-sdk) share: it sees one connection's
// JSON-RPC messages in wire order, creates the connection's emitter from the
// initialize exchange, and scopes compactions to prompt turns. The transport
// packages only feed it the bytes they read and the messages they are about
// to write; it writes them, and its own, through one queue (out.go).
//
// Locks, in acquisition order: session.gate (held across emitter calls that
// may open a compaction, and while settling a session), session.mu (turn
// state), the emitter's own locks, the output queue's lock (see out.go),
// Tap.mu (maps; a leaf). Nothing is acquired while Tap.mu or the queue's
// lock is held; the transport's write runs with neither held.
package tap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
)

// ACP method names the tap reacts to.
const (
	MethodInitialize = "initialize"
	MethodPrompt     = "session/prompt"
	MethodCancel     = "session/cancel"
	MethodUpdate     = "session/update"
)

// Sentinel errors, re-exported by the public packages.
var (
	ErrNotInitialized = errors.New("agentkit: the connection's initialize exchange has not completed")
	ErrClosed         = errors.New("agentkit: the connection is closed")
	ErrUnknownConn    = errors.New("agentkit: the connection is not served by this kit (never was, or has closed)")
)

// DefaultCancelGrace is how long a runtime may take to report its
// compactions after session/cancel before the tap settles them itself.
const DefaultCancelGrace = 5 * time.Second

// Config is what the public packages' options set.
type Config struct {
	EmitterOptions []emitter.Option
	Fallback       emitter.Renderer
	// CancelGrace bounds the wind-down after session/cancel; zero settles at
	// once, a negative value waits for the end of the turn.
	CancelGrace time.Duration
	Logger      *slog.Logger
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config { return Config{CancelGrace: DefaultCancelGrace} }

// Tap is the per-connection state. It is safe for concurrent use.
type Tap struct {
	cfg Config
	log *slog.Logger
	out *outQueue // every message leaves whole, in one order (see out.go)

	mu         sync.Mutex
	em         *emitter.Emitter
	version    int
	closed     bool
	initKey    string
	initParams json.RawMessage
	prompts    map[string]*prompt
	sessions   map[string]*session
	onClose    []func()
}

type prompt struct {
	rawID json.RawMessage
	st    *session
	trace emitter.TraceContext
}

type session struct {
	id string

	// gate is held across every call that may open a compaction, so that
	// setting endingGen under it waits for such a call to finish.
	gate sync.Mutex

	mu        sync.Mutex
	active    bool   // a turn is in progress
	pending   int    // v1: prompts of this turn not yet answered
	cancelled bool   // the client sent session/cancel during this turn
	gen       uint64 // counts turns; changes only when one begins
	// endingGen is the gen of a turn whose end is being settled and
	// written (0 for none). Starts are refused while it equals gen: a turn
	// begun after the write is a new turn, whose starts are welcome even
	// though the old turn's bookkeeping has not finished.
	endingGen uint64
	trace     emitter.TraceContext
	binds     []context.CancelCauseFunc // handler contexts to cancel with the turn
	grace     *time.Timer
}

// New returns a tap that writes each message through out, without its
// newline. out is only ever called by one goroutine at a time, not
// necessarily the one whose write queued the message (see out.go).
func New(cfg Config, out func(msg []byte) error) *Tap {
	return newTap(cfg, newObjectQueue(func(v any) error {
		raw, ok := v.(json.RawMessage)
		if !ok {
			var err error
			if raw, err = json.Marshal(v); err != nil {
				return err
			}
		}
		return out(raw)
	}))
}

// NewObjects returns a tap that writes each message through write: a
// json.RawMessage, or an object given to Pass. write is only ever called by
// one goroutine at a time.
func NewObjects(cfg Config, write func(v any) error) *Tap {
	return newTap(cfg, newObjectQueue(write))
}

// NewWriter returns a tap that writes newline-terminated messages to w,
// several in one Write when they queue up faster than w takes them. w is
// only ever called by one goroutine at a time.
func NewWriter(cfg Config, w io.Writer) *Tap {
	return newTap(cfg, newLineQueue(w))
}

func newTap(cfg Config, q *outQueue) *Tap {
	l := cfg.Logger
	if l == nil {
		l = slog.Default()
	}
	return &Tap{
		cfg: cfg, log: l, out: q, version: capability.V1,
		prompts: make(map[string]*prompt), sessions: make(map[string]*session),
	}
}

// OnClose registers f to run once the tap closes. It reports false, and
// does not register f, when the tap is already closed.
func (t *Tap) OnClose(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.onClose = append(t.onClose, f)
	return true
}

// Emitter returns the connection's emitter, or nil before initialize.
func (t *Tap) Emitter() *emitter.Emitter {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.em
}

func (t *Tap) state() (*emitter.Emitter, int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.em, t.version, t.closed
}

func (t *Tap) session(id string) *session {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.sessions[id]
	if !ok {
		st = &session{id: id}
		t.sessions[id] = st
	}
	return st
}

func (t *Tap) lookup(id string) *session {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sessions[id]
}

// envelope is the part of a JSON-RPC message the tap reads.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// IDKey returns a comparable form of a raw JSON-RPC id ("" for none), so an
// id read off the wire matches the same id written back by either stack.
func IDKey(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return "s:" + s
		}
	}
	return "n:" + string(raw)
}

// Receive inspects one inbound message before the stack dispatches it. It
// returns the raw ids of pending session/prompt requests that this message
// cancelled, so a stack that only cancels requests by id can be told.
func (t *Tap) Receive(msg []byte) (cancelled []json.RawMessage) {
	msg = bytes.TrimSpace(msg)
	if len(msg) > 0 && msg[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(msg, &batch) == nil {
			for _, m := range batch {
				cancelled = append(cancelled, t.Receive(m)...)
			}
		}
		return cancelled
	}
	var env envelope
	if json.Unmarshal(msg, &env) != nil {
		return nil
	}
	key := IDKey(env.ID)
	switch env.Method {
	case MethodInitialize:
		if key != "" {
			t.mu.Lock()
			t.initKey, t.initParams = key, env.Params
			t.mu.Unlock()
		}
	case MethodPrompt:
		if key != "" {
			t.beginPrompt(key, env.ID, env.Params)
		}
	case MethodCancel:
		var p struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(env.Params, &p) == nil {
			return t.cancel(p.SessionID)
		}
	}
	return nil
}

func (t *Tap) beginPrompt(key string, rawID, params json.RawMessage) {
	var p struct {
		SessionID string                     `json:"sessionId"`
		Meta      map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p) // a malformed prompt is the agent's to reject
	st := t.session(p.SessionID)
	tr := TraceFromMeta(p.Meta)
	t.mu.Lock()
	t.prompts[key] = &prompt{rawID: rawID, st: st, trace: tr}
	t.mu.Unlock()
	st.mu.Lock()
	if !st.active {
		st.beginLocked()
	}
	st.pending++
	if tr.Traceparent != "" {
		st.trace = tr
	}
	st.mu.Unlock()
}

func (st *session) beginLocked() {
	st.gen++
	st.active, st.cancelled, st.pending = true, false, 0
	st.trace = emitter.TraceContext{}
}

// endLocked closes the turn: the deadline is dropped and the handler
// contexts bound to it are cancelled with cause.
func (st *session) endLocked(cause error) {
	st.active, st.cancelled, st.pending = false, false, 0
	if st.grace != nil {
		st.grace.Stop()
		st.grace = nil
	}
	for _, c := range st.binds {
		c(cause)
	}
	st.binds = nil
}

func (t *Tap) cancel(sessionID string) []json.RawMessage {
	st := t.lookup(sessionID)
	if st == nil {
		return nil
	}
	st.mu.Lock()
	if !st.active {
		st.mu.Unlock()
		return nil
	}
	first := !st.cancelled
	st.cancelled = true
	for _, c := range st.binds {
		c(emitter.ErrCancelled)
	}
	if first {
		t.armGraceLocked(st)
	}
	st.mu.Unlock()

	var ids []json.RawMessage
	t.mu.Lock()
	for _, p := range t.prompts {
		if p.st == st {
			ids = append(ids, p.rawID)
		}
	}
	t.mu.Unlock()
	return ids
}

// graceExpired settles what the runtime left open after a cancel: the
// client asked to stop, so it must not wait on a runtime that does not.
func (t *Tap) graceExpired(st *session, gen uint64) {
	st.gate.Lock()
	defer st.gate.Unlock()
	st.mu.Lock()
	// When the turn's end is under way, it settles them itself.
	ok := st.gen == gen && st.active && st.cancelled && st.endingGen != gen
	if st.gen == gen {
		st.grace = nil // a compaction started from now on gets a grace of its own
	}
	tr := st.trace
	st.mu.Unlock()
	if ok {
		t.settle(st.id, emitter.ErrCancelled, tr, "cancel grace expired")
	}
}

// armGraceLocked starts the wind-down deadline of a cancelled turn; st.mu
// must be held.
func (t *Tap) armGraceLocked(st *session) {
	if t.cfg.CancelGrace < 0 || st.grace != nil {
		return
	}
	gen := st.gen
	st.grace = time.AfterFunc(t.cfg.CancelGrace, func() { t.graceExpired(st, gen) })
}

// BindPrompt derives the context a session/prompt handler runs with: it is
// cancelled by session/cancel (even one that already arrived) with cause
// emitter.ErrCancelled, at the end of the turn with emitter.ErrTurnEnded and
// when the connection closes with emitter.ErrConnectionClosed, so a runtime
// can tell a user's cancel (context.Cause) from other ends; it carries the
// prompt's trace context.
func (t *Tap) BindPrompt(ctx context.Context, key string) context.Context {
	t.mu.Lock()
	p := t.prompts[key]
	t.mu.Unlock()
	if p == nil {
		return ctx
	}
	if p.trace.Traceparent != "" {
		ctx = emitter.WithTrace(ctx, p.trace)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	st := p.st
	st.mu.Lock()
	if st.cancelled {
		cancel(emitter.ErrCancelled)
	} else {
		st.binds = append(st.binds, cancel)
	}
	st.mu.Unlock()
	return ctx
}

// outbound is what Send needs to know about a message the agent writes.
type outbound struct {
	response     bool
	key          string
	result       json.RawMessage
	failed       bool
	sessionID    string
	state        string // the state of a state_update, else ""
	notification bool   // a request without an id: it may be written behind
}

var stateUpdateMark = []byte(`"state_update"`)

// classify reads what Send needs from an outbound message. Most messages
// are notifications that change nothing; scanHead recognises them without
// decoding (a single pass over the bytes), and everything else, or anything
// it is unsure of, is decoded.
func classify(msg []byte) outbound {
	if h, ok := scanHead(msg); ok && len(h.method) > 0 {
		// A message with a method is never a response; only a v2
		// state_update changes the turn.
		if string(h.method) != MethodUpdate || !bytes.Contains(msg, stateUpdateMark) {
			return outbound{notification: !h.id}
		}
	}
	return decodeOutbound(msg)
}

func decodeOutbound(msg []byte) outbound {
	var env envelope
	if json.Unmarshal(msg, &env) != nil {
		return outbound{}
	}
	key := IDKey(env.ID)
	if env.Method == "" {
		e := bytes.TrimSpace(env.Error)
		return outbound{response: key != "", key: key, result: env.Result, failed: len(e) > 0 && string(e) != "null"}
	}
	notification := key == ""
	// Only a v2 state_update changes the turn; skip decoding every other
	// update a second time.
	if env.Method != MethodUpdate || !bytes.Contains(env.Params, stateUpdateMark) {
		return outbound{notification: notification}
	}
	var p struct {
		SessionID string `json:"sessionId"`
		Update    struct {
			Kind  string `json:"sessionUpdate"`
			State string `json:"state"`
		} `json:"update"`
	}
	if json.Unmarshal(env.Params, &p) != nil || p.Update.Kind != "state_update" {
		return outbound{notification: notification}
	}
	return outbound{sessionID: p.SessionID, state: p.Update.State, notification: notification}
}

// head is what scanHead reads of a message's top-level members.
type head struct {
	method []byte // the raw (unescaped) method string, nil when absent
	id     bool   // an id member that is not null
}

// scanHead reads the top-level "method" and "id" members of a JSON object
// without decoding it, the way encoding/json would (keys match
// case-insensitively, the last duplicate wins). It reports false when msg
// is not an object it can read this way (an escape in a key or in the
// method, a non-ASCII key, a non-string method, malformed input), and the
// caller decodes it instead.
func scanHead(msg []byte) (h head, ok bool) {
	i := skipSpace(msg, 0)
	if i >= len(msg) || msg[i] != '{' {
		return h, false
	}
	i = skipSpace(msg, i+1)
	if i < len(msg) && msg[i] == '}' {
		return h, skipSpace(msg, i+1) == len(msg)
	}
	for {
		if i >= len(msg) || msg[i] != '"' {
			return h, false
		}
		j := i + 1
		for j < len(msg) && msg[j] != '"' {
			if c := msg[j]; c == '\\' || c >= 0x80 {
				return h, false
			}
			j++
		}
		if j >= len(msg) {
			return h, false
		}
		key := msg[i+1 : j]
		i = skipSpace(msg, j+1)
		if i >= len(msg) || msg[i] != ':' {
			return h, false
		}
		i = skipSpace(msg, i+1)
		end, ok := skipValue(msg, i)
		if !ok {
			return h, false
		}
		val := msg[i:end]
		switch {
		case asciiEqualFold(key, "method"):
			if val[0] != '"' || bytes.IndexByte(val, '\\') >= 0 {
				return h, false
			}
			h.method = val[1 : len(val)-1]
		case asciiEqualFold(key, "id"):
			h.id = string(val) != "null"
		}
		i = skipSpace(msg, end)
		if i >= len(msg) {
			return h, false
		}
		switch msg[i] {
		case ',':
			i = skipSpace(msg, i+1)
		case '}':
			return h, skipSpace(msg, i+1) == len(msg)
		default:
			return h, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string that starts at b[i] ('"').
func skipString(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return len(b), false
}

// skipValue returns the index after the value that starts at b[i]. It
// checks nesting and strings, not the full grammar: the caller only needs
// to find the members.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				j, ok := skipString(b, i)
				if !ok {
					return j, false
				}
				i = j
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return i, false
	}
	j := i
	for j < len(b) {
		c := b[j]
		if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			break
		}
		j++
	}
	return j, j > i
}

// asciiEqualFold compares a key with a lower-case ASCII name, ignoring
// ASCII case (keys with other bytes never reach it).
func asciiEqualFold(key []byte, name string) bool {
	if len(key) != len(name) {
		return false
	}
	for i := range key {
		c := key[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

// Pass queues a notification of the agent's own that the caller knows
// changes no turn (not a v2 state_update), without looking at it: on a tap
// of NewObjects the transport marshals v itself when it writes it, so v
// must not change once passed. It returns before the write (see out.go).
func (t *Tap) Pass(v any) error { return t.out.writeObject(v) }

// Send writes one message of the agent's own, after settling the open
// compactions of a turn the message ends: the response to a v1
// session/prompt, or a v2 idle state_update. The stack's writes and the
// emitter's notifications leave through the same lock, one message at a
// time, in the order they reach it. A notification may be written after
// Send returns (see out.go); anything else, a response in particular, is
// written, behind everything sent before it, when Send returns.
func (t *Tap) Send(msg []byte) error {
	m := classify(msg)
	switch {
	case m.response:
		t.mu.Lock()
		if t.em == nil && t.initKey != "" && m.key == t.initKey {
			t.initializedLocked(m.result, m.failed)
		}
		p := t.prompts[m.key]
		delete(t.prompts, m.key)
		v := t.version
		t.mu.Unlock()
		if p != nil && v != capability.V2 {
			return t.endTurn(p.st, msg, true)
		}
	case m.state != "":
		if _, v, _ := t.state(); v != capability.V2 {
			break
		}
		st := t.session(m.sessionID)
		switch m.state {
		case "idle":
			st.mu.Lock()
			active := st.active
			st.mu.Unlock()
			if active {
				return t.endTurn(st, msg, false)
			}
		case "running", "requires_action":
			st.mu.Lock()
			if !st.active {
				st.beginLocked()
			}
			st.mu.Unlock()
		}
	}
	return t.out.write(msg, !m.notification)
}

func (t *Tap) endTurn(st *session, msg []byte, prompt bool) error {
	st.gate.Lock()
	st.mu.Lock()
	gen := st.gen
	st.endingGen = gen
	reason := emitter.ErrTurnEnded
	if st.cancelled {
		reason = emitter.ErrCancelled
	}
	tr := st.trace
	last := true
	if prompt {
		st.pending--
		last = st.pending <= 0
	}
	st.mu.Unlock()
	st.gate.Unlock()

	t.settle(st.id, reason, tr, "turn ended")
	if last {
		// Before the write: the client may answer it with the next prompt
		// at once, and that prompt must find the turn over and begin its
		// own.
		st.mu.Lock()
		st.endLocked(emitter.ErrTurnEnded)
		st.mu.Unlock()
	}
	err := t.out.write(msg, true)
	st.mu.Lock()
	if st.endingGen == gen {
		st.endingGen = 0
	}
	st.mu.Unlock()
	return err
}

func (t *Tap) settle(sessionID string, reason error, tr emitter.TraceContext, why string) {
	em := t.Emitter()
	if em == nil {
		return
	}
	ctx := context.Background()
	if tr.Traceparent != "" {
		ctx = emitter.WithTrace(ctx, tr)
	}
	n, err := em.Session(sessionID).SettleAll(ctx, reason)
	if n > 0 {
		t.log.Info("agentkit: settled open compactions", "session", sessionID, "count", n, "why", why, "reason", reason.Error())
	}
	if err != nil {
		t.log.Warn("agentkit: settlement not delivered", "session", sessionID, "error", err)
	}
}

func (t *Tap) initializedLocked(result json.RawMessage, failed bool) {
	if failed {
		t.log.Warn("agentkit: initialize failed; compaction stays off until one succeeds")
		return
	}
	n := capability.Parse(t.initParams, result)
	for _, d := range n.Diagnostics {
		t.log.Warn("agentkit: initialize", "path", d.Path, "diagnostic", d.Message)
	}
	opts := []emitter.Option{emitter.WithNegotiation(n)}
	if t.cfg.Fallback != nil {
		opts = append(opts, emitter.WithFallback(t.cfg.Fallback))
	}
	opts = append(opts, t.cfg.EmitterOptions...)
	t.em = emitter.New(emitter.NotifierFunc(t.notify), opts...)
	t.version = t.em.Negotiation().Version
	t.log.Info("agentkit: compaction negotiated", "version", t.version, "mode", t.em.Mode().String(), "clientCapability", n.Compaction)
}

// notify is the emitter's Notifier. It ignores ctx: a cancelled turn must
// still be able to report, and a write in progress cannot be interrupted
// anyway.
func (t *Tap) notify(_ context.Context, sessionID string, update any) error {
	u, err := marshalUpdate(update)
	if err != nil {
		return err
	}
	return t.out.writeUpdate(sessionID, u)
}

// UpdateLine returns the session/update notification carrying update.
func UpdateLine(sessionID string, update any) ([]byte, error) {
	u, err := marshalUpdate(update)
	if err != nil {
		return nil, err
	}
	return appendUpdate(make([]byte, 0, len(updatePrefix)+len(sessionID)+len(u)+16), sessionID, u), nil
}

// appendUpdate appends the session/update notification of sessionID
// carrying the marshalled update u.
func appendUpdate(line []byte, sessionID string, u []byte) []byte {
	line = append(line, updatePrefix...)
	line = appendSessionID(line, sessionID)
	line = append(line, `,"update":`...)
	line = append(line, u...)
	return append(line, "}}"...)
}

const updatePrefix = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`

// marshalUpdate is json.Marshal(update). The emitter's own update types
// already marshal to json.Marshal's exact output, so their MarshalJSON is
// called directly, without json.Marshal's reflection and its final pass
// over the bytes.
func marshalUpdate(update any) ([]byte, error) {
	switch u := update.(type) {
	case *emitter.CompactionSummaryChunk:
		if u != nil {
			return u.MarshalJSON()
		}
	case *emitter.CompactionUpdate:
		if u != nil {
			return u.MarshalJSON()
		}
	case emitter.CompactionSummaryChunk:
		return u.MarshalJSON()
	case emitter.CompactionUpdate:
		return u.MarshalJSON()
	}
	return json.Marshal(update)
}

// appendSessionID appends id as json.Marshal writes a string: directly
// when it needs no escaping, as session IDs do.
func appendSessionID(buf []byte, id string) []byte {
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(id) // a string always marshals
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, id...)
	return append(buf, '"')
}

// Flush waits until every message queued so far has been written, for at
// most a few seconds when the client does not read, and returns the
// connection's write error, if any.
func (t *Tap) Flush() error { return t.out.flush() }

// Close settles every open compaction for reason and refuses new ones. It
// runs the OnClose hooks once, and returns once what was queued has been
// written (see Flush). Later calls do nothing.
func (t *Tap) Close(reason error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	ss := make([]*session, 0, len(t.sessions))
	for _, st := range t.sessions {
		ss = append(ss, st)
	}
	em, hooks := t.em, t.onClose
	t.onClose = nil
	t.mu.Unlock()

	for _, st := range ss {
		// Taking the gate waits for a Start that got past it before closed
		// was set, so SettleAll below sees its compaction.
		st.gate.Lock()
		st.mu.Lock()
		st.endingGen = st.gen
		st.mu.Unlock()
		st.gate.Unlock()
	}
	if em != nil {
		n, err := em.SettleAll(context.Background(), reason)
		if n > 0 {
			t.log.Info("agentkit: settled open compactions", "count", n, "why", "connection closed", "reason", reason.Error())
		}
		if err != nil {
			t.log.Debug("agentkit: settlement not delivered on a closing connection", "error", err)
		}
	}
	// Handler contexts end only now, so a runtime woken by them finds its
	// compactions already settled for the right reason.
	for _, st := range ss {
		st.mu.Lock()
		st.endLocked(reason)
		st.mu.Unlock()
	}
	for _, f := range hooks {
		f()
	}
	// The settlements, and anything queued before them, are on the wire
	// when Close returns (or the client stopped reading).
	if err := t.out.flush(); err != nil {
		t.log.Debug("agentkit: output not flushed on a closing connection", "error", err)
	}
}

// Closed reports whether Close ran.
func (t *Tap) Closed() bool {
	_, _, closed := t.state()
	return closed
}

// Crash settles every open compaction as failed because the agent
// panicked; the caller lets the panic go on.
func (t *Tap) Crash() {
	em := t.Emitter()
	if em == nil {
		_ = t.out.flush()
		return
	}
	n, err := em.SettleAll(context.Background(), emitter.ErrAgentCrashed)
	// The process is about to end: what is queued must be on the wire
	// before the panic goes on.
	if ferr := t.out.flush(); err == nil {
		err = ferr
	}
	t.log.Error("agentkit: handler panicked; open compactions settled as failed", "count", n, "deliveryError", err)
}

// usable gates every call that may open a compaction; st.gate is held.
func (t *Tap) usable(st *session) (*emitter.Emitter, error) {
	em, _, closed := t.state()
	st.mu.Lock()
	ending := st.endingGen != 0 && st.endingGen == st.gen
	st.mu.Unlock()
	switch {
	case closed:
		return nil, fmt.Errorf("session %s: %w", st.id, ErrClosed)
	case ending:
		return nil, fmt.Errorf("agentkit: session %s: %w", st.id, emitter.ErrTurnEnded)
	case em == nil:
		return nil, fmt.Errorf("session %s: %w", st.id, ErrNotInitialized)
	}
	return em, nil
}

// turnContext adds the turn's trace context when ctx carries none, so the
// observer of a compaction joins its prompt's trace whatever ctx the runtime
// passed.
func (t *Tap) turnContext(ctx context.Context, st *session) context.Context {
	if _, ok := emitter.TraceFrom(ctx); ok {
		return ctx
	}
	st.mu.Lock()
	tr, active := st.trace, st.active
	st.mu.Unlock()
	if active && tr.Traceparent != "" {
		return emitter.WithTrace(ctx, tr)
	}
	return ctx
}

// Start opens a compaction in sessionID; see emitter.Session.Start. It is
// refused while the session's turn is being settled, so nothing opens
// between the settlement and the message that ends the turn.
func (t *Tap) Start(ctx context.Context, sessionID string, opts ...emitter.StartOption) (*emitter.Compaction, error) {
	st := t.session(sessionID)
	st.gate.Lock()
	defer st.gate.Unlock()
	em, err := t.usable(st)
	if err != nil {
		return nil, err
	}
	c, err := em.Session(sessionID).Start(t.turnContext(ctx, st), opts...)
	if err == nil {
		// A runtime may start compacting after the client cancelled, even
		// after the cancel's grace ran out: the new compaction gets the
		// same bounded wind-down, rather than waiting for a watchdog.
		st.mu.Lock()
		if st.active && st.cancelled {
			t.armGraceLocked(st)
		}
		st.mu.Unlock()
	}
	return c, err
}

// Fail reports the failure of compaction id; see emitter.Session.Fail.
func (t *Tap) Fail(ctx context.Context, sessionID string, id emitter.ID, cause error, opts ...emitter.SettleOption) error {
	st := t.session(sessionID)
	st.gate.Lock()
	defer st.gate.Unlock()
	em, err := t.usable(st)
	if err != nil {
		return err
	}
	return em.Session(sessionID).Fail(t.turnContext(ctx, st), id, cause, opts...)
}

// Replay emits a settled compaction during history replay; see
// emitter.Session.Replay.
func (t *Tap) Replay(ctx context.Context, sessionID string, rec emitter.Record) error {
	em, _, closed := t.state()
	switch {
	case closed:
		return fmt.Errorf("session %s: %w", sessionID, ErrClosed)
	case em == nil:
		return fmt.Errorf("session %s: %w", sessionID, ErrNotInitialized)
	}
	return em.Session(sessionID).Replay(ctx, rec)
}

// SettleAll settles the session's open compactions; see
// emitter.Session.SettleAll.
func (t *Tap) SettleAll(ctx context.Context, sessionID string, reason error) (int, error) {
	em := t.Emitter()
	if em == nil {
		return 0, fmt.Errorf("session %s: %w", sessionID, ErrNotInitialized)
	}
	return em.Session(sessionID).SettleAll(ctx, reason)
}

// Open returns how many compactions of the session are open.
func (t *Tap) Open(sessionID string) int {
	em := t.Emitter()
	if em == nil {
		return 0
	}
	return em.Session(sessionID).Open()
}

// TraceFromMeta reads W3C trace context from an ACP _meta object's root
// keys.
func TraceFromMeta(meta map[string]json.RawMessage) emitter.TraceContext {
	str := func(k string) string {
		var s string
		if raw, ok := meta[k]; ok {
			_ = json.Unmarshal(raw, &s)
		}
		return s
	}
	return emitter.TraceContext{Traceparent: str("traceparent"), Tracestate: str("tracestate"), Baggage: str("baggage")}
}

// TraceFromParams reads the trace context of a request's params._meta.
func TraceFromParams(params json.RawMessage) emitter.TraceContext {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	return TraceFromMeta(p.Meta)
}
