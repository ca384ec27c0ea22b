package proxy

// Classifying, the second stage of the agent's line path (read -> classify
// -> act): what becomes of one agent message, decided from the message and
// the connection's state, and nothing else. classify changes no state (its
// only writes are to the scratch memory it reads members with): every
// change, to the engine, the emitter, the router or the translators' state,
// and every write, is act's, carrying out the decision.

import (
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/acpcompact/acpcompact/protocol"
)

// fate is what becomes of the agent's line itself.
type fate uint8

const (
	// fateForward: the line goes to the client as it came.
	fateForward fate = iota
	// fateRewrite: the line is replaced by what the proxy makes of it (the
	// decision's out, and what the emitter renders as act carries the
	// decision out), which may be nothing.
	fateRewrite
	// fateHold: the line waits (codex's text, until the next line confirms
	// it or not). Where a message's fate depends on whether its session
	// has a turn running, classify asks the turnView.
	fateHold
	// fateDrop: the line goes nowhere; the decision's note says why.
	fateDrop
)

// note is a log line a decision asks for; act adds the line's side and
// number. A note without msg is none.
type note struct {
	level slog.Level
	msg   string
	attrs []any
}

func warn(msg string, attrs ...any) note  { return note{slog.LevelWarn, msg, attrs} }
func info(msg string, attrs ...any) note  { return note{slog.LevelInfo, msg, attrs} }
func debug(msg string, attrs ...any) note { return note{slog.LevelDebug, msg, attrs} }

// decision is what classify makes of one agent message. For a line that
// is a batch it says only that: act then classifies the batch's messages
// one at a time, since what one of them means to the connection (an
// initialize answer) changes how the next is read.
type decision struct {
	fate fate
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
	// confirmsHeld: the line confirms the held line (codex's text), which
	// is replaced rather than forwarded.
	confirmsHeld bool
	// toolErr is a provider's error text for act to keep (quirkErrorText).
	toolErr, toolErrSession string
	// What act does to the compaction state: for the agent's standard
	// update to a capable client (std), or to a client without the
	// capability (gate), or for a legacy signal (sig). At most one is set.
	std  *stdPlan
	gate *gatePlan
	sig  *sigPlan
}

// view is the connection's state as classify and the recognisers read it:
// read only.
type view struct{ c *conn }

// turnView answers what classify asks the engine about one session's
// turn, each question once a line at most. It is the one place that asks:
// a decision that depends on whether the session has a turn running, was
// cancelled, has just ended a cancelled one, or is replaying its history,
// reads it here.
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

// running reports whether the session has a turn under way.
func (t *turnView) running() bool {
	if t.asked&askedInTurn == 0 {
		t.inTurn, t.asked = t.e.InTurn(t.sid), t.asked|askedInTurn
	}
	return t.inTurn
}

// userCancelled reports whether the client cancelled the running turn.
func (t *turnView) userCancelled() bool {
	if t.asked&askedCancelled == 0 {
		t.cancelled, t.asked = t.e.Cancelled(t.sid), t.asked|askedCancelled
	}
	return t.cancelled
}

// justCancelled reports whether the session is between turns right after
// a cancelled one: a signal now, of a compaction nobody saw start, is a
// straggler of that turn.
func (t *turnView) justCancelled() bool {
	if t.asked&askedAfterCancel == 0 {
		t.afterCancel, t.asked = t.e.AfterCancel(t.sid), t.asked|askedAfterCancel
	}
	return t.afterCancel
}

// command is the slash command of the prompt that runs the session's
// turn ("" for none, or no turn).
func (t *turnView) command() string {
	if t.asked&askedCommand == 0 {
		t.cmd, t.asked = t.e.Command(t.sid), t.asked|askedCommand
	}
	return t.cmd
}

// replay reports whether a history replay of the session is in flight,
// and which.
func (t *turnView) replay() (bool, uint64) {
	if t.asked&askedReplaying == 0 {
		t.replaying, t.epoch = t.e.Replaying(t.sid)
		t.asked |= askedReplaying
	}
	return t.replaying, t.epoch
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
		v.message(l.msg, true, d)
	}
}

// element decides what becomes of one message of a batch. Nothing in a
// batch is translated; a compaction update that a v1 client without the
// capability may not receive is dropped from it, since it cannot be
// rewritten there.
func (v view) element(elem []byte) decision {
	var d decision
	v.message(elem, false, &d)
	return d
}

// message decides what becomes of one agent message: a line, or (not
// whole) one message of a batch. d is zero.
func (v view) message(msg []byte, whole bool, d *decision) {
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
	if env.isCompaction() && (c.em == nil || (!whole && !c.capable)) {
		d.fate = fateDrop
		switch {
		case c.em == nil:
			d.note = warn("dropped a compaction update sent before the initialize exchange completed: the client's capability is not known yet", "session", env.sessionID)
		default:
			d.note = warn("dropped a compaction update inside a batch: the client lacks the capability", "session", env.sessionID)
		}
		return
	}
	if !whole {
		if env.isCompaction() && !c.inTurn(env.sessionID) {
			// Unfollowed inside a batch, so it cannot be held either:
			// forwarded, it would reach the client between turns.
			d.fate = fateDrop
			d.note = warn("dropped a compaction update inside a batch sent between turns: it can be neither followed nor held", "session", env.sessionID)
		}
		return
	}
	d.batchable = env.batchable()
	if env.hasMethod && env.method == turn.MethodUpdate && c.em != nil {
		v.update(d, env, msg)
	}
}

// unreadable decides what becomes of a message the proxy cannot read,
// not even as leniently as its clients read: the worst case is taken. One
// that may carry a compaction update (mayCarryCompaction) never reaches a
// client that may lack the capability: a more lenient reader could read
// it so. Anything else is forwarded as it came, and the checker sees it as
// the client receives it.
func (v view) unreadable(msg []byte, err error, d *decision) {
	if mayCarryCompaction(msg) && !v.knownCapable() {
		d.fate = fateDrop
		d.note = warn("dropped an unreadable line that may carry a compaction update: the client may lack the capability",
			"error", err, "text", clip(msg))
		return
	}
	d.checked = msg
	d.note = warn("malformed line; forwarded as is", "error", err, "text", clip(msg))
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

// knownCapable reports whether the client is known to read compaction
// updates: negotiated, v2 or v1 with the capability.
func (v view) knownCapable() bool { return v.c.em != nil && v.c.capable }

// fold reads an agent message as a Go peer reads it (foldAgent), where
// that may change what the message means to the gate or to a turn, and
// reports whether that decides its fate. For a client that may lack the
// capability, a message a Go client reads as a compaction update and the
// exact reading does not is dropped: the proxy could neither rewrite nor
// follow it, and no client reads it as the ACP message it spells (member
// names are case-sensitive in ACP; the TypeScript SDK rejects it). An
// answer a Go peer reads as ending a turn goes to the engine too (alt).
//
// Only a message that may spell a compaction update or a state_update
// (maySpell), or has no method (a response: a Go peer reads a message with
// an exact method as having one), can read differently in either respect,
// so the rest is not read twice. For a capable client, to which the gate
// does not apply, only the latter are: looking for the spellings in every
// line would cost the hot path about a tenth of its time (docs/proxy.md, "Reading
// lines").
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
		d.fate = fateDrop
		d.note = warn("dropped a line that Go clients read as a compaction update: its member names match only when case is ignored",
			"session", m.SessionID)
		return true
	}
	if endsTurnDifferently(&m, &d.msg) {
		d.alt = &m
	}
	return false
}

// classifyHead decides what becomes of a line longer than the inspection
// limit, from its head: the engine reads what the head holds (the answer
// that ends a turn is settled before it), and a compaction update that a
// v1 client without the capability may not receive is dropped, since it
// can neither be forwarded nor, unread, rewritten. Anything else streams
// through.
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
	compaction := env.isCompaction()
	if !compaction && !v.knownCapable() && maySpell(l.msg) {
		if fp, err := skim.PickPrefixUnbounded(l.msg, agentFoldSet); err == nil {
			if _, fc := foldAgent(fp.Values); fc {
				d.fate = fateDrop
				d.note = warn("dropped a line that Go clients read as a compaction update: its member names match only when case is ignored", "limit", limit)
				return d, standIn
			}
		}
	}
	switch {
	case !compaction:
		d.note = debug("line longer than the inspection limit; followed from its head", "limit", limit, "method", env.method)
	case !v.knownCapable():
		d.fate = fateDrop
		d.note = warn("dropped a compaction update longer than the inspection limit: the client may lack the capability, and it cannot be rewritten unread",
			"limit", limit, "session", env.sessionID)
	case !c.inTurn(env.sessionID):
		// Unread, it cannot be held for the next turn; forwarded, it
		// would reach the client between turns.
		d.fate = fateDrop
		d.note = warn("dropped a compaction update longer than the inspection limit sent between turns: it can be neither read nor held",
			"limit", limit, "session", env.sessionID)
	default:
		id, _ := skim.String(pre.Values[aCompactionID])
		if id != "" && c.router.status(trackKey{env.sessionID, protocol.ID(id)}) == trackByProxy {
			d.fate = fateDrop
			d.note = info("dropped the agent's update of a compaction the proxy already settled", "limit", limit, "session", env.sessionID, "compaction", id)
			break
		}
		d.note = info("compaction update longer than the inspection limit forwarded unread; its compaction is not followed", "limit", limit, "session", env.sessionID)
	}
	return d, standIn
}

// update classifies an agent session/update once the connection is
// negotiated.
func (v view) update(d *decision, env *envelope, msg []byte) {
	c := v.c
	sid, kind := env.sessionID, env.kind
	switch kind {
	case protocol.KindUpdate, protocol.KindSummaryChunk:
		if sid == "" {
			// Which session it belongs to is unknown, so it can be neither
			// followed nor rewritten. Forwarded, it would pass the gate, or
			// open a compaction nobody settles for a client that reads it
			// more leniently than the proxy (the TypeScript SDK rejects it).
			d.fate = fateDrop
			d.note = warn("dropped a malformed compaction update: its sessionId is missing or not a string")
			return
		}
		v.standard(d, env, msg)
		return
	case protocol.KindStateUpdate:
		// The engine ends a v2 turn at idle; act settles it first.
		return
	}
	if sid == "" || env.v[aUpdate] == nil || c.tl.on == 0 {
		return
	}
	r := &c.scratch.reading
	*r = reading{sid: sid, kind: kind, env: env, msg: msg, turn: v.turnOf(sid)}
	rec := v.recognise(r)
	if rec.toolErr != "" {
		d.toolErr, d.toolErrSession = rec.toolErr, sid
	}
	if rec.tr != nil {
		v.signal(d, sid, rec.tr, rec.sig, r.turn)
	}
}

// ---- the agent's own standard updates ----

// stdOp is what act does for the agent's own standard update to a capable
// client.
type stdOp uint8

const (
	stdNone       stdOp = iota
	stdOpen             // first sight of an ID: the client opens the entity; follow it
	stdSettle           // the agent settles an open compaction itself
	stdOpenSettle       // a terminal-first update: follow its ID, settled
	stdKeepChunk        // a replayed summary chunk, kept for its terminal update
	stdTakeChunks       // a replayed terminal update took the kept chunks
)

type stdPlan struct {
	op      stdOp
	k       trackKey
	status  protocol.Status
	epoch   uint64 // the replay (stdKeepChunk, stdTakeChunks)
	content []byte // stdKeepChunk: the chunk's content, a part of the line
}

// gatePlan is the agent's standard update to a v1 client without the
// capability: rewritten into the fallback, never forwarded.
type gatePlan struct {
	sid  string
	raw  []byte // params.update, a part of the line
	turn *turnView
}

// standard classifies a compaction_update or compaction_summary_chunk the
// agent sent itself. A capable client gets it unchanged while the proxy
// follows its ID, so that one left open can be settled and a second
// terminal update dropped; a v1 client without the capability must never
// receive it, so it is rewritten into the fallback.
func (v view) standard(d *decision, env *envelope, msg []byte) {
	c := v.c
	sid, kind := env.sessionID, env.kind
	tv := v.turnOf(sid)
	if !c.capable {
		d.fate = fateRewrite
		d.gate = &gatePlan{sid: sid, raw: env.v[aUpdate], turn: tv}
		return
	}
	// Forwarded as is, so only the ID and status are read (the line's one
	// pick read them): decoding a summary the proxy does not touch would
	// be wasted work.
	id, _ := skim.String(env.v[aCompactionID])
	st, _ := skim.String(env.v[aStatus])
	if id == "" || (kind == protocol.KindUpdate && st == "") {
		// It cannot be followed, so it is not forwarded either: a client
		// that reads it more leniently than the proxy (a Go client reads
		// "CompactionId" as compactionId) would see a compaction nobody
		// settles. The TypeScript SDK rejects it.
		d.fate = fateDrop
		d.note = warn("dropped a malformed compaction update: its compactionId or status is missing or not a string", "session", sid)
		return
	}
	isUpdate, status, k := kind == protocol.KindUpdate, protocol.Status(st), trackKey{sid, protocol.ID(id)}
	if replaying, epoch := tv.replay(); replaying {
		v.replayedStandard(d, k, isUpdate, status, epoch, env, msg)
		return
	}
	if !tv.running() || c.router.rendered(k) {
		// Between turns nothing about compaction reaches the client: the
		// update goes through the emitter, which holds it until the
		// session's next turn, and so do the later updates of a
		// compaction it holds or held.
		d.fate = fateRewrite
		d.gate = &gatePlan{sid: sid, raw: env.v[aUpdate], turn: tv}
		return
	}
	switch c.router.status(k) {
	case trackByProxy:
		// The client already holds this compaction's one terminal
		// update; a later one would contradict it or read as a new turn.
		d.fate = fateDrop
		d.note = info("dropped the agent's update of a compaction the proxy already settled", "session", sid, "compaction", id)
	case trackByAgent:
		// The agent settled it already (Claude ACP 0.101 sends a second,
		// field-less completed): exactly one terminal update per ID.
		d.fate = fateDrop
		d.note = debug("dropped the agent's update of a compaction it already settled", "session", sid, "compaction", id, "status", st)
	case trackOpen:
		if isUpdate && status.Terminal() {
			// The agent settles it itself; the emitter only forgets it.
			d.std = &stdPlan{op: stdSettle, k: k, status: status}
		}
	default:
		if tv.justCancelled() {
			d.fate = fateDrop
			d.note = stragglerNote(sid, k.id, sourceStandard)
			return
		}
		if isUpdate && status.Terminal() {
			// A terminal-first update leaves nothing open, but its ID is
			// settled: a repeat of it is dropped.
			d.std = &stdPlan{op: stdOpenSettle, k: k, status: status}
			return
		}
		// First sight of an ID (an update or a chunk) opens the entity on
		// the client; follow it. An ID the agent settled before is refused
		// by the emitter and simply not followed again.
		d.std = &stdPlan{op: stdOpen, k: k}
	}
}

// stragglerNote: nothing about compaction may reach the client after its
// turn ended, so a signal of a compaction the client never saw start,
// arriving right after a cancelled turn of the session (an agent
// reporting what it did while the user cancelled), is dropped.
func stragglerNote(sid string, id protocol.ID, source string) note {
	return info("dropped a compaction signal that arrived after the cancelled turn ended, for a compaction the client never saw start",
		"session", sid, "compaction", string(id), "source", source)
}

// replayedStandard classifies the agent's own update during a history
// replay for a capable client. A replay shows settled compactions: a
// terminal update is forwarded; an in_progress one is a compaction still
// running elsewhere, which no turn of this connection will settle, so it
// is left out, as a client without the capability gets it. Summary chunks
// wait for their terminal update, which gets them as its summary when it
// leaves the summary out.
func (v view) replayedStandard(d *decision, k trackKey, isUpdate bool, status protocol.Status, epoch uint64, env *envelope, msg []byte) {
	if !isUpdate {
		d.fate = fateDrop
		d.std = &stdPlan{op: stdKeepChunk, k: k, epoch: epoch, content: env.v[aContent]}
		return
	}
	chunks := v.c.trans[k.session].chunksOf(k.id, epoch)
	d.std = &stdPlan{op: stdTakeChunks, k: k, epoch: epoch}
	if !status.Terminal() {
		d.fate = fateDrop
		d.note = debug("left out a replayed compaction that is not settled", "session", k.session, "compaction", string(k.id))
		return
	}
	if len(chunks) == 0 {
		return
	}
	var u struct {
		Summary json.RawMessage `json:"summary"`
	}
	if json.Unmarshal(env.v[aUpdate], &u) != nil || u.Summary != nil {
		return // it says what its summary is
	}
	if out := withSummary(msg, chunks); out != nil {
		d.fate, d.out = fateRewrite, out
	}
}

// withSummary returns msg, a compaction_update, with summary set to blocks
// (nil when msg cannot be read so).
func withSummary(msg []byte, blocks []json.RawMessage) []byte {
	return editUpdate(msg, func(upd map[string]json.RawMessage) bool {
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

// ---- legacy signals ----

// sigStep is what act does for a legacy signal.
type sigStep uint8

const (
	stepNone         sigStep = iota
	stepContinuation         // replay Claude's continuation as one completed compaction
	stepReplay               // replay a settled compaction, terminal-first
	stepLearn                // a repeated start: keep what it says
	stepProgress             // keep what it says; a completion that waited for its facts completes
	stepStart                // open
	stepDone                 // open after the fact, and settle as the agent said
	stepOutcome              // settle (opened first when the client saw no start)
	stepAbsorb               // leave out a replayed line that belongs to a compaction already shown
)

// sigPlan is what act does for a recognised legacy signal.
type sigPlan struct {
	tr       *translatorDef
	sig      signal
	sid      string
	k        trackKey
	idless   bool
	form     emitter.Renderer
	verbatim bool
	step     sigStep
	status   protocol.Status
	reason   string
	// openFirst: an outcome the client saw no start of (stepOutcome).
	openFirst bool
	// unfollowed is the line's fate if the compaction cannot be followed
	// (the emitter refuses its start).
	unfollowed fate
	// The bookkeeping of ID-less forms, which act commits whatever becomes
	// of the line: k.id is the next minted ID (mint), or the newest start
	// of the replay (popPending, used up); a start of the replay is kept
	// for its outcome (pushPending); orphans is how many of the
	// translator's orphans remain (-1: untouched).
	replaying        bool
	epoch            uint64
	mint, popPending bool
	pushPending      bool
	orphans          int
}

// legacyForm is how a translated compaction of tr is shown: standard
// updates to a capable client, the configured fallback to one without the
// capability, else the agent's own legacy lines (verbatim), with r
// rendering only a terminal form the proxy must add.
func (v view) legacyForm(tr *translatorDef) (r emitter.Renderer, verbatim bool) {
	switch {
	case v.c.capable:
		return emitter.Standard{}, false
	case v.c.p.cfg.fallback != nil:
		return v.c.p.cfg.fallback, false
	}
	if tr.synth != nil {
		return tr.synth, true
	}
	return emitter.None{}, true
}

// signal classifies one recognised legacy signal of session sid.
func (v view) signal(d *decision, sid string, tr *translatorDef, sig signal, tv *turnView) {
	c := v.c
	ts := c.trans[sid] // nil for a session without translator state yet
	form, verbatim := v.legacyForm(tr)
	replaying, epoch := tv.replay()
	p := &sigPlan{tr: tr, sig: sig, sid: sid, form: form, verbatim: verbatim, replaying: replaying, epoch: epoch, orphans: -1}
	d.sig = p
	// pass is what becomes of the agent's own line once the signal is
	// carried out.
	pass := func() {
		if verbatim || sig.keep {
			d.fate = fateForward
			return
		}
		d.fate, d.out = fateRewrite, sig.rest
	}
	name := tr.name

	switch sig.kind {
	case sigHold:
		if verbatim {
			return // it already reads as finished; there is nothing to settle
		}
		d.fate = fateHold
		return
	case sigAbsorb:
		if !c.capable || !replaying {
			return // a client without the capability gets the agent's lines unchanged
		}
		p.step, d.fate = stepAbsorb, fateRewrite
		return
	case sigContinuation:
		if !c.capable || !replaying {
			return // a client without the capability gets the agent's lines unchanged
		}
		p.k = trackKey{sid, sig.id}
		if sig.id == "" {
			p.k.id, p.mint = ts.nextID(sid, name, true, epoch), true
		}
		p.step, d.fate = stepContinuation, fateRewrite
		return
	}
	if sig.confirms && c.held != nil && c.held.sid == sid {
		// Confirmed: the held text was the agent's signal.
		d.confirmsHeld = true
	}

	id, idless := sig.id, sig.id == ""
	if idless {
		switch sig.kind {
		case sigStart, sigDone:
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
				remain, ok := ts.orphanFor(name, tv.running)
				p.orphans = remain
				if ok {
					d.fate = fateDrop
					d.note = info("dropped the agent's late outcome of a compaction the proxy already settled", "session", sid, "translator", string(name))
				}
				return // else prose that only looks like an outcome: nothing of this kind is open
			}
		}
	}
	p.k, p.idless = trackKey{sid, id}, idless
	if replaying {
		if verbatim {
			return
		}
		switch sig.kind {
		case sigStart:
			p.pushPending = idless
		case sigProgress:
		default:
			// History knows no user cancel; an interrupted compaction
			// is replayed as the cancel opencode itself records.
			p.step = stepReplay
			p.status, p.reason = outcome(sig, true)
		}
		pass()
		return
	}
	switch c.router.status(p.k) {
	case trackByProxy:
		d.fate = fateDrop
		d.note = info("dropped the agent's update of a compaction the proxy already settled", "session", sid, "translator", string(name), "compaction", string(id))
		return
	case trackByAgent:
		// The agent settled it already: the client holds its one
		// terminal form. A later update (Claude's rawOutput, a repeat)
		// adds nothing.
		if !verbatim {
			d.fate = fateDrop
		}
		return
	case trackOpen:
		switch sig.kind {
		case sigStart:
			p.step = stepLearn // a repeated start (a re-sent tool call or marker)
		case sigProgress:
			p.step = stepProgress
		case sigDone:
			if verbatim {
				return // it already reads as finished; there is nothing to settle
			}
			p.step, p.unfollowed = stepDone, fateDrop
			p.status, p.reason = outcome(sig, tv.userCancelled())
		default:
			p.step = stepOutcome
			p.status, p.reason = outcome(sig, tv.userCancelled())
		}
		pass()
		return
	}
	if sig.kind != sigProgress && tv.justCancelled() {
		d.fate = fateDrop
		d.note = stragglerNote(sid, id, string(name))
		return
	}
	switch sig.kind {
	case sigStart:
		p.step, p.unfollowed = stepStart, fateDrop
		if verbatim || sig.keep {
			p.unfollowed = fateForward
		}
	case sigProgress:
	case sigDone:
		if verbatim {
			return // it already reads as finished; there is nothing to settle
		}
		p.step, p.unfollowed = stepDone, fateDrop
		p.status, p.reason = outcome(sig, tv.userCancelled())
	default:
		if verbatim {
			return // the client saw no start, and the line is a complete outcome
		}
		// An outcome without a start: the client still sees a lifecycle,
		// in_progress then the outcome, since a live first update is
		// never terminal.
		p.step, p.openFirst, p.unfollowed = stepOutcome, true, fateDrop
		p.status, p.reason = outcome(sig, tv.userCancelled())
	}
	pass()
}

// ---- what the recognisers read ----

// isTool reports whether toolID is a compaction tool call of session sid.
func (v view) isTool(sid, toolID string) bool {
	ts := v.c.trans[sid]
	return ts != nil && ts.tools[toolID]
}

// toolErrorText reads the text of a message chunk said while a compaction
// tool call of the session is open (quirkErrorText): codex-acp's provider
// error, which a failure the proxy settles then carries.
func (v view) toolErrorText(sid string, raw, update []byte) (string, bool) {
	ts := v.c.trans[sid]
	if ts == nil || len(ts.tools) == 0 || len(raw) < 3 || len(raw) > maxSignalBytes || hasMessageID(update) {
		return "", false
	}
	for id := range ts.tools {
		if v.c.router.status(trackKey{sid, protocol.ID(id)}) == trackOpen {
			text, _ := skim.String(raw)
			text = strings.TrimSpace(text)
			return text, text != ""
		}
	}
	return "", false
}
