package proxy_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/proxy"
)

// Edges of the hardening issue (issue 26), each a defect observed with a
// real process or the official TypeScript SDK client.

// promptBlocks is a session/prompt whose prompt is blocks, raw.
func (h *harness) promptBlocks(sid, blocks string) int {
	h.t.Helper()
	h.nextID++
	h.client(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":%s}}`, h.nextID, sid, blocks))
	return h.nextID
}

// Defect: the proxy read a prompt's slash command only when the prompt's
// JSON was at most 4 KiB. Editors attach context to prompts: a Kimi Code
// /compact with a 5 KiB block beside it ran no compaction, and "Compaction
// completed…" reached the client as prose after the turn. The command is
// read from the first text block however large the prompt is.
func TestSlashCommandInALongPromptRunsItsCompaction(t *testing.T) {
	selection, _ := json.Marshal(strings.Repeat("func main() { println(\"<&>\") }\n", 170))
	for name, blocks := range map[string]string{
		"a block beside the command": `[{"type":"text","text":"/compact"},{"type":"resource","resource":{"uri":"file:///main.go","mimeType":"text/x-go","text":` + string(selection) + `}}]`,
		"the command's own text":     `[{"type":"text","text":"/compact keep ` + strings.Trim(string(selection), `"`) + `"}]`,
	} {
		t.Run(name, func(t *testing.T) {
			require.Greater(t, len(blocks), 5<<10, "the prompt is long")
			h := startProfiled(t)
			h.handshakeAgent(v1Capable, kimiCode, "2.1.0")
			id := h.promptBlocks("s1", blocks)
			h.relay(upd("s1", text(kimiStarted)))
			h.relay(promptResponse(id, "end_turn"))
			h.agent(upd("s1", text(kimiDone))) // between turns: held, not prose
			id = h.prompt("s1")
			h.wantUpdate(mintedID("s1", proxy.Kimi, 1), "completed", `"trigger":"manual"`)
			h.relay(promptResponse(id, "end_turn"))
		})
	}
}

// Defect: re-encoding a summary escaped <, > and & as six bytes each: a
// summary of them grew sixfold on its way through the proxy (a 6 MiB one
// became a 36 MiB line, over the TypeScript SDK's 32 MiB limit). What the
// proxy forwards does not grow by escaping what the agent did not.
func TestRewrittenSummaryIsNotEscapedIntoAGrowth(t *testing.T) {
	summary := strings.Repeat("<&>", 64<<10)
	line := upd("s1", cmpUpdate("cmp_h", "completed", `"summary":[{"type":"text","text":"`+summary+`"}]`))
	h := start(t)
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	h.relay(promptResponse(id, "end_turn"))
	h.agent(upd("s1", cmpUpdate("cmp_h", "in_progress")))
	h.agent(line) // between turns: held, and rendered by the proxy at the next turn
	h.relay(upd("s1", text("the agent's lines so far are read")))
	h.prompt("s1")
	got := h.next()
	assert.Contains(t, string(got), `"status":"completed"`, "the held compaction is delivered")
	assert.True(t, strings.Contains(string(got), summary), "its summary as the agent spelt it")
	assert.Less(t, len(got), len(line)+256, "the delivered line is no longer than the agent's, give or take its envelope")
}

// Defect: an in_progress whose compactionId holds a lone surrogate escape
// (\ud800) and a completed whose ID holds another (\udbff), or raw invalid
// UTF-8 that differs: Go decodes both to U+FFFD and took them for one
// compaction, JSON.parse keeps two, and the official client was left with
// one in_progress after end_turn. The same held for sessionId. Such an ID
// cannot be compared as the clients compare it, so it is taken at its
// worst: neither followed nor forwarded.
func TestIDsThatClientsDecodeOtherwiseAreNotFollowed(t *testing.T) {
	for name, c := range map[string]struct{ open, done string }{
		"lone surrogates":  {`"compactionId":"a\ud800"`, `"compactionId":"a\udbff"`},
		"invalid UTF-8":    {"\"compactionId\":\"a\xff\"", "\"compactionId\":\"a\xfe\""},
		"a lone trail":     {`"compactionId":"\udc00"`, `"compactionId":"\udc01"`},
		"in the sessionId": {`"compactionId":"c1"`, `"compactionId":"c1"`},
	} {
		t.Run(name, func(t *testing.T) {
			for _, capable := range []bool{true, false} {
				h := start(t)
				params := v1Plain
				if capable {
					params = v1Capable
				}
				h.handshake(params, 1)
				id := h.prompt("s1")
				sid := `"s1"`
				if name == "in the sessionId" {
					sid = `"s1\ud800"`
				}
				for _, u := range []string{
					`{"sessionUpdate":"compaction_update",` + c.open + `,"status":"in_progress"}`,
					`{"sessionUpdate":"compaction_update",` + c.done + `,"status":"completed"}`,
				} {
					h.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":` + sid + `,"update":` + u + `}}`)
				}
				h.relay(promptResponse(id, "end_turn"))
				assert.True(t, contains(h.logs.String(), "dropped a malformed compaction update"), "capable %v: the drop is logged", capable)
			}
		})
	}
}

// Defect: a compaction started after the turn (held), then a session/load
// whose replay carries the same ID completed, then a prompt: the client
// saw it completed, then in_progress again, then failed (the proxy's own
// --check=client reported the reuse). Same with the tool-call fallback. A
// replay settles what it replays: the held start is not delivered after
// it, and the client sees the compaction once, settled.
func TestReplayOfAHeldCompactionSettlesIt(t *testing.T) {
	for _, tc := range []struct {
		name, client string
		want         []string // what the client's update of cmp_h carries
	}{
		{"capable", v1Capable, []string{`"sessionUpdate":"compaction_update"`, `"compactionId":"cmp_h"`, `"status":"completed"`, `"replayed summary"`}},
		{"tool-call fallback", v1Plain, []string{`"sessionUpdate":"tool_call"`, `"toolCallId":"compact-cmp_h"`, `"status":"completed"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t)
			h.handshake(tc.client, 1)
			id := h.prompt("s1")
			h.relay(promptResponse(id, "end_turn"))
			h.agent(upd("s1", cmpUpdate("cmp_h", "in_progress"))) // between turns: held
			h.load(50)
			h.agent(upd("s1", cmpUpdate("cmp_h", "completed", `"summary":[{"type":"text","text":"replayed summary"}]`)))
			got := h.next()
			for _, w := range tc.want {
				assert.Contains(t, string(got), w, "the replayed compaction")
			}
			h.relay(`{"jsonrpc":"2.0","id":50,"result":{}}`)
			id = h.prompt("s1")
			h.relay(upd("s1", text("next turn")))
			h.relay(promptResponse(id, "end_turn"))
			rest, err := h.end()
			require.NoError(t, err, "Run")
			for _, l := range rest {
				assert.NotContains(t, string(l), "cmp_h", "the held compaction after its replay")
			}
		})
	}
}

// With WithAudit the proxy audits a summary it settles a compaction with
// against the session's history as it saw it, and the record it sends
// names what the summary lost (here: the URL of the first prompt, which
// the summary dropped; the path it kept is not named).
func TestAuditedLossInTheProxysRecord(t *testing.T) {
	t.Run("a record of the proxy's", func(t *testing.T) { auditedLossInTheProxysRecord(t, "", nil) })
	// The agent's own record keeps its keys and gains the loss (before, a
	// record of the agent's went without it).
	t.Run("the agent's record", func(t *testing.T) {
		auditedLossInTheProxysRecord(t, `,"_meta":{"acpcompact/record":{"trigger":"auto","tokensBefore":900}}`,
			map[string]any{"trigger": "auto", "tokensBefore": 900.0})
	})
}

// auditedTurnWithAURL starts an audited proxy for a capable client and
// runs one ended turn whose prompt (client line 3) names a file and a URL,
// which a summary that leaves the URL out loses.
func auditedTurnWithAURL(t *testing.T) *harness {
	t.Helper()
	h := start(t, proxy.WithAudit())
	h.handshake(v1Capable, 1)
	h.nextID++
	id := h.nextID
	h.client(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"fix internal/skim/prefix.go, see https://example.com/issue/7"}]}}`, id))
	h.relay(upd("s1", text("On it.")))
	h.relay(promptResponse(id, "end_turn"))
	return h
}

func auditedLossInTheProxysRecord(t *testing.T, meta string, keep map[string]any) {
	h := auditedTurnWithAURL(t)
	// Between turns: held, then rendered by the proxy at the next turn.
	h.agent(upd("s1", cmpUpdate("cmp_a", "in_progress")))
	h.agent(upd("s1", cmpUpdate("cmp_a", "completed", `"summary":[{"type":"text","text":"The user asked to fix internal/skim/prefix.go."}]`+meta)))
	h.relay(upd("s1", text("the agent's lines so far are read")))
	id := h.prompt("s1")
	got := h.next()
	var rec struct {
		Params struct {
			Update struct {
				Meta map[string]map[string]any `json:"_meta"`
			} `json:"update"`
		} `json:"params"`
	}
	require.NoError(t, json.Unmarshal(got, &rec), "the delivered compaction: %s", got)
	for k, v := range keep {
		assert.Equal(t, v, rec.Params.Update.Meta[emitter.DefaultRecordKey][k], "the agent's record key %s: %s", k, got)
	}
	var u struct {
		Params struct {
			Update struct {
				Status string `json:"status"`
				Meta   map[string]struct {
					KnownLoss []emitter.Loss `json:"knownLoss"`
				} `json:"_meta"`
			} `json:"update"`
		} `json:"params"`
	}
	require.NoError(t, json.Unmarshal(got, &u), "the delivered compaction: %s", got)
	assert.Equal(t, "completed", u.Params.Update.Status, "the delivered compaction: %s", got)
	lost := u.Params.Update.Meta[emitter.DefaultRecordKey].KnownLoss
	if assert.Len(t, lost, 1, "the record's known loss: %s", got) {
		assert.Equal(t, emitter.Loss{Kind: "url", Value: "https://example.com/issue/7", Where: "client line 3"}, lost[0], "what the summary lost")
	}
	h.relay(promptResponse(id, "end_turn"))
}

// A completion of the agent's own that the proxy forwards as it came (a
// capable client, in a turn) gets the audit's record beside what the
// agent's _meta holds: its other keys and its own record's keys kept; a
// record that is no object leaves the line as it came. Before, such a
// completion carried no record at all.
func TestAuditedLossOnTheAgentsOwnCompletion(t *testing.T) {
	summary := `"summary":[{"type":"text","text":"The user asked to fix internal/skim/prefix.go."}]`
	cases := []struct {
		name, meta string
		// want is the completion's _meta as the client gets it; "" for the
		// agent's line unchanged.
		want string
	}{
		{name: "no _meta",
			want: `{"acpcompact/record":{"status":"completed","knownLoss":[{"kind":"url","value":"https://example.com/issue/7","where":"client line 3"}]}}`},
		{name: "null _meta", meta: `,"_meta":null`,
			want: `{"acpcompact/record":{"status":"completed","knownLoss":[{"kind":"url","value":"https://example.com/issue/7","where":"client line 3"}]}}`},
		{name: "the agent's keys and record", meta: `,"_meta":{"vendor":{"x":1},"acpcompact/record":{"trigger":"auto","tokensBefore":900}}`,
			want: `{"vendor":{"x":1},"acpcompact/record":{"trigger":"auto","tokensBefore":900,"status":"completed","knownLoss":[{"kind":"url","value":"https://example.com/issue/7","where":"client line 3"}]}}`},
		{name: "a record that is no object", meta: `,"_meta":{"acpcompact/record":"opaque"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := auditedTurnWithAURL(t)
			// The next turn compacts what came before its prompt.
			id := h.prompt("s1")
			h.relay(upd("s1", cmpUpdate("cmp_a", "in_progress")))
			line := upd("s1", cmpUpdate("cmp_a", "completed", summary+c.meta))
			if c.want == "" {
				h.relay(line)
			} else {
				h.agent(line)
				got := h.next()
				var u struct {
					Params struct {
						Update map[string]json.RawMessage `json:"update"`
					} `json:"params"`
				}
				require.NoError(t, json.Unmarshal(got, &u), "the completion: %s", got)
				assert.JSONEq(t, c.want, string(u.Params.Update["_meta"]), "the completion's _meta: %s", got)
				assert.JSONEq(t, `"completed"`, string(u.Params.Update["status"]), "the completion: %s", got)
				assert.Contains(t, string(u.Params.Update["summary"]), "prefix.go", "the agent's summary, as it came: %s", got)
			}
			h.relay(promptResponse(id, "end_turn"))
		})
	}
}
