package acpsdk

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/acpcompact/acpcompact/internal/condwait"
	"github.com/acpcompact/acpcompact/internal/turn"
)

// claimTimeout bounds how long the reader holds a prompt back for the one
// before it to reach its handler. Every path of the SDK reaches the handler
// or answers the request at once; this only keeps an unforeseen one from
// stopping the input.
const claimTimeout = 5 * time.Second

// claims ties each handler call of a session/prompt to its request. The
// SDK's handler is not told the request's id, and the SDK starts each
// request's handler on a goroutine of its own, so two prompts read back to
// back may reach their handlers in either order. So the reader hands the
// SDK a prompt only once the prompt before it has been claimed by its
// handler (or answered without one, for a request the SDK rejects before
// its handler): at any moment at most one prompt is unclaimed, and the
// handler call that claims it is its own.
type claims struct {
	mu      sync.Mutex
	cond    sync.Cond
	key     string // the prompt handed to the SDK and not yet claimed ("": none)
	closed  bool
	pending atomic.Bool // key != ""
}

func newClaims() *claims {
	c := &claims{}
	c.cond.L = &c.mu
	return c
}

// hand records the prompt whose id key is about to reach the SDK, once the
// one before it is claimed.
func (c *claims) hand(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	condwait.Until(&c.cond, claimTimeout, func() bool { return c.key == "" || c.closed })
	if !c.closed {
		c.key = key
		c.pending.Store(true)
	}
}

// claim returns the id key of the prompt whose handler is calling, and
// false when there is none to claim.
func (c *claims) claim() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := c.key
	c.releaseLocked()
	return key, key != ""
}

// sent releases the unclaimed prompt when line, a message the SDK writes,
// answers it (a request the SDK rejected before reaching its handler).
func (c *claims) sent(line []byte) {
	if !c.pending.Load() {
		return
	}
	m, ok := turn.Parse(line)
	if !ok || !m.IsResponse() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.key == m.ID {
		c.releaseLocked()
	}
}

func (c *claims) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.releaseLocked()
}

func (c *claims) releaseLocked() {
	c.key = ""
	c.pending.Store(false)
	c.cond.Broadcast()
}
