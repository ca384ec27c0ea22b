package proxy

// Delivering at a turn's beginning what the emitter held between turns
// (internal/host's rule): the engine may begin a turn on the client pump,
// which never writes to the client, so the proxy notes it and delivers it
// under emu, before the next agent line or on a goroutine of its own.

import (
	"context"
	"slices"
)

// turnBegan is the engine's OnBegin, called on the client pump (a prompt)
// or the agent pump (a v2 running state, a queued prompt whose turn
// comes). The client pump never writes to the client, so the delivery is
// noted here and carried out under emu: by the next agent line, before
// anything else it does (a turn's end in particular), or by a goroutine
// of its own when the agent is silent.
func (c *conn) turnBegan(sid string) {
	c.beganMu.Lock()
	if !slices.Contains(c.began, sid) {
		c.began = append(c.began, sid)
	}
	c.beganMu.Unlock()
	c.beganAny.Store(true)
	go func() {
		c.emu.Lock()
		defer c.emu.Unlock()
		if c.stopped.Load() {
			return
		}
		if c.deliverBegun() {
			_ = c.out.flush() // a failure is sticky: the agent pump reports it
		}
	}()
}

// deliverBegun delivers what the sessions whose turn began held, and
// reports whether any turn began, for the caller to flush: the delivery
// may have written (out.made cannot tell when a line of the proxy's was
// already queued). Callers hold emu.
func (c *conn) deliverBegun() bool {
	if !c.beganAny.Load() {
		return false
	}
	c.beganMu.Lock()
	began := c.began
	c.began = nil
	c.beganAny.Store(false)
	c.beganMu.Unlock()
	if c.em == nil {
		return false
	}
	for _, sid := range began {
		c.h.Deliver(context.Background(), sid)
	}
	return len(began) > 0
}
