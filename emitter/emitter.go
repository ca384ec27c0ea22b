package emitter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/internal/pulse"
	"github.com/acpcompact/acpcompact/protocol"
)

// Sentinel errors; every returned error that stems from one of these wraps
// it, so callers branch with errors.Is. An empty compaction ID is a wire
// rule, refused with protocol.ErrInvalidID.
var (
	// ErrIDReused: the ID was already used for another compaction in this
	// session (open or settled, live or replayed).
	ErrIDReused = errors.New("emitter: compaction ID already used in this session")
	// ErrSettled: the compaction already reached its terminal status; the
	// call was dropped and nothing was sent.
	ErrSettled = errors.New("emitter: compaction already settled")
	// ErrUndeliverable: the Notifier failed to send an update.
	ErrUndeliverable = errors.New("emitter: update could not be delivered")
	// ErrNotOpen: no open compaction has this ID in the session (a chunk
	// or terminal before the start, or for an unknown ID); nothing was sent.
	ErrNotOpen = errors.New("emitter: no open compaction with this ID")
	// ErrSessionClosed: the session was closed (Emitter.CloseSession); a
	// handle kept past that opens nothing.
	ErrSessionClosed = errors.New("emitter: session closed")
	// ErrWithheld: the SummaryPolicy withheld the summary block, so nothing
	// was sent. Compaction.Chunk returns it. Under the
	// default policy, DisplayableOnly, every block of a compaction that was
	// not started with UserDisplayable is withheld: the RFD asks that a
	// summary be user-displayable and never reveal context that was not
	// otherwise visible to the user, and only the runtime knows whether its
	// summary is that projection. Start the compaction with
	// UserDisplayable() when it is; treat ErrWithheld as "not shown", not
	// as a failure, when withholding is deliberate. A completion whose
	// final summary is withheld still sends its terminal update and
	// returns nil; the observer sees it (EventWithheld per block, and
	// Event.Withheld on the settled event).
	ErrWithheld = errors.New("emitter: summary withheld by the summary policy (the default passes only compactions started with emitter.UserDisplayable()); nothing was sent")
	// ErrOutsideTurn: Start was called for a session with no turn running
	// (WithTurns with RefuseOutsideTurn, as in the agent kits), typically
	// from a goroutine that outlived its prompt's handler. Nothing was
	// opened or sent: the client is not in a turn and must not see a
	// compaction begin. Start a compaction that may outlive its turn with
	// Background; report one that belongs to a turn while the turn runs.
	ErrOutsideTurn = errors.New("emitter: no turn of the session is running (start a compaction that may outlive its turn with emitter.Background())")
	// ErrHoldLimit: what the session keeps for its client is at its bound,
	// so nothing of this was kept or sent. A session keeps at most 256
	// compactions its client has not seen start (held between turns, or
	// started with Background), and at most 8 MiB of summary blocks (the
	// chunks of those compactions, the summaries of their terminal updates
	// waiting for a turn, and with OnFinalRecord the streamed blocks kept
	// for the records of open compactions). Past the first bound Start is
	// refused and its ID counts as used, so that nothing of it reaches the
	// client later. Past the second the compaction's kept blocks are let
	// go: a compaction the client has not seen start never shows a summary
	// streamed before or after (Chunk returns ErrHoldLimit, and a
	// completion that keeps what was streamed ends with none), since the
	// client must never hold part of one as the whole; a compaction the
	// client sees keeps streaming, and only its record goes without the
	// streamed summary. Memory stays bounded by what is live, however
	// long a client stays away.
	ErrHoldLimit = errors.New("emitter: the session's hold is full (256 compactions its client has not seen start, or 8 MiB of summary); nothing of it was kept or sent")
)

// The bounds of what a session keeps for its client (see ErrHoldLimit).
const (
	holdCompactions = 256
	holdBytes       = 8 << 20
)

// Reasons for SettleAll. They decide the terminal status:
// ErrCancelled (alone or wrapped) settles as cancelled; anything else
// settles as failed with its text as the error.
var (
	// ErrCancelled: the user cancelled the turn (session/cancel). Only a
	// user cancel is a cancel.
	ErrCancelled = errors.New("cancelled by the user")
	// ErrTurnEnded: the prompt turn ended while the compaction was open.
	ErrTurnEnded = errors.New("the turn ended before the compaction finished")
	// ErrTimeout: the watchdog's maximum duration passed.
	ErrTimeout = errors.New("compaction timed out")
	// ErrConnectionClosed: the client connection closed.
	ErrConnectionClosed = errors.New("the connection closed")
	// ErrAgentCrashed: the runtime panicked or exited mid-compaction.
	ErrAgentCrashed = errors.New("the agent crashed during compaction")
)

// Notifier sends one session update to the client. update marshals to the
// `update` object of session/update params. Implementations exist for
// jsonrpc2 connections, the acp-go-sdk, the proxy and test recorders.
//
// A Notifier whose writes must be ordered with its host's own (one that is
// called with a lock of the host's held, as the proxy's is) also has a
// method Serialize(f func()): the emitter then runs the work of its
// timers (WithHeartbeat, WithMaxDuration) as f, inside it, so that a
// heartbeat or a watchdog's settlement takes the host's lock before the
// emitter's, as every other call does.
type Notifier interface {
	Notify(ctx context.Context, sessionID string, update any) error
}

// serializer is the Notifier's optional Serialize (see Notifier).
type serializer interface{ Serialize(f func()) }

// timer runs f, the work of one of the emitter's timers, as its Notifier
// orders it.
func (e *Emitter) timer(f func()) {
	if s, ok := e.n.(serializer); ok {
		s.Serialize(f)
		return
	}
	f()
}

// NotifierFunc adapts a function to Notifier.
type NotifierFunc func(ctx context.Context, sessionID string, update any) error

// Notify calls f.
func (f NotifierFunc) Notify(ctx context.Context, sessionID string, update any) error {
	return f(ctx, sessionID, update)
}

// Emitter tracks the compactions of one connection. Create it with New once
// the connection's initialize exchange is known. Safe for concurrent use.
type Emitter struct {
	n        Notifier
	cfg      config
	renderer Renderer
	mode     capability.Mode

	mu       sync.Mutex
	sessions map[string]*Session
}

// New returns an emitter that sends through n.
func New(n Notifier, opts ...Option) *Emitter {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	e := &Emitter{n: n, cfg: cfg, sessions: make(map[string]*Session)}
	e.mode = cfg.policy(cfg.negotiation, cfg.fallback != nil)
	switch e.mode {
	case capability.Standard:
		e.renderer = Standard{}
	case capability.Fallback:
		if cfg.fallback != nil {
			e.renderer = cfg.fallback
		} else {
			e.mode = capability.Off
		}
	}
	if e.renderer == nil {
		e.renderer = silent{}
	}
	return e
}

// Mode reports how this connection renders compaction.
func (e *Emitter) Mode() capability.Mode { return e.mode }

// Session returns the tracker of one ACP session, creating it on first use.
func (e *Emitter) Session(sessionID string) *Session {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.sessions[sessionID]
	if !ok {
		s = &Session{e: e, id: sessionID, renderer: e.renderer}
		e.sessions[sessionID] = s
	}
	return s
}

// CloseSession ends session sessionID: it settles what is open for reason (as Session.SettleAll
// does), then forgets them, so that the emitter's memory is bounded by the
// sessions that are live rather than by every session it ever saw. A
// Session handle kept past it opens nothing (ErrSessionClosed); Session
// called again with the same ID begins a new session, whose IDs are no
// longer checked against the closed one's: the no-reuse guarantee covers a
// session from its first compaction to its close (or the connection's
// end). It returns how many compactions it settled and the first delivery
// error.
func (e *Emitter) CloseSession(ctx context.Context, sessionID string, reason error) (int, error) {
	e.mu.Lock()
	s, ok := e.sessions[sessionID]
	delete(e.sessions, sessionID)
	e.mu.Unlock()
	if !ok {
		return 0, nil
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	n, err := s.settleAll(ctx, reason, true)
	if herr := s.handOverWithin(ctx); err == nil {
		err = herr
	}
	return n, err
}

// SettleAll settles every open compaction of every session for reason (see
// ErrCancelled), those started with Background included; it is what a
// connection close calls. It returns how many compactions it settled and
// the first delivery error.
func (e *Emitter) SettleAll(ctx context.Context, reason error) (int, error) {
	total := 0
	var first error
	sessions := e.all()
	for _, s := range sessions {
		n, err := s.settleAll(ctx, reason, true)
		total += n
		if first == nil {
			first = err
		}
	}
	// Every session's terminal updates first, then the records.
	for _, s := range sessions {
		if err := s.handOverWithin(ctx); first == nil {
			first = err
		}
	}
	return total, first
}

// all returns the sessions e keeps, so that they are gone through without
// e.mu held.
func (e *Emitter) all() []*Session {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Collect(maps.Values(e.sessions))
}

// admit passes a runtime's call in session sessionID through the host's
// gate (WithGate). On success the caller runs the call, then release.
func (e *Emitter) admit(ctx context.Context, sessionID string) (release func(), err error) {
	if e.cfg.gate == nil {
		return noRelease, nil
	}
	release, err = e.cfg.gate(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if release == nil {
		release = noRelease
	}
	return release, nil
}

func noRelease() {}

// Session tracks the compactions of one ACP session. Its methods are safe
// for concurrent use; notifications of one session leave in call order.
type Session struct {
	e        *Emitter
	id       string // the session ID notifications are sent under
	renderer Renderer

	// Memory per session is kept small, since an agent may hold many
	// sessions with a compaction open in each: the open compactions are a
	// short slice in start order (rarely more than one), the used IDs a
	// short slice that becomes a map only when it grows.
	mu     sync.Mutex
	open   []*Compaction // open compactions, oldest first
	used   idSet         // every ID used in the session, open, settled or replayed
	closed bool          // Emitter.CloseSession ran
	// handing says a goroutine is handing finals over, so that the sink
	// sees one record at a time, in order.
	handing bool
	// unseen are the compactions the client has not seen start, in start
	// order: held between turns or started with Background, open or
	// settled and waiting for a turn to deliver their terminal update.
	unseen []*Compaction
	// finals are the final records waiting for OnFinalRecord's sink, in
	// settlement order.
	finals []final
	// kept is the bytes of summary blocks the session keeps: its
	// compactions' held blocks and the summaries of terminal updates
	// waiting for a turn, bounded by holdBytes.
	kept int
}

// final is a final record waiting to be handed over (OnFinalRecord), with
// the context of the call that settled it.
type final struct {
	ctx context.Context
	rec Record
}

// handOver calls OnFinalRecord's sink for the session's waiting records,
// in order, without s.mu held. Every path that settles calls it once it
// has released s.mu. Only one goroutine hands over at a time: one that
// finds another at it leaves its record to it, which is what lets the sink
// call the emitter, even settle, without deadlocking on itself. A sink
// that panics still gets every other record, those its own calls queued
// included (exactly once); then the first panic goes on, to the caller.
func (s *Session) handOver() {
	if p := s.handOverCaught(); p != nil {
		panic(p)
	}
}

// handOverCaught is handOver, returning the sink's first panic, if any,
// rather than letting it go on.
func (s *Session) handOverCaught() (panicked any) {
	sinks := s.e.cfg.onFinal
	if len(sinks) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handing {
		return nil
	}
	s.handing = true
	for len(s.finals) > 0 {
		batch := s.finals
		s.finals = nil
		s.mu.Unlock()
		for _, fr := range batch {
			for _, f := range sinks {
				if p := callSink(f, fr.ctx, s.id, fr.rec); p != nil && panicked == nil {
					panicked = p
				}
			}
		}
		s.mu.Lock()
	}
	s.handing = false
	return panicked
}

// callSink calls the sink with rec and returns what it panicked with.
func callSink(f func(context.Context, string, Record), ctx context.Context, sessionID string, rec Record) (panicked any) {
	defer func() { panicked = recover() }()
	f(ctx, sessionID, rec)
	return nil
}

// handOverWithin hands over as handOver does, for the host's settlements
// (SettleAll, CloseSession): it waits for the sink up to ctx's deadline,
// if it has one. A cancelled ctx does not cut the wait short (a cancelled
// turn's records are kept all the same); a deadline does: when it passes
// first, handOverWithin returns an error wrapping
// context.DeadlineExceeded, and the sink goes on with the session's
// records on a goroutine of its own (a panic there goes on there).
func (s *Session) handOverWithin(ctx context.Context) error {
	if len(s.e.cfg.onFinal) == 0 {
		return nil
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		s.handOver()
		return nil
	}
	done := make(chan any, 1)
	go func() { done <- s.handOverCaught() }()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case p := <-done:
		if p != nil {
			panic(p)
		}
		return nil
	case <-t.C:
		go func() {
			if p := <-done; p != nil {
				panic(p)
			}
		}()
		return fmt.Errorf("emitter: session %s: final records still being handed over: %w", s.id, context.DeadlineExceeded)
	}
}

// inTurnLocked reports whether the session has a turn running, as the
// host says (WithTurns); without WithTurns it always has.
func (s *Session) inTurnLocked() bool {
	return s.e.cfg.inTurn == nil || s.e.cfg.inTurn(s.id)
}

// removeUnseen removes c from the unseen compactions, keeping their order.
func (s *Session) removeUnseen(c *Compaction) { s.unseen = without(s.unseen, c) }

// without returns list less c, in order; nil when nothing is left, so an
// idle session holds no backing array.
func without(list []*Compaction, c *Compaction) []*Compaction {
	if i := slices.Index(list, c); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		return nil
	}
	return list
}

// findOpen returns the open compaction with id, or nil.
func (s *Session) findOpen(id protocol.ID) *Compaction {
	for _, c := range s.open {
		if c.id == id {
			return c
		}
	}
	return nil
}

// removeOpen removes c from the open compactions, keeping their order.
func (s *Session) removeOpen(c *Compaction) { s.open = without(s.open, c) }

// idSet is a set of IDs: a slice while it is small, a map beyond.
type idSet struct {
	few  []protocol.ID
	many map[protocol.ID]struct{}
}

const idSetFew = 8

func (u *idSet) has(id protocol.ID) bool {
	if u.many != nil {
		_, ok := u.many[id]
		return ok
	}
	return slices.Contains(u.few, id)
}

func (u *idSet) add(id protocol.ID) {
	switch {
	case u.has(id):
	case u.many != nil:
		u.many[id] = struct{}{}
	case len(u.few) < idSetFew:
		u.few = append(u.few, id)
	default:
		u.many = make(map[protocol.ID]struct{}, 2*idSetFew)
		for _, x := range u.few {
			u.many[x] = struct{}{}
		}
		u.many[id] = struct{}{}
		u.few = nil
	}
}

// Start opens a compaction and reports it as in_progress. It never
// overwrites an open compaction: a reused ID is refused with ErrIDReused,
// an empty WithID with protocol.ErrInvalidID. When only delivery fails,
// the compaction is open and returned together with an error wrapping
// ErrUndeliverable.
//
// Nothing about compaction is sent between turns (WithTurns): outside a
// turn Start is refused with ErrOutsideTurn, or, with HoldOutsideTurn, the
// compaction opens held and the client sees it when the session's next
// turn begins. A compaction started with Background is shown only when it
// settles, in or outside a turn. A session holds at most 256 compactions
// its client has not seen start; past that Start is refused with
// ErrHoldLimit.
//
// A call whose context says its turn is over (its cause is, or matches,
// ErrTurnEnded, as the agent kits' prompt contexts do once their turn has
// ended, a cancelled one's included) is refused with ErrOutsideTurn,
// whatever turn of the session runs now: a runtime goroutine that outlived
// its prompt must not open a compaction in the next one. Background
// compactions may outlive their turn and are let through.
func (s *Session) Start(ctx context.Context, opts ...StartOption) (*Compaction, error) {
	var so startOptions
	for _, o := range opts {
		o(&so)
	}
	if cause := context.Cause(ctx); !so.background && errors.Is(cause, ErrTurnEnded) {
		// The call belongs to a turn that is over, whatever turn runs
		// now (a runtime goroutine that outlived its prompt).
		err := fmt.Errorf("%w: session %s: the call's turn is over (%w)", ErrOutsideTurn, s.id, cause)
		s.mu.Lock()
		s.observeLocked(ctx, Event{Kind: EventDropped, SessionID: s.id, ID: so.id, Err: err})
		s.mu.Unlock()
		return nil, err
	}
	release, err := s.e.admit(ctx, s.id)
	if err != nil {
		return nil, err
	}
	defer release()
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.openLocked(ctx, so)
	if err != nil {
		return nil, err
	}
	ev := c.event(EventStarted)
	if !c.shown {
		s.observeLocked(ctx, ev)
		return c, nil
	}
	return c, s.emitLocked(ctx, ev)
}

func (s *Session) openLocked(ctx context.Context, so startOptions) (*Compaction, error) {
	if s.closed {
		return nil, fmt.Errorf("%w: session %s", ErrSessionClosed, s.id)
	}
	id := so.id
	if so.idSet && id == "" {
		return nil, protocol.ErrInvalidID
	}
	if !so.idSet {
		for {
			id = s.e.cfg.newID()
			if id != "" && !s.used.has(id) {
				break
			}
		}
	}
	if s.used.has(id) {
		err := fmt.Errorf("%w: session %s, compaction %s", ErrIDReused, s.id, id)
		s.observeLocked(ctx, Event{Kind: EventDropped, SessionID: s.id, ID: id, Err: err})
		return nil, err
	}
	inTurn := s.inTurnLocked()
	if !inTurn && !so.background && s.e.cfg.outside == RefuseOutsideTurn {
		err := fmt.Errorf("%w: session %s, compaction %s", ErrOutsideTurn, s.id, id)
		s.observeLocked(ctx, Event{Kind: EventDropped, SessionID: s.id, ID: id, Err: err})
		return nil, err
	}
	if (!inTurn || so.background) && len(s.unseen) >= holdCompactions {
		// Its ID is spent: nothing of this compaction may reach the
		// client later, when a slot is free, half-way through.
		s.used.add(id)
		err := fmt.Errorf("%w: session %s, compaction %s: %d compactions are held", ErrHoldLimit, s.id, id, len(s.unseen))
		s.observeLocked(ctx, Event{Kind: EventDropped, SessionID: s.id, ID: id, Err: err})
		return nil, err
	}
	trigger := so.trigger
	if trigger == "" {
		trigger = protocol.Manual
	}
	c := &Compaction{s: s, id: id, trigger: trigger, displayable: so.displayable, meta: so.meta, after: so.after, started: time.Now(),
		background: so.background, shown: inTurn && !so.background}
	s.used.add(id)
	s.open = append(s.open, c)
	if !c.shown {
		s.unseen = append(s.unseen, c)
	}
	if d := s.e.cfg.maxDuration; d > 0 {
		c.watchdog = time.AfterFunc(d, func() {
			s.e.timer(func() {
				_ = c.settle(context.Background(), protocol.Failed, fmt.Errorf("%w after %s", ErrTimeout, d), settleOptions{byHost: true})
			})
		})
	}
	if d := s.e.cfg.heartbeat; d > 0 {
		c.heartbeat = &heartbeat{clock: pulse.Start(d, c.started)}
		c.heartbeat.timer = time.AfterFunc(pulse.Period(d), func() { s.e.timer(c.beat) })
	}
	return c, nil
}

// Compaction returns the handle of the open compaction id, for runtimes
// whose events address compactions by ID rather than by handle: its
// methods are the handle's, gate included (WithGate). An ID that is not
// open is refused with ErrSettled when the session used it, else with
// ErrNotOpen.
func (s *Session) Compaction(id protocol.ID) (*Compaction, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.findOpen(id); c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("%w: session %s, compaction %s", s.notOpenLocked(id), s.id, id)
}

// notOpenLocked says why id is not open: ErrSettled when the session used
// it, else ErrNotOpen.
func (s *Session) notOpenLocked(id protocol.ID) error {
	if s.used.has(id) {
		return ErrSettled
	}
	return ErrNotOpen
}

// SettleAll ends every open compaction of the session: cancelled when
// reason is (or wraps) ErrCancelled, otherwise failed with reason's text.
// A compaction started with Background is left open: it outlives the turn
// by design, and the client has not seen it.
// Agentkit calls it when a turn ends; runtimes may call it on their own
// interruptions. It returns how many it settled and the first delivery error.
func (s *Session) SettleAll(ctx context.Context, reason error) (int, error) {
	n, err := s.settleAll(ctx, reason, false)
	if herr := s.handOverWithin(ctx); err == nil {
		err = herr
	}
	return n, err
}

// settleAll is SettleAll; background says whether compactions started with
// Background and not yet shown are settled too (the connection's end, the
// session's close), or left to outlive the turn.
func (s *Session) settleAll(ctx context.Context, reason error, background bool) (int, error) {
	s.mu.Lock()
	// Oldest first, so the client sees them end in start order.
	open := make([]*Compaction, 0, len(s.open))
	for _, c := range s.open {
		if background || !c.background {
			open = append(open, c)
		}
	}
	s.mu.Unlock()
	status := protocol.Failed
	if errors.Is(reason, ErrCancelled) {
		status = protocol.Cancelled
	}
	if reason == nil {
		reason = ErrTurnEnded
	}
	n := 0
	var first error
	for _, c := range open {
		// Every terminal update goes out before any record is handed
		// over, so that a slow sink delays none of them.
		s.mu.Lock()
		err := c.settleLocked(ctx, status, reason, settleOptions{byHost: true})
		s.mu.Unlock()
		if errors.Is(err, ErrSettled) {
			continue // the runtime settled it meanwhile
		}
		n++
		if first == nil && err != nil {
			first = err
		}
	}
	return n, first
}

// Replay emits a settled compaction during history replay (session/load),
// at the caller's position in the history: one terminal-first update, no
// in_progress, no chunks. A record whose status is not terminal is a
// compaction still running elsewhere; it is skipped, since no live turn on
// this connection will settle it. Replay marks the ID used in this session;
// a record without an ID is refused with protocol.ErrInvalidID.
//
// A replay settles what it replays: when the session has a compaction of
// that ID open (one held between turns, say, whose start the client has
// not seen), the replayed terminal update is its one terminal update. It
// is settled as the record says, nothing more of it is sent (its held
// start is not delivered after the replay), its handle's calls return
// ErrSettled, and OnFinalRecord gets its final record.
func (s *Session) Replay(ctx context.Context, rec Record) error {
	if rec.ID == "" {
		return protocol.ErrInvalidID
	}
	defer s.handOver() // deferred first, so it runs once s.mu is released
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used.add(rec.ID)
	if !rec.Status.Terminal() {
		s.observeLocked(ctx, Event{Kind: EventSkipped, SessionID: s.id, ID: rec.ID, Status: rec.Status})
		return nil
	}
	ev := Event{
		Kind: EventReplayed, SessionID: s.id, ID: rec.ID, Trigger: rec.Trigger, Status: rec.Status,
		Version: s.e.cfg.negotiation.Version, Details: rec.Details,
		Err: errorText(rec.Error),
	}
	// Replay is the entity's first sight on this connection.
	ev.Meta = firstSightMeta(rec.Meta, nil, s.e.cfg.recordKey, rec.Details)
	blocks, withheld := s.filterLocked(ctx, ev, rec.Summary, rec.Displayable)
	ev.Withheld = withheld
	if len(blocks) > 0 {
		ev.Summary = protocol.Set(blocks)
	} else {
		ev.Summary = protocol.Null[[]protocol.ContentBlock]()
	}
	if rec.Error != "" {
		ev.Error = protocol.Set(rec.Error)
	} else {
		ev.Error = protocol.Null[string]()
	}
	err := s.emitLocked(ctx, ev)
	if c := s.findOpen(rec.ID); c != nil {
		c.replayedLocked(ctx, rec, blocks)
	}
	for _, c := range s.unseen {
		if c.id == rec.ID && c.settled {
			// Settled unseen, its terminal update waiting for a turn:
			// the replay's is the one the client gets.
			c.late = nil
			s.kept -= c.lateBytes
			c.lateBytes = 0
			c.shown = true
			s.removeUnseen(c)
			break
		}
	}
	return err
}

// replayedLocked settles open compaction c by the replay of its ID, whose
// terminal update (summary blocks as sent) the client just got instead of
// anything c kept for it.
func (c *Compaction) replayedLocked(ctx context.Context, rec Record, blocks []protocol.ContentBlock) {
	s := c.s
	c.settled = true
	c.end = &ending{status: rec.Status, summary: blocks, errText: rec.Error, details: rec.Details}
	s.removeOpen(c)
	if !c.shown {
		s.removeUnseen(c)
		c.shown = true
	}
	c.releaseLocked()
	if c.watchdog != nil {
		c.watchdog.Stop()
	}
	if c.heartbeat != nil {
		c.heartbeat.timer.Stop()
	}
	// The observer saw it start: it sees it end, as the runtime's own
	// report of its ID.
	ev := c.event(EventSettled)
	ev.Status, ev.Duration = rec.Status, time.Since(c.started)
	if rec.Error != "" {
		ev.Err = errors.New(rec.Error)
	}
	s.observeLocked(ctx, ev)
	s.queueFinalLocked(ctx, c)
}

// filterLocked applies the summary policy to a final or replayed summary;
// it returns the blocks that pass and how many were withheld.
func (s *Session) filterLocked(ctx context.Context, ev Event, blocks []protocol.ContentBlock, displayable bool) ([]protocol.ContentBlock, int) {
	info := ev.info()
	info.Displayable = displayable
	out := make([]protocol.ContentBlock, 0, len(blocks))
	withheld := 0
	for _, b := range blocks {
		if b2, ok := s.e.cfg.summaryPolicy(info, b); ok {
			out = append(out, b2)
		} else {
			withheld++
			s.observeLocked(ctx, Event{Kind: EventWithheld, SessionID: s.id, ID: ev.ID, Trigger: ev.Trigger, Content: b, Err: ErrWithheld})
		}
	}
	return out, withheld
}

// emitLocked renders ev and reports it to the observer; s.mu must be held so
// the session's notifications leave in order.
func (s *Session) emitLocked(ctx context.Context, ev Event) error {
	err := s.renderLocked(ctx, ev)
	s.observeLocked(ctx, ev)
	return err
}

// renderLocked renders ev without showing it to the observer, which saw it
// when it happened: a held event delivered later.
func (s *Session) renderLocked(ctx context.Context, ev Event) error {
	if ev.Version == 0 {
		ev.Version = s.e.cfg.negotiation.Version
	}
	err := s.renderer.Render(ctx, ev, s.e.n)
	if err != nil {
		err = fmt.Errorf("%w: session %s, compaction %s, %s: %w", ErrUndeliverable, s.id, ev.ID, ev.Kind, err)
		s.observeLocked(ctx, Event{Kind: EventUndeliverable, SessionID: s.id, ID: ev.ID, Status: ev.Status, Err: err})
	}
	return err
}

// Deliver sends what the session held while no turn ran (see WithTurns):
// the host calls it when the session's turn begins. A held compaction that
// settled meanwhile gets one terminal update, its first (terminal-first,
// with the summary its chunks streamed); one still running gets its
// in_progress update and the chunks it streamed, and from then on is an
// ordinary compaction of the turn, which the turn's end settles. A
// compaction started with Background stays unseen until it settles. It
// returns the first delivery error.
func (s *Session) Deliver(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first error
	keep := s.unseen[:0]
	for _, c := range s.unseen {
		var err error
		switch {
		case c.settled:
			err = c.deliverEndLocked(ctx)
		case c.background:
			keep = append(keep, c)
			continue
		default:
			err = c.showLocked(ctx)
		}
		if first == nil {
			first = err
		}
	}
	clear(s.unseen[len(keep):])
	s.unseen = keep
	if len(s.unseen) == 0 {
		s.unseen = nil
	}
	return first
}

func (s *Session) observeLocked(ctx context.Context, ev Event) {
	for _, o := range s.e.cfg.observers {
		o.Observe(ctx, ev)
	}
}

// Compaction is the handle of one open compaction. Its methods are safe for
// concurrent use, and safe on a nil handle (as when a runtime ignores
// Start's error): they return ErrNotOpen.
type Compaction struct {
	s         *Session
	id        protocol.ID
	trigger   protocol.Trigger
	meta      protocol.Meta
	after     string // After's position, for Record
	started   time.Time
	watchdog  *time.Timer
	heartbeat *heartbeat // nil without WithHeartbeat

	// Guarded by s.mu.
	chunks   int     // chunks sent
	withheld int     // summary blocks the policy withheld
	streamed uint64  // running FNV-1a hash of what was streamed
	end      *ending // set when the compaction settles

	displayable bool
	settled     bool
	active      bool // a chunk went out since the last heartbeat check
	// background: started with Background, shown only when it settles.
	background bool
	// shown: the client saw the compaction start; until then its chunks
	// are kept in held and its terminal update in late.
	shown bool
	// held are the summary blocks streamed so far, as sent: while the
	// compaction is unseen, for the client to get when it is shown; with
	// OnFinalRecord, until it settles, for its final record (the summary
	// a completion that keeps what was streamed leaves the client with).
	// Otherwise nothing is kept, and memory stays constant.
	held []protocol.ContentBlock
	late *Event
	// keptBytes and lateBytes are what held and late's summary cost the
	// session's hold (Session.kept).
	keptBytes, lateBytes int
	// lost: past the hold's bound, its streamed blocks were let go and no
	// more are kept, so its record has no streamed summary. hidden: it was
	// lost before the client saw it start, so none of its streamed
	// summary is ever sent (the client must not hold part of it).
	lost, hidden bool
}

// ending is what a compaction keeps once settled, for Record. It is
// allocated at settlement, so an open compaction does not carry it.
type ending struct {
	status  protocol.Status
	summary []protocol.ContentBlock
	errText string
	details *Details
}

// ID returns the compaction's ID.
func (c *Compaction) ID() protocol.ID {
	if c == nil {
		return ""
	}
	return c.id
}

// Chunk streams one summary content block. It is sent only while the
// compaction is open; after the terminal update it is dropped, reported to
// the observer, and ErrSettled is returned. A block the summary policy
// withholds is not sent: the observer sees it (EventWithheld) and Chunk
// returns ErrWithheld. Under the default policy that is every block of a
// compaction not started with UserDisplayable (see ErrWithheld).
func (c *Compaction) Chunk(ctx context.Context, block protocol.ContentBlock) error {
	if c == nil {
		return fmt.Errorf("%w: a nil handle", ErrNotOpen)
	}
	release, err := c.s.e.admit(ctx, c.s.id)
	if err != nil {
		return err
	}
	defer release()
	return c.chunk(ctx, block)
}

// chunk is Chunk once admitted.
func (c *Compaction) chunk(ctx context.Context, block protocol.ContentBlock) error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.settled {
		err := fmt.Errorf("%w: chunk dropped: session %s, compaction %s", ErrSettled, s.id, c.id)
		s.observeLocked(ctx, Event{Kind: EventDropped, SessionID: s.id, ID: c.id, Content: block, Err: err})
		return err
	}
	ev := Event{Kind: EventChunk, SessionID: s.id, ID: c.id, Trigger: c.trigger, Status: protocol.InProgress, Content: block}
	b, ok := s.e.cfg.summaryPolicy(Info{SessionID: s.id, ID: c.id, Trigger: c.trigger, Displayable: c.displayable}, block)
	if !ok {
		c.withheld++
		err := fmt.Errorf("%w: session %s, compaction %s", ErrWithheld, s.id, c.id)
		ev.Kind, ev.Err = EventWithheld, err
		s.observeLocked(ctx, ev)
		return err
	}
	ev.Content = b
	if !c.shown || c.hidden {
		// Kept for the client, which sees it when the compaction is
		// shown: memory follows what is live, the summary of an open
		// compaction, within the session's hold.
		if c.hidden || !c.keepLocked(b) {
			err := fmt.Errorf("%w: session %s, compaction %s: its summary is not shown", ErrHoldLimit, s.id, c.id)
			s.observeLocked(ctx, Event{Kind: EventDropped, SessionID: s.id, ID: c.id, Content: b, Err: err})
			return err
		}
		s.observeLocked(ctx, ev)
		return nil
	}
	c.streamed = hashBlock(c.streamed, b, c.chunks == 0)
	c.chunks++
	c.active = true
	if s.e.cfg.keepsStreamed() {
		// Kept for the final record (and its audit): the client holds it,
		// and a completion that keeps what was streamed leaves it there.
		// Past the hold's bound the record goes without it; the client
		// still gets every chunk.
		c.keepLocked(b)
	}
	return s.emitLocked(ctx, ev)
}

// showLocked shows a held compaction that still runs: its in_progress
// update, then the chunks it streamed meanwhile.
func (c *Compaction) showLocked(ctx context.Context) error {
	s := c.s
	c.shown = true
	first := s.renderLocked(ctx, c.event(EventStarted))
	for _, b := range c.held {
		ev := Event{Kind: EventChunk, SessionID: s.id, ID: c.id, Trigger: c.trigger, Status: protocol.InProgress, Content: b}
		c.streamed = hashBlock(c.streamed, b, c.chunks == 0)
		c.chunks++
		if err := s.renderLocked(ctx, ev); first == nil {
			first = err
		}
	}
	if !s.e.cfg.keepsStreamed() {
		c.releaseLocked() // sent; nothing needs them any more
	}
	c.active = true
	return first
}

// deliverEndLocked sends the terminal update of a compaction that settled
// unseen: the client's first sight of it.
func (c *Compaction) deliverEndLocked(ctx context.Context) error {
	ev := c.late
	c.late = nil
	c.s.kept -= c.lateBytes
	c.lateBytes = 0
	c.shown = true
	if ev == nil {
		return nil
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	err := c.s.renderLocked(dctx, *ev)
	if err == nil && ev.Status == protocol.Completed {
		err = c.s.usageLocked(dctx, ev.Details)
	}
	return err
}

// Complete settles the compaction as completed. Without options the summary
// is omitted, which keeps what was streamed; Summary replaces it and
// Summary() clears it. A Summary the policy withholds entirely is
// omitted when nothing was streamed, and clears what was streamed
// otherwise; the terminal update is sent and Complete returns nil, while
// the observer sees the withheld blocks (see ErrWithheld).
func (c *Compaction) Complete(ctx context.Context, opts ...SettleOption) error {
	return c.report(ctx, protocol.Completed, nil, opts)
}

// Fail settles the compaction as failed. The error text the client sees is
// cause's message when it is short, single-line prose; a multi-line defect
// or stack trace becomes the configured generic text ("Compaction failed").
// The observer always receives cause itself. Without a Summary option, a
// summary streamed so far is cleared (summary: null): a failed compaction
// retained no summary, and its record replays none (see Record).
func (c *Compaction) Fail(ctx context.Context, cause error, opts ...SettleOption) error {
	if cause == nil {
		cause = errors.New("")
	}
	return c.report(ctx, protocol.Failed, cause, opts)
}

// Cancel settles the compaction as cancelled. Use it only for a user
// cancel; a provider failure or other interruption is a failure. As with
// Fail, a summary streamed so far is cleared unless a Summary option
// confirms one.
func (c *Compaction) Cancel(ctx context.Context, opts ...SettleOption) error {
	return c.report(ctx, protocol.Cancelled, ErrCancelled, opts)
}

// report is a runtime's settlement of the compaction, through the gate.
func (c *Compaction) report(ctx context.Context, status protocol.Status, cause error, opts []SettleOption) error {
	if c == nil {
		return fmt.Errorf("%w: a nil handle", ErrNotOpen)
	}
	// The final record is handed over once s.mu and the gate are
	// released: the sink may call the emitter.
	defer c.s.handOver()
	release, err := c.s.e.admit(ctx, c.s.id)
	if err != nil {
		return err
	}
	defer release()
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.settleLocked(ctx, status, cause, collect(opts))
}

// Record returns the compaction as stored for history replay. It is final
// once the compaction has settled, whoever settled it, and never changes
// after; before that it says in_progress (and Replay skips it). A final
// record replayed with Session.Replay leaves a client that sees only the
// replay holding what the live client held after the terminal update:
// status, error, and the summary the terminal update left it with (a
// Summary given at settlement; none for a failed or cancelled compaction
// without one, whose terminal update cleared what it streamed).
//
// The one summary the emitter holds only when asked is the one a
// completion keeps from what it streamed (Complete without Summary after
// chunks): with OnFinalRecord set it keeps the streamed blocks until
// settlement, and the record has them; without it it keeps none (memory
// per open compaction stays constant) and the record of such a completion
// has no Summary. A runtime that stores records for replay sets
// OnFinalRecord, which hands it every final record as it settles.
func (c *Compaction) Record() Record {
	if c == nil {
		return Record{}
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.recordLocked()
}

// recordLocked is Record; s.mu must be held.
func (c *Compaction) recordLocked() Record {
	r := Record{ID: c.id, Status: protocol.InProgress, Trigger: c.trigger, Displayable: c.displayable, Meta: c.meta, After: c.after}
	if end := c.end; c.settled && end != nil {
		r.Status, r.Summary, r.Error, r.Details = end.status, end.summary, end.errText, end.details
	}
	return r
}

func (c *Compaction) settle(ctx context.Context, status protocol.Status, cause error, so settleOptions) error {
	defer c.s.handOver() // deferred first, so it runs once s.mu is released
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.settleLocked(ctx, status, cause, so)
}

// settleLocked sends the terminal update and queues the final record for
// OnFinalRecord; s.mu must be held, and the caller hands the record over
// (Session.handOver) once it has released s.mu.
func (c *Compaction) settleLocked(ctx context.Context, status protocol.Status, cause error, so settleOptions) error {
	s := c.s
	if c.settled {
		err := fmt.Errorf("%w: %s ignored: session %s, compaction %s is already %s", ErrSettled, status, s.id, c.id, c.end.status)
		s.observeLocked(ctx, Event{Kind: EventDropped, SessionID: s.id, ID: c.id, Status: status, Err: err})
		return err
	}
	c.settled = true
	end := &ending{status: status}
	c.end = end
	s.removeOpen(c)
	if c.watchdog != nil {
		c.watchdog.Stop()
	}
	if c.heartbeat != nil {
		c.heartbeat.timer.Stop()
	}
	ev := c.event(EventSettled)
	ev.ByHost = so.byHost
	ev.Status = status
	ev.Err = cause
	now := time.Now()
	ev.Duration = now.Sub(c.started)
	if so.details != nil || s.e.cfg.recordKey != "" {
		d := Details{}
		if so.details != nil {
			d = *so.details
		}
		d.Trigger, d.Status = c.trigger, status
		d.StartedAt, d.EndedAt, d.DurationMs = c.started.UTC(), now.UTC(), ev.Duration.Milliseconds()
		ev.Details = &d
		end.details = &d
	}
	// The summary patch leaves the client holding exactly what the record
	// keeps, so that a replay of Record reproduces it (live = replay):
	// the final summary, what a completion kept from the stream (recorded
	// with OnFinalRecord, which keeps the streamed blocks), or nothing.
	switch so.summary {
	case summarySet:
		blocks, withheld := s.filterLocked(ctx, ev, so.blocks, c.displayable)
		c.withheld += withheld
		if len(blocks) == 0 {
			// Everything was withheld: the RFD says to omit a summary
			// that cannot be shown. Streamed drafts the runtime meant to
			// replace are cleared rather than left standing as the
			// summary.
			if c.chunks > 0 {
				ev.Summary = protocol.Null[[]protocol.ContentBlock]()
			}
			break
		}
		end.summary = blocks
		if s.e.cfg.omitRedundant && c.chunks > 0 && hashBlocks(blocks) == c.streamed {
			break // the client already holds exactly this summary
		}
		ev.Summary = protocol.Set(blocks)
	case summaryClear:
		ev.Summary = protocol.Null[[]protocol.ContentBlock]()
	case summaryKeep:
		switch {
		case !c.shown:
			// The client saw none of it: a completion shows what was
			// streamed as its summary, and the record keeps it; a failed
			// or cancelled one retained none.
			if status == protocol.Completed && len(c.held) > 0 {
				end.summary = c.held
				ev.Summary = protocol.Set(c.held)
			} else {
				ev.Summary = protocol.Null[[]protocol.ContentBlock]()
			}
		case c.chunks == 0:
			// Nothing streamed: omission leaves the client with none.
		case status == protocol.Completed:
			// The client keeps what was streamed; the record has it
			// when the emitter kept it (OnFinalRecord).
			end.summary = c.held
		default:
			// A failed or cancelled compaction retained no summary: what
			// was streamed was never confirmed, so it is cleared, as its
			// replay clears it. A runtime that wants to keep a partial
			// summary passes it as Summary, and the record keeps it.
			ev.Summary = protocol.Null[[]protocol.ContentBlock]()
		}
	}
	ev.Withheld = c.withheld
	if status == protocol.Failed {
		end.errText = s.e.cfg.errorText(cause)
		ev.Error = protocol.Set(end.errText)
	}
	c.releaseLocked()
	late := !c.shown && !s.inTurnLocked()
	if late {
		// Its terminal update waits for the session's next turn, and its
		// summary within the session's hold; past it the update goes
		// without, and so does the record, so that the client holds what
		// a replay gives it.
		if blocks, ok := ev.Summary.Get(); ok && len(blocks) > 0 {
			if size := blocksSize(blocks); s.kept+size > holdBytes {
				ev.Summary = protocol.Null[[]protocol.ContentBlock]()
				end.summary = nil
				s.observeLocked(ctx, Event{Kind: EventDropped, SessionID: s.id, ID: c.id, Status: status,
					Err: fmt.Errorf("%w: session %s, compaction %s: its summary is not shown", ErrHoldLimit, s.id, c.id)})
			} else {
				s.kept += size
				c.lateBytes = size
			}
		}
	}
	c.auditLocked(ctx, status, end, &ev)
	if c.shown {
		ev.Meta = terminalMeta(ev.Version, c.meta, so.meta, s.e.cfg.recordKey, ev.Details)
	} else {
		// The terminal update is the client's first sight of the entity,
		// as a replay is.
		ev.Unseen = true
		ev.Meta = firstSightMeta(c.meta, so.meta, s.e.cfg.recordKey, ev.Details)
	}
	if late {
		// Between turns: the observer learns of the settlement now, the
		// client when the session's next turn begins (Deliver). The record
		// is final now, and handed over now: the replay must hold it even
		// if the client never comes back for that turn.
		c.late = &ev
		s.observeLocked(ctx, ev)
		s.queueFinalLocked(ctx, c)
		return nil
	}
	if !c.shown {
		s.removeUnseen(c)
		c.shown = true
	}
	// Terminal updates must reach the client even when the turn's context
	// is already cancelled, so send on a detached, bounded context.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	err := s.emitLocked(dctx, ev)
	if err == nil && status == protocol.Completed {
		err = s.usageLocked(dctx, ev.Details)
	}
	s.queueFinalLocked(ctx, c)
	return err
}

// queueFinalLocked queues c's final record for OnFinalRecord's sink.
func (s *Session) queueFinalLocked(ctx context.Context, c *Compaction) {
	if len(s.e.cfg.onFinal) > 0 {
		s.finals = append(s.finals, final{ctx: context.WithoutCancel(ctx), rec: c.recordLocked()})
	}
}

// usageLocked sends the optional usage_update that follows a completed
// compaction, so the client's context gauge drops at the boundary.
func (s *Session) usageLocked(ctx context.Context, d *Details) error {
	if !s.e.cfg.usageUpdates || d == nil || d.TokensAfter <= 0 || d.ContextWindow <= 0 || s.e.mode == capability.Off {
		return nil
	}
	if err := s.e.n.Notify(ctx, s.id, protocol.UsageUpdate{Used: d.TokensAfter, Size: d.ContextWindow}); err != nil {
		err = fmt.Errorf("%w: session %s, usage_update: %w", ErrUndeliverable, s.id, err)
		s.observeLocked(ctx, Event{Kind: EventUndeliverable, SessionID: s.id, Err: err})
		return err
	}
	return nil
}

// heartbeat is the ticking of one compaction's silence (pulse keeps the
// rule). It is allocated only with WithHeartbeat,
// so memory per open compaction stays as it was without it.
type heartbeat struct {
	timer *time.Timer
	clock pulse.Clock // guarded by s.mu
}

// beat re-sends a field-less in_progress update when the compaction has
// been silent for a heartbeat interval, so client watchdogs see life.
func (c *Compaction) beat() {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.settled {
		return
	}
	hb := c.heartbeat
	// Nothing is sent about a compaction the client has not seen, nor
	// between turns: the silence is looked at again on the next tick.
	if c.shown && s.inTurnLocked() {
		active := c.active
		c.active = false
		if hb.clock.Tick(time.Now(), active) {
			ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
			_ = s.emitLocked(ctx, c.event(EventHeartbeat))
			cancel()
		}
	}
	hb.timer.Reset(pulse.Period(s.e.cfg.heartbeat))
}

func (c *Compaction) event(kind EventKind) Event {
	return Event{Kind: kind, SessionID: c.s.id, ID: c.id, Trigger: c.trigger, Status: protocol.InProgress, Meta: c.metaFor(kind), Version: c.s.e.cfg.negotiation.Version}
}

func (c *Compaction) metaFor(kind EventKind) protocol.Meta {
	if kind == EventStarted {
		return c.meta
	}
	return nil
}

// Record is a compaction as stored for history replay: what Session.Replay
// needs to leave a client holding what the live client held, and where in
// the runtime's history it goes (After). OnFinalRecord hands the runtime
// each compaction's final record; Compaction.Record reads it. Its JSON form
// (MarshalJSON) is versioned, for stores.
type Record struct {
	ID      protocol.ID
	Status  protocol.Status
	Trigger protocol.Trigger
	// Summary is the user-displayable summary to replay; nil replays an
	// explicit null (clearing anything the client may still hold).
	Summary []protocol.ContentBlock
	// Displayable tells the summary policy the runtime marked Summary as
	// safe to show the user.
	Displayable bool
	// Error is the failure text of a failed compaction.
	Error string
	// Meta is the compaction's stored _meta (its start meta), replayed
	// with the record's key added when WithRecords is on.
	Meta protocol.Meta
	// Details is the compaction's record, replayed under the record key.
	Details *Details
	// After is the runtime's position in its history, given at Start
	// (After): the ID of the message the compaction follows, opaque to
	// the emitter. Replay ignores it (a record is replayed where the
	// caller replays it); a runtime uses it to put the record back between
	// its own messages. Empty when the runtime gave none, as for a failure
	// reported before any start.
	After string
}

func errorText(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}

// defaultErrorText keeps human-readable single-line messages and hides
// defects: stack traces and multi-line dumps are not for the user's eyes.
func defaultErrorText(generic string) func(error) string {
	return func(err error) string {
		if err == nil {
			return generic
		}
		msg := strings.TrimSpace(err.Error())
		if msg == "" || len(msg) > 300 || strings.ContainsAny(msg, "\n\r") ||
			strings.Contains(msg, "goroutine ") || strings.HasPrefix(msg, "panic:") {
			return generic
		}
		return msg
	}
}

func randomID() protocol.ID {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return protocol.ID("cmp_" + hex.EncodeToString(b[:]))
}

// blockSize is what a kept block costs the session's hold: its payload,
// and a fixed part for the block and its slot.
func blockSize(b protocol.ContentBlock) int {
	n := 64 + len(b.Type) + len(b.Text)
	for k, v := range b.Extra {
		n += len(k) + len(v)
	}
	return n
}

func blocksSize(bs []protocol.ContentBlock) int {
	n := 0
	for _, b := range bs {
		n += blockSize(b)
	}
	return n
}

// keepLocked keeps b among c's held blocks within the session's hold. Past
// the bound the compaction loses its kept blocks for good (loseLocked) and
// keepLocked reports false.
func (c *Compaction) keepLocked(b protocol.ContentBlock) bool {
	if c.lost {
		return false
	}
	size := blockSize(b)
	if c.s.kept+size > holdBytes {
		c.loseLocked()
		return false
	}
	c.held = append(c.held, b)
	c.keptBytes += size
	c.s.kept += size
	return true
}

// loseLocked lets c's kept blocks go: past the hold's bound, none of its
// streamed summary is kept any more; one its client has not seen start
// never shows any (hidden).
func (c *Compaction) loseLocked() {
	c.releaseLocked()
	c.lost = true
	if !c.shown {
		c.hidden = true
	}
}

// releaseLocked gives c's held blocks back to the session's hold.
func (c *Compaction) releaseLocked() {
	c.s.kept -= c.keptBytes
	c.keptBytes = 0
	c.held = nil
}

// auditLocked adds what WithAudit's auditor finds the summary of a
// completion lost to its record: end.summary is what the client is left
// holding.
func (c *Compaction) auditLocked(ctx context.Context, status protocol.Status, end *ending, ev *Event) {
	s := c.s
	f := s.e.cfg.audit
	if f == nil || status != protocol.Completed || len(end.summary) == 0 {
		return
	}
	loss := f(ctx, Info{SessionID: s.id, ID: c.id, Trigger: c.trigger, Displayable: c.displayable}, end.summary)
	if len(loss) == 0 {
		return
	}
	d := end.details
	if d == nil {
		d = &Details{Trigger: c.trigger, Status: status, StartedAt: c.started.UTC(), EndedAt: time.Now().UTC()}
		d.DurationMs = d.EndedAt.Sub(d.StartedAt).Milliseconds()
		end.details = d
		ev.Details = d
	}
	d.KnownLoss = append(slices.Clip(d.KnownLoss), loss...)
}
