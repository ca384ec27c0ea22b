package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/history"
	"github.com/acpcompact/acpcompact/internal/condwait"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/acpcompact/acpcompact/sessionlog"
	"github.com/sourcegraph/jsonrpc2"
)

// Defaults of Config's zero fields.
const (
	// DefaultFallback is the fallback form for v1 clients without the
	// compaction capability: a "Compact conversation" tool call, which
	// every ACP client shows and which always settles.
	DefaultFallback = fallback.NameToolCall
	// DefaultCancelGrace is agentkit's cancel grace: 5 s after
	// session/cancel.
	DefaultCancelGrace = agentkit.DefaultCancelGrace
	// DefaultCompactionTimeout bounds a compaction's duration (the
	// watchdog); /compact slow takes 5 s, /compact hang needs this.
	DefaultCompactionTimeout = 30 * time.Second
	// DefaultHeartbeat re-sends in_progress after this much silence, so a
	// client's watchdog sees a hung compaction is still alive.
	DefaultHeartbeat = 10 * time.Second
)

// Name and Version identify the agent in its initialize answer.
const (
	Name    = "scenario-agent"
	Version = "0.1.0"
)

// Config configures an Agent. Its zero value gives the defaults above.
type Config struct {
	// Fallback names the form compaction takes for v1 clients without the
	// capability, as fallback.ByName reads it: text, marker,
	// opencode-marker, toolcall or none ("" means DefaultFallback).
	Fallback string
	// CancelGrace is the cancel grace, with the one meaning it has for
	// every host (agentkit.WithCancelGrace): how long the runtime may take,
	// after session/cancel, to report its open compactions before agentkit
	// settles them as cancelled. d > 0: d after the cancel; 0: at once;
	// d < 0: when the turn ends. nil means DefaultCancelGrace (a pointer,
	// because 0 is a grace of its own).
	CancelGrace *time.Duration
	// CompactionTimeout settles a compaction still open after it as failed
	// (emitter.WithMaxDuration). Zero means DefaultCompactionTimeout; a
	// negative value disables the watchdog.
	CompactionTimeout time.Duration
	// Heartbeat re-sends in_progress for a compaction silent that long
	// (emitter.WithHeartbeat). Zero means DefaultHeartbeat; a negative value
	// disables it.
	Heartbeat time.Duration
	// AutoCompactEvery makes every Nth ordinary prompt of a session run an
	// automatic compaction (trigger auto) before its answer; zero disables
	// it.
	AutoCompactEvery int
	// Logger receives the agent's and agentkit's logs; nil means
	// slog.Default(). Nothing but protocol messages is ever written to the
	// connection.
	Logger *slog.Logger
	// StateDir, when set, is where the kit keeps each session's history
	// (agentkit.WithStore with package sessionlog: one <session ID>.jsonl
	// a session): what the client saw, appended as it happens, so that
	// session/load and session/resume in a later process replay it. A
	// compaction the process did not live to settle reads back failed. A
	// session is served by one process at a time: its file's writer lock
	// is held while a connection of the process holds the session, and
	// another process's load of it fails at once. Empty: the kit keeps the
	// histories in memory, and they end with the process (or the
	// session's close).
	StateDir string
	// Audit has the kit audit each compaction's summary against the
	// session's history (agentkit.WithAudit): what it lost joins the
	// compaction's record.
	Audit bool
}

// Agent is the scenario agent: the sessions of one process and the agentkit
// Kit that serves its connections. Safe for concurrent use.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	kit     *agentkit.Kit
	settled *settlements
	// mem is the kit's store without a state directory (nil with one).
	mem *history.Memory

	mu       sync.Mutex
	sessions map[string]*session
	order    []*session

	restoring sync.Mutex // one session restored from its history at a time
}

// New returns an agent configured by cfg. It fails for an unknown fallback
// name, a negative AutoCompactEvery, or a state directory it cannot
// create.
func New(cfg Config) (*Agent, error) {
	if cfg.Fallback == "" {
		cfg.Fallback = DefaultFallback
	}
	r, err := fallback.ByName(cfg.Fallback)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	if cfg.AutoCompactEvery < 0 {
		return nil, fmt.Errorf("scenario: AutoCompactEvery must not be negative, got %d", cfg.AutoCompactEvery)
	}
	grace := DefaultCancelGrace
	if cfg.CancelGrace != nil {
		grace = *cfg.CancelGrace
	}
	cfg.CancelGrace = &grace
	cfg.CompactionTimeout = orDefault(cfg.CompactionTimeout, DefaultCompactionTimeout)
	cfg.Heartbeat = orDefault(cfg.Heartbeat, DefaultHeartbeat)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Agent{cfg: cfg, log: cfg.Logger, settled: newSettlements(), sessions: map[string]*session{}}
	// The kit keeps every session's history (agentkit.WithStore): the
	// agent writes no record code.
	var store history.Store
	if cfg.StateDir != "" {
		st, err := sessionlog.Open(cfg.StateDir, sessionlog.WithLogger(a.log))
		if err != nil {
			return nil, fmt.Errorf("scenario: state directory: %w", err)
		}
		store = st.History()
	} else {
		a.mem = history.NewMemory()
		store = a.mem
	}

	eopts := []emitter.Option{
		// The key spelled out: WithRecords("") writes the default into its
		// closure, which races when connections start at once.
		emitter.WithRecords(emitter.DefaultRecordKey),
		emitter.WithUsageUpdates(),
		emitter.WithObserver(a.settled, emitter.NewSlogObserver(a.log)),
	}
	if cfg.CompactionTimeout > 0 {
		eopts = append(eopts, emitter.WithMaxDuration(cfg.CompactionTimeout))
	}
	if cfg.Heartbeat > 0 {
		eopts = append(eopts, emitter.WithHeartbeat(cfg.Heartbeat))
	}
	opts := []agentkit.Option{
		agentkit.WithFallback(r),
		agentkit.WithCancelGrace(grace),
		agentkit.WithEmitterOptions(eopts...),
		agentkit.WithLogger(a.log),
		agentkit.WithStore(store),
	}
	if cfg.Audit {
		opts = append(opts, agentkit.WithAudit())
	}
	a.kit = agentkit.New(opts...)
	return a, nil
}

// orDefault maps zero to def; it keeps negative values, which mean off.
func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Serve serves one ACP connection on rwc until the peer hangs up (it then
// returns nil) or ctx ends (it closes the connection and returns ctx's
// error). When the input ends, the requests already read are answered
// first (for at most DrainTimeout), so a client may write its requests and
// close its side. Either way, compactions still open are settled (as
// failed, emitter.ErrConnectionClosed, or cancelled in a cancelled turn)
// and written while the connection can still carry them, within
// agentkit.CloseTimeout for a client that does not read (Kit.CloseConn);
// then Serve waits for the connection's handlers to return.
func (a *Agent) Serve(ctx context.Context, rwc io.ReadWriteCloser) error {
	c := &conn{a: a}
	c.handlers.cond = sync.NewCond(&c.handlers.mu)
	stream := agentkit.NewStream(drainOnEOF{ReadWriteCloser: rwc, c: c})
	// The connection's own context does not end with ctx: jsonrpc2 would
	// end the handlers' contexts before the kit settles; CloseConn settles
	// and writes first.
	handler := agentkit.AsyncHandler(c) // at most agentkit.DefaultMaxConcurrent at once
	rpc := a.kit.NewConn(context.WithoutCancel(ctx), stream, &counted{c: c, next: handler}, jsonrpc2.SetLogger(rpcLogger{a.log}))
	var err error
	select {
	case <-rpc.DisconnectNotify():
	case <-ctx.Done():
		err = ctx.Err()
	}
	// Close it, or wait for the close the hang-up began (ErrUnknownConn
	// once that is complete).
	if cerr := a.kit.CloseConn(context.Background(), rpc); cerr != nil && !errors.Is(cerr, agentkit.ErrUnknownConn) {
		a.log.Warn("connection closed before the client took all of its output", "error", cerr)
	}
	c.handlers.wait()
	return err
}

// Shutdown ends every connection the agent serves, for a process about to
// exit: what is open is settled and written first (agentkit's
// Kit.Shutdown: as failed with emitter.ErrConnectionClosed, or cancelled in
// a turn the client cancelled), within ctx and agentkit.CloseTimeout. Each
// Serve then returns once its handlers have.
func (a *Agent) Shutdown(ctx context.Context) error { return a.kit.Shutdown(ctx) }

// Close closes the sessions' histories the kit still holds (their files
// in the state directory); everything was written as it happened. Call it
// after the last Serve has returned; the agent must not be used after.
func (a *Agent) Close() error { return a.kit.Shutdown(context.Background()) }

// DrainTimeout bounds how long Serve keeps a connection open for the
// requests in flight when its input ends.
const DrainTimeout = 5 * time.Second

// drainOnEOF holds back the end of the input until the requests already
// read have been answered (for at most DrainTimeout): jsonrpc2 closes the
// whole connection at EOF, which would drop their answers when a client
// closes its side right after writing, as `printf ... | scenario-agent`
// does.
type drainOnEOF struct {
	io.ReadWriteCloser
	c *conn
}

func (d drainOnEOF) Read(p []byte) (int, error) {
	n, err := d.ReadWriteCloser.Read(p)
	if errors.Is(err, io.EOF) {
		d.c.handlers.waitAtMost(DrainTimeout)
	}
	return n, err
}

// rpcLogger sends jsonrpc2's own messages (protocol errors) to the log.
type rpcLogger struct{ l *slog.Logger }

func (r rpcLogger) Printf(format string, v ...any) {
	r.l.Warn(fmt.Sprintf(format, v...))
}

// conn is the agent's state for one connection.
type conn struct {
	a        *Agent
	version  atomic.Int32 // negotiated protocol version, 0 before initialize
	handlers inflight
}

// inflight counts running handlers, so Serve can wait for them. (A
// WaitGroup would forbid the Add that a message read just before the
// disconnect makes while Serve already waits.)
type inflight struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    int
}

func (f *inflight) add() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *inflight) done() {
	f.mu.Lock()
	f.n--
	if f.n == 0 {
		f.cond.Broadcast()
	}
	f.mu.Unlock()
}

// waitAtMost is wait, bounded by d.
func (f *inflight) waitAtMost(d time.Duration) {
	f.mu.Lock()
	condwait.Until(f.cond, d, func() bool { return f.n <= 0 })
	f.mu.Unlock()
}

func (f *inflight) wait() {
	f.mu.Lock()
	for f.n > 0 {
		f.cond.Wait()
	}
	f.mu.Unlock()
}

// counted counts a message as in flight in the read loop, before
// AsyncHandler hands it to its own goroutine.
type counted struct {
	c    *conn
	next jsonrpc2.Handler
}

func (h *counted) Handle(ctx context.Context, rpc *jsonrpc2.Conn, req *jsonrpc2.Request) {
	h.c.handlers.add()
	h.next.Handle(ctx, rpc, req)
}

// Handle implements jsonrpc2.Handler; it runs on its own goroutine
// (agentkit.AsyncHandler).
func (c *conn) Handle(ctx context.Context, rpc *jsonrpc2.Conn, req *jsonrpc2.Request) {
	defer c.handlers.done()
	var result any
	var err error
	switch req.Method {
	case "initialize":
		result, err = c.initialize(req)
	case "session/new":
		result, err = c.newSession(ctx, req)
		if err == nil && !c.v2() {
			// v1 advertises commands by notification, after the session
			// exists on the client's side.
			c.reply(ctx, rpc, req, result, nil)
			c.notify(ctx, rpc, result.(newSessionResult).SessionID, availableCommandsV1())
			return
		}
	case "session/load":
		if c.v2() {
			err = errMethodNotFound(req.Method)
			break
		}
		result, err = c.load(ctx, rpc, req)
	case "session/resume":
		if !c.v2() {
			err = errMethodNotFound(req.Method)
			break
		}
		result, err = c.resume(ctx, rpc, req)
	case "session/list":
		result, err = c.list()
	case "session/close":
		result, err = c.closeSession(req)
	case "session/prompt":
		c.prompt(ctx, rpc, req)
		return
	case "session/cancel":
		// agentkit has cancelled the prompt's context already.
		return
	default:
		err = errMethodNotFound(req.Method)
	}
	c.reply(ctx, rpc, req, result, err)
}

func (c *conn) v2() bool { return c.version.Load() == 2 }

// reply answers a request (and drops the answer to a notification).
func (c *conn) reply(ctx context.Context, rpc *jsonrpc2.Conn, req *jsonrpc2.Request, result any, err error) {
	if req.Notif {
		if err != nil {
			c.a.log.Debug("notification not handled", "method", req.Method, "error", err)
		}
		return
	}
	ctx = context.WithoutCancel(ctx)
	var sendErr error
	if err != nil {
		var rpcErr *jsonrpc2.Error
		if !errors.As(err, &rpcErr) {
			rpcErr = &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: err.Error()}
		}
		sendErr = rpc.ReplyWithError(ctx, req.ID, rpcErr)
	} else {
		sendErr = rpc.Reply(ctx, req.ID, result)
	}
	if sendErr != nil {
		c.a.log.Debug("reply not sent", "method", req.Method, "error", sendErr)
	}
}

// notify sends one of the session's updates through the kit, which
// records it in the session's history.
func (c *conn) notify(ctx context.Context, _ *jsonrpc2.Conn, sessionID string, update any) {
	if err := agentkit.SessionFrom(ctx, sessionID).Send(context.WithoutCancel(ctx), update); err != nil {
		c.a.log.Debug("session/update not sent", "session", sessionID, "error", err)
	}
}

func errMethodNotFound(method string) error {
	return &jsonrpc2.Error{Code: jsonrpc2.CodeMethodNotFound, Message: "method not found: " + method}
}

func errInvalidParams(msg string) error {
	return &jsonrpc2.Error{Code: jsonrpc2.CodeInvalidParams, Message: msg}
}

// codeResourceNotFound is ACP's error code for an unknown session.
const codeResourceNotFound = -32002

func errUnknownSession(id string) error {
	return &jsonrpc2.Error{Code: codeResourceNotFound, Message: fmt.Sprintf("session %q not found in this agent process", id)}
}

func decode(req *jsonrpc2.Request, v any) error {
	if req.Params == nil {
		return errInvalidParams("missing params")
	}
	if err := json.Unmarshal(*req.Params, v); err != nil {
		return errInvalidParams("invalid params: " + err.Error())
	}
	return nil
}

func (c *conn) initialize(req *jsonrpc2.Request) (any, error) {
	var p struct {
		ProtocolVersion int `json:"protocolVersion"`
	}
	if err := decode(req, &p); err != nil {
		return nil, err
	}
	info := implementation{Name: Name, Title: "acpcompact scenario agent", Version: Version}
	if p.ProtocolVersion >= 2 {
		c.version.Store(2)
		return initializeV2{ProtocolVersion: 2, Info: info, Capabilities: agentCapabilitiesV2{Session: struct{}{}}}, nil
	}
	c.version.Store(1)
	return initializeV1{
		ProtocolVersion:   1,
		AgentCapabilities: agentCapabilitiesV1{LoadSession: true},
		AuthMethods:       []any{},
		AgentInfo:         info,
	}, nil
}

func (c *conn) newSession(ctx context.Context, req *jsonrpc2.Request) (any, error) {
	var p struct {
		Cwd string `json:"cwd"`
	}
	if err := decode(req, &p); err != nil {
		return nil, err
	}
	s, err := c.a.newSession(ctx, p.Cwd)
	if err != nil {
		c.a.log.Error("session not created", "error", err)
		return nil, &jsonrpc2.Error{Code: jsonrpc2.CodeInternalError, Message: "session not created: " + err.Error()}
	}
	c.a.log.Info("session created", "session", s.id)
	res := newSessionResult{SessionID: s.id}
	if c.v2() {
		res.AvailableCommands = availableCommandsV2()
	}
	return res, nil
}

func (c *conn) list() (any, error) {
	c.a.mu.Lock()
	defer c.a.mu.Unlock()
	out := listSessionsResult{Sessions: []sessionInfo{}}
	for _, s := range c.a.order {
		out.Sessions = append(out.Sessions, s.info())
	}
	return out, nil
}

// sessionOf returns the session a request's params name, or the JSON-RPC
// error to answer with.
func (c *conn) sessionOf(req *jsonrpc2.Request) (*session, error) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if err := decode(req, &p); err != nil {
		return nil, err
	}
	s := c.a.session(p.SessionID)
	if s == nil {
		return nil, errUnknownSession(p.SessionID)
	}
	return s, nil
}

func (c *conn) closeSession(req *jsonrpc2.Request) (any, error) {
	s, err := c.sessionOf(req)
	if err != nil {
		return nil, err
	}
	// Closing a session stops its work as a cancel does, and ends it: the
	// agent forgets it, so that memory is bounded by the sessions that are
	// open. Without a state directory a later load or resume does not find
	// it (its history ends too); with one, the kit closes its file once
	// the close is answered, and a later load reads the session back.
	s.cancelTurn()
	c.a.forget(s)
	return struct{}{}, nil
}

// forget drops a closed session, and its history when it is in memory.
func (a *Agent) forget(s *session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sessions[s.id] == s {
		delete(a.sessions, s.id)
	}
	a.order = slices.DeleteFunc(a.order, func(x *session) bool { return x == s })
	if a.mem != nil {
		a.mem.Remove(s.id)
	}
}

// load answers v1 session/load: the replay, then the response. A session
// of an earlier process is read from the state directory first.
func (c *conn) load(ctx context.Context, rpc *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if err := decode(req, &p); err != nil {
		return nil, err
	}
	if _, err := c.a.replay(ctx, p.SessionID); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// resume answers v2 session/resume: the replay when asked for, the current
// state, then the response.
func (c *conn) resume(ctx context.Context, rpc *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
	var p struct {
		SessionID  string          `json:"sessionId"`
		ReplayFrom json.RawMessage `json:"replayFrom"`
	}
	if err := decode(req, &p); err != nil {
		return nil, err
	}
	if len(p.ReplayFrom) > 0 && string(p.ReplayFrom) != "null" {
		var cursor struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(p.ReplayFrom, &cursor) != nil || cursor.Type != "start" {
			return nil, errInvalidParams(`unsupported replayFrom cursor; this agent replays from {"type":"start"} only`)
		}
	}
	// The kit replays the history only when replayFrom asks for it.
	s, err := c.a.replay(ctx, p.SessionID)
	if err != nil {
		return nil, err
	}
	state := stateUpdate{SessionUpdate: protocol.KindStateUpdate, State: "idle"}
	if s.busy() {
		state.State = "running"
	}
	c.notify(ctx, rpc, s.id, state)
	return struct{}{}, nil
}
