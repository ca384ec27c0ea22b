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
	"time"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/test/conformance"
)

// Side names for log positions.
const (
	sideClient = "client"
	sideAgent  = "agent"
)

// conn is one connection's state.
//
// Two goroutines share it. The client pump only reads client lines, notes
// what it needs under mu and writes to the agent. Everything that writes to
// the client (the agent pump, a cancel-grace timer, the final settlement)
// holds emu for a whole message, so the client's stream is never
// interleaved and the emitter, router and translator state (all guarded by
// emu) see one writer at a time. mu is never held across I/O or emitter
// calls; emu may be held while taking mu, never the reverse.
type conn struct {
	p   *Proxy
	log *slog.Logger

	emu     sync.Mutex
	out     lineWriter
	stopped atomic.Bool // set under emu; read without it so the client pump never waits on a client write
	em      *emitter.Emitter
	neg     capability.Negotiation
	capable bool
	router  *router
	trans   map[string]*transState
	synth   map[Translator]emitter.Renderer
	// settleWhy says why the proxy is settling, for the log line of each
	// compaction it settles; empty while the agent's own lines are handled.
	settleWhy string
	// wrote says the proxy made a line of its own while handling the
	// current agent line: a compaction update, which is never held back.
	wrote bool

	mu     sync.Mutex
	inits  map[string]json.RawMessage // initialize request id → params
	proms  map[string]string          // session/prompt request id → session
	loads  map[string]string          // session/load (or v2 resume) id → session
	flags  map[string]*sessFlags
	ended  bool // no more cancel-grace timers
	timers sync.WaitGroup

	ain       lineWriter // only the client pump writes to the agent
	ainMu     sync.Mutex // guards closing agentIn against the client pump
	ainClosed bool

	check *checkState

	// Scratch memory of the pumps: apick and aenv belong to the agent
	// pump (under emu), cpick and cenv to the client pump.
	apick, cpick picker
	aenv, cenv   envelope
}

// sessFlags is what the client's messages say about a session (under mu).
type sessFlags struct {
	pending   int  // v1 prompts not yet answered
	cancelled bool // the client cancelled the current turn
	replaying int  // history replays (session/load) not yet answered
	loads     int  // replays started so far, to restart minted IDs
	timer     *time.Timer
	gen       uint64 // invalidates a timer that fired late
}

func newConn(p *Proxy, clientOut io.Writer, agentIn io.Writer) *conn {
	c := &conn{
		p:     p,
		log:   p.cfg.logger,
		out:   newLineWriter(clientOut),
		ain:   newLineWriter(agentIn),
		trans: map[string]*transState{},
		inits: map[string]json.RawMessage{},
		proms: map[string]string{},
		loads: map[string]string{},
		flags: map[string]*sessFlags{},
		synth: map[Translator]emitter.Renderer{
			ClaudeText:     fallback.Text(),
			ToolCall:       toolCallSynth{},
			OpencodeMarker: fallback.OpencodeMarker(),
		},
	}
	c.router = &router{c: c, tracks: map[trackKey]*track{}}
	if p.cfg.checker != nil {
		c.check = &checkState{ch: p.cfg.checker, which: p.cfg.checked, log: c.log}
	}
	return c
}

// envelope is the part of a JSON-RPC message the proxy routes by, found in
// one pass however big the message. Its raw values are sub-slices of the
// line, valid until the next read.
type envelope struct {
	id, params, result, errv []byte
	method                   string
	hasMethod                bool
	// From params, when it is an object.
	sessionID             string
	update                []byte // params.update
	updateKind            string // params.update.sessionUpdate
	requestID, replayFrom []byte
	// From params.update, for an agent message only (parseAgent): what
	// recognising a signal in it and following a standard update read, so
	// that the line is skimmed once.
	contentType, contentText []byte
	compactionID, status     []byte
}

var envelopePaths = [][]string{
	{"id"}, {"method"}, {"params"}, {"result"}, {"error"},
	{"params", "sessionId"}, {"params", "update"}, {"params", "update", "sessionUpdate"},
	{"params", "requestId"}, {"params", "replayFrom"},
}

var (
	envelopeSet      = compilePaths(envelopePaths...)
	agentEnvelopeSet = compilePaths(append(envelopePaths[:len(envelopePaths):len(envelopePaths)],
		[]string{"params", "update", "content", "type"}, []string{"params", "update", "content", "text"},
		[]string{"params", "update", "compactionId"}, []string{"params", "update", "status"})...)
)

// parse validates msg as a JSON object and picks out its envelope.
func parse(msg []byte) (*envelope, error) {
	var p picker
	var env envelope
	return &env, p.parse(msg, &env)
}

// parse fills env from msg with p's scratch memory; env's raw values are
// sub-slices of msg.
func (p *picker) parse(msg []byte, env *envelope) error {
	return p.parseSet(msg, env, envelopeSet)
}

// parseAgent is parse for an agent message, which also picks what the
// handling of an update reads from it.
func (p *picker) parseAgent(msg []byte, env *envelope) error {
	if err := p.parseSet(msg, env, agentEnvelopeSet); err != nil {
		return err
	}
	v := p.out
	env.contentType, env.contentText, env.compactionID, env.status = v[10], v[11], v[12], v[13]
	return nil
}

func (p *picker) parseSet(msg []byte, env *envelope, set *pathSet) error {
	v, err := p.pickSet(msg, set)
	if err != nil {
		return err
	}
	*env = envelope{id: v[0], params: v[2], result: v[3], errv: v[4], update: v[6], requestID: v[8], replayFrom: v[9]}
	env.method, env.hasMethod = stringValue(v[1])
	env.sessionID = p.session(v[5])
	env.updateKind, _ = stringValue(v[7])
	return nil
}

// batchable reports whether the message may wait in an output buffer for
// the lines already read behind it. Only notifications of the ordinary,
// streaming kind may: a request or response, whose peer may be waiting on
// it, and an update that ends a compaction or a turn are written at once.
func (env *envelope) batchable() bool {
	return env.hasMethod && isNull(env.id) &&
		env.updateKind != emitter.KindUpdate && env.updateKind != "state_update"
}

// idKey is a request id in a form usable as a map key: 1 and "1" differ,
// as they do in JSON-RPC. A null or missing id is "".
func idKey(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
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

// pumpClient forwards client lines to the agent unchanged, noting the
// requests the proxy must follow. It never writes to the client.
func (c *conn) pumpClient(ctx context.Context, r io.Reader) {
	lr := newLineReader(r, c.p.cfg.maxLine)
	for {
		line, long, rerr := lr.next()
		if c.stopped.Load() {
			return
		}
		if len(line) > 0 {
			if long {
				c.log.Warn("line too long to inspect; forwarded as is", "side", sideClient, "line", lr.n, "limit", c.p.cfg.maxLine)
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

// fromClient notes what the proxy needs from one client line before it is
// forwarded, so that the agent's answer can never overtake the note. It
// reports whether the line may wait for the next one (envelope.batchable).
func (c *conn) fromClient(n int, line []byte) (batchable bool) {
	msg := trimEOL(line)
	if isBlank(msg) {
		return false
	}
	env := &c.cenv
	if err := c.cpick.parse(msg, env); err != nil {
		c.log.Warn("malformed line; forwarded as is", "side", sideClient, "line", n, "error", err, "text", clip(msg))
		return false
	}
	c.check.observe(conformance.FromClient, sideClient, n, msg)
	if !env.hasMethod {
		return false // a response to one of the agent's requests
	}
	batchable = env.batchable()
	sid, id := env.sessionID, idKey(env.id)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch env.method {
	case "initialize":
		if id != "" {
			c.inits[id] = append(json.RawMessage(nil), env.params...)
		}
	case "session/prompt":
		if id != "" && sid != "" {
			c.proms[id] = sid
			f := c.flagsLocked(sid)
			if f.pending == 0 {
				c.endTurnLocked(f) // a new turn starts with no cancel
			}
			f.pending++
		}
	case "session/load", "session/resume":
		// v1 resume returns no history; only a v2 resume with a replay
		// cursor replays, as session/load does.
		replays := env.method == "session/load" || !isNull(env.replayFrom)
		if id != "" && sid != "" && replays {
			c.loads[id] = sid
			f := c.flagsLocked(sid)
			f.replaying++
			f.loads++
		}
	case "session/cancel", "session/close":
		// Closing a session cancels its work as session/cancel does.
		c.cancelLocked(sid)
		batchable = false // a cancel is what the user waits on
	case "$/cancel_request":
		batchable = false
		if psid, ok := c.proms[idKey(env.requestID)]; ok {
			c.cancelLocked(psid)
		}
	}
	return batchable
}

func (c *conn) flagsLocked(sid string) *sessFlags {
	f, ok := c.flags[sid]
	if !ok {
		f = &sessFlags{}
		c.flags[sid] = f
	}
	return f
}

// cancelLocked records a user cancel; only it makes a compaction cancelled.
func (c *conn) cancelLocked(sid string) {
	if sid == "" {
		return
	}
	f := c.flagsLocked(sid)
	f.cancelled = true
	if c.p.cfg.cancelGrace > 0 && f.timer == nil && !c.ended {
		f.gen++
		gen := f.gen
		c.timers.Add(1)
		f.timer = time.AfterFunc(c.p.cfg.cancelGrace, func() {
			defer c.timers.Done()
			c.graceExpired(sid, gen)
		})
	}
}

// endTurnLocked forgets the turn's cancel and its grace timer.
func (c *conn) endTurnLocked(f *sessFlags) {
	f.cancelled = false
	f.gen++
	if f.timer != nil {
		if f.timer.Stop() {
			c.timers.Done()
		}
		f.timer = nil
	}
}

func (c *conn) graceExpired(sid string, gen uint64) {
	c.emu.Lock()
	defer c.emu.Unlock()
	if c.stopped.Load() || c.em == nil {
		return
	}
	c.mu.Lock()
	f := c.flags[sid]
	live := f != nil && f.cancelled && f.gen == gen
	if live {
		f.timer = nil
	}
	c.mu.Unlock()
	if live {
		c.settleSession(context.Background(), sid, emitter.ErrCancelled, "the cancel grace period ended")
		_ = c.out.flush() // a failure is sticky: the agent pump reports it
	}
}

// stopTimers stops every cancel-grace timer and waits for one that is
// already running, so that nothing outlives Run.
func (c *conn) stopTimers() {
	c.mu.Lock()
	c.ended = true
	for _, f := range c.flags {
		c.endTurnLocked(f)
	}
	c.mu.Unlock()
	c.timers.Wait()
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
	for {
		line, long, rerr := lr.next()
		if len(line) > 0 {
			werr, err := c.fromAgent(ctx, lr, line, long)
			if werr != nil {
				c.finish(ctx, c.p.cfg.exitReason)
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
			if ctx.Err() != nil {
				// Run closed agentOut to stop: the agent did not end.
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
	if long {
		c.log.Warn("line too long to inspect; forwarded as is", "side", sideAgent, "line", n, "limit", c.p.cfg.maxLine)
		// The rest may be slow to come: what precedes it leaves first.
		if err := c.out.forward(line); err != nil {
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
	msg := trimEOL(line)
	act, wellFormed, hold := forward, false, false
	c.wrote = false
	if !isBlank(msg) {
		env := &c.aenv
		if err := c.apick.parseAgent(msg, env); err != nil {
			c.log.Warn("malformed line; forwarded as is", "side", sideAgent, "line", n, "error", err, "text", clip(msg))
		} else {
			wellFormed = true
			hold = env.batchable()
			if c.check.agentSide() {
				c.check.observe(conformance.FromAgent, sideAgent, n, msg)
			}
			act = c.agentMessage(ctx, n, env, msg)
		}
	}
	if act == forward {
		if err := c.out.forward(line); err != nil {
			return c.clientErr(err), nil
		}
		// The log already reports a malformed line; the checker would
		// only repeat it.
		if wellFormed && c.check.clientSide() {
			c.check.observe(conformance.FromAgent, sideAgent, n, msg)
		}
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

func (c *conn) clientErr(err error) error { return fmt.Errorf("%w: %w", ErrClientClosed, err) }

// writeToClient writes a message the proxy made. Callers hold emu.
func (c *conn) writeToClient(msg []byte) error {
	c.wrote = true
	if err := c.out.line(msg); err != nil {
		return c.clientErr(err)
	}
	if c.check.clientSide() {
		c.check.observe(conformance.FromAgent, "proxy", 0, msg)
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
	msg, err := json.Marshal(notification{JSONRPC: "2.0", Method: "session/update", Params: updateParams{SessionID: sessionID, Update: u}})
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

// agentMessage routes one agent message. Callers hold emu.
func (c *conn) agentMessage(ctx context.Context, n int, env *envelope, msg []byte) action {
	if !env.hasMethod {
		if id := idKey(env.id); id != "" {
			c.agentResponse(ctx, id, env)
		}
		return forward
	}
	if env.method == "session/update" && c.em != nil {
		return c.update(ctx, n, env, msg)
	}
	return forward
}

// agentResponse reacts to the agent's answer to a client request, before
// that answer is forwarded.
func (c *conn) agentResponse(ctx context.Context, id string, env *envelope) {
	c.mu.Lock()
	params, isInit := c.inits[id]
	delete(c.inits, id)
	promptSID, isPrompt := c.proms[id]
	delete(c.proms, id)
	loadSID, isLoad := c.loads[id]
	delete(c.loads, id)
	var cancelled bool
	if isPrompt {
		f := c.flagsLocked(promptSID)
		if f.pending > 0 {
			f.pending--
		}
		cancelled = f.cancelled
		if f.pending == 0 && c.version() != capability.V2 {
			c.endTurnLocked(f)
		}
	}
	if isLoad {
		if f := c.flagsLocked(loadSID); f.replaying > 0 {
			f.replaying--
		}
	}
	c.mu.Unlock()

	switch {
	case isInit:
		if !isNull(env.result) && env.errv == nil {
			c.negotiate(params, env.result)
		}
	case isPrompt && c.em != nil && c.version() != capability.V2:
		// v1: the prompt response ends the turn, and every compaction
		// update must precede it.
		reason := c.p.cfg.turnReason
		if cancelled {
			reason = emitter.ErrCancelled
		}
		c.settleSession(ctx, promptSID, reason, "the agent answered session/prompt")
	}
}

// version is the negotiated protocol version; callers hold emu.
func (c *conn) version() int {
	if c.em == nil {
		return 0
	}
	return c.neg.Version
}

// negotiate reads the initialize exchange; the agent's answer decides the
// version. Only the first successful exchange counts: a second one would
// strand the compactions the first emitter tracks.
func (c *conn) negotiate(params json.RawMessage, result []byte) {
	n := capability.Parse(params, result)
	for _, d := range n.Diagnostics {
		c.log.Warn("initialize: "+d.Message, "path", d.Path)
	}
	if c.em != nil {
		c.log.Warn("a second initialize exchange is ignored; the first one's mode stays", "version", n.Version)
		return
	}
	c.neg = n
	c.capable = n.Version == capability.V2 || n.Compaction
	c.em = emitter.New(c,
		emitter.WithNegotiation(n),
		// The router picks each compaction's form, so the emitter is
		// always in fallback mode with the router as its renderer.
		emitter.WithPolicy(func(capability.Negotiation, bool) capability.Mode { return capability.Fallback }),
		emitter.WithFallback(c.router),
		// The agent already decided what of a summary its client may see.
		emitter.WithSummaryPolicy(emitter.AllSummaries),
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
	if _, err := c.em.Session(sid).SettleAll(ctx, reason); err != nil {
		c.log.Debug("settling failed", "session", sid, "error", err)
	}
}

// finish settles everything still open once no agent line can follow:
// cancelled for a session whose turn the client cancelled, otherwise
// failed with reason.
func (c *conn) finish(ctx context.Context, reason error) {
	c.emu.Lock()
	defer c.emu.Unlock()
	// Nothing follows: what the agent pump held back and the settlement
	// leave now.
	defer func() { _ = c.out.flush() }()
	if c.stopped.Swap(true) {
		return
	}
	if c.em == nil || c.out.err != nil {
		return
	}
	c.mu.Lock()
	cancelled := map[string]bool{}
	for sid, f := range c.flags {
		if f.cancelled {
			cancelled[sid] = true
		}
	}
	c.mu.Unlock()
	for _, sid := range c.router.openSessions() {
		r := reason
		if cancelled[sid] {
			r = emitter.ErrCancelled
		}
		c.settleSession(ctx, sid, r, "the agent's output ended")
	}
}

func (c *conn) closeChecker() { c.check.close() }
