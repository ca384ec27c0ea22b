package agentkit

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/acpcompact/acpcompact/agentkit/internal/tap"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/sourcegraph/jsonrpc2"
)

// Sentinel errors; errors returned by this package that stem from one of
// them wrap it, so callers branch with errors.Is. A Start refused while a
// turn is being settled wraps emitter.ErrTurnEnded.
var (
	// ErrNotInitialized: the connection has not yet answered initialize
	// successfully, so it is not known how the client takes compaction.
	ErrNotInitialized = tap.ErrNotInitialized
	// ErrClosed: the connection has closed; its compactions were settled.
	ErrClosed = tap.ErrClosed
	// ErrUnknownConn: the connection was not created by this Kit's NewConn,
	// or it has closed and the Kit forgot it.
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

// Kit serves any number of jsonrpc2 connections with the same
// configuration. Safe for concurrent use. The zero Kit is usable and has
// the defaults of New().
type Kit struct {
	cfg        settings
	configured bool

	mu    sync.Mutex
	conns map[*jsonrpc2.Conn]*tap.Tap
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

// NewConn is jsonrpc2.NewConn with the kit on both ends of the connection:
// around stream, to see every message in wire order and to hold a turn's
// last message until its compactions are settled, and around h, outermost,
// to give prompt handlers a cancellable, traced context and to settle on a
// panic. See the package documentation for what each end does.
func (k *Kit) NewConn(ctx context.Context, stream jsonrpc2.ObjectStream, h jsonrpc2.Handler, opts ...jsonrpc2.ConnOpt) *jsonrpc2.Conn {
	ts := &tapStream{inner: stream}
	if ls, ok := stream.(*lineStream); ok {
		ts.t = tap.NewWriter(k.config(), ls.rwc)
	} else {
		// The stream writes what the tap queues: json.RawMessage, or the
		// jsonrpc2 message itself for a notification passed through.
		ts.t = tap.NewObjects(k.config(), stream.WriteObject)
		ts.pass = true
	}
	t := ts.t
	b := &binding{k: k, t: t}
	// The OnSend hook runs under jsonrpc2's send lock right before the
	// message reaches WriteObject; it tells the stream what the message is.
	opts = append(opts[:len(opts):len(opts)], jsonrpc2.OnSend(ts.onSend))
	conn := jsonrpc2.NewConn(ctx, ts, &handler{b: b, inner: h}, opts...)
	b.register(conn)
	return conn
}

// binding ties one connection's tap to the Kit's index of connections.
type binding struct {
	k    *Kit
	t    *tap.Tap
	once sync.Once
}

// register indexes conn for Kit.Session. Both NewConn and the first handled
// message call it, because a handler may run before NewConn returns.
func (b *binding) register(conn *jsonrpc2.Conn) {
	b.once.Do(func() {
		k := b.k
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.conns == nil {
			k.conns = make(map[*jsonrpc2.Conn]*tap.Tap)
		}
		k.conns[conn] = b.t
		if !b.t.OnClose(func() { k.forget(conn) }) {
			delete(k.conns, conn)
		}
	})
}

func (k *Kit) config() settings {
	if k.configured {
		return k.cfg
	}
	return tap.DefaultConfig()
}

func (k *Kit) forget(conn *jsonrpc2.Conn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.conns, conn)
}

func (k *Kit) tap(conn *jsonrpc2.Conn) *tap.Tap {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.conns[conn]
}

// Session returns the reporter of one ACP session on conn. It never returns
// nil: on a connection the kit does not serve, every method fails with
// ErrUnknownConn.
func (k *Kit) Session(conn *jsonrpc2.Conn, sessionID string) *Session {
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
func (k *Kit) Emitter(conn *jsonrpc2.Conn) (*emitter.Emitter, error) {
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
