package tap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/history"
	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/acpcompact/acpcompact/protocol"
)

// The tap's part of persistence (see book.go): what it records of the
// messages it reads and writes, the compactions it starts, and the final
// records the emitter hands over, in the kit's Book.

// histories are the session histories a tap holds, released when it
// closes.
type histories struct {
	mu   sync.Mutex
	held map[*hist]struct{}
}

// held notes that t holds h (under Book.mu).
func (t *Tap) held(h *hist) {
	t.hists.mu.Lock()
	if t.hists.held == nil {
		t.hists.held = map[*hist]struct{}{}
	}
	t.hists.held[h] = struct{}{}
	t.hists.mu.Unlock()
}

// unheld forgets h (under Book.mu): the book closed it.
func (t *Tap) unheld(h *hist) {
	t.hists.mu.Lock()
	delete(t.hists.held, h)
	t.hists.mu.Unlock()
}

// releaseHistories lets go of every history the tap holds: its connection
// has closed, its settlements are recorded.
func (t *Tap) releaseHistories() {
	t.hists.mu.Lock()
	held := t.hists.held
	t.hists.held = nil
	t.hists.mu.Unlock()
	for h := range held {
		t.book.release(h, t)
	}
}

// notHistory are the session updates that are the session's state rather
// than its history, and the compaction updates, which the emitter's
// records stand for: none is recorded.
var notHistory = map[string]bool{
	protocol.KindStateUpdate: true, protocol.KindUsageUpdate: true,
	"available_commands_update": true, "current_mode_update": true,
	"config_option_update": true, "session_info_update": true,
	protocol.KindUpdate: true, protocol.KindSummaryChunk: true,
}

var updatePaths = skim.Compile([]string{"params", "sessionId"}, []string{"params", "update"}, []string{"params", "update", "sessionUpdate"})

// recordOut records what an agent message means for the history, before
// it is written: a session update of the history is appended (an error
// refuses the message: the client does not see what the history lacks),
// and a new session's history is created. m is the message as the engine
// read it.
func (t *Tap) recordOut(msg []byte, m *turn.Msg) error {
	switch {
	case m.Method == turn.MethodUpdate && m.ID == "":
		var p skim.Picker
		v, err := p.Pick(msg, updatePaths)
		if err != nil {
			return nil
		}
		sid, _ := skim.String(v[0])
		kind, _ := skim.String(v[2])
		if sid == "" || len(v[1]) == 0 || notHistory[kind] {
			return nil
		}
		if replaying, _ := t.e.Replaying(sid); replaying {
			return nil // a replay sends what is recorded
		}
		e := history.Entry{Kind: history.Update, Update: json.RawMessage(append([]byte(nil), v[1]...))}
		return t.book.write(context.Background(), t, sid, e, openOrCreate, true)
	case m.IsResponse() && !m.Failed && len(m.Result) > 0:
		// A session/new (or fork) answer: the new session's history is
		// created before the client learns of the session.
		var r struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(m.Result, &r) != nil || r.SessionID == "" {
			return nil
		}
		if _, _, err := t.book.open(context.Background(), t, r.SessionID, create); err != nil {
			t.log.Error(t.cfg.Name+": the new session's history could not be created; its records will be refused until it can be", "session", r.SessionID, "error", err)
		}
	}
	return nil
}

// recordPrompt records a v1 client's prompt, as the user_message_chunk
// updates that show it on replay (a v1 client shows its own prompt; a v2
// agent sends user_message itself, which recordOut records).
func (t *Tap) recordPrompt(m *turn.Msg) {
	if n, ok := t.e.Negotiation(); !ok || n.Version != capability.V1 {
		return
	}
	var p struct {
		Prompt    []json.RawMessage `json:"prompt"`
		MessageID string            `json:"messageId,omitempty"`
	}
	if json.Unmarshal(m.Params, &p) != nil {
		return
	}
	if p.MessageID == "" {
		// The blocks of one prompt are one message, and each prompt its
		// own, on replay: a client merges chunks of one messageId.
		p.MessageID = "msg_" + newID()[len("cmp_"):]
	}
	for _, block := range p.Prompt {
		u, err := json.Marshal(struct {
			SessionUpdate string          `json:"sessionUpdate"`
			Content       json.RawMessage `json:"content"`
			MessageID     string          `json:"messageId,omitempty"`
		}{"user_message_chunk", block, p.MessageID})
		if err != nil {
			continue
		}
		// Not refusable: the client has sent it. A failure is kept
		// pending, and logged.
		_ = t.book.write(context.Background(), t, m.SessionID, history.Entry{Kind: history.Update, Update: u}, openExisting, false)
	}
}

// final is the kit's OnFinalRecord: a compaction's final record, kept
// pending when it cannot be written (the client has seen it settle).
func (t *Tap) final(ctx context.Context, sessionID string, rec emitter.Record) {
	_ = t.book.write(ctx, t, sessionID, history.Entry{Kind: history.Final, Record: rec}, openOrCreate, false)
}

// startRecorded is Start with a store: the compaction's start is written
// before it opens, so that the client never sees a compaction the history
// lacks; a start that cannot be written is refused (wrapping the public
// ErrStore), and one the emitter then refuses is voided.
func (t *Tap) startRecorded(ctx context.Context, sessionID string, opts []emitter.StartOption) (*emitter.Compaction, error) {
	rec, err := probe(opts)
	if err != nil {
		return nil, err
	}
	if err := t.book.write(ctx, t, sessionID, history.Entry{Kind: history.Start, Record: rec}, openOrCreate, true); err != nil {
		return nil, fmt.Errorf("%w (compaction %s not started)", err, rec.ID)
	}
	opts = append(opts[:len(opts):len(opts)], emitter.WithID(rec.ID))
	c, err := t.h.Start(t.turnContext(ctx, sessionID), sessionID, opts...)
	if c == nil {
		if verr := t.book.write(ctx, t, sessionID, history.Entry{Kind: history.Void, Record: emitter.Record{ID: rec.ID}}, openOrCreate, true); verr != nil {
			t.log.Error(t.cfg.Name+": a refused compaction's start could not be voided: the session's replay will show it failed", "session", sessionID, "compaction", string(rec.ID), "error", verr)
		}
	}
	return c, err
}

// probe returns the record a compaction started with opts would have when
// it opens, its ID drawn if opts give none, without opening it anywhere:
// the kit writes the start before the compaction opens.
func probe(opts []emitter.StartOption) (emitter.Record, error) {
	em := emitter.New(emitter.NotifierFunc(func(context.Context, string, any) error { return nil }))
	c, err := em.Session("probe").Start(context.Background(), opts...)
	if c == nil {
		return emitter.Record{}, err
	}
	return c.Record(), nil
}

// SendUpdate writes one session update of sessionID's (the `update`
// object of session/update) as any message of the agent's: recorded
// first when the kit keeps histories.
func (t *Tap) SendUpdate(ctx context.Context, sessionID string, update any) error {
	raw, err := protocol.MarshalUpdate(update)
	if err != nil {
		return fmt.Errorf("%s: session %s: the update does not marshal: %w", t.cfg.Name, sessionID, err)
	}
	if t.Closed() {
		return fmt.Errorf("%w: session %s", t.cfg.ErrClosed, sessionID)
	}
	return t.Send(protocol.AppendNotification(nil, sessionID, raw))
}

// Keep writes the runtime's data to sessionID's history.
func (t *Tap) Keep(ctx context.Context, sessionID string, data any) error {
	if t.book == nil {
		return fmt.Errorf("%w: session %s: %w", t.cfg.ErrStore, sessionID, ErrNoStore)
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("%s: session %s: the data does not marshal: %w", t.cfg.Name, sessionID, err)
	}
	return t.book.write(ctx, t, sessionID, history.Entry{Kind: history.Data, Data: raw}, openOrCreate, true)
}

// ReplayHistory opens sessionID's history for this connection and goes
// through it: each entry to restore (when not nil), and, when the client
// asked for a replay (a session/load, or a v2 session/resume with
// replayFrom, is in flight), to the client: updates as they were sent,
// compactions by Session.Replay.
func (t *Tap) ReplayHistory(ctx context.Context, sessionID string, restore func(history.Entry) error) error {
	if t.book == nil {
		return fmt.Errorf("%w: session %s: %w", t.cfg.ErrStore, sessionID, ErrNoStore)
	}
	if _, err := t.ready(sessionID); err != nil {
		return err
	}
	l, running, err := t.book.open(ctx, t, sessionID, openExisting)
	if err != nil {
		return err
	}
	if l == nil {
		return t.book.wrap(sessionID, fmt.Errorf("%w in the store", history.ErrNotFound))
	}
	replay, _ := t.e.Replaying(sessionID)
	var msgs *coalescer
	if n, ok := t.e.Negotiation(); ok && n.Version == capability.V2 {
		msgs = &coalescer{t: t, sessionID: sessionID}
	}
	for e, err := range l.Entries(ctx) {
		if err != nil {
			return t.book.wrap(sessionID, err)
		}
		if e.Interrupted && running[e.Record.ID] {
			continue // it runs in this process: not interrupted, not settled
		}
		if restore != nil {
			if err := restore(e); err != nil {
				return err
			}
		}
		if !replay {
			continue
		}
		switch {
		case e.Kind == history.Update && msgs != nil:
			err = msgs.add(e.Update)
		case e.Kind == history.Update:
			err = t.Send(protocol.AppendNotification(nil, sessionID, e.Update))
		case e.Kind == history.Final:
			if msgs != nil {
				err = msgs.flush()
			}
			if err == nil {
				err = t.Replay(ctx, sessionID, e.Record)
			}
		}
		if err != nil && !errors.Is(err, emitter.ErrWithheld) {
			return fmt.Errorf("%s: session %s: replay: %w", t.cfg.Name, sessionID, err)
		}
	}
	if replay && msgs != nil {
		return msgs.flush()
	}
	return nil
}

// coalescer replays a v2 session's message chunks as the whole-message
// updates of v2 (user_message, agent_message, agent_thought): a client
// that still holds a message when it asks for a replay must not get its
// chunks appended twice, and an upsert replaces content by messageId. The
// consecutive chunks of one message become one upsert; a message whose
// chunks the history has apart (other updates between them) is upserted
// at its first run and its later chunks go as they were sent.
type coalescer struct {
	t         *Tap
	sessionID string
	kind, id  string
	blocks    []json.RawMessage
	upserted  map[string]bool
}

// wholeKinds maps a chunk's kind to its message's.
var wholeKinds = map[string]string{"user_message_chunk": "user_message", "agent_message_chunk": "agent_message", "agent_thought_chunk": "agent_thought"}

func (c *coalescer) add(update json.RawMessage) error {
	var u struct {
		Kind      string          `json:"sessionUpdate"`
		MessageID string          `json:"messageId"`
		Content   json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(update, &u)
	whole := wholeKinds[u.Kind]
	if whole == "" || u.MessageID == "" || len(u.Content) == 0 || c.upserted[whole+"\x00"+u.MessageID] {
		if err := c.flush(); err != nil {
			return err
		}
		return c.t.Send(protocol.AppendNotification(nil, c.sessionID, update))
	}
	if whole != c.kind || u.MessageID != c.id {
		if err := c.flush(); err != nil {
			return err
		}
		c.kind, c.id = whole, u.MessageID
	}
	c.blocks = append(c.blocks, u.Content)
	return nil
}

// flush sends the message being gathered, as one upsert.
func (c *coalescer) flush() error {
	if c.kind == "" {
		return nil
	}
	u, err := json.Marshal(struct {
		Kind      string            `json:"sessionUpdate"`
		MessageID string            `json:"messageId"`
		Content   []json.RawMessage `json:"content"`
	}{c.kind, c.id, c.blocks})
	if c.upserted == nil {
		c.upserted = map[string]bool{}
	}
	c.upserted[c.kind+"\x00"+c.id] = true
	c.kind, c.id, c.blocks = "", "", nil
	if err != nil {
		return err
	}
	return c.t.Send(protocol.AppendNotification(nil, c.sessionID, u))
}
