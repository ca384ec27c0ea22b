package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// sessionID is the session every in-process scenario runs in.
const sessionID = "sess_1"

// runtime is what the runtime steps of a scenario call: the emitter's
// session directly, or agentkit's, whose Start and Fail are scoped to the
// turn.
type runtime struct {
	start  func(ctx context.Context, opts ...emitter.StartOption) (*emitter.Compaction, error)
	replay func(ctx context.Context, rec emitter.Record) error
	// session is the emitter session, for the handles of compactions this
	// runtime holds none of (after a reconnect).
	session func() (*emitter.Session, error)
	// notify sends a session/update with a verbatim update.
	notify func(ctx context.Context, update json.RawMessage) error
	// version is the connection's protocol version, for the agent's own
	// message form.
	version int
	// hist, when set, is where the runtime notes what it reported, for a
	// later replay of the final records; it outlives the connection.
	hist *history

	handles map[protocol.ID]*emitter.Compaction
}

// history is what a runtime keeps to replay its compactions on
// session/load: the final record of each, as the emitter's OnFinalRecord
// hands them over (whoever settled the compaction), in that order, and the
// compactions it reported (started, or failed before any start), to check
// that each of them was handed over exactly once. It outlives the
// connections, and the kits hand records over on their own goroutines.
type history struct {
	mu       sync.Mutex
	reported []protocol.ID
	finals   []emitter.Record
	// wrong lists records handed over for another session than sessionID.
	wrong []string
}

// final is the emitter's OnFinalRecord sink.
func (h *history) final(_ context.Context, sid string, rec emitter.Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if sid != sessionID {
		h.wrong = append(h.wrong, fmt.Sprintf("compaction %s: final record handed over for session %q, not %q", rec.ID, sid, sessionID))
	}
	h.finals = append(h.finals, rec)
}

// report notes a compaction the runtime reported.
func (h *history) report(id protocol.ID) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !slices.Contains(h.reported, id) {
		h.reported = append(h.reported, id)
	}
}

// IDs lists the compactions the runtime reported, in order.
func (h *history) IDs() []string {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, len(h.reported))
	for i, id := range h.reported {
		out[i] = string(id)
	}
	return out
}

// problems says how the hand-over broke its rule: a reported compaction
// handed over other than once, a record of a compaction the runtime never
// reported, one handed over for another session, one that is not final.
func (h *history) problems() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := append([]string(nil), h.wrong...)
	count := map[protocol.ID]int{}
	for _, rec := range h.finals {
		count[rec.ID]++
		if !rec.Status.Terminal() {
			out = append(out, fmt.Sprintf("compaction %s: the record handed over says %s, not a terminal status", rec.ID, rec.Status))
		}
		if !slices.Contains(h.reported, rec.ID) {
			out = append(out, fmt.Sprintf("compaction %s: a final record for a compaction the runtime never reported", rec.ID))
		}
	}
	for _, id := range h.reported {
		if n := count[id]; n != 1 {
			out = append(out, fmt.Sprintf("compaction %s: its final record was handed over %d times, want once", id, n))
		}
	}
	return out
}

// records returns what session/load replays: the final records, in the
// order they were handed over.
func (h *history) records() []emitter.Record {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]emitter.Record(nil), h.finals...)
}

// replaySteps are the steps of a load turn that replays the history.
func (h *history) replaySteps() []Step {
	var out []Step
	for _, rec := range h.records() {
		out = append(out, replay(rec))
	}
	return out
}

// handle is the runtime's handle of id, or the session's open compaction
// of that ID when the runtime holds none.
func (r *runtime) handle(id protocol.ID) (*emitter.Compaction, error) {
	if c, ok := r.handles[id]; ok {
		return c, nil
	}
	sess, err := r.session()
	if err != nil {
		return nil, err
	}
	return sess.Compaction(id)
}

// do runs one runtime step (not OpUserCancel or OpExpect, which belong to
// the target) and returns the call's error.
func (r *runtime) do(ctx context.Context, s Step) error {
	if r.handles == nil {
		r.handles = map[protocol.ID]*emitter.Compaction{}
	}
	switch s.Op {
	case OpStart:
		opts := []emitter.StartOption{emitter.WithID(s.ID)}
		if s.Displayable {
			opts = append(opts, emitter.UserDisplayable())
		}
		if s.Meta != nil {
			opts = append(opts, emitter.WithStartMeta(s.Meta))
		}
		c, err := r.start(ctx, opts...)
		if c != nil {
			r.handles[s.ID] = c
			r.hist.report(s.ID)
		}
		return err
	case OpChunk:
		c, err := r.handle(s.ID)
		if err != nil {
			return err
		}
		return c.Chunk(ctx, protocol.Text(s.Text))
	case OpComplete:
		c, err := r.handle(s.ID)
		if err != nil {
			return err
		}
		return c.Complete(ctx, settleOptions(s)...)
	case OpCancel:
		c, err := r.handle(s.ID)
		if err != nil {
			return err
		}
		return c.Cancel(ctx, settleOptions(s)...)
	case OpFail:
		c, ok := r.handles[s.ID]
		if !ok {
			// A failure before any start: the runtime opens the
			// compaction to fail it, so the client still sees it begin.
			var err error
			if c, err = r.start(ctx, emitter.WithID(s.ID)); err != nil {
				return err
			}
			r.handles[s.ID] = c
		}
		err := c.Fail(ctx, errors.New(s.Err), settleOptions(s)...)
		if err == nil {
			r.hist.report(s.ID)
		}
		return err
	case OpMessage:
		return r.notify(ctx, agentMessage(r.version, s.Text))
	case OpRaw:
		return r.notify(ctx, s.Raw)
	case OpReplay:
		return r.replay(ctx, s.Record)
	}
	return fmt.Errorf("matrix: op %d is not a runtime step", s.Op)
}

// agentMessage is the agent's message update: in v1 an
// agent_message_chunk without a messageId (the case the RFD singles out);
// in v2, which has no chunks, an agent_message upsert whose ID derives from
// the text, so a replay addresses the same message.
func agentMessage(version int, text string) json.RawMessage {
	if version == 2 {
		return mustJSON(map[string]any{
			"sessionUpdate": "agent_message",
			"messageId":     "msg_" + text,
			"content":       []any{map[string]any{"type": "text", "text": text}},
		})
	}
	return mustJSON(map[string]any{
		"sessionUpdate": "agent_message_chunk",
		"content":       map[string]any{"type": "text", "text": text},
	})
}

func settleOptions(s Step) []emitter.SettleOption {
	var opts []emitter.SettleOption
	switch s.Summary {
	case SetSummary:
		blocks := make([]protocol.ContentBlock, len(s.Texts))
		for i, t := range s.Texts {
			blocks[i] = protocol.Text(t)
		}
		opts = append(opts, emitter.Summary(blocks...))
	case ClearSummary:
		opts = append(opts, emitter.Summary())
	case EmptySummary:
		opts = append(opts, emitter.Summary())
	}
	if s.Meta != nil && s.Op != OpStart {
		opts = append(opts, emitter.WithSettleMeta(s.Meta))
	}
	return opts
}

// checkErr describes a step whose error is not the one it wants, or "".
func checkErr(turn, step int, s Step, err error) string {
	switch {
	case s.WantErr == nil && err != nil:
		return fmt.Sprintf("turn %d step %d (op %d %s): unexpected error: %v", turn+1, step+1, s.Op, s.ID, err)
	case s.WantErr != nil && !errors.Is(err, s.WantErr):
		return fmt.Sprintf("turn %d step %d (op %d %s): got error %v, want %v", turn+1, step+1, s.Op, s.ID, err, s.WantErr)
	}
	return ""
}

// Agent answers of the in-process targets.
var (
	initResultV1 = json.RawMessage(`{"protocolVersion":1,"agentCapabilities":{"loadSession":true},"authMethods":[]}`)
	initResultV2 = json.RawMessage(`{"protocolVersion":2,"info":{"name":"matrix-agent","version":"1.0.0"},"capabilities":{"session":{"resume":{}}}}`)
)

func initResult(version int) json.RawMessage {
	if version == 2 {
		return initResultV2
	}
	return initResultV1
}

func newSessionParams(version int) json.RawMessage {
	if version == 2 {
		return json.RawMessage(`{"cwd":"/tmp"}`)
	}
	return json.RawMessage(`{"cwd":"/tmp","mcpServers":[]}`)
}

func promptParams(sid, text string) json.RawMessage {
	return mustJSON(map[string]any{"sessionId": sid, "prompt": []any{map[string]any{"type": "text", "text": text}}})
}

func loadRequest(version int, sid string) (string, json.RawMessage) {
	if version == 2 {
		return "session/resume", mustJSON(map[string]any{"sessionId": sid, "cwd": "/tmp", "replayFrom": map[string]any{"type": "start"}})
	}
	return "session/load", mustJSON(map[string]any{"sessionId": sid, "cwd": "/tmp", "mcpServers": []any{}})
}

func stateUpdate(state, stopReason string) json.RawMessage {
	u := map[string]any{"sessionUpdate": protocol.KindStateUpdate, "state": state}
	if stopReason != "" {
		u["stopReason"] = stopReason
	}
	return mustJSON(u)
}

func notification(method string, params any) []byte {
	return mustJSON(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
}

func request(id int, method string, params json.RawMessage) []byte {
	return mustJSON(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

func response(id int, result any) []byte {
	return mustJSON(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func sessionUpdate(sid string, u json.RawMessage) []byte {
	return notification("session/update", map[string]any{"sessionId": sid, "update": u})
}
