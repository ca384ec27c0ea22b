// Package tap is the core that agentkit (sourcegraph/jsonrpc2) and
// agentkit/acpsdk (coder/acp-go-sdk) share: a host of the wire engine
// (internal/turn) for one connection. The transport packages feed it the
// bytes they read and the messages they are about to write; it shows each
// one to the engine, acts on what the engine answers, and writes the
// messages, the agent's and the emitter's, through one queue (out.go).
//
// The tap keeps no turn, cancel, grace, prompt or request-id state of its
// own: the engine decides when a turn ends and whether it was cancelled,
// matches responses to requests by the JSON value of their ids, runs the
// cancel grace and guards starts. The tap keeps the connection's emitter,
// created from the negotiation the engine reads off the initialize
// exchange, the output queue, and its log. Its files, one job each:
//
//   - tap.go: the host, its Receive (client messages) and Send (agent
//     messages), and what it does on an engine effect;
//   - compaction.go: the reporting calls a runtime makes, and the engine's
//     turn guard, which every one of them passes as the emitter's gate;
//   - close.go: the connection's end, a panic, Flush;
//   - out.go: the output queue, which frames each update with protocol's
//     session/update encoder.
//
// Locks: the engine's (taken by its calls, never held when they return,
// except the shared turn guard that Admit hands out, held across one
// emitter call), the emitter's, the output queue's (a leaf; the
// transport's write runs without it), Tap.mu (close hooks; a leaf).
package tap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acpcompact/acpcompact/audit"
	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/history"
	"github.com/acpcompact/acpcompact/internal/host"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/acpcompact/acpcompact/observe"
	"github.com/acpcompact/acpcompact/protocol"
)

// DefaultCancelGrace is the cancel grace unless configured (see
// turn.Config.CancelGrace, its one definition).
const DefaultCancelGrace = turn.DefaultCancelGrace

// Config is what the public packages' options set.
type Config struct {
	// Name prefixes the tap's log messages and the errors it returns
	// ("agentkit", "acpsdk").
	Name string
	// ErrNotInitialized and ErrClosed are the public package's sentinels,
	// wrapped by the errors the tap returns for a connection before its
	// initialize exchange and after its end.
	ErrNotInitialized, ErrClosed error
	EmitterOptions               []emitter.Option
	// Fallback renders compaction for v1 clients without the capability.
	// nil means fallback.ToolCall(); fallback.None means nothing at all.
	Fallback emitter.Renderer
	// CancelGrace is the engine's turn.Config.CancelGrace.
	CancelGrace time.Duration
	Logger      *slog.Logger
	// Store is what WithStore set; the kit makes Book of it, once, for
	// all its connections (nil: no store).
	Store history.Store
	Book  *Book
	// ErrStore is the public package's sentinel of a history that could
	// not be written or read.
	ErrStore error
	// Audit has each completed compaction's summary audited against the
	// session's history as the connection carried it (WithAudit).
	Audit bool
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config { return Config{CancelGrace: DefaultCancelGrace} }

// NewConfig is the Config of a kit made with opts, the one step both
// public kits take (agentkit.New, acpsdk.New, whose options are
// agentkit's): the defaults, then opts in order (a nil one skipped), then
// the kit's name and sentinels, which no option changes, and the Book of
// the Store an option set.
func NewConfig[O ~func(*Config)](name string, errNotInitialized, errClosed, errStore error, opts ...O) Config {
	cfg := DefaultConfig()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	cfg.Name, cfg.ErrNotInitialized, cfg.ErrClosed, cfg.ErrStore = name, errNotInitialized, errClosed, errStore
	if cfg.Store != nil {
		cfg.Book = NewBook(cfg.Store, cfg.Logger, errStore)
	}
	return cfg
}

// Tap is one connection's host of the wire engine (through
// internal/host, which it shares with the proxy). It is safe for
// concurrent use.
type Tap struct {
	cfg Config
	log *slog.Logger
	out *outQueue // every message leaves whole, in one order (see out.go)
	h   *host.Host
	e   *turn.Engine // h's
	// book keeps the sessions' histories (nil without a store), hists
	// those this tap holds (persist.go).
	book  *Book
	hists histories
	// follower rebuilds each session's history from the connection's
	// messages for the audit of its summaries (Config.Audit; else nil);
	// seen counts the messages it was given, for the losses' places.
	follower *audit.Follower
	seen     atomic.Int64

	mu      sync.Mutex
	closed  bool
	closing chan struct{} // closed when the first Shutdown has finished
	// closeErr is the first Shutdown's result, set before closing is
	// closed.
	closeErr error
	onClose  []func()
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
	if cfg.Name == "" {
		cfg.Name = "agentkit"
	}
	if cfg.ErrNotInitialized == nil {
		cfg.ErrNotInitialized = turn.ErrNotInitialized
	}
	if cfg.ErrClosed == nil {
		cfg.ErrClosed = turn.ErrClosed
	}
	if cfg.ErrStore == nil {
		cfg.ErrStore = errors.New("the session's history could not be written or read")
	}
	l := cfg.Logger
	if l == nil {
		l = slog.Default()
	}
	t := &Tap{cfg: cfg, log: l, out: q, book: cfg.Book}
	if cfg.Audit {
		t.follower = audit.NewFollower()
	}
	t.h = host.New(host.Config{
		Name: cfg.Name, Logger: l, CancelGrace: cfg.CancelGrace,
		Notifier: emitter.NotifierFunc(t.notify),
		// Nothing about compaction between turns: a start from a goroutine
		// that outlived its prompt is refused (emitter.ErrOutsideTurn)
		// unless it was started with emitter.Background, which shows it
		// when it settles. Every reporting call of the runtime, by handle
		// or through the kit's Session, passes the engine's turn guard
		// (see gate).
		Outside: emitter.RefuseOutsideTurn,
		Gate:    t.gate,
		Options: t.emitterOptions,
		Hooks:   host.Hooks{Negotiated: t.negotiated},
	})
	t.e = t.h.Engine()
	if t.book != nil {
		// Once the close's settlements are recorded.
		t.OnClose(t.releaseHistories)
	}
	return t
}

// Emitter returns the connection's emitter, or nil before initialize.
func (t *Tap) Emitter() *emitter.Emitter { return t.h.Emitter() }

// SharedEmitter is Emitter for the host (Kit.Emitter): from then on the
// tap settles every session at its turn's end, since the host may open
// compactions in any session without the tap seeing it.
func (t *Tap) SharedEmitter() *emitter.Emitter { return t.h.Share() }

// KitEmitter is both kits' Kit.Emitter: the SharedEmitter of t, the tap of
// the connection asked about, or errUnknownConn when the kit serves no
// such connection (t nil), or Config.ErrNotInitialized before initialize.
func KitEmitter(t *Tap, errUnknownConn error) (*emitter.Emitter, error) {
	if t == nil {
		return nil, errUnknownConn
	}
	em := t.SharedEmitter()
	if em == nil {
		return nil, t.cfg.ErrNotInitialized
	}
	return em, nil
}

// Inbound is what Receive read of one inbound message.
type Inbound struct {
	// Cancelled are the raw ids of the pending session/prompt requests
	// that the message cancelled (session/cancel, $/cancel_request,
	// session/close).
	Cancelled []json.RawMessage
	// Prompt is the id key (skim.IDKey) of the session/prompt request the
	// message is, as the engine follows it ("" for any other message, and
	// for a batch).
	Prompt string
}

// Receive shows the engine one inbound message (a batch is read message by
// message) before the stack dispatches it.
func (t *Tap) Receive(msg []byte) Inbound {
	t.observe(audit.FromClient, msg)
	var in Inbound
	batch := turn.IsBatch(msg)
	turn.Batch(msg, func(elem []byte) {
		m, ok := turn.Parse(elem)
		if !ok {
			return
		}
		in.Cancelled = append(in.Cancelled, t.h.Client(&m)...)
		if m.Method == turn.MethodPrompt && m.ID != "" && m.SessionID != "" {
			if !batch {
				in.Prompt = m.ID
			}
			if t.book != nil {
				t.recordPrompt(&m)
			}
		}
	})
	return in
}

// BindPrompt derives the context of the handler of the session/prompt
// request whose id is key (skim.IDKey of its raw id): the engine cancels it
// on a user cancel (also one that already arrived) with cause
// emitter.ErrCancelled, once the turn is over with emitter.ErrTurnEnded,
// and when the connection closes with its reason, so a runtime tells a
// user's cancel (context.Cause) from other ends. Once the turn is over the
// cause also matches emitter.ErrTurnEnded (errors.Is), a cancelled turn's
// included, so that the emitter refuses a Start made with the context of
// a turn that is over, whatever turn runs now. It carries the prompt's
// trace context.
func (t *Tap) BindPrompt(ctx context.Context, key string) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	pc := &promptCause{}
	bind := func(err error) {
		pc.once.Do(func() { pc.first = err })
		if errors.Is(err, emitter.ErrTurnEnded) {
			pc.ended.Store(true)
		}
		cancel(pc)
	}
	if tr := t.e.Bind(key, bind); tr.Traceparent != "" {
		ctx = observe.WithTrace(ctx, tr)
	}
	return ctx
}

// promptCause is the cause of a prompt handler's context: the first end
// it had (a user's cancel, the turn's end, the connection's close), which
// it wraps, and once the turn is over emitter.ErrTurnEnded as well.
type promptCause struct {
	once  sync.Once
	first error
	ended atomic.Bool
}

func (c *promptCause) Error() string { return c.first.Error() }

func (c *promptCause) Unwrap() error { return c.first }

// Is makes the cause match emitter.ErrTurnEnded once the turn is over.
func (c *promptCause) Is(target error) bool { return target == emitter.ErrTurnEnded && c.ended.Load() }

// Pass queues a notification of the agent's own that the caller knows
// changes no turn (not a v2 state_update), without looking at it: on a tap
// of NewObjects the transport marshals v itself when it writes it, so v
// must not change once passed. It returns before the write (see out.go).
func (t *Tap) Pass(v any) error { return t.out.writeObject(v) }

// Reads reports whether the tap reads every message it writes: it records
// the sessions' histories (a store) or audits their summaries. Pass is
// then not for the caller's notifications.
func (t *Tap) Reads() bool { return t.book != nil || t.follower != nil }

// observe gives one message to the audit's Follower, if any.
func (t *Tap) observe(side audit.Side, msg []byte) {
	if t.follower == nil {
		return
	}
	n := t.seen.Add(1)
	from := "client"
	if side == audit.FromAgent {
		from = "agent"
	}
	t.follower.Observe(side, fmt.Sprintf("%s message %d", from, n), msg)
}

// Send writes one message of the agent's own, after showing it to the
// engine (through the host). The initialize answer creates the emitter
// before it is written.
// A message that ends a turn (the response to the running v1
// session/prompt, a v2 idle state_update) is written only after every
// compaction of its session still open has been settled. A notification may
// be written after Send returns (see out.go); anything else, a response in
// particular, is written, behind everything sent before it, when Send
// returns.
func (t *Tap) Send(msg []byte) error {
	m, ok := turn.Parse(msg)
	if !ok {
		return t.out.write(msg, true) // not understood: written in place
	}
	if t.book != nil {
		if err := t.recordOut(msg, &m); err != nil {
			return err // not written: the history could not hold it
		}
	}
	t.observe(audit.FromAgent, msg)
	eff := t.h.Agent(context.Background(), &m, nil)
	if eff.Closed != "" && t.follower != nil {
		t.follower.Forget(eff.Closed)
	}
	if eff.End != nil || eff.Closed != "" {
		// The turn it ends is settled (or the session it closes
		// forgotten) before it is written; then the engine is told.
		err := t.out.write(msg, true)
		t.h.Written(eff)
		if eff.Closed != "" && t.book != nil {
			t.book.closeSession(eff.Closed) // its settlements are recorded
		}
		return err
	}
	notification := m.Method != "" && m.ID == ""
	return t.out.write(msg, !notification)
}

// emitterOptions are the emitter's options beyond the host's: the
// fallback, then the kit's (which may override it).
func (t *Tap) emitterOptions(capability.Negotiation) []emitter.Option {
	var opts []emitter.Option
	if r := t.fallback(); r != nil {
		opts = append(opts, emitter.WithFallback(r))
	}
	if t.book != nil {
		// First: the store has each final record before any sink of the
		// runtime's sees it (sinks add up, in order).
		opts = append(opts, emitter.OnFinalRecord(t.final))
	}
	if t.follower != nil {
		opts = append(opts, emitter.WithAudit(t.follower.Audit))
	}
	return append(opts, t.cfg.EmitterOptions...)
}

// negotiated logs the mode the initialize exchange chose.
func (t *Tap) negotiated(n capability.Negotiation, em *emitter.Emitter, _ json.RawMessage) {
	t.log.Info(t.cfg.Name+": compaction negotiated", "version", n.Version, "mode", em.Mode().String(), "clientCapability", n.Compaction)
}

// fallback returns the renderer for clients without the capability: the
// configured one, fallback.ToolCall() by default, nil for fallback.None.
func (t *Tap) fallback() emitter.Renderer {
	switch r := t.cfg.Fallback.(type) {
	case nil:
		return fallback.ToolCall()
	case fallback.None, *fallback.None:
		return nil // the client sees nothing: the emitter's mode is Off
	default:
		return r
	}
}

// notify is the emitter's Notifier. It ignores ctx: a cancelled turn must
// still be able to report, and a write in progress cannot be interrupted
// anyway.
func (t *Tap) notify(_ context.Context, sessionID string, update any) error {
	u, err := protocol.MarshalUpdate(update)
	if err != nil {
		return err
	}
	return t.out.writeUpdate(sessionID, u)
}
