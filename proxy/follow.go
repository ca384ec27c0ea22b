package proxy

// The lifecycle: how the proxy follows each compaction through the
// emitter once the policy let its line through (policy.go's actions). The
// agent's own standard updates are followed by ID (doFollow), rendered in
// the client's form or held (doRender), or shown as a replay shows them
// (doReplay); a legacy signal opens, updates or settles the compaction it
// stands for (doSignal). The proxy's own settlements (a turn's end, a
// cancel's grace, a session's close, the end of the agent's output) are
// the host's (internal/host), with the hooks at the end of this file.

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"

	"github.com/acpcompact/acpcompact/audit"
	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/jsonedit"
	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/acpcompact/acpcompact/proxy/agents"
)

const sourceStandard = "standard"

// ---- the agent's own standard updates ----

// followStandard follows the agent's own update to a capable client in a
// turn (doFollow): the line goes as it came, and the proxy follows its ID
// so that one left open can be settled and a second terminal update
// dropped.
func (c *conn) followStandard(ctx context.Context, p *stdLine) {
	terminal := p.isUpdate && p.status.Terminal()
	switch c.router.status(p.k) {
	case trackOpen:
		if terminal {
			// The agent settles it itself; the emitter only forgets it.
			c.settle(ctx, p.k, p.status, "")
		}
	case trackNone:
		// First sight of an ID opens the entity on the client; a
		// terminal-first update leaves nothing open, but its ID is
		// settled: a repeat of it is dropped. An ID the agent settled
		// before is refused by the emitter and simply not followed again.
		// The summary is the agent's own: it passes, should the proxy
		// come to render it (a completion that waits for its facts).
		if c.open(ctx, p.k, &track{source: sourceStandard, r: emitter.Standard{}, verbatim: true}, true, nil) == nil && terminal {
			c.settle(ctx, p.k, p.status, "")
		}
	}
}

// auditForwarded audits the summary of a completion of the agent's own
// that goes to the client as it came (the "settled by the agent" row):
// the emitter renders nothing of it, so what the summary lost joins the
// line's own _meta, before act writes it.
func (c *conn) auditForwarded(l *line, d *decision) {
	p := &d.std
	if !p.isUpdate || p.status != protocol.Completed || d.seen == nil {
		return
	}
	var lost []emitter.Loss
	for _, r := range c.out.auditAhead(l.n, l.msg) {
		if r.SessionID == p.k.session && r.CompactionID == string(p.k.id) {
			lost = audit.Known(r.KnownLoss)
		}
	}
	b, err := json.Marshal(lost)
	if len(lost) == 0 || err != nil {
		return
	}
	out := jsonedit.Update(d.seen, func(upd map[string]json.RawMessage) bool {
		return jsonedit.Set(upd, json.RawMessage(`"completed"`), "_meta", emitter.DefaultRecordKey, "status") &&
			jsonedit.Set(upd, b, "_meta", emitter.DefaultRecordKey, "knownLoss")
	})
	if out == nil {
		c.log.Warn("the audit's record could not join the agent's _meta; the completion goes as it came", "line", l.n)
		return
	}
	d.fate, d.out = fateRewrite, out
}

// replayStandard shows the agent's own update in a history replay to a
// capable client (doReplay): summary chunks are kept for their terminal
// update, which gets them as its summary when it leaves the summary out.
func (c *conn) replayStandard(p *stdLine, d *decision) {
	ts := c.transFor(p.k.session)
	ts.sync(true, p.epoch)
	if !p.isUpdate {
		ts.keepChunk(p.k.id, p.content)
		return
	}
	chunks := ts.chunks[p.k.id]
	delete(ts.chunks, p.k.id)
	if d.fate != fateForward || len(chunks) == 0 {
		return
	}
	var u struct {
		Summary json.RawMessage `json:"summary"`
	}
	if json.Unmarshal(p.raw, &u) != nil || u.Summary != nil {
		return // it says what its summary is
	}
	if out := withSummary(d.seen, chunks); out != nil {
		d.fate, d.out = fateRewrite, out
	}
}

// withSummary returns msg, a compaction_update, with summary set to blocks
// (nil when msg cannot be read so).
func withSummary(msg []byte, blocks []json.RawMessage) []byte {
	return jsonedit.Update(msg, func(upd map[string]json.RawMessage) bool {
		list := []byte{'['}
		for i, b := range blocks {
			if i > 0 {
				list = append(list, ',')
			}
			list = append(list, b...)
		}
		upd["summary"] = append(list, ']')
		return true
	})
}

// render shows the agent's own update through the emitter (doRender): in
// the fallback form to a v1 client without the capability, which must
// never receive the line, or, to a capable client, held by the emitter
// until the session's next turn. The line itself never reaches the
// client: what does is what the emitter renders of it.
func (c *conn) render(ctx context.Context, l *line, p *stdLine) {
	sid := p.k.session
	log := c.log.With("session", sid, "side", sideAgent, "line", l.n)
	u, err := protocol.UnmarshalLongUpdate(p.raw, c.ownAgentLine)
	if err != nil {
		log.Warn("malformed compaction update dropped: the client lacks the capability and it cannot be rewritten", "error", err)
		return
	}
	id := updateID(u)
	k := trackKey{sid, id}
	r := c.gateRenderer()
	if c.mode == capability.Standard {
		// A capable client's compaction held between turns: its
		// standard form, rendered by the emitter, which holds it.
		r = emitter.Standard{}
	}
	if on, epoch := p.turn.replay(); on {
		c.renderReplay(ctx, k, u, r, epoch, log)
		return
	}
	if c.router.status(k) == trackNone {
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
		if err := c.router.handle(k).Chunk(ctx, u.Content); err != nil {
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

// renderReplay shows the agent's own replayed update in the client's form:
// chunks wait for their terminal update, which the emitter replays,
// terminal-first; a running compaction is not shown.
func (c *conn) renderReplay(ctx context.Context, k trackKey, u any, r emitter.Renderer, epoch uint64, log interface {
	Debug(string, ...any)
}) {
	ts := c.transFor(k.session)
	ts.sync(true, epoch)
	switch u := u.(type) {
	case *protocol.CompactionSummaryChunk:
		if b, err := json.Marshal(u.Content); err == nil {
			ts.keepChunk(k.id, b)
		}
	case *protocol.CompactionUpdate:
		chunks := ts.chunks[k.id]
		delete(ts.chunks, k.id)
		if !u.Status.Terminal() {
			return // a replay shows settled compactions only
		}
		t := &track{source: sourceStandard, r: r}
		rec := emitter.Record{ID: k.id, Status: u.Status, Displayable: true}
		rec.Summary, _ = u.Summary.Get()
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
		if err := c.em.Session(k.session).Replay(ctx, rec); err != nil {
			log.Debug("replay failed", "compaction", string(k.id), "error", err)
		}
		undo()
	}
}

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

func updateID(u any) protocol.ID {
	switch u := u.(type) {
	case *protocol.CompactionUpdate:
		return u.CompactionID
	case *protocol.CompactionSummaryChunk:
		return u.CompactionID
	}
	return ""
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

// followSignal carries out a recognised legacy signal: first the
// bookkeeping of ID-less forms, whatever becomes of the line; then, when
// the policy let the signal through (doSignal), its step in the
// compaction's lifecycle, which may change the line's fate when the
// emitter refuses the compaction.
func (c *conn) followSignal(ctx context.Context, l *line, d *decision) {
	p := d.sig
	sig, name := p.sig, p.def.Name
	sid := p.sid
	ts := c.transFor(sid)
	ts.sync(p.replaying, p.epoch)
	if sig.NewTool {
		ts.tools[string(sig.ID)] = true
	}
	k := p.k
	switch {
	case p.mint:
		k.id = ts.mint(sid, name, p.replaying)
	case p.popPending:
		ts.pending[name] = ts.pending[name][:len(ts.pending[name])-1]
	}
	if p.orphans >= 0 && len(ts.orphans[name]) > p.orphans {
		ts.orphans[name] = ts.orphans[name][:p.orphans]
	}
	if d.do != doSignal {
		return
	}
	log := c.log.With("session", sid, "translator", string(name), "side", sideAgent, "line", l.n)
	t := &track{source: string(name), idless: p.idless, r: p.form, verbatim: p.verbatim, trigger: sig.Trigger, facts: sig.Facts, background: sig.Background}
	if p.def.ToolCall {
		t.toolID, t.toolMeta, t.rawOutput = string(k.id), sig.ToolMeta, sig.RawOutput
	}
	// follow opens the compaction; when the emitter refuses, the line goes
	// nowhere, unless it is a start that the client sees as it came.
	follow := func() bool {
		if err := c.open(ctx, k, t, sig.Displayable, nil); err != nil {
			log.Warn("compaction not followed", "compaction", string(k.id), "error", err)
			d.fate, d.out = fateDrop, nil
			if sig.Kind == agents.Start && (p.verbatim || sig.Keep) {
				d.fate = fateForward
			}
			return false
		}
		return true
	}
	switch {
	case sig.Kind == agents.Continuation:
		sig.ID = k.id
		c.replay(ctx, k, p.def, emitter.Standard{}, protocol.Completed, "", sig, false)
		if sig.Pairs {
			// A command result replayed after it may belong to it.
			ts.pending[name] = append(ts.pending[name], k.id)
		}
		log.Info("replayed the agent's message as the completed compaction it stands for", "compaction", string(k.id))
	case sig.Kind == agents.Absorb:
		if sig.Claims {
			if n := len(ts.pending[agents.ClaudeContinuation]); n > 0 {
				ts.pending[agents.ClaudeContinuation] = ts.pending[agents.ClaudeContinuation][:n-1]
			}
		}
	case p.replaying:
		if p.verbatim {
			return // the agent's own lines show it
		}
		switch sig.Kind {
		case agents.Start:
			if p.idless {
				ts.pending[name] = append(ts.pending[name], k.id)
			}
		case agents.Progress:
		default:
			// History knows no user cancel; an interrupted compaction is
			// replayed as the cancel opencode itself records.
			status, reason := sig.Outcome(true)
			c.replay(ctx, k, p.def, p.form, status, reason, sig, true)
		}
	case p.shown == trackByAgent:
		// The agent settled it already: the client holds its one
		// terminal form (its own lines, forwarded).
	case p.shown == trackOpen:
		c.followOpen(ctx, k, p, sig, name, ts)
	default:
		c.followNew(ctx, k, p, sig, t, follow)
	}
}

// followOpen is a signal of a compaction the client sees open.
func (c *conn) followOpen(ctx context.Context, k trackKey, p *sigLine, sig agents.Signal, name agents.Translator, ts *transState) {
	switch sig.Kind {
	case agents.Start:
		c.router.learn(k, sig) // a repeated start (a re-sent tool call or marker)
	case agents.Progress:
		c.router.learn(k, sig)
		if sig.Facts != nil && ts.deferred[k.id] != nil {
			c.completeDeferred(ctx, k)
		}
	case agents.Done:
		if !p.verbatim {
			status, reason := sig.Outcome(p.userCancelled)
			c.settle(ctx, k, status, reason)
		}
	default:
		c.router.learn(k, sig)
		if p.verbatim && sig.Foreign {
			// The agent's line is no outcome a client knows: the form's own
			// terminal text follows it.
			c.router.render(k)
		}
		status, reason := sig.Outcome(p.userCancelled)
		if status == protocol.Completed && sig.FactsFollow && !p.verbatim && sig.Facts == nil && !c.router.hasFacts(k) {
			// Its facts follow in the next update: the completion waits
			// for them, briefly, so that the record carries them.
			c.deferComplete(k)
			return
		}
		c.settle(ctx, k, status, reason)
		if p.idless {
			ts.open[name] = slices.DeleteFunc(ts.open[name], func(x protocol.ID) bool { return x == k.id })
		}
	}
}

// followNew is a signal of a compaction the client has not seen.
func (c *conn) followNew(ctx context.Context, k trackKey, p *sigLine, sig agents.Signal, t *track, follow func() bool) {
	switch sig.Kind {
	case agents.Start:
		if follow() && p.idless {
			ts := c.transFor(k.session)
			ts.open[p.def.Name] = append(ts.open[p.def.Name], k.id)
		}
	case agents.Progress:
	case agents.Done:
		if p.verbatim {
			return // it already reads as finished; there is nothing to settle
		}
		t.afterFact = true
		if follow() {
			status, reason := sig.Outcome(p.userCancelled)
			var opts []emitter.SettleOption
			if sig.Summary != nil {
				opts = append(opts, emitter.Summary(sig.Summary...))
			}
			c.settle(ctx, k, status, reason, opts...)
		}
	default:
		if p.verbatim {
			return // the client saw no start, and the line is a complete outcome
		}
		// An outcome without a start: the client still sees a lifecycle,
		// in_progress then the outcome, since a live first update is never
		// terminal.
		if follow() {
			status, reason := sig.Outcome(p.userCancelled)
			c.settle(ctx, k, status, reason)
		}
	}
}

// ---- the emitter's lifecycle ----

// open starts following compaction k, shown as t says. Callers hold emu.
func (c *conn) open(ctx context.Context, k trackKey, t *track, displayable bool, meta protocol.Meta) error {
	c.router.add(k, t)
	opts := []emitter.StartOption{emitter.WithID(k.id)}
	if t.trigger != "" {
		opts = append(opts, emitter.WithTrigger(t.trigger))
	}
	if displayable {
		opts = append(opts, emitter.UserDisplayable())
	}
	if meta != nil {
		opts = append(opts, emitter.WithStartMeta(meta))
	}
	if t.background {
		// It outlives its turn: the client sees it once it settled.
		opts = append(opts, emitter.Background())
	}
	h, err := c.h.Start(ctx, k.session, opts...)
	if err != nil && !errors.Is(err, emitter.ErrUndeliverable) {
		c.router.remove(k)
		return err
	}
	c.router.setHandle(k, h)
	return nil
}

// settle applies the agent's own outcome of open compaction k. Callers
// hold emu.
func (c *conn) settle(ctx context.Context, k trackKey, status protocol.Status, reason string, opts ...emitter.SettleOption) {
	if c.router.hasFacts(k) {
		// The emitter times it, for the record.
		opts = append(opts, emitter.WithDetails(emitter.Details{}))
	}
	c.stopDeferred(k)
	h := c.router.handle(k)
	var err error
	switch status {
	case protocol.Completed:
		err = h.Complete(ctx, opts...)
	case protocol.Cancelled:
		err = h.Cancel(ctx, opts...)
	default:
		err = h.Fail(ctx, errors.New(reason), opts...)
	}
	if err != nil {
		c.log.Debug("settling failed", "session", k.session, "compaction", string(k.id), "error", err)
	}
}

// replay shows a settled compaction of a history replay: one terminal-first
// update in form r, no start. displayable says the summary is the agent's
// own (it passes); a summary the proxy derived goes through the summary
// policy. Callers hold emu.
func (c *conn) replay(ctx context.Context, k trackKey, def *agents.Def, r emitter.Renderer, status protocol.Status, reason string, sig agents.Signal, displayable bool) {
	t := &track{source: string(def.Name), r: r, trigger: sig.Trigger, facts: sig.Facts, afterFact: true}
	if def.ToolCall {
		t.toolID, t.toolMeta, t.rawOutput = string(k.id), sig.ToolMeta, sig.RawOutput
	}
	defer c.router.addTemp(k, t)()
	rec := emitter.Record{ID: k.id, Status: status, Error: reason, Trigger: sig.Trigger, Displayable: displayable, Summary: sig.Summary}
	if err := c.em.Session(k.session).Replay(ctx, rec); err != nil {
		c.log.Debug("replay failed", "session", k.session, "compaction", string(k.id), "error", err)
	}
}

// ---- the host's settlements ----

// settled is a compaction the proxy settled because the agent did not.
type settled struct {
	ev     emitter.Event
	source string
	idless bool
}

// beforeSettle is the host's Hooks.Before: before the proxy settles what
// is open in session sid for reason, a text awaiting its confirmation is
// forwarded, completions that waited for their facts complete (the agent
// did complete them), and a compaction tool call whose provider error the
// agent told in text fails with it. Callers hold emu.
func (c *conn) beforeSettle(ctx context.Context, sid string, reason error, why string) {
	if c.awaiting != nil && c.awaiting.sid == sid {
		c.releaseAwaiting()
	}
	ts, ok := c.trans[sid]
	if !ok {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(ts.deferred)) {
		c.completeDeferred(ctx, trackKey{sid, id})
	}
	if ts.toolErr == "" || errors.Is(reason, emitter.ErrCancelled) {
		return
	}
	text := ts.toolErr
	ts.toolErr = ""
	for _, id := range slices.Sorted(maps.Keys(ts.tools)) {
		k := trackKey{sid, protocol.ID(id)}
		if c.router.status(k) != trackOpen {
			continue
		}
		// Not the agent's own settlement (it never sent one): the proxy's,
		// with the agent's words.
		c.router.byProxy(func() {
			if err := c.router.handle(k).Fail(ctx, errors.New(text)); err != nil {
				c.log.Debug("settling failed", "session", sid, "compaction", id, "error", err)
			}
		})
		c.afterSettle(ctx, why)
	}
}

// afterSettle is the host's Hooks.After: it logs each compaction the
// proxy settled and forgets what waited for it; an ID-less one's outcome
// may still come from the agent (an orphan), to be dropped then. Callers
// hold emu.
func (c *conn) afterSettle(_ context.Context, why string) {
	for _, d := range c.router.takeSettled() {
		ev := d.ev
		errText, _ := ev.Error.Get()
		c.log.Warn("settled a compaction the agent left open",
			"session", ev.SessionID, "compaction", string(ev.ID), "source", d.source,
			"status", string(ev.Status), "error", errText, "when", why)
		c.stopDeferred(trackKey{ev.SessionID, ev.ID})
		if d.idless {
			tr := agents.Translator(d.source)
			ts := c.transFor(ev.SessionID)
			ts.open[tr] = slices.DeleteFunc(ts.open[tr], func(x protocol.ID) bool { return x == ev.ID })
			ts.orphans[tr] = append(ts.orphans[tr], orphan{turns: ts.turns})
		}
	}
}

// failedTurn is the reason a failed prompt response gives the compactions
// it leaves open: the error's own text (data.details, data.message or
// message) rather than a generic one. An error that is a translator's
// signal of a failed compaction (Qwen Code's failed automatic compression)
// is that compaction, failed, unless one of its form is open already.
// Callers hold emu.
func (c *conn) failedTurn(ctx context.Context, sid string, errMember []byte) error {
	text := agents.PromptErrorText(errMember)
	if text == "" {
		return c.p.cfg.turnReason
	}
	if def := c.tl.TurnError(text); def != nil {
		ts := c.transFor(sid)
		if form, verbatim := (view{c}).legacyForm(def); !verbatim && len(ts.open[def.Name]) == 0 {
			trigger, _ := def.TurnError(text)
			k := trackKey{sid, ts.mint(sid, def.Name, false)}
			t := &track{source: string(def.Name), idless: true, r: form, trigger: trigger, afterFact: true}
			if err := c.open(ctx, k, t, false, nil); err == nil {
				c.settle(ctx, k, protocol.Failed, text)
			}
		}
	}
	return errors.New(text)
}

// ---- a standard completion whose facts follow it ----

// awaitFacts keeps back the agent's completed update of open compaction
// p.k, whose facts it sends in a duplicate completed update (Claude ACP to
// a JetBrains AIR client): the compaction is rendered from now on, and
// completes with the update's summary and _meta once the facts arrive, the
// turn ends, or rawOutputWait passes. Callers hold emu.
func (c *conn) awaitFacts(p *stdLine) {
	var u struct {
		Summary protocol.Patch[[]protocol.ContentBlock] `json:"summary"`
		Meta    protocol.Meta                           `json:"_meta"`
	}
	if json.Unmarshal(p.raw, &u) != nil {
		return // classify read it; a line that does not read now is dropped whole
	}
	var opts []emitter.SettleOption
	if blocks, ok := u.Summary.Get(); ok {
		opts = append(opts, emitter.Summary(blocks...))
	} else if u.Summary.IsNull() {
		opts = append(opts, emitter.Summary())
	}
	if u.Meta != nil {
		opts = append(opts, emitter.WithSettleMeta(u.Meta))
	}
	c.router.learn(p.k, agents.Signal{Trigger: p.trigger})
	c.router.render(p.k)
	ts := c.transFor(p.k.session)
	if ts.factsOpts == nil {
		ts.factsOpts = map[protocol.ID][]emitter.SettleOption{}
	}
	ts.factsOpts[p.k.id] = opts
	c.deferComplete(p.k)
}

// factsArrived completes a compaction that waited for its facts, with
// them: they go into its record, and the update that brought them (its
// _meta the facts' own form) stands for the waiting one's _meta. Callers
// hold emu.
func (c *conn) factsArrived(ctx context.Context, p *stdLine) {
	c.router.learn(p.k, agents.Signal{Trigger: p.trigger, Facts: p.facts})
	var u struct {
		Meta protocol.Meta `json:"_meta"`
	}
	if json.Unmarshal(p.raw, &u) == nil && u.Meta != nil {
		ts := c.transFor(p.k.session)
		ts.factsOpts[p.k.id] = append(ts.factsOpts[p.k.id], emitter.WithSettleMeta(u.Meta))
	}
	c.completeDeferred(ctx, p.k)
}
