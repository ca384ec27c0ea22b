package proxy

// Nothing about compaction between turns. The emitter is tied to the
// engine's turns (emitter.WithTurns with HoldOutsideTurn): a compaction the
// agent starts, streams or settles while the session has no turn running
// is held, never sent and never lost, and the engine's OnBegin tells the
// proxy when the session's next turn begins, which delivers it
// (emitter.Session.Deliver): terminal-first if it settled meanwhile,
// in_progress and its chunks if it still runs, after which that turn's
// rules settle it. The agent's own standard updates, which a capable
// client otherwise gets verbatim, go through the emitter for such a
// compaction (classify's standard), and the heartbeat is for sessions in a
// turn only.

import (
	"context"
	"slices"
)

// inTurn is the emitter's turn state (emitter.WithTurns): the engine's,
// and the turn whose end the proxy is settling, which the engine already
// counts as over but whose settlement (a failed prompt's after-the-fact
// compaction among it) the client sees before the message that ends it.
func (c *conn) inTurn(sid string) bool {
	if s := c.ending.Load(); s != nil && *s == sid {
		return true
	}
	return c.e.InTurn(sid)
}

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
		if err := c.em.Session(sid).Deliver(context.Background()); err != nil {
			c.log.Debug("held compaction updates not delivered", "session", sid, "error", err)
		}
	}
	return len(began) > 0
}
