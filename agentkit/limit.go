package agentkit

import "sync"

// limiter bounds the handlers AsyncHandler runs at once on one connection
// (see AsyncHandler): a message waits for a slot while active handlers,
// less those waiting for the client's answer to a request of the agent's,
// are at the limit. The connection's close opens the gate for good.
type limiter struct {
	mu       sync.Mutex
	cond     sync.Cond
	active   int  // handlers running with a slot
	awaiting int  // the agent's requests to the client not yet answered
	closed   bool // the connection is closing: nothing waits any more
}

func newLimiter() *limiter {
	l := &limiter{}
	l.cond.L = &l.mu
	return l
}

// acquire waits for a slot under max, and reports whether it took one
// (false once the connection is closing: the message is handled without).
func (l *limiter) acquire(max int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for !l.closed && l.active-l.awaiting >= max {
		l.cond.Wait()
	}
	if l.closed {
		return false
	}
	l.active++
	return true
}

func (l *limiter) release() {
	l.mu.Lock()
	l.active--
	l.mu.Unlock()
	l.cond.Broadcast()
}

// called counts n requests of the agent's sent (n > 0), or answered or
// never sent (n < 0).
func (l *limiter) called(n int) {
	l.mu.Lock()
	l.awaiting = max(l.awaiting+n, 0)
	l.mu.Unlock()
	l.cond.Broadcast()
}

// close releases every waiter, for good.
func (l *limiter) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.cond.Broadcast()
}
