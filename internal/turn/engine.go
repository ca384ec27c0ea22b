package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/observe"
)

// DefaultCancelGrace is the cancel grace of every host unless configured:
// the runtime has this long after session/cancel to report its
// compactions before they are settled as cancelled.
const DefaultCancelGrace = 5 * time.Second

// Sentinel errors of Admit.
var (
	// ErrNotInitialized: the initialize exchange has not completed, so the
	// client's capability is not known.
	ErrNotInitialized = errors.New("the connection's initialize exchange has not completed")
	// ErrClosed: the connection is closed.
	ErrClosed = errors.New("the connection is closed")
)

// Config configures an Engine.
type Config struct {
	// CancelGrace is how long after session/cancel the runtime may take to
	// report a cancelled turn's compactions before the host settles them as
	// cancelled (OnGrace). It means the same for every host:
	//   - d > 0: settle d after the cancel (and d after any compaction
	//     started later in the cancelled turn);
	//   - d == 0: settle at once, as soon as the cancel arrives;
	//   - d < 0: no deadline: they are settled when the turn ends.
	CancelGrace time.Duration
	// OnGrace is called, on a timer's goroutine, when a cancelled turn's
	// grace has run out. The host confirms with GraceDue before settling.
	OnGrace func(Grace)
	// OnBegin is called when a turn of a session begins (a prompt, a
	// queued prompt whose turn comes, a v2 running state), on the
	// goroutine of the call that began it, with no lock of the engine
	// held: the host delivers what it held for the session between turns
	// (emitter.Session.Deliver), so nothing about compaction reaches the
	// client outside a turn and nothing is lost.
	OnBegin func(sessionID string)
}

// Grace names a cancelled turn whose grace ran out.
type Grace struct {
	Session string
	turn    uint64
	seq     uint64 // which of the turn's graces
}

// End is a turn's end that the host must settle: every compaction of
// Session still open is settled for Reason (emitter.ErrCancelled when the
// client cancelled the turn, else emitter.ErrTurnEnded) before the message
// that ends the turn is written; then the host calls Ended.
type End struct {
	Session string
	Reason  error
	// Cancelled says the client cancelled the turn.
	Cancelled bool
	// Trace is the W3C trace context of the turn's prompt, for the
	// settlement's observer.
	Trace observe.TraceContext
	turn  uint64
}

// Effect is what an agent message means to the host. The zero Effect means
// nothing.
type Effect struct {
	// Negotiated is set by the first successful answer to initialize.
	Negotiated *capability.Negotiation
	// End is set by the message that ends a turn.
	End *End
	// Closed names a session the agent has closed (the answer to
	// session/close): the host drops what it keeps for it.
	Closed string
	// Request is the method of the client request this message answers
	// ("" when it answers none the engine follows).
	Request string
	// Session is the session of that request.
	Session string
}

// Engine is one connection's wire state. It is safe for concurrent use.
type Engine struct {
	cfg Config

	mu         sync.Mutex
	neg        *capability.Negotiation
	closed     bool
	lastTurn   uint64 // numbers every turn of the connection
	graces     uint64 // numbers every grace timer
	replays    uint64 // numbers every history replay
	requests   map[string]*request
	sessions   map[string]*session
	timersLive sync.WaitGroup
	// begun are the sessions whose turn began under the lock, for OnBegin.
	begun []string
}

// request is a client request in flight that the engine follows.
type request struct {
	method  string
	session string
	rawID   json.RawMessage
	params  json.RawMessage // initialize
	trace   observe.TraceContext
	command string // a prompt's slash command (Msg.Command)
	// cancelled: a session/cancel arrived while this prompt was pending.
	cancelled bool
	// binds are the contexts of this prompt's handler, ended with the
	// prompt (see Bind).
	binds []func(error)
	// answered: a v2 prompt answered while it waited for the end of the
	// turn before it to be written (v2 answers a prompt as its turn
	// begins). It stays in requests until its turn begins.
	answered bool
}

// session is the state of a session with something live.
type session struct {
	id string
	// running is the prompt whose turn is under way (its id; "" for a v2
	// turn begun by a state_update). In v1 only its answer ends the turn.
	running string
	// queue: v1 prompts sent while running was under way, and prompts of
	// either version sent while a turn's end was being written, in order.
	queue []string
	// runAfterEnd: a v2 running state came while a turn's end was being
	// written; a turn begins when it is written.
	runAfterEnd bool
	active      bool   // a turn is under way
	turn        uint64 // the number of the current (or last) turn
	// cancelled: the client cancelled the current turn.
	cancelled bool
	// ending is the number of a turn whose end is being settled and
	// written (0 for none): Admit refuses starts while it equals turn.
	ending uint64
	// afterCancel: the last turn was cancelled and ended with a response;
	// cleared when the next turn begins.
	afterCancel bool
	trace       observe.TraceContext
	command     string // the slash command of the prompt that runs the turn
	grace       *time.Timer
	graceSeq    uint64        // the pending grace's Grace.seq
	binds       []func(error) // v2: handler contexts that end with the turn
	endDone     chan struct{} // closed by Ended
	replays     int           // session/load (or replaying v2 resume) in flight
	replayEpoch uint64        // numbers the session's latest replay
	admits      int           // Admit holders
	// gate is held across every Start (shared) and while a turn's end is
	// marked (exclusive).
	gate sync.RWMutex
}

// New returns an Engine for one connection.
func New(cfg Config) *Engine {
	return &Engine{cfg: cfg, requests: map[string]*request{}, sessions: map[string]*session{}}
}

// Negotiation returns the connection's negotiation, and false before the
// initialize exchange has completed.
func (e *Engine) Negotiation() (capability.Negotiation, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.neg == nil {
		return capability.Negotiation{}, false
	}
	return *e.neg, true
}

func (e *Engine) v2Locked() bool { return e.neg != nil && e.neg.Version == capability.V2 }

// Client notes one message from the client, before the agent sees it. It
// returns the raw ids of the pending session/prompt requests that this
// message cancelled, for a host whose stack cancels requests only by id.
func (e *Engine) Client(m *Msg) (cancelled []json.RawMessage) {
	defer e.notifyBegun()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || m.Method == "" {
		return nil
	}
	switch m.Method {
	case MethodInitialize:
		if m.ID != "" {
			e.trackLocked(m, &request{method: m.Method, params: m.Params})
		}
	case MethodPrompt:
		if m.ID != "" && m.SessionID != "" {
			e.promptLocked(m)
		}
	case MethodLoad, MethodResume:
		// A v1 resume returns no history; only a v2 resume with a replay
		// cursor replays, as session/load does.
		if m.ID != "" && m.SessionID != "" && (m.Method == MethodLoad || m.ReplayFrom) {
			if e.trackLocked(m, &request{method: m.Method, session: m.SessionID}) {
				s := e.sessionLocked(m.SessionID)
				s.replays++
				e.replays++
				s.replayEpoch = e.replays
			}
		}
	case MethodClose:
		if m.ID != "" && m.SessionID != "" {
			e.trackLocked(m, &request{method: m.Method, session: m.SessionID})
		}
		// Closing a session ends its work as a cancel does.
		return e.cancelLocked(m.SessionID)
	case MethodCancel:
		return e.cancelLocked(m.SessionID)
	case MethodCancelReq:
		if r := e.requests[m.RequestID]; r != nil && r.method == MethodPrompt {
			return e.cancelLocked(r.session)
		}
	}
	return nil
}

// trackLocked records a request in flight. A second request with the id of
// one still in flight breaks JSON-RPC; the first one is kept, so that the
// id's answer is read for the request the agent saw first.
func (e *Engine) trackLocked(m *Msg, r *request) bool {
	if _, dup := e.requests[m.ID]; dup {
		return false
	}
	r.rawID = append(json.RawMessage(nil), m.RawID...)
	if r.params != nil {
		r.params = append(json.RawMessage(nil), r.params...)
	}
	e.requests[m.ID] = r
	return true
}

func (e *Engine) sessionLocked(id string) *session {
	s := e.sessions[id]
	if s == nil {
		s = &session{id: id}
		e.sessions[id] = s
	}
	return s
}

// dropQueueLocked forgets the prompts queued in s (its session closed):
// one answered already is no longer in flight, so it is forgotten too, and
// its handler ends with the session's work.
func (e *Engine) dropQueueLocked(s *session) {
	for _, id := range s.queue {
		if r := e.requests[id]; r != nil && r.answered {
			for _, b := range r.binds {
				b(emitter.ErrTurnEnded)
			}
			delete(e.requests, id)
		}
	}
	s.queue = nil
}

// dropIdleLocked forgets a session with nothing live.
func (e *Engine) dropIdleLocked(s *session) {
	if !s.active && s.ending == 0 && !s.afterCancel && s.replays == 0 && s.admits == 0 && len(s.queue) == 0 && s.grace == nil {
		if e.sessions[s.id] == s {
			delete(e.sessions, s.id)
		}
	}
}

func (e *Engine) promptLocked(m *Msg) {
	if !e.trackLocked(m, &request{method: MethodPrompt, session: m.SessionID, trace: m.Trace, command: m.Command}) {
		return
	}
	s := e.sessionLocked(m.SessionID)
	switch {
	case e.v2Locked() && s.active:
		// A v2 prompt sent while a turn runs belongs to that turn: it
		// neither restarts it nor forgets its cancel.
	case !s.active && s.ending == 0:
		e.beginLocked(s, m.ID)
	default:
		// Behind the running v1 turn, or behind one whose end is not yet
		// written (either version): its turn begins when that one has
		// ended, so nothing of it reaches the client before that end.
		s.queue = append(s.queue, m.ID)
	}
}

// notifyBegun calls OnBegin for the turns that began under the lock the
// caller has just released.
func (e *Engine) notifyBegun() {
	if e.cfg.OnBegin == nil {
		return
	}
	e.mu.Lock()
	begun := e.begun
	e.begun = nil
	e.mu.Unlock()
	for _, sid := range begun {
		e.cfg.OnBegin(sid)
	}
}

// beginLocked starts a turn; in v1 prompt is the prompt that runs it.
func (e *Engine) beginLocked(s *session, prompt string) {
	if e.cfg.OnBegin != nil {
		e.begun = append(e.begun, s.id)
	}
	e.lastTurn++
	s.turn = e.lastTurn
	s.active, s.cancelled, s.afterCancel, s.runAfterEnd = true, false, false, false
	s.running = prompt
	s.trace, s.command = observe.TraceContext{}, ""
	if r := e.requests[prompt]; r != nil {
		s.trace, s.command = r.trace, r.command
		if r.cancelled {
			// Cancelled while it waited behind the turn before it.
			s.cancelled = true
			e.armLocked(s)
		}
	}
}

// cancelLocked records a user cancel of the session's turn and of the
// prompts queued behind it; only a user cancel makes a compaction
// cancelled. It returns the raw ids of the session's pending prompts.
func (e *Engine) cancelLocked(sid string) []json.RawMessage {
	s := e.sessions[sid]
	if s == nil || (!s.active && len(s.queue) == 0) {
		return nil // no turn: nothing to cancel, and nothing to remember
	}
	var ids []json.RawMessage
	cancelPrompt := func(id string) {
		if r := e.requests[id]; r != nil {
			r.cancelled = true
			ids = append(ids, r.rawID)
			for _, b := range r.binds {
				b(emitter.ErrCancelled)
			}
			r.binds = nil
		}
	}
	if s.active {
		if !s.cancelled {
			s.cancelled = true
			e.armLocked(s)
		}
		if !e.v2Locked() {
			cancelPrompt(s.running)
		} else {
			// v2: every prompt of the session in flight belongs to the turn.
			for id, r := range e.requests {
				if r.method == MethodPrompt && r.session == sid {
					cancelPrompt(id)
				}
			}
			for _, b := range s.binds {
				b(emitter.ErrCancelled)
			}
			s.binds = nil
		}
	}
	for _, id := range s.queue {
		cancelPrompt(id)
	}
	return ids
}

// armLocked starts the cancelled turn's grace unless one is pending.
func (e *Engine) armLocked(s *session) {
	if e.cfg.CancelGrace < 0 || s.grace != nil || e.closed || e.cfg.OnGrace == nil {
		return
	}
	e.graces++
	s.graceSeq = e.graces
	g := Grace{Session: s.id, turn: s.turn, seq: e.graces}
	e.timersLive.Add(1)
	s.grace = time.AfterFunc(e.cfg.CancelGrace, func() {
		defer e.timersLive.Done()
		e.cfg.OnGrace(g)
	})
}

func (e *Engine) stopGraceLocked(s *session) {
	if s.grace != nil {
		if s.grace.Stop() {
			e.timersLive.Done()
		}
		s.grace = nil
	}
}

// GraceDue reports whether the cancelled turn g names is still under way
// and not being ended, so its open compactions are to be settled as
// cancelled now. A compaction started after this gets a grace of its own
// (see CompactionStarted).
func (e *Engine) GraceDue(g Grace) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.sessions[g.Session]
	if s == nil || s.turn != g.turn || s.grace == nil || s.graceSeq != g.seq {
		return false
	}
	s.grace = nil
	due := !e.closed && s.active && s.cancelled && s.ending != s.turn
	e.dropIdleLocked(s)
	return due
}

// CompactionStarted tells the engine that a compaction opened in session
// sid: in a cancelled turn whose grace already ran out, it gets a grace of
// its own, rather than waiting for a watchdog.
func (e *Engine) CompactionStarted(sid string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s := e.sessions[sid]; s != nil && s.active && s.cancelled {
		e.armLocked(s)
	}
}

// Agent notes one message from the agent, before it is written, and says
// what it means. When Effect.End is set the host settles first, writes the
// message, then calls Ended.
func (e *Engine) Agent(m *Msg) Effect {
	if m.Method == "" {
		if m.ID == "" {
			return Effect{}
		}
		return e.response(m)
	}
	if m.Method == MethodUpdate && m.State != "" && m.SessionID != "" {
		return e.stateUpdate(m)
	}
	return Effect{}
}

func (e *Engine) response(m *Msg) Effect {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.requests[m.ID]
	if r == nil || r.answered {
		return Effect{}
	}
	eff := Effect{Request: r.method, Session: r.session}
	if s := e.sessions[r.session]; s != nil && e.v2Locked() && r.method == MethodPrompt && !m.Failed && !s.active && slices.Contains(s.queue, m.ID) {
		// A v2 prompt waiting for the end before it is answered as its
		// turn begins: it keeps its place, and its handler runs on.
		r.answered = true
		return eff
	}
	delete(e.requests, m.ID)
	if s := e.sessions[r.session]; s != nil && e.v2Locked() && s.active && r.method == MethodPrompt {
		// A v2 prompt is answered as its turn begins: its handler runs on
		// until the turn's idle state.
		s.binds = append(s.binds, r.binds...)
	} else {
		for _, b := range r.binds {
			b(emitter.ErrTurnEnded)
		}
	}
	r.binds = nil
	switch r.method {
	case MethodInitialize:
		if e.neg == nil && !m.Failed && len(m.Result) > 0 && string(m.Result) != "null" && !e.closed {
			n := capability.Parse(r.params, m.Result)
			e.neg = &n
			eff.Negotiated = &n
		}
	case MethodPrompt:
		s := e.sessions[r.session]
		if s == nil {
			break
		}
		if i := slices.Index(s.queue, m.ID); i >= 0 {
			// Answered before its turn came (an agent that rejects a
			// prompt sent while another runs): it ends nothing.
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			e.dropIdleLocked(s)
			break
		}
		if !e.v2Locked() && s.active && s.running == m.ID {
			eff.End = e.endLocked(s, !m.Failed)
		}
	case MethodLoad, MethodResume:
		if s := e.sessions[r.session]; s != nil {
			s.replays--
			e.dropIdleLocked(s)
		}
	case MethodClose:
		if !m.Failed {
			eff.Closed = r.session
			if s := e.sessions[r.session]; s != nil {
				// Its turn, if the agent answered the close first, ends
				// with the session.
				if s.active && s.ending != s.turn {
					eff.End = e.endLocked(s, false)
				}
				e.stopGraceLocked(s)
				s.afterCancel, s.runAfterEnd = false, false
				e.dropQueueLocked(s)
				e.dropIdleLocked(s)
			}
		}
	}
	return eff
}

func (e *Engine) stateUpdate(m *Msg) Effect {
	defer e.notifyBegun()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.v2Locked() {
		return Effect{}
	}
	switch m.State {
	case "idle":
		if s := e.sessions[m.SessionID]; s != nil && s.active {
			return Effect{End: e.endLocked(s, true)}
		}
	case "running", "requires_action":
		s := e.sessions[m.SessionID]
		switch {
		case s == nil || !s.active && s.ending == 0:
			e.beginLocked(e.sessionLocked(m.SessionID), "")
		case !s.active:
			// The end before it is still being written: the turn begins
			// once it is.
			s.runAfterEnd = true
		}
	}
	return Effect{}
}

// endLocked marks s's turn as ending and returns the End, or nil when
// another message ended the turn meanwhile. answered says the agent ended
// the turn normally (a response, an idle state), which lets a signal right
// after a cancelled turn be recognised as a straggler. It releases e.mu
// while it waits for the gate.
func (e *Engine) endLocked(s *session, answered bool) *End {
	t := s.turn
	// The gate waits for a Start in progress, so the settlement sees its
	// compaction; from then on Admit refuses the turn's starts.
	e.mu.Unlock()
	s.gate.Lock()
	e.mu.Lock()
	defer s.gate.Unlock()
	if !s.active || s.turn != t {
		return nil
	}
	end := &End{Session: s.id, Reason: emitter.ErrTurnEnded, Cancelled: s.cancelled, Trace: s.trace, turn: s.turn}
	if s.cancelled {
		end.Reason = emitter.ErrCancelled
	}
	s.ending = s.turn
	s.endDone = make(chan struct{})
	s.active, s.running = false, ""
	s.afterCancel = s.cancelled && answered
	s.cancelled = false
	e.stopGraceLocked(s)
	return end
}

// Ended reports that the message that ended end's turn has been written
// (or could not be): the next queued prompt's turn begins, and starts are
// admitted again.
func (e *Engine) Ended(end *End) {
	if end == nil {
		return
	}
	defer e.notifyBegun()
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.sessions[end.Session]
	if s == nil || s.ending != end.turn {
		return
	}
	s.ending = 0
	binds := s.binds
	s.binds = nil
	defer func() {
		for _, b := range binds {
			b(emitter.ErrTurnEnded)
		}
	}()
	if s.endDone != nil {
		close(s.endDone)
		s.endDone = nil
	}
	for !s.active && len(s.queue) > 0 && !e.closed {
		next := s.queue[0]
		s.queue = s.queue[1:]
		if e.requests[next] != nil {
			e.beginLocked(s, next)
		}
	}
	if e.v2Locked() {
		if !s.active && s.runAfterEnd && !e.closed {
			e.beginLocked(s, "")
		}
		// The rest of the queue belongs to the turn that began, as a v2
		// prompt sent during a turn does; one answered already hands its
		// handler to the turn.
		for _, id := range s.queue {
			e.adoptAnsweredLocked(s, id)
		}
		e.adoptAnsweredLocked(s, s.running)
		s.queue = nil
	}
	s.runAfterEnd = false
	e.dropIdleLocked(s)
}

// adoptAnsweredLocked hands the handler of prompt id, if it was answered
// while it waited for the end before it (v2), to s's turn, and forgets the
// request: it is no longer in flight.
func (e *Engine) adoptAnsweredLocked(s *session, id string) {
	if r := e.requests[id]; r != nil && r.answered {
		s.binds = append(s.binds, r.binds...)
		delete(e.requests, id)
	}
}

// Bind ties a prompt handler's context to the prompt request id (by JSON
// value): cancel is called with emitter.ErrCancelled on a user cancel (at
// once if one already arrived), with emitter.ErrTurnEnded once the prompt
// has been answered, and with emitter.ErrConnectionClosed (or Close's
// reason) when the connection closes. It returns the prompt's trace
// context.
func (e *Engine) Bind(id string, cancel func(error)) observe.TraceContext {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.requests[id]
	switch {
	case r == nil || r.method != MethodPrompt:
		return observe.TraceContext{}
	case r.cancelled:
		cancel(emitter.ErrCancelled)
	default:
		r.binds = append(r.binds, cancel)
	}
	return r.trace
}

// Admit gates a call that may open a compaction in session sid. A turn's
// end waits for the calls it admitted (the settlement sees what they
// opened). While the session's turn end is being settled and written, a
// call waits for the end to be written (the host's write is bounded) or
// for ctx, so nothing opens between the settlement and the message that
// ends the turn; then it is judged as the next turn's (a prompt was
// queued) or as a call between turns, which the emitter
// (emitter.WithTurns) holds or refuses, since the session has no turn
// running (InTurn). A call made with a context of the settlement itself
// (Settling: the settlement's observer) is refused at once with an error
// wrapping emitter.ErrOutsideTurn and emitter.ErrTurnEnded, since the end
// it would wait for waits on it. Admit refuses after Close (ErrClosed)
// and before initialize (ErrNotInitialized). On success the caller opens
// the compaction, calls release, and Started when one opened.
func (e *Engine) Admit(ctx context.Context, sid string) (release func(), err error) {
	for {
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return nil, fmt.Errorf("session %s: %w", sid, ErrClosed)
		}
		if e.neg == nil {
			e.mu.Unlock()
			return nil, fmt.Errorf("session %s: %w", sid, ErrNotInitialized)
		}
		s := e.sessionLocked(sid)
		s.admits++
		e.mu.Unlock()

		s.gate.RLock()
		e.mu.Lock()
		ending := s.ending != 0 && s.ending == s.turn && !s.active
		wait := s.endDone
		closed := e.closed
		e.mu.Unlock()
		done := func() {
			s.gate.RUnlock()
			e.mu.Lock()
			s.admits--
			e.dropIdleLocked(s)
			e.mu.Unlock()
		}
		switch {
		case closed:
			done()
			return nil, fmt.Errorf("session %s: %w", sid, ErrClosed)
		case ending && ctx.Value(settlingKey{}) != nil:
			// A call from inside the settlement (its observer) must not
			// wait for the end it is part of: refused before the emitter,
			// which the settlement holds, is reached.
			done()
			return nil, fmt.Errorf("session %s: %w (%w)", sid, emitter.ErrOutsideTurn, emitter.ErrTurnEnded)
		case ending && wait != nil:
			// The turn is over; whether the call is for the next turn (a
			// prompt is queued) or for no turn, it is judged once the end
			// is written, so nothing opens between the settlement and the
			// message that ends the turn.
			done()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("session %s: %w", sid, context.Cause(ctx))
			}
		}
		return done, nil
	}
}

type settlingKey struct{}

// Settling marks ctx as the context of a turn end's settlement, which the
// host passes to the emitter: a call that reaches Admit with it (from the
// emitter's observer) is refused rather than made to wait for the end.
func Settling(ctx context.Context) context.Context {
	return context.WithValue(ctx, settlingKey{}, true)
}

// Trace returns the trace context of session sid's running turn.
func (e *Engine) Trace(sid string) (observe.TraceContext, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s := e.sessions[sid]; s != nil && s.active && s.trace.Traceparent != "" {
		return s.trace, true
	}
	return observe.TraceContext{}, false
}

// Command returns the slash command of the prompt that runs session
// sid's turn (Msg.Command), "" when no turn is under way or its prompt
// runs none. In v2, prompts sent during a turn belong to it; the first
// one's command counts.
func (e *Engine) Command(sid string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s := e.sessions[sid]; s != nil && s.active {
		return s.command
	}
	return ""
}

// InTurn reports whether session sid has a turn under way.
func (e *Engine) InTurn(sid string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.sessions[sid]
	return s != nil && s.active
}

// Cancelled reports whether session sid's running turn was cancelled by
// the client.
func (e *Engine) Cancelled(sid string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.sessions[sid]
	return s != nil && s.active && s.cancelled
}

// AfterCancel reports whether session sid is between turns right after a
// cancelled turn: a compaction signal now, for a compaction nobody saw
// start, is a straggler of the cancelled turn.
func (e *Engine) AfterCancel(sid string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.sessions[sid]
	return s != nil && !s.active && s.afterCancel
}

// Replaying reports whether a history replay (session/load, or a v2
// session/resume with a replay cursor) of session sid is in flight, and
// which: epoch changes with every replay the client asks for, so a host
// that numbers what a replay shows can start again from the beginning.
func (e *Engine) Replaying(sid string) (replaying bool, epoch uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.sessions[sid]
	if s == nil || s.replays == 0 {
		return false, 0
	}
	return true, s.replayEpoch
}

// Close ends the connection: starts are refused from now on and grace
// timers are stopped. It returns the sessions that had a turn under way,
// each with whether the client cancelled it, for the host to settle, and
// endHandlers, which ends every bound prompt handler's context with reason:
// the host calls it after settling, so a runtime woken by its context
// finds its compactions already settled for the right reason. Later calls
// return nothing.
func (e *Engine) Close(reason error) (live map[string]bool, endHandlers func()) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, func() {}
	}
	e.closed = true
	live = make(map[string]bool, len(e.sessions))
	ss := make([]*session, 0, len(e.sessions))
	for id, s := range e.sessions {
		if s.active {
			live[id] = s.cancelled
		}
		ss = append(ss, s)
	}
	e.mu.Unlock()
	// Taking each gate waits for a Start admitted before closed was set,
	// so the host's settlement sees its compaction.
	for _, s := range ss {
		s.gate.Lock()
		s.gate.Unlock() //lint:ignore SA2001 the empty critical section waits for admitted starts
	}
	e.mu.Lock()
	var binds []func(error)
	for _, s := range ss {
		e.stopGraceLocked(s)
		if s.endDone != nil {
			close(s.endDone)
			s.endDone = nil
		}
	}
	for _, r := range e.requests {
		binds = append(binds, r.binds...)
		r.binds = nil
	}
	for _, s := range ss {
		binds = append(binds, s.binds...)
		s.binds = nil
	}
	e.mu.Unlock()
	return live, func() {
		for _, b := range binds {
			b(reason)
		}
	}
}

// Wait waits for grace callbacks already running to return. The host calls
// it after Close without holding any lock that OnGrace takes.
func (e *Engine) Wait() { e.timersLive.Wait() }
