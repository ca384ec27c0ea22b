package kittest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/history"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/acpcompact/acpcompact/sessionlog"
	"github.com/acpcompact/acpcompact/sqlstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite" // Stores' "sqlite"
)

// Persistence: a kit with a store (WithStore) keeps the session's history
// by itself, and a new kit on the same store replays it as the client saw
// it live.

// ErrSummary is the failure of the "/compact fail" prompt of
// HistoryAgent.
var ErrSummary = errors.New("summary request failed")

// HistoryAgent is an agent that writes no record code: its prompts send
// messages through Session.Send and report compactions, and its
// session/load is one ReplayHistory call. Its prompts, by text: "/compact"
// (a streamed, completed compaction), "/compact fail", "/compact hang" (the
// runtime returns with it open: the turn's end settles it), "/compact
// twice" (two at once, settled in reverse order); anything else is
// echoed as an agent message.
func HistoryAgent(st Stack) *Agent {
	return &Agent{
		Prompt: func(ctx context.Context, _ Conn, p Prompt) (string, error) {
			s := st.SessionFrom(ctx, p.SessionID)
			start := func() *emitter.Compaction {
				c, _ := s.Start(ctx, emitter.WithTrigger(protocol.Manual), emitter.UserDisplayable())
				return c
			}
			switch p.Text {
			case "/compact":
				c := start()
				_ = c.Chunk(ctx, protocol.Text("## Retained context\n"))
				_ = c.Complete(ctx)
			case "/compact fail":
				c := start()
				_ = c.Chunk(ctx, protocol.Text("## Partial"))
				_ = c.Fail(ctx, ErrSummary)
			case "/compact hang":
				start()
			case "/compact twice":
				a, b := start(), start()
				_ = b.Complete(ctx, emitter.Summary(protocol.Text("the newer half")))
				_ = a.Complete(ctx, emitter.Summary(protocol.Text("the older half")))
			default:
				if err := s.Send(ctx, AgentText("echo: "+p.Text)); err != nil {
					return "", err
				}
			}
			return "end_turn", nil
		},
		Load: func(ctx context.Context, _ Conn, sessionID string) error {
			return st.SessionFrom(ctx, sessionID).ReplayHistory(ctx, nil)
		},
	}
}

// AgentText is an agent_message_chunk update with text.
func AgentText(text string) map[string]any {
	return map[string]any{"sessionUpdate": "agent_message_chunk", "content": protocol.Text(text)}
}

// HistoryPrompts are the prompts HistoryReplaysWhatTheClientSaw plays.
var HistoryPrompts = []string{"hello", "/compact", "between", "/compact fail", "/compact hang", "/compact twice", "bye"}

// HistoryReplaysWhatTheClientSaw plays HistoryPrompts against a
// HistoryAgent on a kit with store, then loads the session on a new kit
// with the same store (a restart), and checks that the replay leaves the
// client holding what the live client held: every message, every
// compaction with its status, summary and error. It returns the replayed
// timeline.
func HistoryReplaysWhatTheClientSaw(t *testing.T, st Stack, store history.Store, capable bool) []string {
	t.Helper()
	r := Serve(t, st, Config{Store: store}, HistoryAgent(st))
	r.Initialize(1, capable)
	r.NewSession()
	for _, p := range HistoryPrompts {
		_, err := r.Client.Call(r.Ctx, "session/prompt", PromptText(SessionID, p, nil))
		require.NoError(t, err, "prompt %q", p)
	}
	live := Timeline(r.Finish(1), true)

	r2 := Serve(t, st, Config{Store: store}, HistoryAgent(st))
	r2.Initialize(1, capable)
	_, err := r2.Client.Call(r2.Ctx, "session/load", map[string]any{"sessionId": SessionID, "cwd": "/", "mcpServers": []any{}})
	require.NoError(t, err, "session/load on the new kit")
	replay := Timeline(r2.Finish(1), false)
	assert.Equal(t, live, replay, "the replay after a restart holds what the live client held")
	return replay
}

// NewSession runs session/new (the agent answers SessionID).
func (r *Rig) NewSession() {
	r.T.Helper()
	_, err := r.Client.Call(r.Ctx, "session/new", map[string]any{"cwd": "/", "mcpServers": []any{}})
	require.NoError(r.T, err, "session/new")
}

// Call sends a request and waits for its result.
func (c *Client) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	var res json.RawMessage
	err := c.Conn.Call(ctx, method, params, &res)
	return res, err
}

// Timeline is the client's timeline of SessionID after evs (the
// conformance reducer's rendering, one row an item). With prompts, the
// prompts the client sent are rows of their own, where it sent them, as a
// v1 client shows them (a replay sends them as user_message_chunk).
func Timeline(evs []Event, prompts bool) []string {
	red := conformance.NewReducer(1)
	for _, e := range evs {
		switch {
		case e.Sent && prompts && e.Method == "session/prompt" && !e.Response:
			var p struct {
				Prompt []json.RawMessage `json:"prompt"`
			}
			_ = json.Unmarshal(e.Params, &p)
			for _, b := range p.Prompt {
				// Each prompt a message of its own, as a client shows it.
				u, _ := json.Marshal(map[string]any{"sessionUpdate": "user_message_chunk", "content": b, "messageId": "prompt_" + e.ID})
				_ = red.Apply(SessionID, u)
			}
		case !e.Sent && e.Method == "session/update" && e.SessionID == SessionID:
			_ = red.Apply(SessionID, e.Update)
		}
	}
	var b strings.Builder
	_ = red.Render(&b, SessionID)
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

// KeptDataIsHandedBackInItsPlace checks that what the runtime keeps with
// Session.Keep is never sent, and that ReplayHistory hands it back to the
// runtime, among the other entries, in its place; and that a restore
// error fails the load.
func KeptDataIsHandedBackInItsPlace(t *testing.T, st Stack, store history.Store) {
	t.Helper()
	agent := HistoryAgent(st)
	script := agent.Prompt
	agent.Prompt = func(ctx context.Context, c Conn, p Prompt) (string, error) {
		if n, ok := strings.CutPrefix(p.Text, "tokens "); ok {
			return "end_turn", st.SessionFrom(ctx, p.SessionID).Keep(ctx, map[string]string{"tokens": n})
		}
		return script(ctx, c, p)
	}
	r := Serve(t, st, Config{Store: store}, agent)
	r.Initialize(1, true)
	r.NewSession()
	for _, p := range []string{"hello", "tokens 151200", "/compact", "tokens 6000"} {
		_, err := r.Client.Call(r.Ctx, "session/prompt", PromptText(SessionID, p, nil))
		require.NoError(t, err, "prompt %q", p)
	}
	for _, e := range r.Finish(1) {
		assert.NotContains(t, string(e.Update), "151200", "kept data is never sent")
	}

	var restored []string
	loader := &Agent{Load: func(ctx context.Context, _ Conn, sessionID string) error {
		return st.SessionFrom(ctx, sessionID).ReplayHistory(ctx, func(e history.Entry) error {
			switch e.Kind {
			case history.Data:
				restored = append(restored, "data "+string(e.Data))
			case history.Final:
				restored = append(restored, "compaction "+string(e.Record.Status))
			case history.Update:
				var u struct {
					Kind    string                `json:"sessionUpdate"`
					Content protocol.ContentBlock `json:"content"`
				}
				_ = json.Unmarshal(e.Update, &u)
				restored = append(restored, u.Kind+" "+u.Content.Text)
			}
			return nil
		})
	}}
	r2 := Serve(t, st, Config{Store: store}, loader)
	r2.Initialize(1, true)
	_, err := r2.Client.Call(r2.Ctx, "session/load", map[string]any{"sessionId": SessionID, "cwd": "/", "mcpServers": []any{}})
	require.NoError(t, err)
	r2.Finish(1)
	assert.Equal(t, []string{
		"user_message_chunk hello", "agent_message_chunk echo: hello",
		"user_message_chunk tokens 151200", `data {"tokens":"151200"}`,
		"user_message_chunk /compact", "compaction completed",
		"user_message_chunk tokens 6000", `data {"tokens":"6000"}`,
	}, restored, "the runtime gets every entry back, in its place")

	failing := &Agent{Load: func(ctx context.Context, _ Conn, sessionID string) error {
		return st.SessionFrom(ctx, sessionID).ReplayHistory(ctx, func(history.Entry) error { return errors.New("the runtime cannot restore this") })
	}}
	r3 := Serve(t, st, Config{Store: store}, failing)
	r3.Initialize(1, true)
	_, err = r3.Client.Call(r3.Ctx, "session/load", map[string]any{"sessionId": SessionID, "cwd": "/", "mcpServers": []any{}})
	assert.Error(t, err, "a restore error fails the load")
	r3.Finish(1)
}

// ReplayedTimeline loads SessionID on a new kit with store and returns the
// timeline the client is left with.
func ReplayedTimeline(t *testing.T, st Stack, store history.Store) []string {
	t.Helper()
	return replayed(t, st, store)
}

// Stores are the stores a kit persists through in the shared tests, by
// name: sessionlog's files, and sqlstore on SQLite.
func Stores() map[string]func(t *testing.T) history.Store {
	return map[string]func(t *testing.T) history.Store{
		"sessionlog": func(t *testing.T) history.Store {
			s, err := sessionlog.Open(t.TempDir())
			require.NoError(t, err)
			return s.History()
		},
		"sqlite": func(t *testing.T) history.Store {
			db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "h.db")+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			s, err := sqlstore.Open(context.Background(), db)
			require.NoError(t, err)
			return s
		},
	}
}

// RecordWithoutAConnectionIsReplayedOnTheNextLoad: a compaction the
// runtime applies after its kit's Shutdown (Kit.Record) is replayed at the
// end of the history on the next load; only a settled one is recorded,
// and a kit without a store records nothing.
func RecordWithoutAConnectionIsReplayedOnTheNextLoad(t *testing.T, st Stack, store history.Store) {
	r := Serve(t, st, Config{Store: store}, HistoryAgent(st))
	r.Initialize(1, true)
	r.NewSession()
	_, err := r.Client.Call(r.Ctx, "session/prompt", PromptText(SessionID, "hello", nil))
	require.NoError(t, err)
	r.Finish(1)

	kit := st.Kit(store)
	require.NoError(t, kit.Shutdown(context.Background()))
	late := emitter.Record{Status: protocol.Completed, Trigger: protocol.Auto, Displayable: true, Summary: []protocol.ContentBlock{protocol.Text("applied after Shutdown")}}
	require.NoError(t, kit.Record(context.Background(), SessionID, late), "a record without a connection")
	assert.ErrorIs(t, kit.Record(context.Background(), SessionID, emitter.Record{Status: protocol.InProgress}), st.Errors().Store, "only a settled compaction is recorded")
	assert.ErrorIs(t, st.Kit(nil).Record(context.Background(), SessionID, late), st.Errors().Store, "a kit without a store records nothing")

	replay := ReplayedTimeline(t, st, store)
	require.Len(t, replay, 3)
	assert.Equal(t, []string{"[user] hello", "[agent] echo: hello"}, replay[:2])
	assert.Contains(t, replay[2], "completed  summary: applied after Shutdown", "the late record replays at the end of the history")
}
