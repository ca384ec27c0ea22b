package scenario_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/scenario"
	"github.com/acpcompact/acpcompact/internal/scenario/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Word shorthands for the expected wire, see seq.
func upd(id, status string) string { return "compaction_update:" + id + ":" + status }
func chunks(id string, n int) string {
	if n == 1 {
		return "chunk:" + id
	}
	return fmt.Sprintf("chunk:%s*%d", id, n)
}
func tool(id, status string) string   { return "tool_call:compact-" + id + ":" + status }
func toolUp(id, status string) string { return "tool_call_update:compact-" + id + ":" + status }

const (
	usage    = "usage_update"
	message  = "agent_message_chunk"
	endTurn  = "response:end_turn"
	internal = "error:-32603"
)

// record returns the acpcompact/record of a terminal update's _meta.
func record(t *testing.T, m client.Message) map[string]json.RawMessage {
	t.Helper()
	var meta map[string]map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(field(m, "_meta"), &meta), "no acpcompact/record in the _meta of %s", m.Raw)
	require.NotNil(t, meta["acpcompact/record"], "no acpcompact/record in the _meta of %s", m.Raw)
	return meta["acpcompact/record"]
}

// TestScripts plays every prompt script in both v1 capability modes and
// checks the exact updates, the prompt's answer, and (in finish) the
// conformance checker and the official schema over the whole record.
func TestScenarioScripts(t *testing.T) {
	type script struct {
		prompt   string
		standard []string // with the capability
		fallback []string // without: the default tool call form
		check    func(t *testing.T, m mode, turn []client.Message)
	}
	scripts := []script{
		{
			prompt:   "/compact",
			standard: []string{upd("cmp_1", "in_progress"), chunks("cmp_1", 4), upd("cmp_1", "completed"), usage, message, endTurn},
			fallback: []string{tool("cmp_1", "in_progress"), toolUp("cmp_1", "completed"), usage, message, endTurn},
			check: func(t *testing.T, m mode, turn []client.Message) {
				if !m.capable {
					return
				}
				var streamed strings.Builder
				for _, c := range turn {
					if c.Kind == "compaction_summary_chunk" {
						var ch struct {
							Content struct{ Text string } `json:"content"`
						}
						_ = json.Unmarshal(c.Update, &ch)
						streamed.WriteString(ch.Content.Text)
					}
				}
				done := find(t, turn, "completed update", update("compaction_update", "cmp_1", "completed"))
				want, _ := json.Marshal([]map[string]string{{"type": "text", "text": streamed.String()}})
				assert.JSONEq(t, string(want), string(field(done, "summary")), "the completed summary is not the streamed text %q", streamed.String())
				assert.True(t, strings.HasPrefix(streamed.String(), "## Retained context\n\n- The conversation began with \"hello\"."),
					"the streamed summary does not begin with the retained context: %q", streamed.String())
				rec := record(t, done)
				assert.JSONEq(t, `{"model":"scenario-summarizer","promptId":"scenario-compact-v1"}`, string(rec["summarizer"]), "record summarizer in %s", field(done, "_meta"))
				assert.JSONEq(t, `"manual"`, string(rec["trigger"]), "record trigger in %s", field(done, "_meta"))
				assert.JSONEq(t, `200000`, string(rec["contextWindow"]), "record contextWindow in %s", field(done, "_meta"))
				u := find(t, turn, "usage_update", func(m client.Message) bool { return m.Kind == "usage_update" })
				assert.JSONEq(t, string(rec["tokensAfter"]), string(field(u, "used")), "usage_update used is not the record's tokensAfter")
			},
		},
		{
			prompt:   "/compact nosummary",
			standard: []string{upd("cmp_1", "in_progress"), upd("cmp_1", "completed"), usage, endTurn},
			fallback: []string{tool("cmp_1", "in_progress"), toolUp("cmp_1", "completed"), usage, endTurn},
			check: func(t *testing.T, m mode, turn []client.Message) {
				if m.capable {
					done := find(t, turn, "completed update", update("compaction_update", "cmp_1", "completed"))
					assert.Nil(t, field(done, "summary"), "completed without a summary carries a summary")
				}
			},
		},
		{
			prompt:   "/compact fail",
			standard: []string{upd("cmp_1", "in_progress"), chunks("cmp_1", 1), upd("cmp_1", "failed"), endTurn},
			fallback: []string{tool("cmp_1", "in_progress"), toolUp("cmp_1", "failed"), endTurn},
			check: func(t *testing.T, m mode, turn []client.Message) {
				if !m.capable {
					f := find(t, turn, "failed tool call", update("tool_call_update", "compact-cmp_1", "failed"))
					assert.Contains(t, string(f.Raw), "Compaction failed: summary request failed", "failed tool call")
					return
				}
				f := find(t, turn, "failed update", update("compaction_update", "cmp_1", "failed"))
				assert.JSONEq(t, `"summary request failed"`, string(field(f, "error")), "failed update %s: want the runtime's error", f.Raw)
				assert.JSONEq(t, `null`, string(field(f, "summary")), "failed update %s: want the partial summary cleared", f.Raw)
			},
		},
		{
			prompt:   "/compact failearly",
			standard: []string{upd("cmp_1", "in_progress"), upd("cmp_1", "failed"), endTurn},
			fallback: []string{tool("cmp_1", "in_progress"), toolUp("cmp_1", "failed"), endTurn},
			check: func(t *testing.T, m mode, turn []client.Message) {
				if m.capable {
					f := find(t, turn, "failed update", update("compaction_update", "cmp_1", "failed"))
					assert.JSONEq(t, `"summarizer model unavailable"`, string(field(f, "error")), "failed update's error: %s", f.Raw)
				}
			},
		},
		{
			prompt:   "/compact flood 200",
			standard: []string{upd("cmp_1", "in_progress"), chunks("cmp_1", 200), upd("cmp_1", "completed"), usage, endTurn},
			fallback: []string{tool("cmp_1", "in_progress"), toolUp("cmp_1", "completed"), usage, endTurn},
			check: func(t *testing.T, m mode, turn []client.Message) {
				if m.capable {
					done := find(t, turn, "completed update", update("compaction_update", "cmp_1", "completed"))
					if s := field(done, "summary"); !assert.Nil(t, s, "flood completes keeping the streamed summary, but sent a summary") {
						t.Logf("summary %.80s", s)
					}
				}
			},
		},
		{
			prompt: "/compact twice",
			standard: []string{upd("cmp_1", "in_progress"), upd("cmp_2", "in_progress"), chunks("cmp_1", 1), chunks("cmp_2", 1),
				upd("cmp_2", "completed"), usage, upd("cmp_1", "completed"), usage, endTurn},
			fallback: []string{tool("cmp_1", "in_progress"), tool("cmp_2", "in_progress"),
				toolUp("cmp_2", "completed"), usage, toolUp("cmp_1", "completed"), usage, endTurn},
		},
		{
			prompt:   "/compact panic",
			standard: []string{upd("cmp_1", "in_progress"), chunks("cmp_1", 1), upd("cmp_1", "failed"), internal},
			fallback: []string{tool("cmp_1", "in_progress"), toolUp("cmp_1", "failed"), internal},
			check: func(t *testing.T, m mode, turn []client.Message) {
				if m.capable {
					f := find(t, turn, "failed update", update("compaction_update", "cmp_1", "failed"))
					assert.JSONEq(t, fmt.Sprintf("%q", emitter.ErrAgentCrashed.Error()), string(field(f, "error")), "failed update's error: %s", f.Raw)
				}
			},
		},
		{
			prompt:   "hello again",
			standard: []string{message, endTurn},
			fallback: []string{message, endTurn},
		},
		{
			prompt:   "/compact sideways",
			standard: []string{message, endTurn},
			fallback: []string{message, endTurn},
		},
	}
	for _, sc := range scripts {
		for _, m := range bothModes {
			t.Run(sc.prompt+"/"+m.name, func(t *testing.T) {
				t.Parallel()
				r := connect(t, newAgent(t), m)
				sid := r.session()
				_, warm := r.prompt(sid, "hello")
				require.True(t, equalWords(seq(warm), message, endTurn), "warm-up prompt: %v", seq(warm))
				_, turn := r.prompt(sid, sc.prompt)
				want := sc.standard
				if !m.capable {
					want = sc.fallback
				}
				wantSeq(t, turn, want...)
				if sc.check != nil {
					sc.check(t, m, turn)
				}
				// The connection and the session stay usable, whatever the
				// script did.
				_, after := r.prompt(sid, "still there?")
				wantSeq(t, after, message, endTurn)
				msgs := r.finish()
				if !m.capable {
					noStandardUpdates(t, msgs)
				}
			})
		}
	}
}

func equalWords(got []string, want ...string) bool {
	return strings.Join(got, " ") == strings.Join(want, " ")
}

// TestSlowCompactionCancelledMidStreamIsReportedByTheRuntime: the runtime
// sees its context cancelled with emitter.ErrCancelled and reports the
// interruption itself, well before the kit's cancel grace.
func TestScenarioSlowCompactionCancelledMidStreamIsReportedByTheRuntime(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			r := connect(t, newAgent(t), m)
			sid := r.session()
			turn, err := r.cl.StartPrompt(r.ctx, sid, "/compact slow")
			require.NoError(t, err, "r.cl.StartPrompt")
			if m.capable {
				r.waitFor(turn.From(), "a second chunk", func(m client.Message) bool {
					return m.Kind == "compaction_summary_chunk" && strings.Contains(string(m.Raw), "Step 2 of")
				})
			} else {
				r.waitFor(turn.From(), "the tool call", update("tool_call", "compact-cmp_1", "in_progress"))
			}
			require.NoError(t, r.cl.Cancel(r.ctx, sid), "r.cl.Cancel")
			o, msgs := r.wait(turn)
			assert.Equal(t, "cancelled", o.StopReason, "stop reason")
			words := seq(msgs)
			if m.capable {
				if assert.Len(t, words, 4, "the agent sent %v", words) {
					assert.Equal(t, upd("cmp_1", "in_progress"), words[0], "the agent sent %v", words)
					assert.True(t, strings.HasPrefix(words[1], "chunk:cmp_1*"), "the agent sent %v", words)
					assert.Equal(t, upd("cmp_1", "cancelled"), words[2], "the agent sent %v", words)
					assert.Equal(t, "response:cancelled", words[3], "the agent sent %v", words)
				}
				c := find(t, msgs, "cancelled update", update("compaction_update", "cmp_1", "cancelled"))
				// The runtime's own report clears the partial summary and
				// carries its record; the kit's would do neither.
				assert.JSONEq(t, "null", string(field(c, "summary")), "cancelled update %s was not the runtime's report: the summary is not cleared", c.Raw)
				assert.NotNil(t, record(t, c)["summarizer"], "cancelled update %s was not the runtime's report: no summarizer in its record", c.Raw)
			} else {
				wantSeq(t, msgs, tool("cmp_1", "in_progress"), toolUp("cmp_1", "failed"), "response:cancelled")
				c := find(t, msgs, "settled tool call", update("tool_call_update", "compact-cmp_1", "failed"))
				assert.Contains(t, string(c.Raw), "Compaction cancelled", "settled tool call was not the runtime's cancel")
				assert.NotNil(t, record(t, c)["summarizer"], "settled tool call %s was not the runtime's cancel: no summarizer in its record", c.Raw)
			}
			msgs = r.finish()
			if !m.capable {
				noStandardUpdates(t, msgs)
			}
		})
	}
}

// TestSlowCompactionRunsToCompletion streams all 50 chunks (5 s).
func TestScenarioSlowCompactionRunsToCompletion(t *testing.T) {
	t.Parallel()
	r := connect(t, newAgent(t), capableV1)
	sid := r.session()
	o, turn := r.prompt(sid, "/compact slow")
	assert.Equal(t, "end_turn", o.StopReason, "stop reason")
	wantSeq(t, turn, upd("cmp_1", "in_progress"), chunks("cmp_1", 50), upd("cmp_1", "completed"), usage, endTurn)
	r.finish()
}

// hangCancelled runs /compact hang and cancels it once it is on the wire.
func hangCancelled(t *testing.T, r *rig) (client.Outcome, []client.Message) {
	t.Helper()
	sid := r.session()
	turn, err := r.cl.StartPrompt(r.ctx, sid, "/compact hang")
	require.NoError(t, err, "r.cl.StartPrompt")
	r.waitFor(turn.From(), "the start", func(m client.Message) bool {
		return m.CompactionID == "cmp_1" || m.ToolCallID == "compact-cmp_1"
	})
	require.NoError(t, r.cl.Cancel(r.ctx, sid), "r.cl.Cancel")
	return r.wait(turn)
}

// TestHangIsSettledCancelledAtTheCancelGraceDeadline: the runtime never
// reports, so the kit settles the compaction when the grace runs out, and
// the prompt is answered after that.
func TestScenarioHangIsSettledCancelledAtTheCancelGraceDeadline(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			r := connect(t, newAgent(t, func(c *scenario.Config) { c.CancelGrace = new(50 * time.Millisecond) }), m)
			o, turn := hangCancelled(t, r)
			assert.Equal(t, "cancelled", o.StopReason, "stop reason")
			if m.capable {
				wantSeq(t, turn, upd("cmp_1", "in_progress"), upd("cmp_1", "cancelled"), "response:cancelled")
				c := find(t, turn, "cancelled update", update("compaction_update", "cmp_1", "cancelled"))
				assert.Nil(t, field(c, "summary"), "the kit's settlement %s patches the summary", c.Raw)
			} else {
				wantSeq(t, turn, tool("cmp_1", "in_progress"), toolUp("cmp_1", "failed"), "response:cancelled")
			}
			msgs := r.finish()
			if !m.capable {
				noStandardUpdates(t, msgs)
			}
		})
	}
}

// TestHangWithoutAGraceEndsWithTheTurn: with a negative cancel grace the
// handler answers at once and the end of the turn settles the compaction.
func TestScenarioHangWithoutAGraceEndsWithTheTurn(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			r := connect(t, newAgent(t, func(c *scenario.Config) { c.CancelGrace = new(time.Duration(-1)) }), m)
			o, turn := hangCancelled(t, r)
			assert.Equal(t, "cancelled", o.StopReason, "stop reason")
			if m.capable {
				wantSeq(t, turn, upd("cmp_1", "in_progress"), upd("cmp_1", "cancelled"), "response:cancelled")
			} else {
				wantSeq(t, turn, tool("cmp_1", "in_progress"), toolUp("cmp_1", "failed"), "response:cancelled")
			}
			r.finish()
		})
	}
}

// TestHangIsSettledFailedByTheWatchdog: without a cancel, the compaction
// timeout fails it, and the turn ends normally.
func TestScenarioHangIsSettledFailedByTheWatchdog(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			r := connect(t, newAgent(t, func(c *scenario.Config) { c.CompactionTimeout = 100 * time.Millisecond }), m)
			sid := r.session()
			o, turn := r.prompt(sid, "/compact hang")
			assert.Equal(t, "end_turn", o.StopReason, "stop reason")
			if m.capable {
				wantSeq(t, turn, upd("cmp_1", "in_progress"), upd("cmp_1", "failed"), endTurn)
				f := find(t, turn, "failed update", update("compaction_update", "cmp_1", "failed"))
				assert.JSONEq(t, `"compaction timed out after 100ms"`, string(field(f, "error")), "failed update's error: %s", f.Raw)
			} else {
				wantSeq(t, turn, tool("cmp_1", "in_progress"), toolUp("cmp_1", "failed"), endTurn)
			}
			msgs := r.finish()
			if !m.capable {
				noStandardUpdates(t, msgs)
			}
		})
	}
}

// TestHeartbeatShowsAHungCompactionIsAlive: silence re-sends in_progress.
func TestScenarioHeartbeatShowsAHungCompactionIsAlive(t *testing.T) {
	t.Parallel()
	r := connect(t, newAgent(t, func(c *scenario.Config) { c.Heartbeat = 20 * time.Millisecond; c.CancelGrace = new(time.Duration(-1)) }), capableV1)
	sid := r.session()
	turn, err := r.cl.StartPrompt(r.ctx, sid, "/compact hang")
	require.NoError(t, err, "r.cl.StartPrompt")
	seen := 0
	r.waitFor(turn.From(), "a heartbeat", func(m client.Message) bool {
		if m.Kind == "compaction_update" && m.Status == "in_progress" {
			seen++
		}
		return seen == 2
	})
	require.NoError(t, r.cl.Cancel(r.ctx, sid), "r.cl.Cancel")
	_, msgs := r.wait(turn)
	words := seq(msgs)
	if assert.Len(t, words, 3, "the agent sent %v", words) {
		assert.True(t, strings.HasPrefix(words[0], upd("cmp_1", "in_progress")+"*"), "the agent sent %v", words)
		assert.Equal(t, upd("cmp_1", "cancelled"), words[1], "the agent sent %v", words)
		assert.Equal(t, "response:cancelled", words[2], "the agent sent %v", words)
	}
	r.finish()
}

// TestAutoCompactEvery: every Nth ordinary prompt compacts first, with
// trigger auto.
func TestScenarioAutoCompactEvery(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			r := connect(t, newAgent(t, func(c *scenario.Config) { c.AutoCompactEvery = 2 }), m)
			sid := r.session()
			_, first := r.prompt(sid, "one")
			wantSeq(t, first, message, endTurn)
			_, second := r.prompt(sid, "two")
			var done client.Message
			if m.capable {
				wantSeq(t, second, upd("cmp_1", "in_progress"), chunks("cmp_1", 4), upd("cmp_1", "completed"), usage, message, endTurn)
				done = find(t, second, "completed update", update("compaction_update", "cmp_1", "completed"))
			} else {
				wantSeq(t, second, tool("cmp_1", "in_progress"), toolUp("cmp_1", "completed"), usage, message, endTurn)
				done = find(t, second, "settled tool call", update("tool_call_update", "compact-cmp_1", "completed"))
			}
			assert.JSONEq(t, `"auto"`, string(record(t, done)["trigger"]), "record %s: want trigger auto", field(done, "_meta"))
			_, third := r.prompt(sid, "three")
			wantSeq(t, third, message, endTurn)
			r.finish()
		})
	}
}

// TestEveryFallbackFormSettles: whatever the fallback, a client without the
// capability gets no standard update and every form reaches its end.
func TestScenarioEveryFallbackFormSettles(t *testing.T) {
	for _, name := range fallback.Names() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := connect(t, newAgent(t, func(c *scenario.Config) { c.Fallback = name }), plainV1)
			sid := r.session()
			for _, p := range []string{"/compact", "/compact fail", "/compact failearly", "/compact twice"} {
				o, _ := r.prompt(sid, p)
				assert.Equal(t, "end_turn", o.StopReason, "%s: stop reason", p)
			}
			noStandardUpdates(t, r.finish())
		})
	}
}

func TestScenarioRequestErrors(t *testing.T) {
	r := connect(t, newAgent(t), capableV1)
	sid := r.session()
	for _, tc := range []struct {
		method string
		params any
		code   int64
	}{
		{"session/prompt", client.PromptParams("sess_unknown", "hi"), -32002},
		{"session/load", map[string]any{"sessionId": "sess_unknown", "cwd": "/", "mcpServers": []any{}}, -32002},
		{"session/prompt", client.PromptParams(sid, "/compact flood lots"), -32602},
		{"session/resume", map[string]any{"sessionId": sid, "cwd": "/"}, -32601}, // v2 only
		{"no/such/method", map[string]any{}, -32601},
	} {
		err := r.cl.Call(r.ctx, tc.method, tc.params, nil)
		assert.ErrorContains(t, err, fmt.Sprintf("code %d", tc.code), "%s %v: want error code %d", tc.method, tc.params, tc.code)
	}
	r.finish()
}

func TestScenarioConfigErrors(t *testing.T) {
	_, err := scenario.New(scenario.Config{Fallback: "smoke-signals"})
	assert.Error(t, err, "an unknown fallback name was accepted")
	_, err = scenario.New(scenario.Config{AutoCompactEvery: -1})
	assert.Error(t, err, "a negative AutoCompactEvery was accepted")
}

// TestScenarioServeStopsWhenItsContextEnds: ending Serve's context closes
// the connection, after settling what is open on it (failed: the
// connection closed), and Serve returns once its handlers have.
func TestScenarioServeStopsWhenItsContextEnds(t *testing.T) {
	a := newAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	agentEnd, clientEnd := net.Pipe()
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- a.Serve(serveCtx, agentEnd) }()
	cl := client.New(ctx, clientEnd)
	_, err := cl.Initialize(ctx, 1, true)
	require.NoError(t, err, "initialize")
	sid, err := cl.NewSession(ctx, "/work")
	require.NoError(t, err, "cl.NewSession")
	turn, err := cl.StartPrompt(ctx, sid, "/compact hang")
	require.NoError(t, err, "cl.StartPrompt")
	_, err = cl.Wait(ctx, turn.From(), update("compaction_update", "cmp_1", "in_progress"))
	require.NoError(t, err, "waiting for the in_progress update")
	stop()
	assert.ErrorIs(t, <-served, context.Canceled, "Serve's return")
	<-cl.Done()
	f := find(t, cl.Messages(), "the settlement", update("compaction_update", "cmp_1", "failed"))
	assert.JSONEq(t, fmt.Sprintf("%q", emitter.ErrConnectionClosed.Error()), string(field(f, "error")), "settlement's error: %s", f.Raw)
}
