package proxy

import (
	"context"
	"slices"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/pulse"
	"github.com/acpcompact/acpcompact/protocol"
)

// heartbeat re-sends the progress of the compactions the client sees while
// the agent is silent (WithHeartbeat): Claude Code retries a failing
// summary for minutes without a word, and client watchdogs give up. The
// rule of when a heartbeat is due is package pulse's, shared with the
// emitter; the ticking is the proxy's own because the emitter's writes from
// its timer under the emitter's lock, while the proxy writes to the client
// under emu and calls the emitter with emu held. So the proxy ticks itself,
// under emu, and counts any agent line that reached the client as life.
type heartbeat struct {
	timer *time.Timer
	line  int         // the agent line the client's stream had reached at the last tick
	clock pulse.Clock // the silence, as the ticks saw it
}

// armHeartbeat starts the ticks when a compaction opens. Callers hold emu.
func (c *conn) armHeartbeat() {
	d := c.p.cfg.heartbeat
	hb := &c.hb
	if d <= 0 || hb.timer != nil {
		return
	}
	hb.line, hb.clock = c.out.at, pulse.Start(d, time.Now())
	hb.timer = time.AfterFunc(pulse.Period(d), c.tick)
}

func (c *conn) tick() {
	c.emu.Lock()
	defer c.emu.Unlock()
	hb := &c.hb
	if c.stopped.Load() || c.em == nil {
		hb.timer = nil
		return
	}
	if c.deliverBegun() {
		_ = c.out.flush() // a failure is sticky: the agent pump reports it
	}
	open := c.router.open()
	if len(open) == 0 {
		hb.timer = nil // armed again by the next compaction
		return
	}
	// Only a session in a turn has a client waiting on its compactions:
	// nothing about compaction is sent between turns. One that outlives
	// its turn is not shown until it settled. Either still keeps the
	// ticks going: a held one is shown once its session's next turn
	// begins.
	open = slices.DeleteFunc(open, func(o openTrack) bool { return o.t.background || !c.e.InTurn(o.k.session) })
	active := c.out.at != hb.line
	hb.line = c.out.at
	if hb.clock.Tick(time.Now(), active) {
		for _, o := range open {
			c.beat(o)
		}
		_ = c.out.flush() // a failure is sticky: the agent pump reports it
	}
	hb.timer.Reset(pulse.Period(c.p.cfg.heartbeat))
}

// beat re-sends one open compaction's progress in the form the client sees
// it: a field-less in_progress compaction_update, the fallback's progress
// form, or, for the agent's own lines forwarded unchanged, an in_progress
// tool_call_update of its compaction tool call (a text or a marker has no
// progress form that is not a new message). Callers hold emu.
func (c *conn) beat(o openTrack) {
	ctx := context.Background()
	ev := emitter.Event{
		Kind: emitter.EventHeartbeat, SessionID: o.k.session, ID: o.k.id, Trigger: o.t.trigger,
		Status: protocol.InProgress, Version: c.em.Negotiation().Version,
	}
	var err error
	switch {
	case !o.t.verbatim:
		err = o.t.r.Render(ctx, ev, o.t.notifier(c, o.k.id))
	case o.t.source == sourceStandard:
		err = emitter.Standard{}.Render(ctx, ev, c)
	case o.t.toolID != "":
		err = o.t.r.Render(ctx, ev, c) // the agent's form's synth: an in_progress tool_call_update
	}
	if err != nil {
		c.log.Debug("heartbeat not sent", "session", o.k.session, "compaction", string(o.k.id), "error", err)
	}
}

// stopHeartbeat stops the ticks once no agent line can follow. Callers
// hold emu.
func (c *conn) stopHeartbeat() {
	if hb := &c.hb; hb.timer != nil {
		hb.timer.Stop()
		hb.timer = nil
	}
}
