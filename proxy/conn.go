package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/acpcompact/acpcompact/protocol"
)

// Side names for log positions.
const (
	sideClient = "client"
	sideAgent  = "agent"
	sideProxy  = "proxy"
)

// conn is one connection's state.
//
// The wire state (negotiation, requests in flight, turns, cancels and
// their grace, history replays) is the engine's (package turn); the
// proxy keeps none of its own, only what it shows the client: the
// emitter, the router and the translators' state.
//
// Two goroutines share it. The client pump only reads client lines, notes
// each with the engine and writes it to the agent; it never writes to the
// client. Everything that writes to the client (the agent pump, a
// cancel-grace timer, the final settlement) holds emu for a whole message,
// so the client's stream is never interleaved and the emitter, router and
// translator state (all guarded by emu) see one writer at a time. emu may
// be held while calling the engine, never the reverse (the engine calls
// back only from its timers, with no lock of its own held).
type conn struct {
	p   *Proxy
	log *slog.Logger
	e   *turn.Engine

	emu  sync.Mutex
	out  lineWriter
	cout *clientWriter // out's writer, which Run abandons when the client does not read
	// stopped: the connection has ended; set under emu (or, when Run
	// abandons a client that does not read, without it), read without it
	// so that the client pump never waits on a client write.
	stopped atomic.Bool
	// clientEnded: the client's input has ended, so the end of the
	// agent's output that follows is the connection closing, not the
	// agent crashing.
	clientEnded atomic.Bool
	em          *emitter.Emitter
	capable     bool
	router      *router
	trans       map[string]*transState
	synth       map[Translator]emitter.Renderer
	// ps is the agent's profile and what its signals need (translate.go).
	ps profState
	// settleWhy says why the proxy is settling, for the log line of each
	// compaction it settles; empty while the agent's own lines are handled.
	settleWhy string
	// wrote says the proxy made a line of its own while handling the
	// current agent line: a compaction update, which is never held back.
	wrote bool
	// line is the agent line being handled (the last one read), which
	// numbers the lines the proxy makes for the checker.
	line int

	ain       lineWriter // only the client pump writes to the agent
	ainMu     sync.Mutex // guards closing agentIn against the client pump
	ainClosed bool

	check *checkState

	// Scratch memory of the pumps: apick, aenv and asid belong to the
	// agent pump (under emu), cpick, cenv and csid to the client pump.
	apick, cpick skim.Picker
	aenv, cenv   envelope
	asid, csid   sidCache
	alr          *lineReader // the agent pump's reader
}

// ownAgentLine hands the memory of b, a part of the agent line being
// handled, over to the caller, when the reader can let it go (see
// lineReader.detach). Only the agent pump calls it.
func (c *conn) ownAgentLine(b []byte) bool { return c.alr != nil && c.alr.detach(b) }

func newConn(p *Proxy, clientOut io.Writer, agentIn io.Writer) *conn {
	cout := &clientWriter{w: clientOut}
	c := &conn{
		p:     p,
		log:   p.cfg.logger,
		out:   newLineWriter(cout),
		cout:  cout,
		ain:   newLineWriter(agentIn),
		trans: map[string]*transState{},
		synth: map[Translator]emitter.Renderer{
			ClaudeText:     fallback.Text(),
			ToolCall:       toolCallSynth{},
			OpencodeMarker: fallback.OpencodeMarker(),
		},
	}
	c.e = turn.New(turn.Config{CancelGrace: p.cfg.cancelGrace, OnGrace: c.graceRanOut})
	c.router = &router{c: c, tracks: map[trackKey]*track{}}
	if p.cfg.checker != nil {
		c.check = &checkState{ch: p.cfg.checker, which: p.cfg.checked, log: c.log}
	}
	return c
}

// ---- reading messages ----

// The members the proxy reads, in one pass over each line (skim.Picker):
// what the engine follows, and on the agent side what recognising a
// legacy signal and following a standard update read. Names match
// exactly: ACP's names are case-sensitive, and the proxy's peers are
// TypeScript and Rust programs that read them so.
var (
	clientSet = skim.Compile(
		[]string{"id"}, []string{"method"}, []string{"params"},
		[]string{"params", "sessionId"}, []string{"params", "requestId"}, []string{"params", "replayFrom"},
	)
	agentSet = skim.Compile(
		[]string{"id"}, []string{"method"}, []string{"result"}, []string{"error"},
		[]string{"params", "sessionId"}, []string{"params", "update"},
		[]string{"params", "update", "sessionUpdate"}, []string{"params", "update", "state"},
		[]string{"params", "update", "content"}, []string{"params", "update", "content", "type"},
		[]string{"params", "update", "content", "text"},
		[]string{"params", "update", "compactionId"}, []string{"params", "update", "status"},
		[]string{"params", "update", "toolCallId"}, []string{"params", "update", "title"},
		[]string{"params", "update", "_meta", "claudeCode", "toolName"},
		[]string{"params", "update", "_meta", opencodeMarkerKey},
	)
)

// Indexes of clientSet's values.
const (
	cID = iota
	cMethod
	cParams
	cSession
	cRequestID
	cReplayFrom
)

// Indexes of agentSet's values.
const (
	aID = iota
	aMethod
	aResult
	aError
	aSession
	aUpdate
	aKind
	aState
	aContent
	aContentType
	aContentText
	aCompactionID
	aStatus
	aToolCallID
	aTitle
	aToolName
	aMarker
)

// envelope is what the proxy read of one message. Its raw values are
// sub-slices of the line, valid until the pump's next read.
type envelope struct {
	v         [][]byte
	method    string
	hasMethod bool
	sessionID string // params.sessionId when it is a non-empty string
	kind      string // params.update.sessionUpdate
	// response: a message without a method that answers a request. For a
	// line read from its head only, that is one whose result or error
	// member begins in the head.
	response bool
	failed   bool // a response with a non-null error
	// head: read from the head of an over-long line; values the head cut
	// are nil.
	head bool
}

// read fills env from the values of one pick.
func (env *envelope) read(v [][]byte, methodAt, sessionAt int, sid *sidCache) {
	*env = envelope{v: v}
	env.method, env.hasMethod = skim.String(v[methodAt])
	env.sessionID = sid.get(v[sessionAt])
}

// readAgent fills env from an agent message's values; started is nil for
// a whole message (see skim.Prefix).
func (env *envelope) readAgent(v [][]byte, started []bool, sid *sidCache) {
	env.read(v, aMethod, aSession, sid)
	env.head = started != nil
	env.kind, _ = skim.String(v[aKind])
	switch {
	case env.hasMethod:
	case env.head:
		env.response = v[aID] != nil && (started[aResult] || started[aError])
		env.failed = started[aError] && !(v[aError] != nil && skim.IsNull(v[aError]))
	default:
		env.response = true
		env.failed = !skim.IsNull(v[aError])
	}
}

// agentMsg is what the engine reads of an agent message.
func (env *envelope) agentMsg(m *turn.Msg) {
	*m = turn.Msg{SessionID: env.sessionID}
	switch {
	case env.hasMethod:
		m.Method = env.method
		if env.kind == "state_update" {
			m.State, _ = skim.String(env.v[aState])
		}
	case env.response:
		m.ID = skim.IDKey(env.v[aID])
		m.Failed = env.failed
		m.Result = json.RawMessage(env.v[aResult])
	}
}

// clientMsg is what the engine reads of a client message; started is nil
// for a whole message.
func (env *envelope) clientMsg(m *turn.Msg, started []bool) {
	*m = turn.Msg{SessionID: env.sessionID}
	if !env.hasMethod {
		return // an answer to one of the agent's requests: nothing to follow
	}
	v := env.v
	m.Method = env.method
	m.ID = skim.IDKey(v[cID])
	if m.ID != "" {
		m.RawID = json.RawMessage(v[cID])
	}
	m.Params = json.RawMessage(v[cParams])
	m.RequestID = skim.IDKey(v[cRequestID])
	// A replay cursor that runs past the head is taken to be one (not
	// null).
	m.ReplayFrom = !skim.IsNull(v[cReplayFrom]) || (started != nil && started[cReplayFrom] && v[cReplayFrom] == nil)
}

// isCompaction reports a standard compaction update or summary chunk.
func (env *envelope) isCompaction() bool {
	return env.hasMethod && env.method == turn.MethodUpdate &&
		(env.kind == protocol.KindUpdate || env.kind == protocol.KindSummaryChunk)
}

// batchable reports whether an agent message may wait in an output buffer
// for the lines already read behind it. Only notifications of the
// ordinary, streaming kind may: a request or response, whose peer may be
// waiting on it, and an update that ends a compaction or a turn are
// written at once.
func (env *envelope) batchable() bool {
	return env.hasMethod && skim.IsNull(env.v[aID]) &&
		env.kind != protocol.KindUpdate && env.kind != "state_update"
}

// sidCache decodes session IDs, reusing the last one's string: nearly
// every line of a connection names the same session.
type sidCache struct{ raw, sid string }

// get decodes a raw session ID; "" for anything but a non-empty string.
func (c *sidCache) get(raw []byte) string {
	if raw == nil {
		return ""
	}
	if c.sid != "" && string(raw) == c.raw {
		return c.sid
	}
	sid, ok := skim.String(raw)
	if !ok {
		return ""
	}
	c.raw, c.sid = string(raw), sid
	return sid
}

// isBatch reports a JSON-RPC batch: a message that is a JSON array.
func isBatch(msg []byte) bool {
	t := bytes.TrimLeft(msg, " \t\r\n")
	return len(t) > 0 && t[0] == '['
}

func isBlank(b []byte) bool { return len(bytes.TrimSpace(b)) == 0 }

// clip shortens a line for a log message.
func clip(b []byte) string {
	const n = 120
	if len(b) > n {
		return string(bytes.ToValidUTF8(b[:n], nil)) + "…"
	}
	return string(bytes.ToValidUTF8(b, nil))
}

// ---- client → agent ----

// pumpClient forwards client lines to the agent unchanged, noting each
// with the engine first. It never writes to the client.
func (c *conn) pumpClient(ctx context.Context, r io.Reader) {
	lr := newLineReader(r, c.p.cfg.maxLine)
	for {
		line, long, rerr := lr.next()
		if c.stopped.Load() {
			return
		}
		if len(line) > 0 {
			if long {
				c.clientHead(lr.n, line)
				if c.toAgent(line, false) != nil {
					return
				}
				if err := lr.copyRest(func(b []byte) error { return c.toAgent(b, false) }); err != nil {
					rerr = err
				}
				if c.toAgent(nil, true) != nil {
					return
				}
			} else {
				// Holding the line back costs nothing when the next one is
				// already here, and saves a write.
				hold := c.fromClient(lr.n, line) && lr.ready()
				if c.toAgent(line, !hold) != nil {
					return
				}
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				c.log.Warn("reading the client failed", "side", sideClient, "line", lr.n, "error", rerr)
			}
			// Before the agent can learn of it: the end of its output
			// that follows is the connection closing.
			c.clientEnded.Store(true)
			c.closeAgentIn()
			return
		}
	}
}

// toAgent queues b for the agent and, with flush, writes what is queued.
func (c *conn) toAgent(b []byte, flush bool) error {
	c.ainMu.Lock()
	defer c.ainMu.Unlock()
	if c.ainClosed {
		return io.ErrClosedPipe
	}
	err := c.ain.forward(b)
	if err == nil && flush {
		err = c.ain.flush()
	}
	if err != nil {
		c.log.Debug("the agent's input is closed; client lines are no longer delivered", "error", err)
		return err
	}
	return nil
}

func (c *conn) closeAgentIn() {
	c.ainMu.Lock()
	defer c.ainMu.Unlock()
	c.closeAgentInLocked()
}

// endAgentIn closes agentIn when Run returns. The client pump may be
// stuck writing to an agent that does not read: after the stop timeout
// the writer is closed under it, which ends such a write where the writer
// allows (a pipe made by os.Pipe does).
func (c *conn) endAgentIn() {
	if !lockWithin(&c.ainMu, c.p.cfg.stopTimeout) {
		if cl, ok := c.ain.w.(io.Closer); ok {
			_ = cl.Close()
		}
		return
	}
	defer c.ainMu.Unlock()
	c.closeAgentInLocked()
}

func (c *conn) closeAgentInLocked() {
	if c.ainClosed {
		return
	}
	c.ainClosed = true
	// What the client pump queued was accepted: it reaches the agent
	// before the end of file does.
	_ = c.ain.flush()
	if cl, ok := c.ain.w.(io.Closer); ok {
		_ = cl.Close()
	}
}

// fromClient notes one client line with the engine before it is
// forwarded, so that the agent's answer can never overtake the note. It
// reports whether the line may wait for the next one: a notification
// other than a cancel.
func (c *conn) fromClient(n int, line []byte) (batchable bool) {
	msg := trimEOL(line)
	if isBlank(msg) {
		return false
	}
	if isBatch(msg) {
		if !turn.Batch(msg, func(elem []byte) { c.clientMessage(n, elem) }) {
			c.log.Warn("malformed line; forwarded as is", "side", sideClient, "line", n, "error", "invalid batch", "text", clip(msg))
		}
		return false
	}
	m, ok := c.clientMessage(n, msg)
	return ok && m.Method != "" && m.ID == "" && m.Method != turn.MethodCancel && m.Method != turn.MethodCancelReq
}

// clientMessage notes one client message (a line, or one message of a
// batch).
func (c *conn) clientMessage(n int, msg []byte) (m turn.Msg, ok bool) {
	v, err := c.cpick.Pick(msg, clientSet)
	if err != nil {
		c.log.Warn("malformed line; forwarded as is", "side", sideClient, "line", n, "error", err, "text", clip(msg))
		return m, false
	}
	c.check.observe(conformance.FromClient, sideClient, n, msg)
	env := &c.cenv
	env.read(v, cMethod, cSession, &c.csid)
	env.clientMsg(&m, nil)
	c.e.Client(&m)
	return m, true
}

// clientHead notes a client line longer than the inspection limit from
// its head: its id, method and session usually precede the big part (a
// prompt's content), so a prompt is followed even when its content is not
// read.
func (c *conn) clientHead(n int, head []byte) {
	pre, err := skim.PickPrefix(head, clientSet)
	if err != nil {
		c.log.Warn("malformed line; forwarded as is", "side", sideClient, "line", n, "error", err, "text", clip(head))
		return
	}
	env := &c.cenv
	env.read(pre.Values, cMethod, cSession, &c.csid)
	var m turn.Msg
	env.clientMsg(&m, pre.Started)
	c.log.Debug("line longer than the inspection limit; followed from its head",
		"side", sideClient, "line", n, "limit", c.p.cfg.maxLine, "method", m.Method)
	if m.Method == turn.MethodInitialize && pre.Values[cParams] == nil {
		c.log.Warn("initialize too long to read its capabilities; the client is taken to lack the compaction capability",
			"side", sideClient, "line", n, "limit", c.p.cfg.maxLine)
	}
	if c.check != nil && m.Method != "" {
		// The checker follows the turn from a stand-in of what was read.
		v := pre.Values
		c.check.observe(conformance.FromClient, sideClient, n, standIn(
			"id", v[cID], "method", v[cMethod], "params", standIn("sessionId", v[cSession], "requestId", v[cRequestID], "replayFrom", v[cReplayFrom])))
	}
	c.e.Client(&m)
}

// standIn is a JSON object of the raw members given as name, value pairs,
// those without a value left out: a small message standing, for the
// checker, for an over-long one of which only the head was read.
func standIn(members ...any) []byte {
	b := []byte{'{'}
	if members[0] == "id" {
		b = append(b, `"jsonrpc":"2.0"`...)
	}
	for i := 0; i+1 < len(members); i += 2 {
		v := members[i+1].([]byte)
		if v == nil {
			continue
		}
		if b[len(b)-1] != '{' {
			b = append(b, ',')
		}
		b = append(append(append(b, '"'), members[i].(string)...), `":`...)
		b = append(b, v...)
	}
	return append(b, '}')
}

// graceRanOut is the engine's cancel-grace callback: a cancelled turn's
// compactions still open are settled as cancelled, since the agent did not
// settle them in time.
func (c *conn) graceRanOut(g turn.Grace) {
	c.emu.Lock()
	defer c.emu.Unlock()
	if !c.e.GraceDue(g) || c.stopped.Load() || c.em == nil {
		return
	}
	c.settleSession(context.Background(), g.Session, emitter.ErrCancelled, "the cancel grace period ended")
	_ = c.out.flush() // a failure is sticky: the agent pump reports it
}

// ---- agent → client ----

type action int

const (
	forward action = iota // the agent's line goes to the client as it came
	drop                  // the proxy wrote its replacement, if any
)

// pumpAgent forwards agent lines to the client, correcting compaction
// reporting, and settles what is open when the agent's output ends.
func (c *conn) pumpAgent(ctx context.Context, r io.Reader) error {
	lr := newLineReader(r, c.p.cfg.maxLine)
	c.alr = lr
	for {
		line, long, rerr := lr.next()
		if len(line) > 0 {
			werr, err := c.fromAgent(ctx, lr, line, long)
			if werr != nil {
				// The client is gone: nothing the proxy settles reaches it.
				c.finish(ctx, emitter.ErrConnectionClosed)
				return werr
			}
			if err != nil {
				rerr = err
			}
		}
		if c.stopped.Load() {
			return nil // Run stopped on its context and settled already
		}
		if rerr != nil {
			reason := c.p.cfg.exitReason
			if ctx.Err() != nil || c.clientEnded.Load() || c.p.terminating.Load() {
				// Run closed agentOut to stop, or the agent's output
				// ended after the client's input did or after the host
				// began to end the connection: the connection closed,
				// and the agent did not crash.
				reason = emitter.ErrConnectionClosed
			}
			c.finish(ctx, reason)
			if errors.Is(rerr, io.EOF) {
				return nil
			}
			return fmt.Errorf("%w: line %d: %w", ErrAgentOutput, lr.n, rerr)
		}
	}
}

// fromAgent handles one agent line. werr is a failed write to the client,
// rerr a failed read of the remainder of an overlong line.
func (c *conn) fromAgent(ctx context.Context, lr *lineReader, line []byte, long bool) (werr, rerr error) {
	c.emu.Lock()
	defer c.emu.Unlock()
	if c.stopped.Load() {
		return nil, nil
	}
	n := lr.n
	c.line = n
	c.wrote = false
	c.beforeLine(line)
	if long {
		return c.agentHead(ctx, lr, line)
	}
	msg := trimEOL(line)
	act, out, hold := forward, line, false
	var ends []*turn.End
	// observed is the message the checker sees on the client's side
	// once written (nil: none).
	var observed []byte
	switch {
	case isBlank(msg):
	case isBatch(msg):
		out, ends = c.agentBatch(ctx, n, msg, line)
	default:
		v, err := c.apick.Pick(msg, agentSet)
		if err != nil {
			c.log.Warn("malformed line; forwarded as is", "side", sideAgent, "line", n, "error", err, "text", clip(msg))
			break
		}
		env := &c.aenv
		env.readAgent(v, nil, &c.asid)
		hold = env.batchable()
		if c.check.agentSide() {
			c.check.observe(conformance.FromAgent, sideAgent, n, msg)
		}
		var end *turn.End
		act, end = c.agentMessage(ctx, n, env, msg)
		ends = append(ends, end)
		observed = msg
	}
	if act == forward && out != nil {
		werr = c.out.forward(out)
		if werr == nil && observed != nil && c.check.clientSide() {
			c.check.observe(conformance.FromAgent, sideAgent, n, observed)
		}
	}
	// The turn's end is written (or could not be): the engine may begin
	// the next one.
	for _, end := range ends {
		c.e.Ended(end)
	}
	if werr != nil {
		return c.clientErr(werr), nil
	}
	// The client sees this line, and any the proxy made for it, as soon as
	// no further agent line is at hand, or at once when it may be waiting
	// on it. lr.ready is asked last: reading it costs a scan.
	if !hold || c.wrote || !lr.ready() {
		if err := c.out.flush(); err != nil {
			return c.clientErr(err), nil
		}
	}
	if c.out.err != nil {
		return c.clientErr(c.out.err), nil
	}
	return nil, nil
}

// agentHead handles an agent line longer than the inspection limit from
// its head: the engine reads what the head holds (the answer that ends a
// turn is settled before it), and a compaction update that a v1 client
// without the capability may not receive is dropped, since it can neither
// be forwarded nor, unread, rewritten. Anything else streams through.
// Callers hold emu.
func (c *conn) agentHead(ctx context.Context, lr *lineReader, head []byte) (werr, rerr error) {
	n := lr.n
	act := forward
	var end *turn.End
	pre, err := skim.PickPrefix(head, agentSet)
	if err != nil {
		c.log.Warn("malformed line; forwarded as is", "side", sideAgent, "line", n, "error", err, "text", clip(head))
	} else {
		env := &c.aenv
		env.readAgent(pre.Values, pre.Started, &c.asid)
		var m turn.Msg
		env.agentMsg(&m)
		eff := c.e.Agent(&m)
		end = c.effect(ctx, eff, &m)
		if env.response && eff.Request != "" && c.check != nil {
			// The checker follows the turn from a stand-in of the answer.
			answer := []byte(`{}`)
			if m.Failed {
				answer = []byte(`{"code":-32603,"message":"(longer than the proxy's inspection limit)"}`)
			}
			defer c.check.observe(conformance.FromAgent, sideAgent, n, standIn("id", env.v[aID], map[bool]string{false: "result", true: "error"}[m.Failed], answer))
		}
		log := c.log.With("side", sideAgent, "line", n, "limit", c.p.cfg.maxLine)
		switch {
		case !env.isCompaction() || c.em == nil:
			log.Debug("line longer than the inspection limit; followed from its head", "method", env.method)
		case !c.capable:
			act = drop
			log.Warn("dropped a compaction update longer than the inspection limit: the client lacks the capability, and it cannot be rewritten unread",
				"session", env.sessionID)
		default:
			id, _ := skim.String(pre.Values[aCompactionID])
			if _, settled := c.router.state(trackKey{env.sessionID, protocol.ID(id)}); settled && id != "" {
				act = drop
				log.Info("dropped the agent's update of a compaction the proxy already settled", "session", env.sessionID, "compaction", id)
				break
			}
			log.Info("compaction update longer than the inspection limit forwarded unread; its compaction is not followed", "session", env.sessionID)
		}
	}
	defer c.e.Ended(end)
	if act == drop {
		return nil, lr.copyRest(func([]byte) error { return nil })
	}
	// The rest may be slow to come: what precedes it leaves first.
	if err := c.out.forward(head); err != nil {
		return c.clientErr(err), nil
	}
	if err := c.out.flush(); err != nil {
		return c.clientErr(err), nil
	}
	rerr = lr.copyRest(c.out.forward)
	if err := c.out.flush(); err != nil {
		return c.clientErr(err), nil
	}
	return nil, rerr
}

// agentBatch handles a JSON-RPC batch from the agent. The engine notes
// each message of it, and a turn one of them ends is settled before the
// batch is written; nothing in it is translated. A compaction update that a
// v1 client without the capability may not receive is dropped from it;
// the rest is forwarded, in order (out is line itself when nothing was
// dropped, nil when nothing is left). Callers hold emu.
func (c *conn) agentBatch(ctx context.Context, n int, msg, line []byte) (out []byte, ends []*turn.End) {
	var kept, checked [][]byte
	dropped := 0
	valid := turn.Batch(msg, func(elem []byte) {
		v, err := c.apick.Pick(elem, agentSet)
		if err != nil {
			// The log reports it; the checker would only repeat it.
			c.log.Warn("malformed line; forwarded as is", "side", sideAgent, "line", n, "error", err, "text", clip(elem))
			kept = append(kept, elem)
			return
		}
		env := &c.aenv
		env.readAgent(v, nil, &c.asid)
		if c.check.agentSide() {
			c.check.observe(conformance.FromAgent, sideAgent, n, elem)
		}
		var m turn.Msg
		env.agentMsg(&m)
		c.ps.lastError = env.v[aError]
		ends = append(ends, c.effect(ctx, c.e.Agent(&m), &m))
		if env.isCompaction() && c.em != nil && !c.capable {
			c.log.Warn("dropped a compaction update inside a batch: the client lacks the capability",
				"session", env.sessionID, "side", sideAgent, "line", n)
			dropped++
			return
		}
		kept = append(kept, elem)
		checked = append(checked, elem)
	})
	if !valid {
		c.log.Warn("malformed line; forwarded as is", "side", sideAgent, "line", n, "error", "invalid batch", "text", clip(msg))
		return line, nil
	}
	if c.check.clientSide() {
		for _, elem := range checked {
			c.check.observe(conformance.FromAgent, sideAgent, n, elem)
		}
	}
	switch {
	case dropped == 0:
		return line, ends
	case len(kept) == 0:
		return nil, ends
	}
	b := append(make([]byte, 0, len(line)), '[')
	b = append(b, bytes.Join(kept, []byte{','})...)
	return append(b, ']', '\n'), ends
}

func (c *conn) clientErr(err error) error { return fmt.Errorf("%w: %w", ErrClientClosed, err) }

// writeToClient writes a message the proxy made. Callers hold emu.
func (c *conn) writeToClient(msg []byte) error {
	c.wrote = true
	if err := c.out.line(msg); err != nil {
		return c.clientErr(err)
	}
	if c.check.clientSide() {
		c.check.observe(conformance.FromAgent, sideProxy, c.line, msg)
	}
	return nil
}

// Notify implements emitter.Notifier: the emitter's updates go into the
// client's stream at the position of the agent line being handled.
func (c *conn) Notify(_ context.Context, sessionID string, update any) error {
	u, err := json.Marshal(update)
	if err != nil {
		return err
	}
	msg, err := json.Marshal(notification{JSONRPC: "2.0", Method: turn.MethodUpdate, Params: updateParams{SessionID: sessionID, Update: u}})
	if err != nil {
		return err
	}
	return c.writeToClient(msg)
}

type notification struct {
	JSONRPC string       `json:"jsonrpc"`
	Method  string       `json:"method"`
	Params  updateParams `json:"params"`
}

type updateParams struct {
	SessionID string          `json:"sessionId"`
	Update    json.RawMessage `json:"update"`
}

// agentMessage routes one agent message: the engine reads it first, and
// the turn it ends is settled before it is written (the caller reports the
// write with Ended). Callers hold emu.
func (c *conn) agentMessage(ctx context.Context, n int, env *envelope, msg []byte) (action, *turn.End) {
	var m turn.Msg
	env.agentMsg(&m)
	c.ps.lastError = env.v[aError]
	end := c.effect(ctx, c.e.Agent(&m), &m)
	if env.hasMethod && env.method == turn.MethodUpdate && c.em != nil {
		return c.update(ctx, n, env, msg), end
	}
	return forward, end
}

// effect carries out what an agent message means to the connection: the
// negotiation an initialize answer brings, the settlement of the turn a
// message ends (before the message is written), and the end of a session
// the agent closed. Callers hold emu.
func (c *conn) effect(ctx context.Context, eff turn.Effect, m *turn.Msg) *turn.End {
	// The error member of this message, read only here (see failedTurn).
	errMember := c.ps.lastError
	c.ps.lastError = nil
	switch {
	case eff.Negotiated != nil:
		c.negotiate(*eff.Negotiated, m.Result)
	case eff.Request == turn.MethodInitialize && !m.Failed && c.em != nil:
		c.log.Warn("a second initialize exchange is ignored; the first one's mode stays")
	}
	if end := eff.End; end != nil {
		reason, why := c.p.cfg.turnReason, "the agent reported the idle state_update"
		if end.Cancelled {
			reason = emitter.ErrCancelled
		}
		switch eff.Request {
		case turn.MethodPrompt:
			why = "the agent answered session/prompt"
		case turn.MethodClose:
			why = "the agent answered session/close"
		}
		if m.Failed && !end.Cancelled && c.em != nil {
			// What is left open fails with the agent's own error text.
			reason = c.failedTurn(ctx, end.Session, errMember, reason)
		}
		c.settleSession(ctx, end.Session, reason, why)
		c.turnEnded(end.Session)
	}
	if sid := eff.Closed; sid != "" {
		c.closeSession(ctx, sid)
	}
	return eff.End
}

// negotiate starts the emitter for the negotiated connection. Only the
// first successful initialize exchange counts (the engine reports it
// once): a second one would strand the compactions the first emitter
// tracks.
func (c *conn) negotiate(n capability.Negotiation, result []byte) {
	for _, d := range n.Diagnostics {
		c.log.Warn("initialize: "+d.Message, "path", d.Path)
	}
	c.chooseProfile(result)
	c.capable = n.Version == capability.V2 || n.Compaction
	c.em = emitter.New(c,
		emitter.WithNegotiation(n),
		// The router picks each compaction's form, so the emitter is
		// always in fallback mode with the router as its renderer.
		emitter.WithPolicy(func(capability.Negotiation, bool) capability.Mode { return capability.Fallback }),
		emitter.WithFallback(c.router),
		// The agent already decided what of a summary its client may see;
		// what the proxy derives from its text goes through the policy.
		emitter.WithSummaryPolicy(c.summaryPolicy),
		emitter.WithObserver(emitter.ObserverFunc(c.observe)),
	)
	mode := "standard updates"
	switch {
	case c.capable:
	case c.p.cfg.fallback != nil:
		mode = "fallback rendering"
	default:
		mode = "legacy signals untouched"
	}
	c.log.Info("initialize negotiated", "version", n.Version, "capability", n.Compaction, "compaction", mode)
}

// observe logs what the emitter refused or could not deliver.
func (c *conn) observe(ctx context.Context, ev emitter.Event) {
	switch ev.Kind {
	case emitter.EventDropped, emitter.EventUndeliverable:
		c.log.Log(ctx, slog.LevelDebug, "compaction "+ev.Kind.String(), "session", ev.SessionID, "compaction", string(ev.ID), "error", ev.Err)
	}
}

// settleSession ends every open compaction of a session: cancelled for
// emitter.ErrCancelled, otherwise failed with reason. Callers hold emu.
func (c *conn) settleSession(ctx context.Context, sid string, reason error, why string) {
	if c.em == nil {
		return
	}
	c.settleWhy = why
	defer func() { c.settleWhy = "" }()
	c.beforeSettle(ctx, sid, reason)
	if _, err := c.em.Session(sid).SettleAll(ctx, reason); err != nil {
		c.log.Debug("settling failed", "session", sid, "error", err)
	}
}

// closeSession ends a session the agent closed: a compaction opened
// between turns ends with it, and the emitter, the router and the
// translators forget it, so that the proxy's memory is bounded by the
// sessions that are live, not by every session the connection saw.
// Callers hold emu.
func (c *conn) closeSession(ctx context.Context, sid string) {
	if c.em != nil {
		c.settleWhy = "the agent answered session/close"
		c.beforeSettle(ctx, sid, c.p.cfg.turnReason)
		if _, err := c.em.CloseSession(ctx, sid, c.p.cfg.turnReason); err != nil {
			c.log.Debug("settling failed", "session", sid, "error", err)
		}
		c.settleWhy = ""
	}
	delete(c.trans, sid)
	c.router.forget(sid)
}

// finish closes the engine and settles everything still open once no
// agent line can follow: cancelled for a session whose running turn the
// client cancelled, otherwise failed with reason.
func (c *conn) finish(ctx context.Context, reason error) {
	c.emu.Lock()
	defer c.emu.Unlock()
	c.finishLocked(ctx, reason)
}

// stop is finish for Run stopping on its context: the write to the
// client in progress, if any, is waited for at most the stop timeout.
// Past it the client is taken not to read: its output is abandoned
// (clientWriter.abandon), nothing is settled, and stop reports false.
func (c *conn) stop(ctx context.Context, reason error) bool {
	if !lockWithin(&c.emu, c.p.cfg.stopTimeout) {
		c.cout.abandon()
		c.stopped.Store(true)
		_, endHandlers := c.e.Close(reason)
		endHandlers()
		c.log.Warn("the client did not read for the stop timeout; its output is abandoned, and the compactions still open are not settled",
			"timeout", c.p.cfg.stopTimeout)
		return false
	}
	defer c.emu.Unlock()
	c.finishLocked(ctx, reason)
	return true
}

// finishLocked is finish; callers hold emu.
func (c *conn) finishLocked(ctx context.Context, reason error) {
	// Nothing follows: what the agent pump held back and the settlement
	// leave now.
	defer func() { _ = c.out.flush() }()
	c.endProfile() // a text held for its confirmation still reaches the client; the heartbeat stops
	if c.stopped.Swap(true) {
		return
	}
	live, endHandlers := c.e.Close(reason)
	defer endHandlers()
	if c.em == nil || c.out.err != nil {
		return
	}
	for _, sid := range c.router.openSessions() {
		r := reason
		if live[sid] {
			r = emitter.ErrCancelled
		}
		c.settleSession(ctx, sid, r, "the agent's output ended")
	}
}

func (c *conn) closeChecker() { c.check.close() }
