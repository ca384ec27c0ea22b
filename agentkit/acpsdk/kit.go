package acpsdk

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/acpcompact/acpcompact/agentkit/internal/tap"
	"github.com/acpcompact/acpcompact/emitter"
	acp "github.com/coder/acp-go-sdk"
)

// Sentinel errors; errors returned by this package that stem from one of
// them wrap it, so callers branch with errors.Is. They are the same values
// as package agentkit's. A Start refused while a turn is being settled wraps
// emitter.ErrTurnEnded.
var (
	// ErrNotInitialized: the connection has not yet answered initialize
	// successfully, so it is not known how the client takes compaction.
	ErrNotInitialized = tap.ErrNotInitialized
	// ErrClosed: the connection has closed; its compactions were settled.
	ErrClosed = tap.ErrClosed
	// ErrUnknownConn: the connection was not created by this Kit, or it has
	// closed and the Kit forgot it.
	ErrUnknownConn = tap.ErrUnknownConn
)

// DefaultCancelGrace is the wind-down deadline after session/cancel when
// WithCancelGrace is not given.
const DefaultCancelGrace = tap.DefaultCancelGrace

type settings = tap.Config

// Option configures a Kit.
type Option func(*settings)

// WithFallback sets the renderer used for v1 clients that did not advertise
// the compaction capability (see package fallback). Without one such
// clients see nothing of compaction.
func WithFallback(r emitter.Renderer) Option { return func(s *settings) { s.Fallback = r } }

// WithCancelGrace sets how long the runtime may take, after session/cancel,
// to report its open compactions before the kit settles them as cancelled
// (default 5 s). Zero settles them as soon as the cancel arrives; a negative
// value leaves them to the end of the turn.
func WithCancelGrace(d time.Duration) Option { return func(s *settings) { s.CancelGrace = d } }

// WithEmitterOptions passes options to each connection's emitter, after the
// kit's own (the negotiation and the fallback), so they may override them.
func WithEmitterOptions(opts ...emitter.Option) Option {
	return func(s *settings) { s.EmitterOptions = append(s.EmitterOptions, opts...) }
}

// WithLogger sets where the kit logs negotiation diagnostics, settlements it
// performs and panics it sees (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *settings) { s.Logger = l } }

// Conn is a connection created by a Kit: the *acp.AgentSideConnection of
// NewAgentSideConnection or the *acp.Connection of NewConnection.
type Conn interface {
	Done() <-chan struct{}
}

// Kit serves any number of SDK connections with the same configuration.
// Safe for concurrent use. The zero Kit is usable and has the defaults of
// New().
type Kit struct {
	cfg        settings
	configured bool

	mu    sync.Mutex
	conns map[Conn]*tap.Tap
}

// New returns a Kit configured by opts.
func New(opts ...Option) *Kit {
	cfg := tap.DefaultConfig()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return &Kit{cfg: cfg, configured: true}
}

// NewAgentSideConnection is acp.NewAgentSideConnection with the kit on the
// connection's reader and writer (see the package documentation).
func (k *Kit) NewAgentSideConnection(agent acp.Agent, peerInput io.Writer, peerOutput io.Reader) *acp.AgentSideConnection {
	t, w, r := k.wire(peerInput, peerOutput)
	conn := acp.NewAgentSideConnection(agent, w, r)
	k.register(conn, t)
	return conn
}

// NewConnection is acp.NewConnection with the kit on the connection's
// reader and writer, and around h: a session/prompt is handled with the
// prompt's trace context attached, and a panic in h settles the
// connection's open compactions as failed before it goes on.
func (k *Kit) NewConnection(h acp.MethodHandler, peerInput io.Writer, peerOutput io.Reader) *acp.Connection {
	t, w, r := k.wire(peerInput, peerOutput)
	conn := acp.NewConnection(guard(t, h), w, r)
	k.register(conn, t)
	return conn
}

func (k *Kit) wire(peerInput io.Writer, peerOutput io.Reader) (*tap.Tap, io.Writer, io.Reader) {
	// The tap writes whole lines to peerInput, several in one Write when
	// notifications queue up (see agentkit.NewStream).
	t := tap.NewWriter(k.config(), peerInput)
	return t, &writer{t: t}, newReader(t, peerOutput)
}

func guard(t *tap.Tap, h acp.MethodHandler) acp.MethodHandler {
	return func(ctx context.Context, method string, params json.RawMessage) (any, *acp.RequestError) {
		if method == tap.MethodPrompt {
			if tr := tap.TraceFromParams(params); tr.Traceparent != "" {
				ctx = emitter.WithTrace(ctx, tr)
			}
		}
		// Not recover: a deferred check lets the panic continue with its
		// own stack after the compactions are settled.
		returned := false
		defer func() {
			if !returned {
				t.Crash()
			}
		}()
		res, err := h(ctx, method, params)
		returned = true
		return res, err
	}
}

// register indexes conn for Session; a connection that already ended (its
// input closed before the SDK constructor returned) is not kept.
func (k *Kit) register(conn Conn, t *tap.Tap) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.conns == nil {
		k.conns = make(map[Conn]*tap.Tap)
	}
	k.conns[conn] = t
	if !t.OnClose(func() { k.forget(conn) }) {
		delete(k.conns, conn)
		return
	}
	// The reader settles when the input ends; this covers the SDK
	// stopping on its own (a full notification queue) without reading on.
	go func() {
		<-conn.Done()
		t.Close(emitter.ErrConnectionClosed)
	}()
}

func (k *Kit) config() settings {
	if k.configured {
		return k.cfg
	}
	return tap.DefaultConfig()
}

func (k *Kit) forget(conn Conn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.conns, conn)
}

func (k *Kit) tap(conn Conn) *tap.Tap {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.conns[conn]
}

// Session returns the reporter of one ACP session on conn. It never returns
// nil: on a connection the kit does not serve, every method fails with
// ErrUnknownConn.
func (k *Kit) Session(conn Conn, sessionID string) *Session {
	t := k.tap(conn)
	if t == nil {
		return &Session{id: sessionID, err: fmt.Errorf("session %s: %w", sessionID, ErrUnknownConn)}
	}
	return &Session{t: t, id: sessionID}
}

// Emitter returns conn's emitter, for what Session does not cover
// (Emitter.ChildSession, Mode, Negotiation). Compactions opened through it
// bypass the kit's refusal of starts while a turn is being settled, but are
// still settled at the end of their session's turn.
func (k *Kit) Emitter(conn Conn) (*emitter.Emitter, error) {
	t := k.tap(conn)
	if t == nil {
		return nil, ErrUnknownConn
	}
	em := t.Emitter()
	if em == nil {
		return nil, ErrNotInitialized
	}
	return em, nil
}

// Recover settles conn's open compactions as failed
// (emitter.ErrAgentCrashed) when the goroutine is panicking, then panics
// again with the same value. The SDK runs an acp.Agent's methods on
// goroutines the kit has no hook in, so use it as `defer kit.Recover(conn)`
// first thing in Prompt (and wherever a runtime runs mid-compaction). It
// does nothing when there is no panic.
func (k *Kit) Recover(conn Conn) {
	if v := recover(); v != nil {
		if t := k.tap(conn); t != nil {
			t.Crash()
		}
		panic(v)
	}
}
