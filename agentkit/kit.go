package agentkit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/acpcompact/acpcompact/agentkit/internal/tap"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/sourcegraph/jsonrpc2"
)

// Kit serves any number of jsonrpc2 connections with the same
// configuration. Safe for concurrent use. The zero Kit is usable and has
// the defaults of New().
type Kit struct {
	cfg        settings
	configured bool

	mu    sync.Mutex
	conns map[*jsonrpc2.Conn]*binding
	shut  bool // Shutdown ran: connections made from now on close at once
}

// New returns a Kit configured by opts.
func New(opts ...Option) *Kit { return &Kit{cfg: newSettings(opts...), configured: true} }

// NewConn is jsonrpc2.NewConn with the kit on both ends of the connection:
// around stream, to see every message in wire order and to hold a turn's
// last message until its compactions are settled, and around h, outermost,
// to give prompt handlers a cancellable, traced context and to settle on a
// panic. See the package documentation for what each end does.
//
// ctx bounds the connection as it bounds jsonrpc2's; to stop an agent on a
// signal, prefer Shutdown (or CloseConn) to ending ctx: jsonrpc2 ends its
// handlers' contexts before it closes the stream, while Shutdown settles
// and writes first. A connection made after Shutdown is closed at once.
func (k *Kit) NewConn(ctx context.Context, stream jsonrpc2.ObjectStream, h jsonrpc2.Handler, opts ...jsonrpc2.ConnOpt) *jsonrpc2.Conn {
	b := &binding{k: k, lim: newLimiter(), closed: make(chan struct{})}
	ts := &tapStream{inner: stream, b: b}
	if ls, ok := stream.(*lineStream); ok {
		ts.t = tap.NewWriter(k.config(), ls.rwc)
	} else {
		// The stream writes what the tap queues: json.RawMessage, or the
		// jsonrpc2 message itself for a notification passed through.
		ts.t = tap.NewObjects(k.config(), stream.WriteObject)
		ts.pass = true
	}
	b.t = ts.t
	b.bound = tap.Binding{Tap: b.t, Host: b}
	b.t.OnClose(b.lim.close)
	// The OnSend hook runs under jsonrpc2's send lock right before the
	// message reaches WriteObject; it tells the stream what the message is.
	// OnRecv sees the client's answers to the agent's requests.
	opts = append(opts[:len(opts):len(opts)], jsonrpc2.OnSend(ts.onSend), jsonrpc2.OnRecv(b.onRecv))
	conn := jsonrpc2.NewConn(ctx, ts, &handler{b: b, inner: h}, opts...)
	b.register(conn)
	k.mu.Lock()
	shut := k.shut
	k.mu.Unlock()
	if shut {
		_ = b.close(context.Background(), conn)
	}
	return conn
}

// binding ties one connection's tap to the Kit's index of connections.
type binding struct {
	k *Kit
	t *tap.Tap
	// bound is what the connection's handlers' contexts carry (tap.Bind),
	// for SessionFrom, Recover and AsyncHandler.
	bound tap.Binding
	lim   *limiter       // AsyncHandler's slots
	once  sync.Once      // register
	conn  *jsonrpc2.Conn // set by register, under k.mu
	gone  bool           // the stream is closed (under k.mu)
	// closed is closed once the stream's Close has returned: the
	// settlements are written (or abandoned) and the transport is closed.
	closed chan struct{}
}

// register indexes conn for Shutdown, CloseConn and Emitter. Both NewConn
// and the first handled message call it, because a handler may run before
// NewConn returns.
func (b *binding) register(conn *jsonrpc2.Conn) {
	b.once.Do(func() {
		k := b.k
		k.mu.Lock()
		defer k.mu.Unlock()
		b.conn = conn
		if b.gone {
			return // closed before it was indexed
		}
		if k.conns == nil {
			k.conns = make(map[*jsonrpc2.Conn]*binding)
		}
		k.conns[conn] = b
	})
}

// streamClosed is the end of the connection's stream: the Kit forgets it.
func (b *binding) streamClosed() {
	k := b.k
	k.mu.Lock()
	if !b.gone {
		b.gone = true
		if b.conn != nil && k.conns[b.conn] == b {
			delete(k.conns, b.conn)
		}
		close(b.closed)
	}
	k.mu.Unlock()
}

// onRecv is the connection's jsonrpc2.OnRecv hook: an answer of the
// client's to a request of the agent's.
func (b *binding) onRecv(req *jsonrpc2.Request, resp *jsonrpc2.Response) {
	if req != nil && resp != nil {
		b.lim.answered(req)
	}
}

// close closes the connection the kit's way: settle and write (the tap's
// Shutdown, bounded by ctx and CloseTimeout), then close the jsonrpc2
// connection, and wait, within ctx, for its stream to be closed (by this
// call or by a close already under way).
func (b *binding) close(ctx context.Context, conn *jsonrpc2.Conn) error {
	err := b.t.Shutdown(ctx, emitter.ErrConnectionClosed)
	_ = conn.Close()
	select {
	case <-b.closed:
	case <-ctx.Done():
		if err == nil {
			err = context.Cause(ctx)
		}
	}
	return err
}

// Shutdown ends every connection the kit serves, for an agent about to
// exit (on SIGINT or SIGTERM, say): on each, at once, the kit refuses new
// compactions, settles every one still open (`cancelled` in a turn the
// client cancelled, otherwise `failed` with emitter.ErrConnectionClosed),
// ends the prompt handlers' contexts (cause emitter.ErrConnectionClosed),
// writes everything queued, the settlements last, then closes the
// connection. It returns when that is done everywhere, so the process may
// exit without losing a terminal update.
//
// It is bounded by ctx and by CloseTimeout: a client that does not read is
// waited for at most that long (less when it had taken nothing for a
// while already), after which what it has not taken is dropped. It returns
// nil when everything was written, else the errors of the connections
// that could not be (joined). Connections made after it close at once.//
// The OnFinalRecord sink calls of what it settles run after every terminal
// update was written, and are waited for within the same bound: when
// Shutdown returns nil they have all returned, so the agent may close its
// store. When one is still running at the bound (a store that hangs),
// Shutdown returns an error wrapping context.DeadlineExceeded and that
// sink goes on; its record is still handed over, once, when it returns.
func (k *Kit) Shutdown(ctx context.Context) error {
	k.mu.Lock()
	k.shut = true
	bs := make(map[*jsonrpc2.Conn]*binding, len(k.conns))
	maps.Copy(bs, k.conns)
	k.mu.Unlock()
	errs := make([]error, 0, len(bs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for conn, b := range bs {
		wg.Go(func() {
			if err := b.close(ctx, conn); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if b := k.cfg.Book; b != nil {
		b.Close() // the connections' settlements are recorded
	}
	return errors.Join(errs...)
}

// Record writes the final record of a compaction to sessionID's history
// (WithStore) without a connection: for a compaction the runtime applies
// while no client is connected, or after Shutdown (a late summary), which
// the session's next ReplayHistory replays at the end of the history as
// it stood. rec must be settled (completed, failed or cancelled); without
// an ID it gets a new one (an ID the history holds already keeps its
// first final record: see package history). It opens the session's
// history for the write and closes it again, unless a connection of the
// kit holds it. It returns an error wrapping ErrStore when the kit has no
// store or the record cannot be written (the store's error is wrapped
// too: another process serving the session is history.ErrLocked).
func (k *Kit) Record(ctx context.Context, sessionID string, rec emitter.Record) error {
	return record(ctx, k.config(), sessionID, rec)
}

// record is Kit.Record for either kit's settings.
func record(ctx context.Context, cfg settings, sessionID string, rec emitter.Record) error {
	if cfg.Book == nil {
		return fmt.Errorf("%w: session %s: %w", ErrStore, sessionID, tap.ErrNoStore)
	}
	return cfg.Book.Record(ctx, sessionID, rec)
}

// CloseConn is Shutdown for one connection. It also waits for a close
// already under way, as when the client hung up: jsonrpc2's
// DisconnectNotify fires before the kit has closed the stream, so an agent
// that exits when its connection ends calls CloseConn (or Shutdown) first.
// It returns ErrUnknownConn for a connection the kit does not serve (or no
// longer: its close has completed).
func (k *Kit) CloseConn(ctx context.Context, conn *jsonrpc2.Conn) error {
	k.mu.Lock()
	b := k.conns[conn]
	k.mu.Unlock()
	if b == nil {
		return ErrUnknownConn
	}
	return b.close(ctx, conn)
}

func (k *Kit) config() settings {
	if k.configured {
		return k.cfg
	}
	return newSettings()
}

func (k *Kit) tap(conn *jsonrpc2.Conn) *tap.Tap {
	k.mu.Lock()
	defer k.mu.Unlock()
	if b := k.conns[conn]; b != nil {
		return b.t
	}
	return nil
}

// Emitter returns conn's emitter, for what Session does not cover
// (Mode, CloseSession). Its reporting calls pass the
// turn guard as Session's do, and its compactions are settled at the end
// of their session's turn: from the first call on, every turn's end
// settles its session in the emitter, which then keeps a tracker of each
// session that had a turn until it closes (see "Memory" in the package
// documentation).
func (k *Kit) Emitter(conn *jsonrpc2.Conn) (*emitter.Emitter, error) {
	return tap.KitEmitter(k.tap(conn), ErrUnknownConn)
}
