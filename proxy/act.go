package proxy

// Acting on an agent line (doc.go, "How a line goes through"): the
// decision carried out, in the order act's steps show.

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/jsonedit"
	"github.com/acpcompact/acpcompact/internal/lines"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/acpcompact/acpcompact/protocol"
)

// handleAgent carries one agent line through classify and act. werr is a
// failed write to the client, rerr a failed read of the remainder of an
// overlong line.
func (c *conn) handleAgent(ctx context.Context, lr *lines.Reader, raw []byte, long bool) (werr, rerr error) {
	c.emu.Lock()
	defer c.emu.Unlock()
	if c.stopped.Load() {
		return nil, nil
	}
	// A turn that began since the last line gets what was held for it
	// first: before this line, which may be the one that ends it.
	c.h.DeliverBegun(ctx)
	l := readLine(lr.Lines(), raw, long)
	c.out.at = l.n
	if l.long {
		return c.actHead(ctx, lr, &l)
	}
	d := &c.scratch.decision
	view{c}.classify(&l, d)
	var err error
	if d.batch {
		c.releaseAwaiting()
		err = c.actBatch(ctx, &l)
	} else {
		err = c.act(ctx, &l, d)
	}
	if err != nil {
		return c.clientErr(err), nil
	}
	// The client sees this line, and any the proxy made for it, as soon as
	// no further agent line is at hand, or at once when it may be waiting
	// on it. lr.Ready is asked last: reading it costs a scan.
	if !d.batchable || c.out.made || !lr.Ready() {
		if err := c.out.flush(); err != nil {
			return c.clientErr(err), nil
		}
	}
	if c.out.err != nil {
		return c.clientErr(c.out.err), nil
	}
	return nil, nil
}

// act carries out decision d for agent line l. The error is a failed
// write to the client.
func (c *conn) act(ctx context.Context, l *line, d *decision) error {
	if d.confirmsAwaiting {
		c.dropAwaiting() // what it said is replaced
	} else {
		c.releaseAwaiting()
	}
	c.logNote(l.n, d.note)
	if d.checked != nil && c.check.agentSide() {
		c.check.observe(conformance.FromAgent, sideAgent, l.n, d.checked)
	}
	if d.seen != nil {
		// The turn's end is written (or could not be) once act returns:
		// the engine may begin the next one.
		defer c.h.Written(c.feed(ctx, &d.msg, d.errMember))
		if d.alt != nil {
			defer c.h.Written(c.feed(ctx, d.alt, nil))
		}
	}
	if d.toolErr != "" {
		if ts, ok := c.trans[d.toolErrSession]; ok {
			ts.toolErr = d.toolErr
		}
	}
	if d.chunkSession != "" {
		c.transFor(d.chunkSession).emptyChunk = d.chunkEmpty
	}
	switch d.do {
	case doAwaitFacts:
		c.awaitFacts(&d.std)
	case doFacts:
		c.factsArrived(ctx, &d.std)
	case doFollow:
		c.followStandard(ctx, &d.std)
		if c.follower != nil && d.fate == fateForward {
			c.auditForwarded(l, d)
		}
	case doReplay:
		c.replayStandard(&d.std, d)
	case doRender:
		c.render(ctx, l, &d.std)
	}
	if d.sig != nil {
		c.followSignal(ctx, l, d)
	}
	switch d.fate {
	case fateForward:
		return c.out.forwardLine(l.n, l.raw, d.checked)
	case fateRewrite:
		if d.out != nil {
			return c.out.make(d.out)
		}
	case fateAwait:
		c.await(l, d.sig.sid, d.sig.def.Name)
	}
	return nil
}

// feed tells the host of an agent message (see host.Host.Agent); the
// reason of a turn a failed prompt response ends is the agent's own error
// text (failedTurn). errMember is a response's error member.
func (c *conn) feed(ctx context.Context, m *turn.Msg, errMember []byte) turn.Effect {
	eff := c.h.Agent(ctx, m, func(sid string) error { return c.failedTurn(ctx, sid, errMember) })
	if eff.End != nil {
		c.turnEnded(eff.End.Session)
	}
	if sid := eff.Closed; sid != "" {
		// The host settled the session and the emitter forgot it: so do
		// the router and the translators, so that the proxy's memory is
		// bounded by the sessions that are live.
		delete(c.trans, sid)
		c.router.forget(sid)
		if c.follower != nil {
			c.follower.Forget(sid)
		}
	}
	return eff
}

// logNote logs a decision's note at agent line n.
func (c *conn) logNote(n int, nt note) {
	if nt.msg == "" {
		return
	}
	c.log.Log(context.Background(), nt.level, nt.msg, append(nt.attrs, "side", sideAgent, "line", n)...)
}

// negotiated is the host's Hooks.Negotiated: the connection's mode, the
// agent's profile and its translators, from the initialize exchange. Only
// the first successful one counts (the engine reports it once): a second
// one would strand the compactions the first emitter tracks.
func (c *conn) negotiated(n capability.Negotiation, em *emitter.Emitter, result json.RawMessage) {
	c.chooseProfile(result)
	c.mode = capability.DefaultPolicy(n, c.p.cfg.fallback != nil)
	c.em = em
	mode := "standard updates"
	switch c.mode {
	case capability.Fallback:
		mode = "fallback rendering"
	case capability.Off:
		mode = "legacy signals untouched"
	}
	c.log.Info("initialize negotiated", "version", n.Version, "capability", n.Compaction, "compaction", mode)
}

// emitterOptions are the emitter's options beyond the host's.
func (c *conn) emitterOptions(capability.Negotiation) []emitter.Option {
	opts := []emitter.Option{
		// The router picks each compaction's form, so the emitter is
		// always in fallback mode with the router as its renderer.
		emitter.WithPolicy(func(capability.Negotiation, bool) capability.Mode { return capability.Fallback }),
		emitter.WithFallback(c.router),
		// The agent already decided what of a summary its client may see;
		// what the proxy derives from its text goes through the policy.
		emitter.WithSummaryPolicy(c.summaryPolicy),
		emitter.WithObserver(emitter.ObserverFunc(c.observe)),
		// While a compaction the client sees is silent, its progress is
		// re-sent, in the form the client sees it in (router.Render).
		emitter.WithHeartbeat(c.p.cfg.heartbeat),
	}
	if c.follower != nil {
		opts = append(opts, emitter.WithAudit(c.follower.Audit))
	}
	return opts
}

// observe logs what the emitter refused or could not deliver.
func (c *conn) observe(ctx context.Context, ev emitter.Event) {
	switch ev.Kind {
	case emitter.EventDropped, emitter.EventUndeliverable:
		c.log.Debug("compaction "+ev.Kind.String(), "session", ev.SessionID, "compaction", string(ev.ID), "error", ev.Err)
	}
}

// actHead carries a line longer than the inspection limit through: its
// head is classified (classifyHead) and, unless it is dropped, written at
// once, and the rest streams through as it comes.
func (c *conn) actHead(ctx context.Context, lr *lines.Reader, l *line) (werr, rerr error) {
	c.releaseAwaiting()
	d, standIn := view{c}.classifyHead(l)
	c.logNote(l.n, d.note)
	if d.seen != nil {
		eff := c.feed(ctx, &d.msg, nil)
		if standIn != nil && eff.Request != "" {
			defer c.check.observe(conformance.FromAgent, sideAgent, l.n, standIn)
		}
		defer c.h.Written(eff)
	}
	if d.fate == fateDrop {
		return nil, lr.CopyRest(func([]byte) error { return nil })
	}
	// The rest may be slow to come: what precedes it leaves first.
	if err := c.out.forward(l.raw); err != nil {
		return c.clientErr(err), nil
	}
	if err := c.out.flush(); err != nil {
		return c.clientErr(err), nil
	}
	rerr = lr.CopyRest(c.out.forward)
	if err := c.out.flush(); err != nil {
		return c.clientErr(err), nil
	}
	return nil, rerr
}

// actBatch carries a JSON-RPC batch from the agent through, one message at
// a time: the engine is told of each, and a turn one of them ends is
// settled before the batch is written. A message a decision drops is left
// out of it; the rest is forwarded, in order (the line as it came when
// nothing was dropped, nothing when nothing is left).
func (c *conn) actBatch(ctx context.Context, l *line) error {
	var kept, checked [][]byte
	var effs []turn.Effect
	defer func() {
		for _, eff := range effs {
			c.h.Written(eff)
		}
	}()
	dropped := 0
	valid := turn.Batch(l.msg, func(elem []byte) {
		d := view{c}.element(elem)
		c.logNote(l.n, d.note)
		if d.checked != nil && c.check.agentSide() {
			c.check.observe(conformance.FromAgent, sideAgent, l.n, d.checked)
		}
		if d.seen != nil {
			effs = append(effs, c.feed(ctx, &d.msg, d.errMember))
			if d.alt != nil {
				effs = append(effs, c.feed(ctx, d.alt, nil))
			}
		}
		if d.fate == fateDrop {
			dropped++
			return
		}
		kept = append(kept, elem)
		if d.checked != nil {
			checked = append(checked, d.checked)
		}
	})
	if !valid {
		// Unreadable as a batch (which no ACP client dispatches): the
		// worst case is taken of it as a whole.
		var d decision
		view{c}.unreadable(l.msg, errInvalidBatch, &d)
		c.logNote(l.n, d.note)
		if d.checked != nil && c.check.agentSide() {
			c.check.observe(conformance.FromAgent, sideAgent, l.n, d.checked)
		}
		if d.fate == fateDrop {
			return nil
		}
		return c.out.forwardLine(l.n, l.raw, d.checked)
	}
	if c.check.clientSide() {
		for _, elem := range checked {
			c.check.observe(conformance.FromAgent, sideAgent, l.n, elem)
		}
	}
	switch {
	case dropped == 0:
		return c.out.forward(l.raw)
	case len(kept) == 0:
		return nil
	}
	b := append(make([]byte, 0, len(l.raw)), '[')
	for i, elem := range kept {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, elem...)
	}
	return c.out.forward(append(b, ']', '\n'))
}

func (c *conn) clientErr(err error) error { return fmt.Errorf("%w: %w", ErrClientClosed, err) }

// Notify implements emitter.Notifier: the emitter's updates go into the
// client's stream at the position of the agent line being handled. What
// the emitter renders of the agent's own content (a summary it rewrote)
// does not grow by escaping what the agent did not escape.
func (c *conn) Notify(_ context.Context, sessionID string, update any) error {
	u, err := protocol.MarshalUpdate(update)
	if err != nil {
		return err
	}
	u = jsonedit.Unescape(u)
	if err := c.out.make(protocol.AppendNotification(nil, sessionID, u)); err != nil {
		return c.clientErr(err)
	}
	return nil
}
