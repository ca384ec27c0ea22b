package agentkit

import (
	"context"
	"slices"
	"sync"

	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/sourcegraph/jsonrpc2"
	"golang.org/x/sync/semaphore"
)

// semLimiter is the limiter on semaphore.Weighted: the semaphore holds a
// unit for each running handler not exempt; a handler whose exemption ends
// while the semaphore is full (its answer came) is counted as debt, paid by
// the next unit given back, so the bound holds without a queue of our own.
type semLimiter struct {
	mu       sync.Mutex
	sem      *semaphore.Weighted // made with the first acquire's max
	debt     int64
	ctx      context.Context // ends at close: waiters go on without a slot
	stop     context.CancelFunc
	closed   bool
	sessions map[string][]*slot
	calls    map[*jsonrpc2.Request]*slot
}

func newSemLimiter() *semLimiter {
	ctx, stop := context.WithCancel(context.Background())
	return &semLimiter{ctx: ctx, stop: stop, sessions: map[string][]*slot{}, calls: map[*jsonrpc2.Request]*slot{}}
}

func (l *semLimiter) acquire(max int, req *jsonrpc2.Request) *slot {
	s := &slot{session: sessionOf(req.Params), prompt: req.Method == turn.MethodPrompt && !req.Notif}
	l.mu.Lock()
	if l.sem == nil {
		l.sem = semaphore.NewWeighted(int64(max))
	}
	sem := l.sem
	l.mu.Unlock()
	if sem.Acquire(l.ctx, 1) != nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		sem.Release(1)
		return nil
	}
	if s.session != "" {
		l.sessions[s.session] = append(l.sessions[s.session], s)
	}
	return s
}

// giveBackLocked uncounts one handler: it pays a debt, or frees a unit.
func (l *semLimiter) giveBackLocked() {
	if l.debt > 0 {
		l.debt--
		return
	}
	l.sem.Release(1)
}

func (l *semLimiter) release(s *slot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(s.calls) > 0 {
		for _, req := range s.calls {
			delete(l.calls, req)
		}
		s.calls = nil
	} else {
		l.giveBackLocked()
	}
	if s.session != "" {
		ss := slices.DeleteFunc(l.sessions[s.session], func(o *slot) bool { return o == s })
		if len(ss) == 0 {
			delete(l.sessions, s.session)
		} else {
			l.sessions[s.session] = ss
		}
	}
}

func (l *semLimiter) sent(req *jsonrpc2.Request) {
	session := sessionOf(req.Params)
	if session == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
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
		return
	}
	s.calls = append(s.calls, req)
	l.calls[req] = s
	if len(s.calls) == 1 {
		l.giveBackLocked()
	}
}

func (l *semLimiter) answered(req *jsonrpc2.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.calls[req]
	if s == nil {
		return
	}
	delete(l.calls, req)
	s.calls = slices.DeleteFunc(s.calls, func(r *jsonrpc2.Request) bool { return r == req })
	if len(s.calls) == 0 && !l.sem.TryAcquire(1) {
		l.debt++
	}
}

func (l *semLimiter) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.stop()
}
