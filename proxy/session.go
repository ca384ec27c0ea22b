package proxy

// What the proxy keeps of a session's legacy forms between its lines: the
// bookkeeping of ID-less compactions (their IDs, stable across a replay),
// compaction tool calls, what waits for its facts, and replayed chunks.
// classify and the recognisers read it (sessionView, and the methods that
// take a *transState that may be nil, and change nothing); the lifecycle
// changes it.

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/acpcompact/acpcompact/proxy/agents"
)

// maxReplayChunks bounds the summary chunks of a replayed compaction kept
// until its terminal update.
const maxReplayChunks = 1 << 20

// sessionView is what the recognisers read of one session
// (agents.State): read only.
type sessionView struct {
	c    *conn
	sid  string
	turn *turnView
}

func (s *sessionView) Replaying() bool {
	on, _ := s.turn.replay()
	return on
}

func (s *sessionView) Command() string { return s.turn.command() }

func (s *sessionView) Awaiting() agents.Translator {
	if h := s.c.awaiting; h != nil && h.sid == s.sid {
		return h.tr
	}
	return ""
}

func (s *sessionView) Open(t agents.Translator) int {
	if ts := s.c.trans[s.sid]; ts != nil {
		return len(ts.open[t])
	}
	return 0
}

func (s *sessionView) PendingReplay(t agents.Translator) bool {
	_, epoch := s.turn.replay()
	_, ok := s.c.trans[s.sid].pendingTop(t, epoch)
	return ok
}

func (s *sessionView) IsTool(id string) bool {
	ts := s.c.trans[s.sid]
	return ts != nil && ts.tools[id]
}

func (s *sessionView) AfterEmptyChunk() bool {
	ts := s.c.trans[s.sid]
	return ts != nil && ts.emptyChunk
}

func (s *sessionView) ToolOpen() bool {
	ts := s.c.trans[s.sid]
	if ts == nil {
		return false
	}
	for id := range ts.tools {
		if s.c.router.status(trackKey{s.sid, protocol.ID(id)}) == trackOpen {
			return true
		}
	}
	return false
}

// orphan is an ID-less compaction the proxy settled; its agent's outcome
// may still come, until the session's next turn begins.
type orphan struct{ turns int }

// transState is a session's translator state; guarded by conn.emu.
type transState struct {
	open    map[Translator][]protocol.ID // open compactions of ID-less forms, oldest first
	orphans map[Translator][]orphan      // ID-less ones the proxy settled, whose outcome may still come
	pending map[Translator][]protocol.ID // ID-less starts seen in a replay
	// live and replayed count the ID-less compactions of each form, live
	// and in the current replay, for their IDs.
	live, replayed map[Translator]int
	epoch          uint64          // the replay the counts and buffers belong to (turn.Engine.Replaying)
	tools          map[string]bool // tool call IDs recognised as compaction tool calls
	// toolErr is the provider's error text said while a compaction tool
	// call was open (agents.ErrorText).
	toolErr string
	// deferred are completions waiting for their facts
	// (agents.RawOutputFollows): a compaction tool call's rawOutput, a
	// standard update's duplicate. factsOpts are the settle options the
	// standard ones complete with (their summary and _meta).
	deferred  map[protocol.ID]*time.Timer
	factsOpts map[protocol.ID][]emitter.SettleOption
	// turns counts the session's turns that ended.
	turns int
	// emptyChunk: the session's last agent_message_chunk was an empty text
	// (kept for agents.ProseAfterEmptyChunk only).
	emptyChunk bool
	// chunks are the summary chunks of replayed standard compactions, kept
	// until their terminal update.
	chunks      map[protocol.ID][]json.RawMessage
	chunksBytes int
}

func newTransState() *transState {
	return &transState{
		open: map[Translator][]protocol.ID{}, orphans: map[Translator][]orphan{},
		pending: map[Translator][]protocol.ID{}, live: map[Translator]int{}, replayed: map[Translator]int{},
		tools: map[string]bool{},
	}
}

// transFor returns the state of session sid, making it on first use.
// Callers hold emu.
func (c *conn) transFor(sid string) *transState {
	ts, ok := c.trans[sid]
	if !ok {
		ts = newTransState()
		c.trans[sid] = ts
	}
	return ts
}

// stale reports whether ts's replay state belongs to a replay other than
// the one in flight (epoch), which sync clears: classify reads it as
// empty.
func (ts *transState) stale(replaying bool, epoch uint64) bool {
	return replaying && ts.epoch != epoch
}

// sync starts the session's count again when a new history replay began.
func (ts *transState) sync(replaying bool, epoch uint64) {
	if ts.stale(replaying, epoch) {
		ts.epoch = epoch
		clear(ts.replayed)
		clear(ts.pending)
		ts.chunks, ts.chunksBytes = nil, 0
	}
}

// nextID is the ID that mint will give the next ID-less compaction of tr
// in session sid (ts may be nil: a session without state yet).
//
// It is derived from the session and the compaction's ordinal rather than
// random, so that a history replay, which recounts from the session's
// start, gives a compaction the same ID it had live and a client does not
// show it twice. Live ordinals continue after both the last live one and
// the last replayed one, so a replay that leaves a compaction out never
// makes a live ID come round again.
func (ts *transState) nextID(sid string, tr Translator, replaying bool, epoch uint64) protocol.ID {
	return agents.DerivedID(sid, string(tr), strconv.Itoa(ts.ordinal(tr, replaying, epoch)))
}

func (ts *transState) ordinal(tr Translator, replaying bool, epoch uint64) int {
	if ts == nil {
		return 1
	}
	replayed := ts.replayed[tr]
	if ts.stale(replaying, epoch) {
		replayed = 0
	}
	if replaying {
		return replayed + 1
	}
	return max(ts.live[tr], replayed) + 1
}

// mint counts the next ID-less compaction of tr and returns its ID
// (nextID's). ts is synced.
func (ts *transState) mint(sid string, tr Translator, replaying bool) protocol.ID {
	n := ts.ordinal(tr, replaying, ts.epoch)
	if replaying {
		ts.replayed[tr] = n
	} else {
		ts.live[tr] = n
	}
	return agents.DerivedID(sid, string(tr), strconv.Itoa(n))
}

// pendingTop is the last ID-less start of tr seen in the replay in
// flight, if any.
func (ts *transState) pendingTop(tr Translator, epoch uint64) (protocol.ID, bool) {
	if ts == nil || ts.stale(true, epoch) || len(ts.pending[tr]) == 0 {
		return "", false
	}
	p := ts.pending[tr]
	return p[len(p)-1], true
}

// lastOpen is the newest open compaction of ID-less form tr, if any.
func (ts *transState) lastOpen(tr Translator) (protocol.ID, bool) {
	if ts == nil || len(ts.open[tr]) == 0 {
		return "", false
	}
	o := ts.open[tr]
	return o[len(o)-1], true
}

// orphanFor looks, newest first, for an ID-less compaction of tr the proxy
// settled whose outcome may still come: one settled in the turn now
// running (inTurn) or, between turns, any. It says how many of tr's
// orphans remain once it is used up, or, when none is found, once the
// unusable ones are forgotten (0).
func (ts *transState) orphanFor(tr Translator, inTurn func() bool) (remain int, ok bool) {
	if ts == nil {
		return 0, false
	}
	os := ts.orphans[tr]
	if len(os) == 0 {
		return 0, false
	}
	in := inTurn()
	for i := len(os) - 1; i >= 0; i-- {
		if !in || os[i].turns == ts.turns {
			return i, true
		}
	}
	return 0, false
}

// keepChunk keeps a replayed summary chunk's content until its
// compaction's terminal update, within a bound.
func (ts *transState) keepChunk(id protocol.ID, content []byte) {
	if content == nil || ts.chunksBytes+len(content) > maxReplayChunks {
		return
	}
	if ts.chunks == nil {
		ts.chunks = map[protocol.ID][]json.RawMessage{}
	}
	ts.chunks[id] = append(ts.chunks[id], json.RawMessage(string(content)))
	ts.chunksBytes += len(content)
}

// turnEnded notes that a turn of session sid ended. Callers hold emu.
func (c *conn) turnEnded(sid string) {
	if ts, ok := c.trans[sid]; ok {
		ts.turns++
	}
}
