package proxy

// Acting, the last stage of the agent's line path (read -> classify ->
// act): a decision carried out, in this order: the held line let go or
// replaced, the decision's log line, the engine told (a turn the message
// ends is settled before the message is written), the compaction state
// changed (which writes what the emitter renders), the line itself
// written, held or not, and the checker shown what the client receives.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/lines"
	"github.com/acpcompact/acpcompact/internal/skim"
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
	c.deliverBegun()
	l := readLine(lr.Lines(), raw, long)
	return c.actLine(ctx, lr, &l)
}

// actLine is handleAgent for a line read; callers hold emu.
func (c *conn) actLine(ctx context.Context, lr *lines.Reader, l *line) (werr, rerr error) {
	c.out.at = l.n
	if l.long {
		return c.actHead(ctx, lr, l)
	}
	d := &c.scratch.decision
	view{c}.classify(l, d)
	var err error
	if d.batch {
		c.releaseHeld()
		err = c.actBatch(ctx, l)
	} else {
		err = c.act(ctx, l, d)
	}
	if err != nil {
		return c.clientErr(err), nil
	}
	// The client sees this line, and any the proxy made for it, as soon as
	// no further agent line is at hand, or at once when it may be waiting
	// on it. lr.ready is asked last: reading it costs a scan.
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
	if d.confirmsHeld {
		c.dropHeld() // what it said is replaced
	} else {
		c.releaseHeld()
	}
	c.logNote(l.n, d.note)
	if d.checked != nil && c.check.agentSide() {
		c.check.observe(conformance.FromAgent, sideAgent, l.n, d.checked)
	}
	if d.seen != nil {
		// The turn's end is written (or could not be) once act returns:
		// the engine may begin the next one.
		defer c.e.Ended(c.feed(ctx, &d.msg, d.errMember).End)
		if d.alt != nil {
			defer c.e.Ended(c.feed(ctx, d.alt, nil).End)
		}
	}
	if d.toolErr != "" {
		if ts, ok := c.trans[d.toolErrSession]; ok {
			ts.toolErr = d.toolErr
		}
	}
	switch {
	case d.std != nil:
		c.applyStandard(ctx, d.std)
	case d.gate != nil:
		c.gate(ctx, l, d.gate)
	case d.sig != nil:
		c.applySignal(ctx, l, d)
	}
	switch d.fate {
	case fateForward:
		return c.out.forwardLine(l.n, l.raw, d.checked)
	case fateRewrite:
		if d.out != nil {
			return c.out.make(d.out)
		}
	case fateHold:
		c.hold(l, d.sig.sid, d.sig.tr.name)
	}
	return nil
}

// logNote logs a decision's note at agent line n.
func (c *conn) logNote(n int, nt note) {
	if nt.msg == "" {
		return
	}
	c.log.Log(context.Background(), nt.level, nt.msg, append(nt.attrs, "side", sideAgent, "line", n)...)
}

// feed tells the engine of an agent message and carries out what it
// means: the negotiation an initialize answer brings, the settlement of
// the turn a message ends (before the message is written; the caller
// reports the write with Ended), and the end of a session the agent
// closed. errMember is a response's error member.
func (c *conn) feed(ctx context.Context, m *turn.Msg, errMember []byte) turn.Effect {
	eff := c.e.Agent(m)
	switch {
	case eff.Negotiated != nil:
		c.negotiate(*eff.Negotiated, m.Result)
	case eff.Request == turn.MethodInitialize && !m.Failed && c.em != nil:
		c.log.Warn("a second initialize exchange is ignored; the first one's mode stays")
	}
	if end := eff.End; end != nil {
		reason, why := c.p.cfg.turnReason, "the agent reported the idle state_update"
		if end.Cancelled {
			reason = emitter.ErrCancelled
		}
		switch eff.Request {
		case turn.MethodPrompt:
			why = "the agent answered session/prompt"
		case turn.MethodClose:
			why = "the agent answered session/close"
		}
		// What the proxy shows while it settles the ending turn belongs to
		// that turn, which the engine already counts as over.
		c.ending.Store(&end.Session)
		if m.Failed && !end.Cancelled && c.em != nil {
			// What is left open fails with the agent's own error text.
			reason = c.failedTurn(ctx, end.Session, errMember, reason)
		}
		c.settleSession(ctx, end.Session, reason, why)
		c.ending.Store(nil)
		c.turnEnded(end.Session)
	}
	if sid := eff.Closed; sid != "" {
		c.closeSession(ctx, sid)
	}
	return eff
}

// negotiate starts the emitter for the negotiated connection. Only the
// first successful initialize exchange counts (the engine reports it
// once): a second one would strand the compactions the first emitter
// tracks.
func (c *conn) negotiate(n capability.Negotiation, result []byte) {
	for _, d := range n.Diagnostics {
		c.log.Warn("initialize: "+d.Message, "path", d.Path)
	}
	c.chooseProfile(result)
	c.capable = n.Version == capability.V2 || n.Compaction
	c.em = emitter.New(c,
		emitter.WithNegotiation(n),
		// The router picks each compaction's form, so the emitter is
		// always in fallback mode with the router as its renderer.
		emitter.WithPolicy(func(capability.Negotiation, bool) capability.Mode { return capability.Fallback }),
		emitter.WithFallback(c.router),
		// The agent already decided what of a summary its client may see;
		// what the proxy derives from its text goes through the policy.
		emitter.WithSummaryPolicy(c.summaryPolicy),
		emitter.WithObserver(emitter.ObserverFunc(c.observe)),
		// Nothing about compaction between turns: what the agent reports
		// then is held until the session's next turn (turns.go).
		emitter.WithTurns(c.inTurn, emitter.HoldOutsideTurn),
	)
	mode := "standard updates"
	switch {
	case c.capable:
	case c.p.cfg.fallback != nil:
		mode = "fallback rendering"
	default:
		mode = "legacy signals untouched"
	}
	c.log.Info("initialize negotiated", "version", n.Version, "capability", n.Compaction, "compaction", mode)
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
	c.releaseHeld()
	d, standIn := view{c}.classifyHead(l)
	c.logNote(l.n, d.note)
	var end *turn.End
	if d.seen != nil {
		eff := c.feed(ctx, &d.msg, nil)
		if standIn != nil && eff.Request != "" {
			defer c.check.observe(conformance.FromAgent, sideAgent, l.n, standIn)
		}
		end = eff.End
	}
	defer c.e.Ended(end)
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
	var ends []*turn.End
	defer func() {
		for _, end := range ends {
			c.e.Ended(end)
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
			ends = append(ends, c.feed(ctx, &d.msg, d.errMember).End)
			if d.alt != nil {
				ends = append(ends, c.feed(ctx, d.alt, nil).End)
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

var errInvalidBatch = errors.New("invalid batch")

func (c *conn) clientErr(err error) error { return fmt.Errorf("%w: %w", ErrClientClosed, err) }

// Notify implements emitter.Notifier: the emitter's updates go into the
// client's stream at the position of the agent line being handled.
func (c *conn) Notify(_ context.Context, sessionID string, update any) error {
	u, err := protocol.MarshalUpdate(update)
	if err != nil {
		return err
	}
	if err := c.out.make(protocol.AppendNotification(nil, sessionID, u)); err != nil {
		return c.clientErr(err)
	}
	return nil
}

// ---- the agent's own standard updates ----

// applyStandard follows the agent's own update to a capable client.
func (c *conn) applyStandard(ctx context.Context, p *stdPlan) {
	switch p.op {
	case stdOpen:
		_ = c.open(ctx, p.k, &track{source: sourceStandard, r: emitter.Standard{}, verbatim: true}, false, nil)
	case stdSettle:
		c.settle(ctx, p.k, p.status, "")
	case stdOpenSettle:
		if err := c.open(ctx, p.k, &track{source: sourceStandard, r: emitter.Standard{}, verbatim: true}, false, nil); err == nil {
			c.settle(ctx, p.k, p.status, "")
		}
	case stdKeepChunk:
		ts := c.transFor(p.k.session)
		ts.sync(true, p.epoch)
		ts.keepChunk(p.k.id, p.content)
	case stdTakeChunks:
		ts := c.transFor(p.k.session)
		ts.sync(true, p.epoch)
		delete(ts.chunks, p.k.id)
	}
}

const sourceStandard = "standard"

// gateRenderer is the fallback for standard updates a v1 client without
// the capability must not receive.
func (c *conn) gateRenderer() emitter.Renderer {
	if c.p.cfg.fallback != nil {
		return c.p.cfg.fallback
	}
	return c.p.cfg.gateFallback
}

// agentRecord is the compaction record the agent put in its _meta itself.
func agentRecord(m protocol.Meta) json.RawMessage {
	if rec, ok := m[emitter.DefaultRecordKey]; ok && len(rec) > 0 && !skim.IsNull(rec) {
		return rec
	}
	return nil
}

// gate rewrites the agent's standard update into the fallback for a v1
// client without the capability. The line itself never reaches the
// client: what does is what the fallback renders of it.
func (c *conn) gate(ctx context.Context, l *line, p *gatePlan) {
	sid := p.sid
	log := c.log.With("session", sid, "side", sideAgent, "line", l.n)
	u, err := decodeUpdate(p.raw, c.ownAgentLine)
	if err != nil {
		log.Warn("malformed compaction update dropped: the client lacks the capability and it cannot be rewritten", "error", err)
		return
	}
	id := updateID(u)
	k := trackKey{sid, id}
	r := c.gateRenderer()
	if c.capable {
		// A capable client's compaction held between turns: its
		// standard form, rendered by the emitter, which holds it.
		r = emitter.Standard{}
	}
	if on, epoch := p.turn.replay(); on {
		ts := c.transFor(sid)
		ts.sync(on, epoch)
		switch u := u.(type) {
		case *protocol.CompactionSummaryChunk:
			if b, err := json.Marshal(u.Content); err == nil {
				ts.keepChunk(id, b)
			}
		case *protocol.CompactionUpdate:
			chunks := ts.chunks[id]
			delete(ts.chunks, id)
			if !u.Status.Terminal() {
				break // a replay shows settled compactions only
			}
			t := &track{source: sourceStandard, r: r}
			rec := emitter.Record{ID: id, Status: u.Status, Displayable: true, Summary: summaryOf(u)}
			if u.Summary.IsZero() {
				rec.Summary = blocksOf(chunks)
			}
			if e, ok := u.Error.Get(); ok {
				rec.Error = e
			}
			if m, ok := u.Meta.Get(); ok {
				rec.Meta = m
				t.record = agentRecord(m)
			}
			undo := c.router.addTemp(k, t)
			if err := c.em.Session(sid).Replay(ctx, rec); err != nil {
				log.Debug("replay failed", "compaction", string(id), "error", err)
			}
			undo()
		}
		return
	}
	switch c.router.status(k) {
	case trackByProxy:
		log.Info("dropped the agent's update of a compaction the proxy already settled", "compaction", string(id))
		return
	case trackByAgent:
		log.Debug("dropped the agent's update of a compaction it already settled", "compaction", string(id))
		return
	case trackNone:
		if p.turn.justCancelled() {
			c.logNote(l.n, stragglerNote(sid, id, sourceStandard))
			return
		}
		var meta protocol.Meta
		if up, ok := u.(*protocol.CompactionUpdate); ok && !up.Status.Terminal() {
			meta, _ = up.Meta.Get()
		}
		if err := c.open(ctx, k, &track{source: sourceStandard, r: r}, true, meta); err != nil {
			log.Info("dropped a compaction update that cannot be rewritten", "compaction", string(id), "error", err)
			return
		}
	}
	switch u := u.(type) {
	case *protocol.CompactionSummaryChunk:
		if err := c.em.Session(sid).Chunk(ctx, id, u.Content); err != nil {
			log.Debug("chunk not rewritten", "compaction", string(id), "error", err)
		}
	case *protocol.CompactionUpdate:
		if !u.Status.Terminal() {
			return // still in progress, or a status the fallback has no form for
		}
		var opts []emitter.SettleOption
		if blocks, ok := u.Summary.Get(); ok {
			opts = append(opts, emitter.Summary(blocks...))
		} else if u.Summary.IsNull() {
			opts = append(opts, emitter.Summary()) // no blocks: cleared
		}
		if m, ok := u.Meta.Get(); ok {
			opts = append(opts, emitter.WithSettleMeta(m))
			if rec := agentRecord(m); rec != nil {
				c.router.keepRecord(k, rec)
			}
		}
		reason, _ := u.Error.Get()
		c.settle(ctx, k, u.Status, reason, opts...)
	}
}

func updateID(u any) protocol.ID {
	switch u := u.(type) {
	case *protocol.CompactionUpdate:
		return u.CompactionID
	case *protocol.CompactionSummaryChunk:
		return u.CompactionID
	}
	return ""
}

// summaryOf is an update's summary, or nil when it leaves it out.
func summaryOf(u *protocol.CompactionUpdate) []protocol.ContentBlock {
	blocks, _ := u.Summary.Get()
	return blocks
}

// blocksOf decodes kept summary chunks.
func blocksOf(chunks []json.RawMessage) []protocol.ContentBlock {
	var out []protocol.ContentBlock
	for _, raw := range chunks {
		var b protocol.ContentBlock
		if json.Unmarshal(raw, &b) == nil {
			out = append(out, b)
		}
	}
	return out
}

// ---- legacy signals ----

// applySignal carries out a recognised legacy signal (classify's
// sigPlan); it may change the line's fate when the compaction cannot be
// followed.
func (c *conn) applySignal(ctx context.Context, l *line, d *decision) {
	p := d.sig
	tr, sig, k := p.tr, p.sig, p.k
	name := tr.name
	ts := c.transFor(p.sid)
	ts.sync(p.replaying, p.epoch)
	if sig.newTool {
		ts.tools[string(sig.id)] = true
	}
	switch {
	case p.mint:
		k.id = ts.mint(p.sid, name, p.replaying)
	case p.popPending:
		ts.pending[name] = ts.pending[name][:len(ts.pending[name])-1]
	}
	if p.orphans >= 0 && len(ts.orphans[name]) > p.orphans {
		ts.orphans[name] = ts.orphans[name][:p.orphans]
	}
	if p.pushPending {
		ts.pending[name] = append(ts.pending[name], k.id)
	}
	log := c.log.With("session", p.sid, "translator", string(name), "side", sideAgent, "line", l.n)
	t := &track{source: string(name), idless: p.idless, r: p.form, verbatim: p.verbatim, trigger: sig.trigger, facts: sig.facts, background: sig.background}
	if tr.toolCall {
		t.toolID, t.toolMeta, t.rawOutput = string(k.id), sig.toolMeta, sig.rawOutput
	}
	// follow opens the compaction; when the emitter refuses, the line
	// takes its unfollowed fate.
	follow := func() bool {
		if err := c.open(ctx, k, t, false, nil); err != nil {
			log.Warn("compaction not followed", "compaction", string(k.id), "error", err)
			d.fate, d.out = p.unfollowed, nil
			return false
		}
		return true
	}
	switch p.step {
	case stepContinuation:
		sig.id = k.id
		c.replay(ctx, k, tr, emitter.Standard{}, protocol.Completed, "", sig, false)
		if sig.pairs {
			// A command result replayed after it may belong to it.
			ts.pending[name] = append(ts.pending[name], k.id)
		}
		log.Info("replayed the agent's message as the completed compaction it stands for", "compaction", string(k.id))
	case stepAbsorb:
		if sig.claims {
			if l := len(ts.pending[ClaudeContinuation]); l > 0 {
				ts.pending[ClaudeContinuation] = ts.pending[ClaudeContinuation][:l-1]
			}
		}
	case stepReplay:
		c.replay(ctx, k, tr, p.form, p.status, p.reason, sig, true)
	case stepLearn:
		c.router.learn(k, sig)
	case stepProgress:
		c.router.learn(k, sig)
		if sig.facts != nil && ts.deferred[k.id] != nil {
			c.completeDeferred(ctx, k)
		}
	case stepStart:
		if follow() && p.idless {
			ts.open[name] = append(ts.open[name], k.id)
		}
	case stepDone:
		t.afterFact = true
		if follow() {
			c.settle(ctx, k, p.status, p.reason)
		}
	case stepOutcome:
		if p.openFirst {
			if !follow() {
				return
			}
		} else {
			c.router.learn(k, sig)
		}
		if p.status == protocol.Completed && sig.factsFollow && !p.verbatim && sig.facts == nil && !c.router.hasFacts(k) {
			// Its facts follow in the next update: the completion waits
			// for them, briefly, so that the record carries them.
			c.deferComplete(k)
			return
		}
		c.settle(ctx, k, p.status, p.reason)
		if p.idless {
			ts.open[name] = slices.DeleteFunc(ts.open[name], func(x protocol.ID) bool { return x == k.id })
		}
	}
}
