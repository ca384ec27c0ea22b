package proxy

// What waits: an agent line that awaits its confirmation (fateAwait), and completions
// that wait for the facts the agent sends after them. Both are let go by a
// timer, by what follows, or by the settlement of their session.

import (
	"bytes"
	"context"
	"time"

	"github.com/acpcompact/acpcompact/protocol"
)

const (
	// awaitFor bounds how long an awaiting line (codex's "Context compacted\n",
	// Kimi's automatic start) waits for the line that confirms it before
	// it is forwarded as prose.
	awaitFor = 500 * time.Millisecond
	// rawOutputWait bounds how long a completed compaction tool call
	// waits for the rawOutput update that follows it (quirkRawOutput).
	rawOutputWait = 2 * time.Second
)

// awaitLine is an agent line kept back until the next line says whether it
// was the agent's signal or the model's prose: codex's "Context
// compacted\n" (confirmed by its warning), Kimi Code's "Compacting
// conversation context…" (confirmed by its "Compaction is blocked…").
type awaitLine struct {
	sid      string
	tr       Translator // whose signal it may be
	n        int
	raw, msg []byte // as read (line.raw, line.msg), copied
	timer    *time.Timer
}

// await keeps agent line l of session sid, which may be a signal of tr,
// back for at most awaitFor. Callers hold emu.
func (c *conn) await(l *line, sid string, tr Translator) {
	c.releaseAwaiting()
	h := &awaitLine{sid: sid, tr: tr, n: l.n, raw: bytes.Clone(l.raw), msg: bytes.Clone(l.msg)}
	h.timer = time.AfterFunc(awaitFor, func() {
		c.emu.Lock()
		defer c.emu.Unlock()
		if c.awaiting != h || c.stopped.Load() {
			return
		}
		c.releaseAwaiting()
		_ = c.out.flush() // a failure is sticky: the agent pump reports it
	})
	c.awaiting = h
}

// releaseAwaiting forwards the awaiting line as it came: nothing confirmed it.
// Callers hold emu.
func (c *conn) releaseAwaiting() {
	h := c.awaiting
	if h == nil {
		return
	}
	c.dropAwaiting()
	_ = c.out.forwardLine(h.n, h.raw, h.msg) // a failure is sticky: the agent pump reports it
}

// dropAwaiting forgets the awaiting line: what it said is replaced.
func (c *conn) dropAwaiting() {
	if h := c.awaiting; h != nil {
		h.timer.Stop()
		c.awaiting = nil
	}
}

// deferComplete keeps back the completion of compaction k until its facts
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
	c.settle(ctx, k, protocol.Completed, "", ts.factsOpts[k.id]...)
}

// stopDeferred forgets a waiting completion.
func (c *conn) stopDeferred(k trackKey) {
	if ts, ok := c.trans[k.session]; ok && ts.deferred[k.id] != nil {
		ts.deferred[k.id].Stop()
		delete(ts.deferred, k.id)
		delete(ts.factsOpts, k.id)
	}
}
