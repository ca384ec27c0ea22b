package proxy

// What waits: an agent line act holds back (fateHold), and completions
// that wait for the facts the agent sends after them. Both are let go by a
// timer, by what follows, or by the settlement of their session.

import (
	"bytes"
	"context"
	"time"

	"github.com/acpcompact/acpcompact/protocol"
)

const (
	// holdFor bounds how long a held line (codex's "Context compacted\n",
	// Kimi's automatic start) waits for the line that confirms it before
	// it is forwarded as prose.
	holdFor = 500 * time.Millisecond
	// rawOutputWait bounds how long a completed compaction tool call
	// waits for the rawOutput update that follows it (quirkRawOutput).
	rawOutputWait = 2 * time.Second
)

// heldLine is an agent line held back until the next line says whether it
// was the agent's signal or the model's prose: codex's "Context
// compacted\n" (confirmed by its warning), Kimi Code's "Compacting
// conversation context…" (confirmed by its "Compaction is blocked…").
type heldLine struct {
	sid      string
	tr       Translator // whose signal it may be
	n        int
	raw, msg []byte // as read (line.raw, line.msg), copied
	timer    *time.Timer
}

// hold keeps agent line l of session sid, which may be a signal of tr,
// back for at most holdFor. Callers hold emu.
func (c *conn) hold(l *line, sid string, tr Translator) {
	c.releaseHeld()
	h := &heldLine{sid: sid, tr: tr, n: l.n, raw: bytes.Clone(l.raw), msg: bytes.Clone(l.msg)}
	h.timer = time.AfterFunc(holdFor, func() {
		c.emu.Lock()
		defer c.emu.Unlock()
		if c.held != h || c.stopped.Load() {
			return
		}
		c.releaseHeld()
		_ = c.out.flush() // a failure is sticky: the agent pump reports it
	})
	c.held = h
}

// releaseHeld forwards a held line as it came: nothing confirmed it.
// Callers hold emu.
func (c *conn) releaseHeld() {
	h := c.held
	if h == nil {
		return
	}
	c.dropHeld()
	_ = c.out.forwardLine(h.n, h.raw, h.msg) // a failure is sticky: the agent pump reports it
}

// dropHeld forgets a held line: what it said is replaced.
func (c *conn) dropHeld() {
	if h := c.held; h != nil {
		h.timer.Stop()
		c.held = nil
	}
}

// deferComplete holds back the completion of compaction k until its facts
// arrive, the turn ends, or rawOutputWait passes. Callers hold emu.
func (c *conn) deferComplete(k trackKey) {
	ts := c.transFor(k.session)
	if ts.deferred == nil {
		ts.deferred = map[protocol.ID]*time.Timer{}
	}
	if ts.deferred[k.id] != nil {
		return
	}
	ts.deferred[k.id] = time.AfterFunc(rawOutputWait, func() {
		c.emu.Lock()
		defer c.emu.Unlock()
		if c.stopped.Load() || c.em == nil {
			return
		}
		c.completeDeferred(context.Background(), k)
		_ = c.out.flush()
	})
}

// completeDeferred completes a compaction whose completion waited.
func (c *conn) completeDeferred(ctx context.Context, k trackKey) {
	ts, ok := c.trans[k.session]
	if !ok || ts.deferred[k.id] == nil {
		return
	}
	c.settle(ctx, k, protocol.Completed, "")
}

// stopDeferred forgets a waiting completion.
func (c *conn) stopDeferred(k trackKey) {
	if ts, ok := c.trans[k.session]; ok && ts.deferred[k.id] != nil {
		ts.deferred[k.id].Stop()
		delete(ts.deferred, k.id)
	}
}
