package scenario

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

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

// entry is one item of a session's history, in timeline order.
type entry struct {
	role      role              // for a message
	messageID string            // for a message
	content   []json.RawMessage // a message's content blocks
	comp      *compEntry        // for a compaction
}

// compEntry is a compaction in history. The handle's Record gives its
// status, error and record at replay time, so a compaction the kit or the
// watchdog settled after its turn replays as what it became.
type compEntry struct {
	mu       sync.Mutex
	handle   *emitter.Compaction // nil when the runtime failed before any start
	early    emitter.Record      // the record of such a failure
	streamed []protocol.ContentBlock
}

func (c *compEntry) stream(s string) {
	c.mu.Lock()
	c.streamed = append(c.streamed, protocol.Text(s))
	c.mu.Unlock()
}

func (c *compEntry) streamedText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, s := range c.streamed {
		b.WriteString(s.Text)
	}
	return b.String()
}

// record returns what session/load replays for this compaction. The
// emitter keeps only a summary given at settlement; a completion that kept
// the streamed summary (flood; Record.KeptStreamed) replays the streamed
// blocks, as the client held them live. A completion that cleared its
// summary (Summary()) or gave none after nothing streamed replays none.
func (c *compEntry) record() emitter.Record {
	if c.handle == nil {
		return c.early
	}
	rec := c.handle.Record()
	if rec.KeptStreamed {
		c.mu.Lock()
		rec.Summary = append([]protocol.ContentBlock(nil), c.streamed...)
		c.mu.Unlock()
	}
	return rec
}

// session is one ACP session's state, shared by every connection of the
// process.
type session struct {
	id      string
	cwd     string
	created time.Time

	mu          sync.Mutex
	entries     []entry
	nextMessage int
	nextCmp     int
	ordinary    int   // ordinary prompts so far, for AutoCompactEvery
	tokens      int64 // simulated context size
	updated     time.Time
	turn        *running // the running turn, nil when idle
}

func newSessionID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "sess_" + hex.EncodeToString(b[:])
}

func (a *Agent) newSession(cwd string) *session {
	if cwd == "" {
		cwd = "/"
	}
	now := time.Now()
	s := &session{id: newSessionID(), cwd: cwd, created: now, updated: now, tokens: startTokens}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sessions[s.id] = s
	a.order = append(a.order, s)
	return s
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
	id := fmt.Sprintf("%s%d", prefix, s.nextMessage)
	s.entries = append(s.entries, entry{role: r, messageID: id, content: content})
	for _, b := range content {
		s.tokens += tokensPerEntry + int64(len(b))/4
	}
	s.updated = time.Now()
	return id
}

// nextCompactionID mints an ID unique within the session, across
// connections: the replay marks replayed IDs used on the new connection,
// and live ones never repeat.
func (s *session) nextCompactionID() protocol.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextCmp++
	return protocol.ID(fmt.Sprintf("cmp_%d", s.nextCmp))
}

func (s *session) addCompaction(c *compEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = append(s.entries, entry{comp: c})
	s.updated = time.Now()
}

func (s *session) snapshot() []entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]entry(nil), s.entries...)
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
// which it keeps verbatim.
func (s *session) details(summary string, completed bool) emitter.Details {
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
		SummaryBytes:  int64(len(summary)),
	}
	if n := len(ids); n > 1 {
		d.Source = &emitter.MessageRange{FirstMessageID: ids[0], LastMessageID: ids[n-2], Count: n - 1}
		d.KeptTail = &emitter.MessageRange{FirstMessageID: ids[n-1], LastMessageID: ids[n-1], Count: 1}
	} else if n == 1 {
		d.KeptTail = &emitter.MessageRange{FirstMessageID: ids[0], LastMessageID: ids[0], Count: 1}
	}
	if completed {
		d.TokensAfter = baseTokensAfter + int64(len(summary))/4
		d.KnownLoss = []string{"verbatim tool output older than the summary"}
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

// settlement is one awaited compaction; details is valid once done is
// closed.
type settlement struct {
	done    chan struct{}
	details *emitter.Details
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
		st.details = ev.Details
		close(st.done)
	}
}
