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
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/turn"
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
	// nil means fallback.ToolCall(); emitter.None (fallback.None) means
	// nothing at all.
	Fallback emitter.Renderer
	// CancelGrace is the engine's turn.Config.CancelGrace.
	CancelGrace time.Duration
	Logger      *slog.Logger
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config { return Config{CancelGrace: DefaultCancelGrace} }

// Tap is one connection's host of the wire engine. It is safe for
// concurrent use.
type Tap struct {
	cfg Config
	log *slog.Logger
	out *outQueue // every message leaves whole, in one order (see out.go)
	e   *turn.Engine
	em  atomic.Pointer[emitter.Emitter] // created by the initialize answer

	// touched holds the sessions the tap has asked the emitter for (a
	// string set): the only ones the emitter keeps state for, unless the
	// host has the emitter itself (shared). A turn's end settles a session
	// only then, so that a turn without compactions, or a prompt for a
	// session the agent does not know, leaves nothing behind in the
	// emitter. A session's entry goes with the session (closeSession) or
	// with the connection.
	touched sync.Map
	shared  atomic.Bool

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
	l := cfg.Logger
	if l == nil {
		l = slog.Default()
	}
	t := &Tap{cfg: cfg, log: l, out: q}
	t.e = turn.New(turn.Config{CancelGrace: cfg.CancelGrace, OnGrace: t.onGrace, OnBegin: t.onBegin})
	return t
}

// Emitter returns the connection's emitter, or nil before initialize.
func (t *Tap) Emitter() *emitter.Emitter { return t.em.Load() }

// SharedEmitter is Emitter for the host (Kit.Emitter): from then on the
// tap settles every session at its turn's end, since the host may open
// compactions in any session without the tap seeing it.
func (t *Tap) SharedEmitter() *emitter.Emitter {
	t.shared.Store(true)
	return t.em.Load()
}

// session returns em's tracker of sessionID, which the emitter keeps from
// now on until the session closes.
func (t *Tap) session(em *emitter.Emitter, sessionID string) *emitter.Session {
	if _, ok := t.touched.Load(sessionID); !ok {
		t.touched.Store(sessionID, struct{}{})
	}
	return em.Session(sessionID)
}

// known reports whether the emitter may keep state for sessionID.
func (t *Tap) known(sessionID string) bool {
	if t.shared.Load() {
		return true
	}
	_, ok := t.touched.Load(sessionID)
	return ok
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
	var in Inbound
	batch := turn.IsBatch(msg)
	turn.Batch(msg, func(elem []byte) {
		m, ok := turn.Parse(elem)
		if !ok {
			return
		}
		in.Cancelled = append(in.Cancelled, t.e.Client(&m)...)
		if !batch && m.Method == turn.MethodPrompt && m.ID != "" && m.SessionID != "" {
			in.Prompt = m.ID
		}
	})
	return in
}

// BindPrompt derives the context of the handler of the session/prompt
// request whose id is key (skim.IDKey of its raw id): the engine cancels it
// on a user cancel (also one that already arrived) with cause
// emitter.ErrCancelled, once the turn is over with emitter.ErrTurnEnded,
// and when the connection closes with its reason, so a runtime tells a
// user's cancel (context.Cause) from other ends. It carries the prompt's
// trace context.
func (t *Tap) BindPrompt(ctx context.Context, key string) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	if tr := t.e.Bind(key, cancel); tr.Traceparent != "" {
		ctx = emitter.WithTrace(ctx, tr)
	}
	return ctx
}

// Pass queues a notification of the agent's own that the caller knows
// changes no turn (not a v2 state_update), without looking at it: on a tap
// of NewObjects the transport marshals v itself when it writes it, so v
// must not change once passed. It returns before the write (see out.go).
func (t *Tap) Pass(v any) error { return t.out.writeObject(v) }

// Send writes one message of the agent's own, after showing it to the
// engine. The initialize answer creates the emitter before it is written.
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
	eff := t.e.Agent(&m)
	switch {
	case eff.Negotiated != nil:
		t.negotiated(*eff.Negotiated)
	case eff.Request == turn.MethodInitialize && m.Failed && t.Emitter() == nil:
		t.log.Warn(t.cfg.Name + ": initialize failed; compaction stays off until one succeeds")
	}
	if eff.End != nil || eff.Closed != "" {
		return t.endTurn(eff, msg)
	}
	notification := m.Method != "" && m.ID == ""
	return t.out.write(msg, !notification)
}

// endTurn settles the session of the turn eff ends, and forgets a session
// eff closes, before it writes msg, the message that does it; then it tells
// the engine the end is written.
func (t *Tap) endTurn(eff turn.Effect, msg []byte) error {
	if end := eff.End; end != nil {
		t.settle(end.Session, end.Reason, end.Trace, "turn ended")
	}
	if eff.Closed != "" {
		t.closeSession(eff.Closed)
	}
	err := t.out.write(msg, true)
	if eff.End != nil {
		t.e.Ended(eff.End)
	}
	return err
}

// closeSession ends a session the agent closed (its answer to
// session/close): what is still open in it, which no turn holds, is
// settled as cancelled, since closing ends its work as a cancel does, and
// the emitter forgets it, so that its memory is bounded by the live
// sessions.
func (t *Tap) closeSession(sessionID string) {
	em := t.Emitter()
	if em == nil {
		return
	}
	n, err := em.CloseSession(context.Background(), sessionID, emitter.ErrCancelled)
	t.touched.Delete(sessionID)
	if n > 0 {
		t.log.Info(t.cfg.Name+": settled open compactions", "session", sessionID, "count", n, "why", "session closed", "reason", emitter.ErrCancelled.Error())
	}
	if err != nil {
		t.log.Warn(t.cfg.Name+": settlement not delivered", "session", sessionID, "error", err)
	}
}

// onGrace is the engine's OnGrace: a cancelled turn's grace ran out, and
// what the runtime left open is settled as cancelled, since the client
// asked to stop and must not wait on a runtime that does not.
func (t *Tap) onGrace(g turn.Grace) {
	if !t.e.GraceDue(g) {
		return
	}
	tr, _ := t.e.Trace(g.Session)
	t.settle(g.Session, emitter.ErrCancelled, tr, "cancel grace expired")
}

// onBegin is the engine's OnBegin: a session's turn began, and the
// background compactions that settled between turns are delivered to it.
func (t *Tap) onBegin(sessionID string) {
	em := t.Emitter()
	if em == nil || !t.known(sessionID) {
		return
	}
	if err := em.Session(sessionID).Deliver(context.Background()); err != nil {
		t.log.Warn(t.cfg.Name+": held compaction updates not delivered", "session", sessionID, "error", err)
	}
}

// settle settles the open compactions of one session for reason.
func (t *Tap) settle(sessionID string, reason error, tr emitter.TraceContext, why string) {
	em := t.Emitter()
	if em == nil || !t.known(sessionID) {
		return // nothing was ever opened in it
	}
	// Marked as the settlement's, so that a start its observer attempts
	// is refused rather than made to wait for the end it belongs to.
	ctx := turn.Settling(context.Background())
	if tr.Traceparent != "" {
		ctx = emitter.WithTrace(ctx, tr)
	}
	n, err := em.Session(sessionID).SettleAll(ctx, reason)
	if n > 0 {
		t.log.Info(t.cfg.Name+": settled open compactions", "session", sessionID, "count", n, "why", why, "reason", reason.Error())
	}
	if err != nil {
		t.log.Warn(t.cfg.Name+": settlement not delivered", "session", sessionID, "error", err)
	}
}

// negotiated creates the connection's emitter from the initialize
// exchange.
func (t *Tap) negotiated(n capability.Negotiation) {
	for _, d := range n.Diagnostics {
		t.log.Warn(t.cfg.Name+": initialize", "path", d.Path, "diagnostic", d.Message)
	}
	// Nothing about compaction between turns: a start from a goroutine that
	// outlived its prompt is refused (emitter.ErrOutsideTurn) unless it was
	// started with emitter.Background, which shows it when it settles.
	// Every reporting call of the runtime, by handle or through the kit's
	// Session, passes the engine's turn guard (see gate).
	opts := []emitter.Option{emitter.WithNegotiation(n), emitter.WithTurns(t.e.InTurn, emitter.RefuseOutsideTurn), emitter.WithGate(t.gate)}
	if r := t.fallback(); r != nil {
		opts = append(opts, emitter.WithFallback(r))
	}
	opts = append(opts, t.cfg.EmitterOptions...)
	em := emitter.New(emitter.NotifierFunc(t.notify), opts...)
	t.em.Store(em)
	t.log.Info(t.cfg.Name+": compaction negotiated", "version", em.Negotiation().Version, "mode", em.Mode().String(), "clientCapability", n.Compaction)
}

// fallback returns the renderer for clients without the capability: the
// configured one, fallback.ToolCall() by default, nil for emitter.None.
func (t *Tap) fallback() emitter.Renderer {
	switch r := t.cfg.Fallback.(type) {
	case nil:
		return fallback.ToolCall()
	case emitter.None, *emitter.None:
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
