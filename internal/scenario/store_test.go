package scenario_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/scenario"
	"github.com/acpcompact/acpcompact/internal/scenario/client"
	"github.com/acpcompact/acpcompact/sessionlog"
	"github.com/sourcegraph/jsonrpc2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func stateDir(dir string) func(*scenario.Config) {
	return func(c *scenario.Config) { c.StateDir = dir }
}

// closeAgent closes an agent's state files, as a process does before it
// exits.
func closeAgent(t *testing.T, a *scenario.Agent) {
	t.Helper()
	require.NoError(t, a.Close(), "a.Close")
}

// rows is the client's view of session sid, one string a row: each
// message's kind and text, each compaction's state (ID, status, summary,
// error, _meta) and each other item's (a fallback tool call: ID, status,
// title, content). A live v1 client shows its own prompts (the agent does
// not echo them); they are rows too, so that a live view and a replayed
// one compare.
func rows(t *testing.T, msgs []client.Message, version int, sid string) []string {
	t.Helper()
	red := conformance.NewReducer(version)
	for _, m := range msgs {
		switch {
		case m.Dir == conformance.FromClient && m.Method == "session/prompt" && version == 1:
			var p struct {
				Prompt []json.RawMessage `json:"prompt"`
			}
			var env struct {
				Params json.RawMessage `json:"params"`
			}
			_ = json.Unmarshal(m.Raw, &env)
			_ = json.Unmarshal(env.Params, &p)
			for _, b := range p.Prompt {
				u, _ := json.Marshal(map[string]any{"sessionUpdate": "user_message_chunk", "messageId": m.Seq, "content": b})
				require.NoError(t, red.Apply(sid, u), "red.Apply")
			}
		case m.Dir == conformance.FromAgent:
			require.NoError(t, red.ApplyMessage(m.Raw), "reducer")
		}
	}
	var out []string
	for _, it := range red.Timeline(sid) {
		switch it.Kind {
		case conformance.KindUserMessage, conformance.KindAgentMessage, conformance.KindAgentThought:
			out = append(out, string(it.Kind)+": "+it.Text)
		case conformance.KindCompaction:
			j, _ := json.Marshal(struct {
				ID, Status string
				Summary    []json.RawMessage
				Error      *string
				Meta       map[string]json.RawMessage
			}{it.ID, it.Status, it.Summary, it.Error, it.Meta})
			out = append(out, "compaction: "+string(j))
		default:
			var u struct {
				Content []struct {
					Content struct{ Text string } `json:"content"`
				} `json:"content"`
			}
			_ = json.Unmarshal(it.Raw, &u)
			var content []string
			for _, c := range u.Content {
				content = append(content, c.Content.Text)
			}
			out = append(out, string(it.Kind)+": "+it.ID+" "+it.Status+" "+it.Text+" "+strings.Join(content, "|"))
		}
	}
	return out
}

func sameRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	assert.Equal(t, strings.Join(want, "\n"), strings.Join(got, "\n"), what)
}

// TestScenarioRestartReplaysFromTheStateDir: a new Agent on the same state
// directory (a restarted process) loads a session of the old one and
// replays what the client saw live, for every outcome, as the old one
// replays it; the session then goes on where it left off.
func TestScenarioRestartReplaysFromTheStateDir(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			a := newAgent(t, stateDir(dir), func(c *scenario.Config) { c.AutoCompactEvery = 2 })
			live := connect(t, a, m)
			sid := live.session()
			for _, p := range []string{"hello", "/compact", "/compact fail", "/compact failearly"} {
				live.prompt(sid, p)
			}
			slow, err := live.cl.StartPrompt(live.ctx, sid, "/compact slow")
			require.NoError(t, err, "live.cl.StartPrompt")
			live.waitFor(slow.From(), "the slow compaction", func(m client.Message) bool {
				return m.CompactionID == "cmp_4" || m.ToolCallID == "compact-cmp_4"
			})
			require.NoError(t, live.cl.Cancel(live.ctx, sid), "live.cl.Cancel")
			live.wait(slow)
			for _, p := range []string{"/compact nosummary", "/compact panic", "/compact flood 5", "/compact twice", "again"} {
				live.prompt(sid, p)
			}
			liveMsgs := live.finish()

			// The same process loads it first, from memory.
			same := connect(t, a, m)
			from := same.cl.Len()
			require.NoError(t, same.cl.Load(same.ctx, sid, "/work"), "same.cl.Load")
			inMemory := same.cl.Messages()[from:]
			same.finish()
			closeAgent(t, a)

			b := newAgent(t, stateDir(dir), func(c *scenario.Config) { c.AutoCompactEvery = 2 })
			loaded := connect(t, b, m)
			from = loaded.cl.Len()
			require.NoError(t, loaded.cl.Load(loaded.ctx, sid, "/work"), "session/load after the restart")
			replay := loaded.cl.Messages()[from:]
			assert.Equal(t, strings.Join(seq(inMemory), " "), strings.Join(seq(replay), " "), "what the restarted agent replays, against the running one")
			sameRows(t, "the replay after the restart, against the live view", rows(t, replay, 1, sid), rows(t, liveMsgs, 1, sid))

			// The session goes on: its compaction IDs too.
			_, turn := loaded.prompt(sid, "/compact nosummary")
			id := reopened(t, turn, 11) // cmp_<mark>_11
			if m.capable {
				wantSeq(t, turn, upd(id, "in_progress"), upd(id, "completed"), usage, endTurn)
			} else {
				wantSeq(t, turn, tool(id, "in_progress"), toolUp(id, "completed"), usage, endTurn)
			}
			loaded.finish()
			closeAgent(t, b)

			// And a third process replays that too.
			c := newAgent(t, stateDir(dir))
			again := connect(t, c, m)
			from = again.cl.Len()
			require.NoError(t, again.cl.Load(again.ctx, sid, "/work"), "again.cl.Load")
			if n := len(compactions(timeline(t, again.cl.Messages()[from:], 1, sid))); m.capable {
				assert.Equal(t, 11, n, "compactions replayed")
			}
			again.finish()
			closeAgent(t, c)
		})
	}
}

// TestScenarioUnreadableStateFiles: a corrupt or foreign state file fails
// its session/load with an error naming the file; the agent serves its
// other sessions as before.
func TestScenarioUnreadableStateFiles(t *testing.T) {
	dir := t.TempDir()
	a := newAgent(t, stateDir(dir))
	r := connect(t, a, capableV1)
	var sids []string
	for range 3 {
		sid := r.session()
		r.prompt(sid, "hello")
		r.prompt(sid, "/compact")
		sids = append(sids, sid)
	}
	r.finish()
	closeAgent(t, a)

	corrupt, foreign, good := sids[0], sids[1], sids[2]
	corruptPath := filepath.Join(dir, corrupt+".jsonl")
	data, err := os.ReadFile(corruptPath)
	require.NoError(t, err, "os.ReadFile")
	i := strings.Index(string(data), "hello")
	data[i] = 'j' // in the prompt's record: line 3 (line 2 keeps the working directory)
	require.NoError(t, os.WriteFile(corruptPath, data, 0o600), "os.WriteFile")
	foreignPath := filepath.Join(dir, foreign+".jsonl")
	require.NoError(t, os.WriteFile(foreignPath, []byte("{\"role\":\"user\",\"content\":\"a chat log of another tool\"}\n"), 0o600), "os.WriteFile")

	b := newAgent(t, stateDir(dir))
	defer closeAgent(t, b)
	l := connect(t, b, capableV1)
	for _, tc := range []struct {
		sid, path, what string
		line            int
	}{{corrupt, corruptPath, "corrupt session log: checksum mismatch", 3}, {foreign, foreignPath, "not a session log", 1}} {
		err := l.cl.Load(l.ctx, tc.sid, "/work")
		var rpcErr *jsonrpc2.Error
		if !assert.ErrorAs(t, err, &rpcErr, "session/load of %s", tc.sid) ||
			!assert.Equal(t, int64(jsonrpc2.CodeInternalError), rpcErr.Code, "session/load of %s: error code", tc.sid) ||
			!assert.Contains(t, rpcErr.Message, tc.path, "session/load of %s: the error names the file", tc.sid) ||
			!assert.Contains(t, rpcErr.Message, tc.what, "session/load of %s: the error says what is wrong", tc.sid) {
			continue
		}
		var data struct {
			File string
			Line int
		}
		if assert.NotNil(t, rpcErr.Data, "session/load of %s: error data", tc.sid) &&
			assert.NoError(t, json.Unmarshal(*rpcErr.Data, &data), "error data %s", string(ptrOr(rpcErr.Data))) {
			assert.Equal(t, tc.path, data.File, "error data %s: file", string(ptrOr(rpcErr.Data)))
			assert.Equal(t, tc.line, data.Line, "error data %s: line", string(ptrOr(rpcErr.Data)))
		}
	}
	assert.ErrorContains(t, l.cl.Load(l.ctx, "sess_000000000000", "/work"), "-32002", "session/load of a session without a file")
	from := l.cl.Len()
	require.NoError(t, l.cl.Load(l.ctx, good, "/work"), "session/load of the good session")
	wantSeq(t, l.cl.Messages()[from:], "user_message_chunk", message, "user_message_chunk", upd("cmp_1", "completed"), message, "response:session/load")
	_, turn := l.prompt(good, "/compact nosummary")
	id := reopened(t, turn, 2) // cmp_<mark>_2
	wantSeq(t, turn, upd(id, "in_progress"), upd(id, "completed"), usage, endTurn)
	l.finish()

	_, err = sessionlog.Open(dir)
	require.NoError(t, err, "sessionlog.Open of the state directory")
}

func ptrOr(r *json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return *r
}
