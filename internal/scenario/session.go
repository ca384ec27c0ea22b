package scenario

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/acpcompact/acpcompact/agentkit"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// Simulated context accounting, for plausible records and usage updates.
const (
	contextWindow   = 200_000
	startTokens     = 151_200 // a session well into its budget
	tokensPerEntry  = 900
	baseTokensAfter = 6_000
)

type role uint8

const (
	roleUser role = iota + 1
	roleAgent
)

// entry is one message of a session, in the order of the history: what
// the scripts summarize. (The history itself, compactions included, is
// the kit's: see store.go.)
type entry struct {
	role      role
	messageID string
	content   []json.RawMessage // its content blocks
}

// session is one ACP session's state, shared by every connection of the
// process.
type session struct {
	a       *Agent
	id      string
	cwd     string
	created time.Time

	mu          sync.Mutex
	entries     []entry
	nextMessage int
	nextCmp     int
	// mark is "" in the process that created the session, and in a
	// process that reopened its log a random mark of that opening and "_",
	// which every ID it mints carries (see mintID).
	mark     string
	ordinary int   // ordinary prompts so far, for AutoCompactEvery
	tokens   int64 // simulated context size
	updated  time.Time
	turn     *running // the running turn, nil when idle
}

func newSessionID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "sess_" + hex.EncodeToString(b[:])
}

// newMark returns the mark of one reopening of a session's log: 32 random
// bits, and the separator.
func newMark() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + "_"
}

// mintID returns the ID numbered n with prefix ("cmp_", "msg_user_"),
// unique within the session across every process that ever serves it:
// the process that created the session writes prefix+n (cmp_1: the log is
// new, so no ID came before, and the log's writer lock keeps every other
// process out while this one holds it); a process that reopens the log
// writes prefix+mark+n (cmp_3f9a2c1b_4), its own random mark, with n
// going on from the highest the log holds. An ID the log did not keep
// (a start whose line was torn by a crash, an append that failed on a
// full disk) after the client saw it is so never minted again by the
// next process, which a number taken from the log alone would do.
func (s *session) mintID(prefix string, n int) string {
	return fmt.Sprintf("%s%s%d", prefix, s.mark, n)
}

// newSession creates a session; its history begins with its working
// directory (kept by the kit with Session.Keep, in the state directory if
// the agent has one).
func (a *Agent) newSession(ctx context.Context, cwd string) (*session, error) {
	if cwd == "" {
		cwd = "/"
	}
	now := time.Now()
	s := &session{a: a, id: newSessionID(), cwd: cwd, created: now, updated: now, tokens: startTokens}
	if err := agentkit.SessionFrom(ctx, s.id).Keep(ctx, storedInfo{Cwd: cwd}); err != nil {
		return nil, fmt.Errorf("the session's history: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sessions[s.id] = s
	a.order = append(a.order, s)
	return s, nil
}

func (a *Agent) session(id string) *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[id]
}

func (s *session) info() sessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := sessionInfo{SessionID: s.id, Cwd: s.cwd, UpdatedAt: s.updated.UTC().Format(time.RFC3339)}
	for _, e := range s.entries {
		if e.role == roleUser {
			info.Title = firstText(e.content)
			if len(info.Title) > 60 {
				info.Title = info.Title[:57] + "..."
			}
			break
		}
	}
	return info
}

// running is one turn of a session.
type running struct {
	cancel context.CancelCauseFunc
}

// beginTurn marks a turn running and returns its context, which
// cancelTurn (session/close) cancels like a session/cancel does, and the
// token that ends it.
func (s *session) beginTurn(ctx context.Context) (context.Context, *running, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turn != nil {
		return ctx, nil, false
	}
	ctx, cancel := context.WithCancelCause(ctx)
	s.turn = &running{cancel: cancel}
	return ctx, s.turn, true
}

// endTurn ends turn r; it does nothing when r has ended already, so a
// later turn is never touched.
func (s *session) endTurn(r *running) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.cancel(emitter.ErrTurnEnded)
	if s.turn == r {
		s.turn = nil
	}
}

func (s *session) cancelTurn() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turn != nil {
		s.turn.cancel(emitter.ErrCancelled)
	}
}

func (s *session) busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turn != nil
}

// addMessage appends a message to the history and returns its ID.
func (s *session) addMessage(r role, content []json.RawMessage) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextMessage++
	prefix := "msg_agent_"
	if r == roleUser {
		prefix = "msg_user_"
	}
	id := s.mintID(prefix, s.nextMessage)
	s.entries = append(s.entries, entry{role: r, messageID: id, content: content})
	for _, b := range content {
		s.tokens += tokensPerEntry + int64(len(b))/4
	}
	s.updated = time.Now()
	return id
}

// nextCompactionID mints an ID unique within the session, across
// connections and processes (mintID): the replay marks replayed IDs used
// on the new connection, and live ones never repeat.
func (s *session) nextCompactionID() protocol.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextCmp++
	return protocol.ID(s.mintID("cmp_", s.nextCmp))
}

// lastMessageID returns the ID of the history's latest message, the
// position a compaction starting now follows (emitter.After).
func (s *session) lastMessageID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.entries) - 1; i >= 0; i-- {
		if id := s.entries[i].messageID; id != "" {
			return id
		}
	}
	return ""
}

// userTexts returns the text of the user messages so far.
func (s *session) userTexts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.entries {
		if e.role == roleUser {
			out = append(out, firstText(e.content))
		}
	}
	return out
}

// messageCount returns how many messages the history holds.
func (s *session) messageCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.entries {
		if e.messageID != "" {
			n++
		}
	}
	return n
}

// details is a plausible record of a compaction of the history so far: it
// replaces every message but the last (the prompt that asked for it),
// which it keeps verbatim. summaryBytes is the size of its summary.
func (s *session) details(summaryBytes int, completed bool) emitter.Details {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, e := range s.entries {
		if e.messageID != "" {
			ids = append(ids, e.messageID)
		}
	}
	d := emitter.Details{
		TokensBefore:  s.tokens,
		ContextWindow: contextWindow,
		Summarizer:    &emitter.Summarizer{Model: "scenario-summarizer", PromptID: "scenario-compact-v1"},
		SummaryBytes:  int64(summaryBytes),
	}
	if n := len(ids); n > 1 {
		d.Source = &emitter.MessageRange{FirstMessageID: ids[0], LastMessageID: ids[n-2], Count: n - 1}
		d.KeptTail = &emitter.MessageRange{FirstMessageID: ids[n-1], LastMessageID: ids[n-1], Count: 1}
	} else if n == 1 {
		d.KeptTail = &emitter.MessageRange{FirstMessageID: ids[0], LastMessageID: ids[0], Count: 1}
	}
	if completed {
		d.TokensAfter = baseTokensAfter + int64(summaryBytes)/4
		d.KnownLoss = []emitter.Loss{{Kind: "note", Value: "verbatim tool output older than the summary"}}
		s.tokens = d.TokensAfter
	}
	return d
}

func firstText(blocks []json.RawMessage) string {
	for _, b := range blocks {
		var t textBlock
		if json.Unmarshal(b, &t) == nil && t.Type == "text" {
			return t.Text
		}
	}
	return ""
}

// settlements lets a prompt handler wait for a compaction to be settled by
// whoever settles it: the runtime, the kit (cancel grace, end of turn,
// connection close) or the emitter's watchdog. It is an emitter Observer.
type settlements struct {
	mu      sync.Mutex
	waiting map[string]*settlement
}

// settlement is one awaited compaction; done is closed when it settles.
type settlement struct {
	done chan struct{}
}

func newSettlements() *settlements { return &settlements{waiting: map[string]*settlement{}} }

func settlementKey(sessionID string, id protocol.ID) string { return sessionID + "\x00" + string(id) }

// register returns the settlement of compaction id of sessionID. Call it
// before Start, so an instant settlement is not missed.
func (w *settlements) register(sessionID string, id protocol.ID) *settlement {
	st := &settlement{done: make(chan struct{})}
	w.mu.Lock()
	w.waiting[settlementKey(sessionID, id)] = st
	w.mu.Unlock()
	return st
}

// forget drops a registration whose compaction never started.
func (w *settlements) forget(sessionID string, id protocol.ID) {
	w.mu.Lock()
	delete(w.waiting, settlementKey(sessionID, id))
	w.mu.Unlock()
}

// Observe implements emitter.Observer.
func (w *settlements) Observe(_ context.Context, ev emitter.Event) {
	if ev.Kind != emitter.EventSettled {
		return
	}
	k := settlementKey(ev.SessionID, ev.ID)
	w.mu.Lock()
	st, ok := w.waiting[k]
	delete(w.waiting, k)
	w.mu.Unlock()
	if ok {
		close(st.done)
	}
}
