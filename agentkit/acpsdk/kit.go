package acpsdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/acpcompact/acpcompact/agentkit/internal/tap"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/turn"
	acp "github.com/coder/acp-go-sdk"
)

// Kit serves any number of SDK connections with the same configuration.
// Safe for concurrent use. The zero Kit is usable and has the defaults of
// New().
type Kit struct {
	cfg        tap.Config
	configured bool

	mu    sync.Mutex
	conns map[*Conn]bool
	shut  bool // Shutdown ran: connections made from now on close at once
}

// New returns a Kit configured by opts.
func New(opts ...Option) *Kit { return &Kit{cfg: newSettings(opts...), configured: true} }

// Conn is one connection a Kit serves: the SDK's connection, and the kit's
// state for it. Kit.NewAgentSideConnection and Kit.NewConnection create
// it; the agent sends through the SDK connection it holds.
type Conn struct {
	t      *tap.Tap
	bound  tap.Binding // what its handlers' contexts carry
	asc    *acp.AgentSideConnection
	raw    *acp.Connection
	claims *claims
}

// AgentSideConnection returns the SDK connection of
// Kit.NewAgentSideConnection, through which the agent sends
// (SessionUpdate, RequestPermission, ...); nil for a Conn of
// Kit.NewConnection.
func (c *Conn) AgentSideConnection() *acp.AgentSideConnection { return c.asc }

// Connection returns the SDK connection of Kit.NewConnection, through which
// the agent sends (SendNotification, SendRequest); nil for a Conn of
// Kit.NewAgentSideConnection.
func (c *Conn) Connection() *acp.Connection { return c.raw }

// Done is closed when the peer disconnects.
func (c *Conn) Done() <-chan struct{} {
	if c.asc != nil {
		return c.asc.Done()
	}
	return c.raw.Done()
}

// SetLogger directs the SDK connection's own diagnostics to l (the kit's
// go where WithLogger says).
func (c *Conn) SetLogger(l *slog.Logger) {
	if c.asc != nil {
		c.asc.SetLogger(l)
		return
	}
	c.raw.SetLogger(l)
}

// NewAgentSideConnection is acp.NewAgentSideConnection with the kit on the
// connection's reader and writer and around agent (see the package
// documentation): the context of agent.Prompt is the kit's, cancelled in
// wire order, and a panic in any of agent's methods settles the
// connection's open compactions as failed before it goes on.
func (k *Kit) NewAgentSideConnection(agent acp.Agent, peerInput io.Writer, peerOutput io.Reader) *Conn {
	c, w, r := k.wire(peerInput, peerOutput)
	c.asc = acp.NewAgentSideConnection(&kitAgent{inner: agent, c: c}, w, r)
	k.register(c)
	return c
}

// NewConnection is acp.NewConnection with the kit on the connection's
// reader and writer, and around h: a session/prompt is handled with the
// kit's context (cancelled in wire order, carrying the prompt's trace
// context), and a panic in h settles the connection's open compactions as
// failed before it goes on.
func (k *Kit) NewConnection(h acp.MethodHandler, peerInput io.Writer, peerOutput io.Reader) *Conn {
	c, w, r := k.wire(peerInput, peerOutput)
	c.raw = acp.NewConnection(c.guard(h), w, r)
	k.register(c)
	return c
}

func (k *Kit) wire(peerInput io.Writer, peerOutput io.Reader) (*Conn, io.Writer, io.Reader) {
	// The tap writes whole lines to peerInput, several in one Write when
	// notifications queue up (see agentkit.NewStream).
	cfg := k.config()
	c := &Conn{t: tap.NewWriter(cfg, peerInput), claims: newClaims()}
	c.bound = tap.Binding{Tap: c.t}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return c, &writer{c: c, log: log}, newReader(c, peerOutput, log)
}

// guard is the kit around a raw MethodHandler.
func (c *Conn) guard(h acp.MethodHandler) acp.MethodHandler {
	return func(ctx context.Context, method string, params json.RawMessage) (any, *acp.RequestError) {
		if method == turn.MethodPrompt {
			ctx = c.promptContext(ctx)
		}
		ctx = c.bind(ctx)
		returned := false
		defer c.settleOnPanic(&returned)
		res, err := h(ctx, method, params)
		returned = true
		return res, err
	}
}

// bind gives a handler's context its connection, for SessionFrom and
// Recover: the binding of both kits (tap.Bind), so agentkit.SessionFrom
// reads it.
func (c *Conn) bind(ctx context.Context) context.Context {
	return tap.Bind(ctx, &c.bound)
}

// promptContext is the context a prompt handler runs with: the kit's, tied
// to the prompt's request by the engine (see tap.BindPrompt), and detached
// from the SDK's cancellations of the request, which a late session/cancel
// or a second prompt of the session would apply to whichever prompt runs
// then. A handler call the kit cannot tie to a request keeps ctx.
func (c *Conn) promptContext(ctx context.Context) context.Context {
	key, ok := c.claims.claim()
	if !ok {
		return ctx
	}
	return c.t.BindPrompt(context.WithoutCancel(ctx), key)
}

// settleOnPanic, deferred around a call of the agent's, settles the
// connection's open compactions as failed when the call did not return: it
// is panicking. It does not recover, so the panic goes on with its own
// stack.
func (c *Conn) settleOnPanic(returned *bool) {
	if !*returned {
		c.t.Crash()
	}
}

// register indexes c for Shutdown; a connection that already ended (its
// input closed before the SDK constructor returned) is not kept.
func (k *Kit) register(c *Conn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.shut {
		go c.close() // after Shutdown; nothing is open yet
		return
	}
	if k.conns == nil {
		k.conns = make(map[*Conn]bool)
	}
	k.conns[c] = true
	if !c.t.OnClose(func() { k.forget(c) }) {
		delete(k.conns, c)
		return
	}
	// The reader settles when the input ends; this covers the SDK
	// stopping on its own (a full notification queue) without reading on.
	go func() {
		<-c.Done()
		c.close()
	}()
}

// close ends the connection for the kit.
func (c *Conn) close() {
	c.claims.close()
	c.t.Close(emitter.ErrConnectionClosed)
}

// shutdown is close bounded by ctx.
func (c *Conn) shutdown(ctx context.Context) error {
	c.claims.close()
	return c.t.Shutdown(ctx, emitter.ErrConnectionClosed)
}

// Shutdown ends the kit's part of every connection it serves, for an agent
// about to exit (on SIGINT or SIGTERM, say): on each, at once, the kit
// refuses new compactions, settles every one still open (`cancelled` in a
// turn the client cancelled, otherwise `failed` with
// emitter.ErrConnectionClosed), ends the prompt handlers' contexts (cause
// emitter.ErrConnectionClosed) and writes everything queued, the
// settlements last. It returns when that is done everywhere, so the
// process may exit without losing a terminal update. The SDK's connection
// itself runs on (the kit cannot close it): what the SDK writes later is
// still written, but no compaction opens any more.
//
// It is bounded by ctx and by CloseTimeout: a client that does not read is
// waited for at most that long (less when it had taken nothing for a while
// already), after which what it has not taken is dropped and every write
// still waiting returns at once. It returns nil when everything was
// written, else the errors of the connections that could not be (joined).
// Connections made after it are closed at once.//
// The OnFinalRecord sink calls of what it settles run after every terminal
// update was written, and are waited for within the same bound: when
// Shutdown returns nil they have all returned, so the agent may close its
// store. When one is still running at the bound (a store that hangs),
// Shutdown returns an error wrapping context.DeadlineExceeded and that
// sink goes on; its record is still handed over, once, when it returns.
func (k *Kit) Shutdown(ctx context.Context) error {
	k.mu.Lock()
	k.shut = true
	cs := make([]*Conn, 0, len(k.conns))
	for c := range k.conns {
		cs = append(cs, c)
	}
	k.mu.Unlock()
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { errs[i] = c.shutdown(ctx) })
	}
	wg.Wait()
	if b := k.cfg.Book; b != nil {
		b.Close() // the connections' settlements are recorded
	}
	return errors.Join(errs...)
}

// Record is agentkit's Kit.Record: it writes the final record of a
// compaction the runtime applied without a connection (while no client is
// connected, or after Shutdown) to sessionID's history, for its next
// ReplayHistory.
func (k *Kit) Record(ctx context.Context, sessionID string, rec emitter.Record) error {
	b := k.config().Book
	if b == nil {
		return fmt.Errorf("%w: session %s: %w", ErrStore, sessionID, tap.ErrNoStore)
	}
	return b.Record(ctx, sessionID, rec)
}

// CloseConn is Shutdown for one connection. It also waits, within ctx, for
// a close already under way (the kit closes its part when the input ends,
// before the SDK learns of it), so an agent that exits when its
// connection ends may call it (or Shutdown) to be sure the settlements are
// written.
func (k *Kit) CloseConn(ctx context.Context, conn *Conn) error {
	if conn == nil || conn.t == nil {
		return ErrUnknownConn
	}
	return conn.shutdown(ctx)
}

func (k *Kit) config() tap.Config {
	if k.configured {
		return k.cfg
	}
	return newSettings()
}

func (k *Kit) forget(c *Conn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.conns, c)
}

// tap returns conn's tap when the Kit serves conn.
func (k *Kit) tap(conn *Conn) *tap.Tap {
	k.mu.Lock()
	defer k.mu.Unlock()
	if conn == nil || !k.conns[conn] {
		return nil
	}
	return conn.t
}

// Emitter returns conn's emitter, for what Session does not cover
// (Mode, CloseSession). Its reporting calls pass the
// turn guard as Session's do, and its compactions are settled at the end
// of their session's turn: from the first call on, every turn's end
// settles its session in the emitter, which then keeps a tracker of each
// session that had a turn until it closes.
func (k *Kit) Emitter(conn *Conn) (*emitter.Emitter, error) {
	return tap.KitEmitter(k.tap(conn), ErrUnknownConn)
}
