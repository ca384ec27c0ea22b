// Package host is the one host of the wire engine: it turns what the
// engine (internal/turn) says an ACP message means into emitter calls,
// once, for every host that carries a connection (the agent kits' tap and
// the proxy). Its one job is the turn rules on the emitter's side:
//
//   - the emitter is made when the initialize exchange negotiates, tied to
//     the engine's turns (emitter.WithTurns), so nothing about compaction
//     reaches the client outside a turn;
//   - a turn's end is settled before the message that ends it is written,
//     and the engine is told once it is written (Agent, then Written);
//   - a cancelled turn's grace (turn.Config.CancelGrace) settles what the
//     runtime left open as cancelled, and a compaction started after the
//     grace ran out gets a grace of its own (Start);
//   - what was held for a session between turns is delivered when its next
//     turn begins (Deliver);
//   - a session the agent closed is settled and forgotten (the emitter
//     keeps nothing of it), and the connection's end settles everything.
//
// The transport-specific parts stay with each caller: how messages are
// read and written, and, for the proxy, what its translators keep (the
// Hooks). A Host is safe for concurrent use.
package host

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/acpcompact/acpcompact/observe"
)

// Config configures a Host.
type Config struct {
	// Name prefixes the host's log messages ("agentkit", "proxy").
	Name   string
	Logger *slog.Logger
	// CancelGrace is the engine's (turn.Config.CancelGrace).
	CancelGrace time.Duration
	// Notifier is where the emitter's updates go.
	Notifier emitter.Notifier
	// Options are the emitter's options beyond the host's own (the
	// negotiation and the turns), for the negotiation n; the host applies
	// them after its own.
	Options func(n capability.Negotiation) []emitter.Option
	// Outside is what the emitter does with a start in a session with no
	// turn running: the kits refuse it (the runtime learns so), the proxy
	// holds it (the agent already started it).
	Outside emitter.OutsideTurn
	// Gate, when set, is the emitter's gate (emitter.WithGate): the kits
	// pass every reporting call of a runtime through the engine's turn
	// guard (turn.Engine.Admit), naming their own errors; the proxy, whose
	// calls all come from the goroutine that writes, sets none.
	Gate func(ctx context.Context, sessionID string) (release func(), err error)
	// TurnEndReason is what a turn's end that the client did not cancel
	// settles with; nil means emitter.ErrTurnEnded.
	TurnEndReason error
	// CloseReason is what the close of a session (session/close)
	// settles with; nil means emitter.ErrCancelled, since closing ends
	// its work as a cancel does.
	CloseReason error
	// DeferBegin: a turn's beginning is noted, and what was held for it
	// is delivered by DeliverBegun, which the caller calls where its
	// writes are ordered (the proxy: before the next agent line, since the
	// turn may begin on its client pump, which never writes to the
	// client), and which the host also runs through Serialize on a
	// goroutine of its own, for an agent that is silent. Otherwise it is
	// delivered at once, on the goroutine that began the turn.
	DeferBegin bool
	// Serialize runs a timer's work (the cancel grace) in the order of the
	// caller's writes (the proxy takes its output lock); nil runs it as
	// is.
	Serialize func(f func())
	// Hooks are the caller's parts of a settlement.
	Hooks Hooks
}

// Hooks are what a caller adds to the host's settlements; each may be nil.
type Hooks struct {
	// Before runs before the host settles session sid for reason, whether
	// or not it has compactions open (the proxy forwards a line it held
	// back, and completes what waited for its facts).
	Before func(ctx context.Context, sid string, reason error, why string)
	// After runs once the settlement is done (the proxy logs what it
	// settled and forgets what waited for it).
	After func(ctx context.Context, why string)
	// Negotiated runs once the emitter is made, with the agent's
	// initialize result.
	Negotiated func(n capability.Negotiation, em *emitter.Emitter, result json.RawMessage)
}

// Host hosts one connection's wire engine.
type Host struct {
	cfg Config
	log *slog.Logger
	e   *turn.Engine
	em  atomic.Pointer[emitter.Emitter]
	// ending is the session whose turn end is being settled: what is shown
	// while it settles belongs to that turn, which the engine already
	// counts as over (InTurn).
	ending atomic.Pointer[string]

	// known holds the sessions the host opened a compaction in (a string
	// set): the only ones the emitter keeps state for, unless all are
	// (Share). A settlement skips the others, so that a turn without
	// compactions, or a prompt for a session the agent does not know,
	// leaves nothing behind in the emitter.
	known  sync.Map
	all    atomic.Bool
	closed atomic.Bool

	// began are the sessions whose turn began since the last delivery
	// (DeferBegin); beganAny says whether there are any, without the lock.
	beganMu  sync.Mutex
	began    []string
	beganAny atomic.Bool
}

// New returns the host of a new connection.
func New(cfg Config) *Host {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.TurnEndReason == nil {
		cfg.TurnEndReason = emitter.ErrTurnEnded
	}
	if cfg.CloseReason == nil {
		cfg.CloseReason = emitter.ErrCancelled
	}
	h := &Host{cfg: cfg, log: cfg.Logger}
	h.e = turn.New(turn.Config{CancelGrace: cfg.CancelGrace, OnGrace: h.grace, OnBegin: h.begin})
	return h
}

// Engine returns the connection's wire engine.
func (h *Host) Engine() *turn.Engine { return h.e }

// Emitter returns the connection's emitter, or nil before initialize.
func (h *Host) Emitter() *emitter.Emitter { return h.em.Load() }

// Share is Emitter for a caller that opens compactions on the emitter
// itself (Kit.Emitter): from then on every session's turn end settles it,
// since the host cannot see what is opened in it.
func (h *Host) Share() *emitter.Emitter {
	h.all.Store(true)
	return h.em.Load()
}

// InTurn reports whether session sid has a turn running, the turn whose
// end is being settled included: the emitter's turn state.
func (h *Host) InTurn(sid string) bool {
	if s := h.ending.Load(); s != nil && *s == sid {
		return true
	}
	return h.e.InTurn(sid)
}

// Known reports whether the emitter keeps state for sessionID.
func (h *Host) Known(sessionID string) bool {
	if h.all.Load() {
		return true
	}
	_, ok := h.known.Load(sessionID)
	return ok
}

// Session returns the emitter's tracker of sessionID, which it keeps from
// now on until the session closes; nil before initialize.
func (h *Host) Session(sessionID string) *emitter.Session {
	em := h.Emitter()
	if em == nil {
		return nil
	}
	if _, ok := h.known.Load(sessionID); !ok {
		h.known.Store(sessionID, struct{}{})
	}
	return em.Session(sessionID)
}

// Client tells the engine of one client message and returns the raw ids
// of the prompt requests it cancelled.
func (h *Host) Client(m *turn.Msg) []json.RawMessage { return h.e.Client(m) }

// Agent tells the engine of one message of the agent's, before it is
// written, and carries out what it means: the initialize answer makes the
// emitter; a message that ends a turn has the turn's open compactions
// settled first (for a failed prompt response that the client did not
// cancel, with failed's reason when failed is set: the proxy reads the
// agent's own error text); the answer to session/close settles and
// forgets the session. The caller writes the message, then calls Written
// with the effect.
func (h *Host) Agent(ctx context.Context, m *turn.Msg, failed func(sid string) error) turn.Effect {
	eff := h.e.Agent(m)
	switch {
	case eff.Negotiated != nil:
		h.negotiated(*eff.Negotiated, m.Result)
	case eff.Request != turn.MethodInitialize:
	case !m.Failed && h.Emitter() != nil:
		h.log.Warn(h.cfg.Name + ": a second initialize exchange is ignored; the first one's mode stays")
	case m.Failed && h.Emitter() == nil:
		h.log.Warn(h.cfg.Name + ": initialize failed; compaction stays off until one succeeds")
	}
	if end := eff.End; end != nil {
		reason := h.cfg.TurnEndReason
		if end.Cancelled {
			reason = emitter.ErrCancelled
		}
		h.ending.Store(&end.Session)
		if !end.Cancelled && m.Failed && failed != nil && h.Emitter() != nil {
			reason = failed(end.Session)
		}
		h.settle(ctx, end.Session, reason, endWhy(eff), end.Trace)
		h.ending.Store(nil)
	}
	if sid := eff.Closed; sid != "" {
		h.closeSession(ctx, sid)
	}
	return eff
}

// endWhy says, for the log, what ended a turn.
func endWhy(eff turn.Effect) string {
	switch eff.Request {
	case turn.MethodPrompt:
		return "the agent answered session/prompt"
	case turn.MethodClose:
		return "the agent answered session/close"
	}
	return "the agent reported the idle state_update"
}

// Written reports that the message of eff has been written (or could not
// be): the engine may begin the next turn.
func (h *Host) Written(eff turn.Effect) { h.e.Ended(eff.End) }

// Start opens a compaction in sessionID (emitter.Session.Start), refused
// once the connection has closed or before its initialize exchange.
func (h *Host) Start(ctx context.Context, sessionID string, opts ...emitter.StartOption) (*emitter.Compaction, error) {
	if h.closed.Load() {
		return nil, fmt.Errorf("session %s: %w", sessionID, turn.ErrClosed)
	}
	s := h.Session(sessionID)
	if s == nil {
		return nil, fmt.Errorf("session %s: %w", sessionID, turn.ErrNotInitialized)
	}
	return s.Start(ctx, opts...)
}

// Deliver delivers what the emitter held for sessionID between turns, at
// the beginning of its turn.
func (h *Host) Deliver(ctx context.Context, sessionID string) {
	em := h.Emitter()
	if em == nil || !h.Known(sessionID) {
		return
	}
	if err := em.Session(sessionID).Deliver(ctx); err != nil {
		h.log.Warn(h.cfg.Name+": held compaction updates not delivered", "session", sessionID, "error", err)
	}
}

// Settle settles every open compaction of sessionID for reason
// (emitter.ErrCancelled: cancelled; anything else: failed with its text);
// why says when, for the log.
func (h *Host) Settle(ctx context.Context, sessionID string, reason error, why string) {
	tr, _ := h.e.Trace(sessionID)
	h.settle(ctx, sessionID, reason, why, tr)
}

func (h *Host) settle(ctx context.Context, sid string, reason error, why string, tr observe.TraceContext) {
	if f := h.cfg.Hooks.Before; f != nil {
		f(ctx, sid, reason, why)
	}
	if em := h.Emitter(); em != nil && h.Known(sid) {
		// Marked as the settlement's, so that a start its observer
		// attempts is refused rather than made to wait for the end it
		// belongs to.
		ctx := turn.Settling(ctx)
		if tr.Traceparent != "" {
			ctx = observe.WithTrace(ctx, tr)
		}
		n, err := em.Session(sid).SettleAll(ctx, reason)
		h.logSettled(sid, n, err, why, reason)
	}
	if f := h.cfg.Hooks.After; f != nil {
		f(ctx, why)
	}
}

func (h *Host) logSettled(sid string, n int, err error, why string, reason error) {
	if n > 0 {
		h.log.Info(h.cfg.Name+": settled open compactions", "session", sid, "count", n, "why", why, "reason", reason.Error())
	}
	if err != nil {
		h.log.Warn(h.cfg.Name+": settlement not delivered", "session", sid, "error", err)
	}
}

// closeSession ends a session the agent closed (its answer to
// session/close): what is still open in it, which no turn holds, is
// settled for CloseReason, and the emitter forgets it, so that its memory
// is bounded by the live sessions.
func (h *Host) closeSession(ctx context.Context, sid string) {
	const why = "the agent answered session/close"
	if f := h.cfg.Hooks.Before; f != nil {
		f(ctx, sid, h.cfg.CloseReason, why)
	}
	if em := h.Emitter(); em != nil {
		n, err := em.CloseSession(turn.Settling(ctx), sid, h.cfg.CloseReason)
		h.known.Delete(sid)
		h.logSettled(sid, n, err, why, h.cfg.CloseReason)
	}
	if f := h.cfg.Hooks.After; f != nil {
		f(ctx, why)
	}
}

// Close ends the connection: the engine refuses starts from now on, and
// every open compaction is settled, cancelled in a session whose running
// turn the client cancelled, otherwise for reason; why says when, for the
// log. (Hooks.Before runs only for the cancelled sessions: the caller
// does what it must for the others before the close.) The caller calls
// endHandlers once what the settlement wrote is on its way: it ends the
// prompt handlers' contexts with reason, so a runtime woken by its
// context finds its compactions already settled.
func (h *Host) Close(ctx context.Context, reason error, why string) (endHandlers func()) {
	h.closed.Store(true)
	live, endHandlers := h.e.Close(reason)
	for sid, cancelled := range live {
		if cancelled {
			h.Settle(ctx, sid, emitter.ErrCancelled, why)
		}
	}
	if em := h.Emitter(); em != nil {
		n, err := em.SettleAll(turn.Settling(ctx), reason)
		if n > 0 {
			h.log.Info(h.cfg.Name+": settled open compactions", "count", n, "why", why, "reason", reason.Error())
		}
		if err != nil {
			h.log.Debug(h.cfg.Name+": settlement not delivered on a closing connection", "error", err)
		}
		if f := h.cfg.Hooks.After; f != nil {
			f(ctx, why)
		}
	}
	return endHandlers
}

// grace is the engine's OnGrace: a cancelled turn's grace ran out, and
// what the runtime left open is settled as cancelled, since the client
// asked to stop and must not wait on a runtime that does not.
func (h *Host) grace(g turn.Grace) {
	h.serialize(func() {
		if h.e.GraceDue(g) {
			h.Settle(context.Background(), g.Session, emitter.ErrCancelled, "the cancel grace period ended")
		}
	})
}

// begin is the engine's OnBegin.
func (h *Host) begin(sid string) {
	if !h.cfg.DeferBegin {
		h.Deliver(context.Background(), sid)
		return
	}
	h.beganMu.Lock()
	if !slices.Contains(h.began, sid) {
		h.began = append(h.began, sid)
	}
	h.beganMu.Unlock()
	h.beganAny.Store(true)
	go h.serialize(func() { h.DeliverBegun(context.Background()) })
}

// DeliverBegun delivers what the emitter held for the sessions whose turn
// began since the last call (DeferBegin).
func (h *Host) DeliverBegun(ctx context.Context) {
	if !h.beganAny.Load() {
		return
	}
	h.beganMu.Lock()
	began := h.began
	h.began = nil
	h.beganAny.Store(false)
	h.beganMu.Unlock()
	for _, sid := range began {
		h.Deliver(ctx, sid)
	}
}

func (h *Host) serialize(f func()) {
	if s := h.cfg.Serialize; s != nil {
		s(f)
		return
	}
	f()
}

// negotiated makes the connection's emitter from the initialize exchange.
func (h *Host) negotiated(n capability.Negotiation, result json.RawMessage) {
	for _, d := range n.Diagnostics {
		h.log.Warn(h.cfg.Name+": initialize: "+d.Message, "path", d.Path)
	}
	// Nothing about compaction between turns: the emitter is tied to the
	// engine's turns; what it does with a start outside one is the host's
	// choice.
	opts := []emitter.Option{emitter.WithNegotiation(n), emitter.WithTurns(h.InTurn, h.cfg.Outside),
		// However the compaction was opened (Start, the kit's Emitter, the
		// proxy's router), one opened in a cancelled turn whose grace ran
		// out gets a grace of its own rather than waiting for a watchdog.
		emitter.WithObserver(emitter.ObserverFunc(h.started))}
	if h.cfg.Gate != nil {
		opts = append(opts, emitter.WithGate(h.cfg.Gate))
	}
	if f := h.cfg.Options; f != nil {
		opts = append(opts, f(n)...)
	}
	em := emitter.New(h.cfg.Notifier, opts...)
	h.em.Store(em)
	if f := h.cfg.Hooks.Negotiated; f != nil {
		f(n, em, result)
	}
}

// started is the host's observer of the emitter: it tells the engine of
// each compaction opened.
func (h *Host) started(_ context.Context, ev emitter.Event) {
	if ev.Kind == emitter.EventStarted {
		h.e.CompactionStarted(ev.SessionID)
	}
}

// KnownSessions reports how many sessions the emitter keeps state for,
// for the memory bounds' tests.
func (h *Host) KnownSessions() int {
	n := 0
	h.known.Range(func(any, any) bool { n++; return true })
	return n
}
