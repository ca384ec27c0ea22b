package scenario_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/scenario"
	"github.com/acpcompact/acpcompact/internal/scenario/client"
	"github.com/acpcompact/acpcompact/sessionlog"
	"github.com/sourcegraph/jsonrpc2"
)

func stateDir(dir string) func(*scenario.Config) {
	return func(c *scenario.Config) { c.StateDir = dir }
}

// closeAgent closes an agent's state files, as a process does before it
// exits.
func closeAgent(t *testing.T, a *scenario.Agent) {
	t.Helper()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
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
				if err := red.Apply(sid, u); err != nil {
					t.Fatal(err)
				}
			}
		case m.Dir == conformance.FromAgent:
			if err := red.ApplyMessage(m.Raw); err != nil {
				t.Fatalf("reducer: %v", err)
			}
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
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n  got\n    %s\n  want\n    %s", what, strings.Join(got, "\n    "), strings.Join(want, "\n    "))
	}
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
			if err != nil {
				t.Fatal(err)
			}
			live.waitFor(slow.From(), "the slow compaction", func(m client.Message) bool {
				return m.CompactionID == "cmp_4" || m.ToolCallID == "compact-cmp_4"
			})
			if err := live.cl.Cancel(live.ctx, sid); err != nil {
				t.Fatal(err)
			}
			live.wait(slow)
			for _, p := range []string{"/compact nosummary", "/compact panic", "/compact flood 5", "/compact twice", "again"} {
				live.prompt(sid, p)
			}
			liveMsgs := live.finish()

			// The same process loads it first, from memory.
			same := connect(t, a, m)
			from := same.cl.Len()
			if err := same.cl.Load(same.ctx, sid, "/work"); err != nil {
				t.Fatal(err)
			}
			inMemory := same.cl.Messages()[from:]
			same.finish()
			closeAgent(t, a)

			b := newAgent(t, stateDir(dir), func(c *scenario.Config) { c.AutoCompactEvery = 2 })
			loaded := connect(t, b, m)
			from = loaded.cl.Len()
			if err := loaded.cl.Load(loaded.ctx, sid, "/work"); err != nil {
				t.Fatalf("session/load after the restart: %v", err)
			}
			replay := loaded.cl.Messages()[from:]
			if got, want := seq(replay), seq(inMemory); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("the restarted agent replays\n  %v\nthe running one\n  %v", got, want)
			}
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
			if err := again.cl.Load(again.ctx, sid, "/work"); err != nil {
				t.Fatal(err)
			}
			if n := len(compactions(timeline(t, again.cl.Messages()[from:], 1, sid))); m.capable && n != 11 {
				t.Errorf("%d compactions replayed, want 11", n)
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
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(data), "hello")
	data[i] = 'j' // in a message: line 2
	if err := os.WriteFile(corruptPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	foreignPath := filepath.Join(dir, foreign+".jsonl")
	if err := os.WriteFile(foreignPath, []byte("{\"role\":\"user\",\"content\":\"a chat log of another tool\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	b := newAgent(t, stateDir(dir))
	defer closeAgent(t, b)
	l := connect(t, b, capableV1)
	for _, tc := range []struct {
		sid, path, what string
		line            int
	}{{corrupt, corruptPath, "corrupt session log: checksum mismatch", 2}, {foreign, foreignPath, "not a session log", 1}} {
		err := l.cl.Load(l.ctx, tc.sid, "/work")
		var rpcErr *jsonrpc2.Error
		if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc2.CodeInternalError ||
			!strings.Contains(rpcErr.Message, tc.path) || !strings.Contains(rpcErr.Message, tc.what) {
			t.Errorf("session/load of %s: %v, want an error naming %s (%s)", tc.sid, err, tc.path, tc.what)
			continue
		}
		var data struct {
			File string
			Line int
		}
		if rpcErr.Data == nil || json.Unmarshal(*rpcErr.Data, &data) != nil || data.File != tc.path || data.Line != tc.line {
			t.Errorf("error data %s, want file %s line %d", string(ptrOr(rpcErr.Data)), tc.path, tc.line)
		}
	}
	if err := l.cl.Load(l.ctx, "sess_000000000000", "/work"); err == nil || !strings.Contains(err.Error(), "-32002") {
		t.Errorf("session/load of a session without a file: %v", err)
	}
	from := l.cl.Len()
	if err := l.cl.Load(l.ctx, good, "/work"); err != nil {
		t.Fatalf("session/load of the good session: %v", err)
	}
	wantSeq(t, l.cl.Messages()[from:], "user_message_chunk", message, "user_message_chunk", upd("cmp_1", "completed"), message, "response:session/load")
	_, turn := l.prompt(good, "/compact nosummary")
	id := reopened(t, turn, 2) // cmp_<mark>_2
	wantSeq(t, turn, upd(id, "in_progress"), upd(id, "completed"), usage, endTurn)
	l.finish()

	if _, err := sessionlog.Open(dir); err != nil {
		t.Fatal(err)
	}
}

func ptrOr(r *json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return *r
}
