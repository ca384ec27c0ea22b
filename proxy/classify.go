package proxy

// Classifying an agent line (doc.go, "How a line goes through"): what the
// line is, for the policy. classify changes no state (its only writes are
// to the scratch memory it reads members with).

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/acpcompact/acpcompact/proxy/agents"
)

// note is a log line a decision asks for; act adds the line's side and
// number. A note without msg is none.
type note struct {
	level slog.Level
	msg   string
	attrs []any
}

func warn(msg string, attrs ...any) note { return note{slog.LevelWarn, msg, attrs} }

// decision is what classify makes of one agent message. For a line that
// is a batch it says only that: act then classifies the batch's messages
// one at a time, since what one of them means to the connection (an
// initialize answer) changes how the next is read.
type decision struct {
	fate fate
	do   action
	out  []byte // fateRewrite: a message of the proxy's in the line's place (nil: none)
	note note
	// batch: the line is a JSON-RPC batch; act classifies each message.
	batch bool
	// seen is the message as read, for the engine; nil when the line is
	// blank or could not be read.
	seen []byte
	// checked is what the checker sees of the line (with CheckClient, once
	// the client has it): the message as the client reads it, whether the
	// proxy could read it or not; nil for a blank line, which the client
	// skips.
	checked []byte
	// msg is what the engine reads of it. A response, or an idle
	// state_update, may end a turn: act settles the turn's compactions
	// before the line is written. alt, when set, is what a Go peer reads
	// of it, which may end a turn msg does not (foldAgent): the engine
	// reads both.
	msg       turn.Msg
	alt       *turn.Msg
	errMember []byte // a response's error member: the reason of a failed turn
	// batchable: the line may wait in the output buffer for the next one.
	batchable bool
	// confirmsAwaiting: the line confirms the awaiting line, which is replaced
	// rather than forwarded.
	confirmsAwaiting bool
	// toolErr is a provider's error text for act to keep (agents.ErrorText).
	toolErr, toolErrSession string
	// chunk is an agent_message_chunk's session, and whether its text is
	// empty, for act to keep (agents.ProseAfterEmptyChunk); "" for none.
	chunkSession string
	chunkEmpty   bool
	// What the lifecycle works on: the agent's standard update (std), or
	// a legacy signal (sig).
	std stdLine
	sig *sigLine
}

// stdLine is the agent's standard update, as the lifecycle follows it.
type stdLine struct {
	k        trackKey
	isUpdate bool
	status   protocol.Status
	raw      []byte // params.update, a part of the line
	content  []byte // a summary chunk's content, a part of the line
	epoch    uint64 // the replay in flight
	turn     *turnView
	// air, trigger and facts are what a completed update says to a
	// JetBrains AIR client (agents.AIRFacts), read only where the
	// profile says the facts follow (agents.RawOutputFollows).
	air     bool
	trigger protocol.Trigger
	facts   *agents.Facts
}

// sigLine is a recognised legacy signal, as the lifecycle follows it.
type sigLine struct {
	sid string
	def *agents.Def
	sig agents.Signal
	k   trackKey
	// idless: the agent's form carries no ID; k.id is the one the proxy
	// uses for it (see the bookkeeping below).
	idless bool
	// form renders the compaction in the client's form; verbatim: the
	// agent's own lines show it (a client without the capability, no
	// fallback), and form only adds the terminal form it never sent.
	form     emitter.Renderer
	verbatim bool
	// shown is how far the compaction got, as the client sees it.
	shown         trackStatus
	replaying     bool
	epoch         uint64
	userCancelled bool
	// The bookkeeping of ID-less forms, which act commits whatever becomes
	// of the line: k.id is the next minted ID (mint), or the newest start
	// of the replay (popPending, used up); orphans is how many of the
	// translator's orphans remain (-1: untouched).
	mint, popPending bool
	orphans          int
}

// view is the connection's state as classify and the recognisers read it:
// read only.
type view struct{ c *conn }

// turnView answers what classify asks the engine about one session's
// turn, each question once a line at most.
type turnView struct {
	e                                         *turn.Engine
	sid                                       string
	asked                                     uint8 // the questions already asked, one bit each
	inTurn, cancelled, afterCancel, replaying bool
	epoch                                     uint64
	cmd                                       string
}

const (
	askedInTurn = 1 << iota
	askedCancelled
	askedAfterCancel
	askedReplaying
	askedCommand
)

// turnOf is the turnView of session sid, in the connection's scratch
// memory: valid until the next line.
func (v view) turnOf(sid string) *turnView {
	t := &v.c.scratch.turn
	*t = turnView{e: v.c.e, sid: sid}
	return t
}

// first reports whether question bit is asked for the first time on this
// line, and notes that it is.
func (t *turnView) first(bit uint8) bool {
	f := t.asked&bit == 0
	t.asked |= bit
	return f
}

// ask answers question bit from *answer, asking the engine (of the
// session) the first time on this line.
func ask[T any](t *turnView, bit uint8, answer *T, engine func(sid string) T) T {
	if t.first(bit) {
		*answer = engine(t.sid)
	}
	return *answer
}

// running reports whether the session has a turn under way.
func (t *turnView) running() bool { return ask(t, askedInTurn, &t.inTurn, t.e.InTurn) }

// userCancelled reports whether the client cancelled the running turn.
func (t *turnView) userCancelled() bool { return ask(t, askedCancelled, &t.cancelled, t.e.Cancelled) }

// justCancelled reports whether the session is between turns right after
// a cancelled one.
func (t *turnView) justCancelled() bool {
	return ask(t, askedAfterCancel, &t.afterCancel, t.e.AfterCancel)
}

// command is the slash command of the prompt that runs the session's
// turn ("" for none, or no turn).
func (t *turnView) command() string { return ask(t, askedCommand, &t.cmd, t.e.Command) }

// replay reports whether a history replay of the session is in flight,
// and which.
func (t *turnView) replay() (bool, uint64) {
	if t.first(askedReplaying) {
		t.replaying, t.epoch = t.e.Replaying(t.sid)
	}
	return t.replaying, t.epoch
}

// facts is what the policy knows of any line: the connection's part.
func (v view) facts(kind lineKind, read readAs) lineFacts {
	return lineFacts{kind: kind, read: read, negotiated: v.c.em != nil, mode: v.c.mode}
}

// decide applies the policy to f: the line's fate, what the lifecycle
// does, and the rule's log line, with the attributes attrs makes (only
// then: most lines log nothing, and a line's path makes no garbage).
func (d *decision) decide(f *lineFacts, attrs func() []any) {
	r := judge(f)
	if r == nil {
		return
	}
	d.fate, d.do = r.fate, r.do
	if r.msg == "" {
		return
	}
	msg := r.msg
	if f.read != readWhole {
		msg = fmt.Sprintf(msg, f.how())
	}
	d.note = note{r.level, msg, attrs()}
}

// classify decides what becomes of agent line l (not a long one: see
// classifyHead), in d.
func (v view) classify(l *line, d *decision) {
	*d = decision{}
	switch {
	case isBlank(l.msg):
	case turn.IsBatch(l.msg):
		d.batch = true
	default:
		v.message(l.msg, readWhole, d)
	}
}

// element decides what becomes of one message of a batch. Nothing in a
// batch is translated or rewritten.
func (v view) element(elem []byte) decision {
	var d decision
	v.message(elem, readBatch, &d)
	return d
}

// message decides what becomes of one agent message: a line, or one
// message of a batch. d is zero.
func (v view) message(msg []byte, read readAs, d *decision) {
	c := v.c
	vals, err := c.apick.Pick(msg, agentSet)
	if err != nil {
		v.unreadable(msg, err, d)
		return
	}
	env := &c.aenv
	env.readAgent(vals, nil, &c.asid)
	d.seen, d.checked, d.errMember = msg, msg, env.v[aError]
	if c.tooDeep(&c.depth, msg) {
		d.checked = v.agentStandIn(env)
	}
	env.agentMsg(&d.msg)
	if v.fold(d, env, msg) {
		return
	}
	if read == readWhole {
		d.batchable = env.batchable()
	}
	if !env.hasMethod || env.method != turn.MethodUpdate {
		return
	}
	sid := env.sessionID
	switch env.kind {
	case protocol.KindUpdate, protocol.KindSummaryChunk:
		v.standard(d, env, read)
	case protocol.KindStateUpdate:
		// The engine ends a v2 turn at idle; act settles it first.
	default:
		if read == readWhole && sid != "" && env.v[aUpdate] != nil && c.em != nil && !c.tl.Empty() && skim.Exact(env.v[aSession]) {
			v.legacy(d, env, msg)
			if env.kind == "agent_message_chunk" && c.tl.Quirks()&agents.ProseAfterEmptyChunk != 0 {
				d.chunkSession, d.chunkEmpty = sid, string(env.v[aContentText]) == `""`
			}
		}
	}
}

// unreadable decides what becomes of a message the proxy cannot read,
// not even as leniently as its clients read: the worst case is taken. One
// that may carry a compaction update (mayCarryCompaction) is one at
// worst; anything else is forwarded as it came, and the checker sees it as
// the client receives it.
func (v view) unreadable(msg []byte, err error, d *decision) {
	d.checked = msg
	d.note = warn("malformed line; forwarded as is", "error", err, "text", clip(msg))
	if !mayCarryCompaction(msg) {
		return
	}
	f := v.facts(kindUnreadable, readWhole)
	d.decide(&f, func() []any { return []any{"error", err, "text", clip(msg)} })
}

// agentStandIn is what the checker sees of an agent message nested deeper
// than it reads: the members the proxy read of it, those nested too deep
// themselves left out (an answer's result or error by a placeholder).
func (v view) agentStandIn(env *envelope) []byte {
	c, vals := v.c, env.v
	shallow := func(raw []byte) []byte {
		if raw == nil || c.tooDeep(&c.depth, raw) {
			return nil
		}
		return raw
	}
	var params, result, errMember []byte
	if vals[aUpdate] != nil {
		params = makeStandIn("sessionId", vals[aSession], "update", makeStandIn(
			"sessionUpdate", vals[aKind], "state", vals[aState], "compactionId", vals[aCompactionID], "status", vals[aStatus],
			"toolCallId", vals[aToolCallID], "title", vals[aTitle], "content", shallow(vals[aContent])))
	} else if vals[aSession] != nil {
		params = makeStandIn("sessionId", vals[aSession])
	}
	if vals[aResult] != nil {
		if result = shallow(vals[aResult]); result == nil {
			result = []byte(`{}`)
		}
	}
	if vals[aError] != nil {
		if errMember = shallow(vals[aError]); errMember == nil {
			errMember = []byte(`{"code":-32603,"message":"(nested deeper than the checker reads)"}`)
		}
	}
	return makeStandIn("id", vals[aID], "method", vals[aMethod], "params", params, "result", result, "error", errMember)
}

// fold reads an agent message as a Go peer reads it (foldAgent), where
// that may change what the message means to the gate or to a turn, and
// reports whether that decides its fate. A message a Go client reads as a
// compaction update and the exact reading does not is, at worst, one (no
// client reads it as the ACP message it spells: member names are
// case-sensitive in ACP; the TypeScript SDK rejects it). An answer a Go
// peer reads as ending a turn goes to the engine too (alt).
//
// Only a message that may spell a compaction update or a state_update
// (maySpell), or has no method (a response: a Go peer reads a message with
// an exact method as having one), can read differently in either respect,
// so the rest is not read twice. For a capable client, to which the gate
// does not apply, only the latter are: looking for the spellings in every
// line would cost the hot path about a tenth of its time (docs/proxy.md,
// "Reading lines").
func (v view) fold(d *decision, env *envelope, msg []byte) bool {
	if env.isCompaction() || env.kind == protocol.KindStateUpdate {
		return false
	}
	gate := !v.knownCapable()
	if env.hasMethod && (!gate || !maySpell(msg)) {
		return false
	}
	c := v.c
	vals, err := c.fpick.Pick(msg, agentFoldSet)
	if err != nil {
		return false
	}
	m, compaction := foldAgent(vals)
	if compaction && gate {
		f := v.facts(kindFolded, readWhole)
		d.decide(&f, func() []any { return []any{"session", m.SessionID} })
		return true
	}
	if endsTurnDifferently(&m, &d.msg) {
		d.alt = &m
	}
	return false
}

// knownCapable reports whether the client is known to read compaction
// updates.
func (v view) knownCapable() bool { return v.c.em != nil && v.c.mode == capability.Standard }

// classifyHead decides what becomes of a line longer than the inspection
// limit, from its head: the engine reads what the head holds (the answer
// that ends a turn is settled before it), and a compaction update is
// judged unread. Anything else streams through.
func (v view) classifyHead(l *line) (d decision, standIn []byte) {
	c := v.c
	limit := c.p.cfg.maxLine
	pre, err := skim.PickPrefixUnbounded(l.msg, agentSet)
	if err != nil {
		v.unreadable(l.msg, err, &d)
		d.checked = nil // the checker cannot follow what it cannot read whole
		return d, nil
	}
	env := &c.aenv
	env.readAgent(pre.Values, pre.Started, &c.asid)
	d.seen = l.msg
	env.agentMsg(&d.msg)
	if env.response {
		// The checker follows the turn from a stand-in of the answer.
		answer, member := []byte(`{}`), "result"
		if d.msg.Failed {
			answer, member = []byte(`{"code":-32603,"message":"(longer than the proxy's inspection limit)"}`), "error"
		}
		standIn = makeStandIn("id", env.v[aID], member, answer)
	}
	if !env.isCompaction() {
		if !v.knownCapable() && maySpell(l.msg) {
			if fp, err := skim.PickPrefixUnbounded(l.msg, agentFoldSet); err == nil {
				if _, fc := foldAgent(fp.Values); fc {
					f := v.facts(kindFolded, readHead)
					d.decide(&f, func() []any { return []any{"limit", limit} })
					return d, standIn
				}
			}
		}
		d.note = note{slog.LevelDebug, "line longer than the inspection limit; followed from its head", []any{"limit", limit, "method", env.method}}
		return d, standIn
	}
	sid := env.sessionID
	f := v.facts(kindCompaction, readHead)
	f.inTurn = c.h.InTurn(sid)
	if id, _ := skim.String(pre.Values[aCompactionID]); id != "" {
		f.shown = c.router.status(trackKey{sid, protocol.ID(id)})
	}
	d.decide(&f, func() []any { return []any{"limit", limit, "session", sid} })
	return d, standIn
}

// standard reads a compaction_update or compaction_summary_chunk the
// agent sent itself, for the policy and the lifecycle.
func (v view) standard(d *decision, env *envelope, read readAs) {
	c := v.c
	sid := env.sessionID
	f := v.facts(kindCompaction, read)
	if read != readWhole {
		f.inTurn = c.h.InTurn(sid)
		d.decide(&f, func() []any { return []any{"session", sid} })
		return
	}
	// Forwarded as is, so only the ID and status are read (the line's one
	// pick read them): decoding a summary the proxy does not touch would
	// be wasted work.
	id, _ := skim.String(env.v[aCompactionID])
	st, _ := skim.String(env.v[aStatus])
	isUpdate := env.kind == protocol.KindUpdate
	// An ID that clients may decode otherwise than the proxy (an unpaired
	// surrogate, invalid UTF-8: two IDs Go reads as one, JSON.parse as
	// two) cannot be followed as they follow it: it is taken at its worst.
	f.malformed = sid == "" || id == "" || (isUpdate && st == "") ||
		!skim.Exact(env.v[aCompactionID]) || !skim.Exact(env.v[aSession])
	tv := v.turnOf(sid)
	k := trackKey{sid, protocol.ID(id)}
	d.std = stdLine{k: k, isUpdate: isUpdate, status: protocol.Status(st), raw: env.v[aUpdate], content: env.v[aContent], turn: tv}
	if !f.malformed && f.negotiated {
		f.replaying, d.std.epoch = tv.replay()
		f.inTurn = tv.running()
		f.shown, f.rendered = c.router.shown(k)
		f.chunk, f.terminal = !isUpdate, isUpdate && d.std.status.Terminal()
		if f.shown == trackNone && !f.replaying {
			f.afterCancel = tv.justCancelled()
		}
		if isUpdate && d.std.status == protocol.Completed && c.tl.Quirks()&agents.RawOutputFollows != 0 {
			p := &d.std
			p.air, p.trigger, p.facts = agents.AIRFacts(p.raw)
			ts, ok := c.trans[sid]
			f.factsAwaited = ok && ts.deferred[k.id] != nil && ts.factsOpts[k.id] != nil
			f.awaitsFacts = p.air && p.facts == nil && !f.factsAwaited
		}
	}
	d.decide(&f, func() []any { return []any{"session", sid, "compaction", id} })
}

// legacy reads an update for the agent's legacy signals, with its
// profile's recognisers (package agents), and decides what becomes of it.
func (v view) legacy(d *decision, env *envelope, msg []byte) {
	c := v.c
	sid := env.sessionID
	tv := v.turnOf(sid)
	st := &c.scratch.state
	*st = sessionView{c: c, sid: sid, turn: tv}
	u := &c.scratch.update
	*u = agents.Update{
		Session: sid, Kind: env.kind, Msg: msg, Raw: env.v[aUpdate],
		ContentType: env.v[aContentType], ContentText: env.v[aContentText],
		ToolCallID: env.v[aToolCallID], Title: env.v[aTitle], Status: env.v[aStatus],
		ToolName: env.v[aToolName], Marker: env.v[aMarker],
	}
	rec := c.tl.Recognise(st, u)
	if rec.Note != "" {
		d.toolErr, d.toolErrSession = rec.Note, sid
	}
	if rec.Def != nil {
		v.signal(d, sid, rec.Def, rec.Signal, tv)
	}
}

// signal reads one recognised legacy signal of session sid for the policy
// and the lifecycle: the compaction it is about (for an ID-less form,
// the one open of its kind, or a new one), and how far the client saw it
// get.
func (v view) signal(d *decision, sid string, def *agents.Def, sig agents.Signal, tv *turnView) {
	c := v.c
	ts := c.trans[sid] // nil for a session without translator state yet
	replaying, epoch := tv.replay()
	p := &sigLine{sid: sid, def: def, sig: sig, replaying: replaying, epoch: epoch, orphans: -1}
	p.form, p.verbatim = v.legacyForm(def)
	f := v.facts(kindSignal, readWhole)
	f.replaying, f.progress = replaying, sig.Kind == agents.Progress
	name := def.Name
	switch {
	case sig.StandIn:
		f.kind = kindStandIn
	case sig.Kind == agents.Await:
		f.kind = kindAwaits
	}
	if sig.Confirms && c.awaiting != nil && c.awaiting.sid == sid {
		// Confirmed: the awaiting text was the agent's signal.
		d.confirmsAwaiting = true
	}
	id, idless := sig.ID, sig.ID == ""
	if idless {
		switch sig.Kind {
		case agents.Await, agents.Absorb:
		case agents.Start, agents.Done, agents.Continuation:
			id, p.mint = ts.nextID(sid, name, replaying, epoch), true
		default:
			top, pending := ts.pendingTop(name, epoch)
			last, open := ts.lastOpen(name)
			switch {
			case replaying && pending:
				id, p.popPending = top, true
			case open:
				id = last
			default:
				// Nothing of its kind is open: the late outcome of one the
				// proxy settled (an orphan), or prose that only looks like
				// an outcome.
				remain, ok := ts.orphanFor(name, tv.running)
				p.orphans = remain
				d.sig = p
				if ok {
					f.shown = trackByProxy
					d.decide(&f, func() []any { return []any{"session", sid, "translator", string(name)} })
				}
				return
			}
		}
	}
	p.k, p.idless = trackKey{sid, id}, idless
	d.sig = p
	if f.kind == kindSignal && !replaying {
		p.shown = c.router.status(p.k)
		f.shown = p.shown
		if p.shown == trackNone && !f.progress {
			f.afterCancel = tv.justCancelled()
		}
		if p.shown == trackOpen || sig.Kind == agents.Done || sig.Kind >= agents.Completed && sig.Kind <= agents.Aborted {
			p.userCancelled = tv.userCancelled()
		}
	}
	d.decide(&f, func() []any { return []any{"session", sid, "translator", string(name), "compaction", string(id)} })
	if d.do == doSignal && d.fate == fateRewrite {
		// What the proxy writes replaces the line: its rest, when it
		// carried more than the signal; or the proxy writes before it and
		// the line goes on, when it says more than the signal.
		if sig.Keep {
			d.fate = fateForward
		} else {
			d.out = sig.Rest
		}
	}
}

// legacyForm is how a translated compaction of def is shown: standard
// updates to a capable client, the configured fallback to one without the
// capability, else the agent's own legacy lines (verbatim), with r
// rendering only a terminal form the proxy must add.
func (v view) legacyForm(def *agents.Def) (r emitter.Renderer, verbatim bool) {
	switch v.c.mode {
	case capability.Standard:
		return emitter.Standard{}, false
	case capability.Fallback:
		return v.c.p.cfg.fallback, false
	}
	if def.Synth != nil {
		return def.Synth, true
	}
	return fallback.None{}, true
}

var errInvalidBatch = errors.New("invalid batch")
