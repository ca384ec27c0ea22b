package proxy

// The settle path: how act drives the emitter through a compaction's
// lifecycle, and who settled what. The agent's own outcomes are applied
// with the emitter's Complete, Fail or Cancel; the proxy's own settlements
// (the end of a turn, a cancel's grace, a session's close, the end of the
// agent's output) carry a settling in their context, which tells the
// router that they are the proxy's and brings back what they settled.

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// settling is a settlement the proxy makes of its own accord. The router
// adds each compaction it settles to done.
type settling struct {
	why  string // for the log line of each compaction settled
	done []settled
}

// settled is a compaction the proxy settled because the agent did not.
type settled struct {
	ev     emitter.Event
	source string
	idless bool
}

type settlingKey struct{}

func withSettling(ctx context.Context, s *settling) context.Context {
	return context.WithValue(ctx, settlingKey{}, s)
}

func settlingFrom(ctx context.Context) *settling {
	s, _ := ctx.Value(settlingKey{}).(*settling)
	return s
}

// settledByProxy reports whether a Settled event is the proxy's doing: a
// settlement the emitter made itself (SettleAll, which also closes a
// session) is, and so is one the proxy made under a settling (a failure
// with the agent's own error text); the agent's outcomes, applied outside
// one, are not.
func settledByProxy(ctx context.Context, ev emitter.Event) bool {
	return ev.SettledBy != emitter.SettledByRuntime || settlingFrom(ctx) != nil
}

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
	_, err := c.em.Session(k.session).Start(ctx, opts...)
	if err != nil && !errors.Is(err, emitter.ErrUndeliverable) {
		c.router.remove(k)
		return err
	}
	// Started in a cancelled turn whose grace ran out, it gets one of its
	// own.
	c.e.Started(k.session)
	c.armHeartbeat()
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
	s := c.em.Session(k.session)
	var err error
	switch status {
	case protocol.Completed:
		err = s.Complete(ctx, k.id, opts...)
	case protocol.Cancelled:
		err = s.Cancel(ctx, k.id, opts...)
	default:
		err = s.Fail(ctx, k.id, errors.New(reason), opts...)
	}
	if err != nil {
		c.log.Debug("settling failed", "session", k.session, "compaction", string(k.id), "error", err)
	}
}

// replay shows a settled compaction of a history replay: one terminal-first
// update in form r, no start. displayable says the summary is the agent's
// own (it passes); a summary the proxy derived goes through the summary
// policy. Callers hold emu.
func (c *conn) replay(ctx context.Context, k trackKey, tr *translatorDef, r emitter.Renderer, status protocol.Status, reason string, sig signal, displayable bool) {
	t := &track{source: string(tr.name), r: r, trigger: sig.trigger, facts: sig.facts, afterFact: true}
	if tr.toolCall {
		t.toolID, t.toolMeta, t.rawOutput = string(k.id), sig.toolMeta, sig.rawOutput
	}
	defer c.router.addTemp(k, t)()
	rec := emitter.Record{ID: k.id, Status: status, Error: reason, Trigger: sig.trigger, Displayable: displayable, Summary: sig.summary}
	if err := c.em.Session(k.session).Replay(ctx, rec); err != nil {
		c.log.Debug("replay failed", "session", k.session, "compaction", string(k.id), "error", err)
	}
}

// settleSession ends every open compaction of a session: cancelled for
// emitter.ErrCancelled, otherwise failed with reason; why says when, for
// the log. Callers hold emu.
func (c *conn) settleSession(ctx context.Context, sid string, reason error, why string) {
	if c.em == nil {
		return
	}
	c.beforeSettle(ctx, sid, reason, why)
	s := &settling{why: why}
	if _, err := c.em.Session(sid).SettleAll(withSettling(ctx, s), reason); err != nil {
		c.log.Debug("settling failed", "session", sid, "error", err)
	}
	c.settledAll(s)
}

// closeSession ends a session the agent closed: a compaction opened
// between turns ends with it, and the emitter, the router and the
// translators forget it, so that the proxy's memory is bounded by the
// sessions that are live, not by every session the connection saw.
// Callers hold emu.
func (c *conn) closeSession(ctx context.Context, sid string) {
	if c.em != nil {
		const why = "the agent answered session/close"
		c.beforeSettle(ctx, sid, c.p.cfg.turnReason, why)
		s := &settling{why: why}
		if _, err := c.em.CloseSession(withSettling(ctx, s), sid, c.p.cfg.turnReason); err != nil {
			c.log.Debug("settling failed", "session", sid, "error", err)
		}
		c.settledAll(s)
	}
	delete(c.trans, sid)
	c.router.forget(sid)
}

// settledAll logs each compaction a settling settled and forgets what
// waited for it; an ID-less one's outcome may still come from the agent
// (an orphan), to be dropped then. Callers hold emu.
func (c *conn) settledAll(s *settling) {
	for _, d := range s.done {
		ev := d.ev
		errText, _ := ev.Error.Get()
		c.log.Warn("settled a compaction the agent left open",
			"session", ev.SessionID, "compaction", string(ev.ID), "source", d.source,
			"status", string(ev.Status), "error", errText, "when", s.why)
		c.stopDeferred(trackKey{ev.SessionID, ev.ID})
		if d.idless {
			tr := Translator(d.source)
			ts := c.transFor(ev.SessionID)
			ts.open[tr] = slices.DeleteFunc(ts.open[tr], func(x protocol.ID) bool { return x == ev.ID })
			ts.orphans[tr] = append(ts.orphans[tr], orphan{turns: ts.turns})
		}
	}
	s.done = nil
}

// beforeSettle runs before the proxy settles what is open in session sid
// for reason: completions that waited for their facts complete (the agent
// did complete them), a held text is forwarded, and a compaction tool call
// whose provider error the agent told in text fails with it. Callers hold
// emu.
func (c *conn) beforeSettle(ctx context.Context, sid string, reason error, why string) {
	if c.held != nil && c.held.sid == sid {
		c.releaseHeld()
	}
	ts, ok := c.trans[sid]
	if !ok {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(ts.deferred)) {
		c.completeDeferred(ctx, trackKey{sid, id})
	}
	if ts.toolErr != "" && !errors.Is(reason, emitter.ErrCancelled) {
		text := ts.toolErr
		ts.toolErr = ""
		for _, id := range slices.Sorted(maps.Keys(ts.tools)) {
			k := trackKey{sid, protocol.ID(id)}
			if c.router.status(k) != trackOpen {
				continue
			}
			// Not the agent's own settlement (it never sent one): the
			// proxy's, with the agent's words.
			s := &settling{why: why}
			if err := c.em.Session(sid).Fail(withSettling(ctx, s), k.id, errors.New(text)); err != nil {
				c.log.Debug("settling failed", "session", sid, "compaction", id, "error", err)
			}
			c.settledAll(s)
		}
	}
}

// failedTurn is the reason a failed prompt response gives the compactions
// it leaves open: the error's own text (data.details, data.message or
// message) rather than a generic one. An error that is a translator's
// signal of a failed compaction (Qwen Code's failed automatic compression)
// is that compaction, failed, unless one of its form is open already.
// Callers hold emu.
func (c *conn) failedTurn(ctx context.Context, sid string, errMember []byte, reason error) error {
	text := promptErrorText(errMember)
	if text == "" {
		return reason
	}
	for i := range translatorTable {
		tr := &translatorTable[i]
		if tr.turnError == nil || c.tl.on&tr.bit == 0 || !tr.turnError(text) {
			continue
		}
		ts := c.transFor(sid)
		if form, verbatim := (view{c}).legacyForm(tr); !verbatim && len(ts.open[tr.name]) == 0 {
			k := trackKey{sid, ts.mint(sid, tr.name, false)}
			t := &track{source: string(tr.name), idless: true, r: form, trigger: protocol.Auto, afterFact: true}
			if err := c.open(ctx, k, t, false, nil); err == nil {
				c.settle(ctx, k, protocol.Failed, text)
			}
		}
	}
	return errors.New(text)
}
