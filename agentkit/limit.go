package agentkit

import (
	"encoding/json"
	"slices"
	"sync"

	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/sourcegraph/jsonrpc2"
)

// limiter bounds the handlers AsyncHandler runs at once on one connection
// (see AsyncHandler): a message waits for a slot while the running
// handlers, less those waiting for the client's answer to a request of
// the agent's, are at the limit. The connection's close opens the gate for
// good.
//
// Each handler's exemption is its own: a handler that waits for one answer
// or for several is exempt once, from its first request written until the
// last is answered or the handler returns, whichever comes first. So the
// bound cannot erode: an answer that never comes exempts nobody once its
// handler is gone, and one that comes after that changes nothing.
//
// jsonrpc2 gives its hooks and the stream nothing of the call's context,
// so a request is tied to a handler by its session: params.sessionId,
// which ACP requires of every method of the client's
// (session/request_permission, fs/*, terminal/*). It counts for the
// handler running for that session, the latest session/prompt among them
// if there are several (else the latest handler). A request without a
// session, or whose session has no handler running, exempts nobody.
//
// It is a count under a mutex and a sync.Cond rather than a
// golang.org/x/sync/semaphore.Weighted: a semaphore carries the exemption
// (a unit given back while a handler waits for the client; one owed, as a
// debt the next returned unit pays, when its answer comes while the
// semaphore is full), but it still needs this mutex and these maps, and
// measured slower, with two more allocations for every message that waits
// at the limit (BenchmarkLimiter; CHANGELOG.md, "One surface").
type limiter struct {
	mu       sync.Mutex
	cond     sync.Cond
	active   int                         // handlers running with a slot
	exempt   int                         // of them, those waiting for the client
	closed   bool                        // the connection is closing: nothing waits any more
	sessions map[string][]*slot          // the running handlers with a session, oldest first
	calls    map[*jsonrpc2.Request]*slot // unanswered requests, by the handler they exempt

	onWait func() // tests: called, under mu, each time acquire waits
}

// slot is one handler that holds a slot.
type slot struct {
	session string
	prompt  bool                // a session/prompt request
	calls   []*jsonrpc2.Request // its requests not yet answered: exempt while any
}

func newLimiter() *limiter {
	l := &limiter{sessions: map[string][]*slot{}, calls: map[*jsonrpc2.Request]*slot{}}
	l.cond.L = &l.mu
	return l
}

var sessionPath = skim.CompileFold([]string{"sessionId"})

// sessionOf returns params.sessionId when it is a string, else "". The
// names match as encoding/json matches them, as the host's decoding does.
func sessionOf(params *json.RawMessage) string {
	if params == nil {
		return ""
	}
	var p skim.Picker
	v, err := p.Pick(*params, sessionPath)
	if err != nil {
		return ""
	}
	s, _ := skim.String(v[0])
	return s
}

// acquire waits for a slot under max for the handler of req, and returns
// it (nil once the connection is closing: the message is handled
// without).
func (l *limiter) acquire(max int, req *jsonrpc2.Request) *slot {
	s := &slot{session: sessionOf(req.Params), prompt: req.Method == turn.MethodPrompt && !req.Notif}
	l.mu.Lock()
	defer l.mu.Unlock()
	for !l.closed && l.active-l.exempt >= max {
		if l.onWait != nil {
			l.onWait()
		}
		l.cond.Wait()
	}
	if l.closed {
		return nil
	}
	l.active++
	if s.session != "" {
		l.sessions[s.session] = append(l.sessions[s.session], s)
	}
	return s
}

// release returns s's slot once its handler has returned, ending its
// exemption: its requests still unanswered exempt nobody any more.
func (l *limiter) release(s *slot) {
	l.mu.Lock()
	l.active--
	if len(s.calls) > 0 {
		l.exempt--
		for _, req := range s.calls {
			delete(l.calls, req)
		}
		s.calls = nil
	}
	if s.session != "" {
		ss := slices.DeleteFunc(l.sessions[s.session], func(o *slot) bool { return o == s })
		if len(ss) == 0 {
			delete(l.sessions, s.session)
		} else {
			l.sessions[s.session] = ss
		}
	}
	l.mu.Unlock()
	l.cond.Broadcast()
}

// sent counts req, a request of the agent's about to be written, for the
// handler of its session (see limiter), which is exempt until it is
// answered or the handler returns.
func (l *limiter) sent(req *jsonrpc2.Request) {
	session := sessionOf(req.Params)
	if session == "" {
		return
	}
	l.mu.Lock()
	var s *slot
	for _, o := range slices.Backward(l.sessions[session]) {
		if o.prompt {
			s = o
			break
		}
		if s == nil {
			s = o
		}
	}
	if s == nil {
		l.mu.Unlock()
		return
	}
	s.calls = append(s.calls, req)
	l.calls[req] = s
	if len(s.calls) == 1 {
		l.exempt++
	}
	l.mu.Unlock()
	l.cond.Broadcast()
}

// answered uncounts req: the client answered it, or it was never written.
// A request whose handler has returned is no longer counted.
func (l *limiter) answered(req *jsonrpc2.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.calls[req]
	if s == nil {
		return
	}
	delete(l.calls, req)
	s.calls = slices.DeleteFunc(s.calls, func(r *jsonrpc2.Request) bool { return r == req })
	if len(s.calls) == 0 {
		l.exempt--
	}
}

// close releases every waiter, for good.
func (l *limiter) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.cond.Broadcast()
}
