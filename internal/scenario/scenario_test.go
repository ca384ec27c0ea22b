package scenario_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/scenario"
	"github.com/acpcompact/acpcompact/internal/scenario/client"
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
	if err := json.Unmarshal(field(m, "_meta"), &meta); err != nil || meta["acpcompact/record"] == nil {
		t.Fatalf("no acpcompact/record in the _meta of %s", m.Raw)
	}
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
				if !sameJSON(field(done, "summary"), string(want)) {
					t.Errorf("the completed summary %s is not the streamed text %q", field(done, "summary"), streamed.String())
				}
				if !strings.HasPrefix(streamed.String(), "## Retained context\n\n- The conversation began with \"hello\".") {
					t.Errorf("summary %q", streamed.String())
				}
				rec := record(t, done)
				if !sameJSON(rec["summarizer"], `{"model":"scenario-summarizer","promptId":"scenario-compact-v1"}`) ||
					!sameJSON(rec["trigger"], `"manual"`) || !sameJSON(rec["contextWindow"], `200000`) {
					t.Errorf("record %s", field(done, "_meta"))
				}
				u := find(t, turn, "usage_update", func(m client.Message) bool { return m.Kind == "usage_update" })
				if !sameJSON(field(u, "used"), string(rec["tokensAfter"])) {
					t.Errorf("usage_update used %s, record tokensAfter %s", field(u, "used"), rec["tokensAfter"])
				}
			},
		},
		{
			prompt:   "/compact nosummary",
			standard: []string{upd("cmp_1", "in_progress"), upd("cmp_1", "completed"), usage, endTurn},
			fallback: []string{tool("cmp_1", "in_progress"), toolUp("cmp_1", "completed"), usage, endTurn},
			check: func(t *testing.T, m mode, turn []client.Message) {
				if m.capable {
					done := find(t, turn, "completed update", update("compaction_update", "cmp_1", "completed"))
					if s := field(done, "summary"); s != nil {
						t.Errorf("completed without a summary carries summary %s", s)
					}
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
					if !strings.Contains(string(f.Raw), "Compaction failed: summary request failed") {
						t.Errorf("failed tool call %s", f.Raw)
					}
					return
				}
				f := find(t, turn, "failed update", update("compaction_update", "cmp_1", "failed"))
				if !sameJSON(field(f, "error"), `"summary request failed"`) || !sameJSON(field(f, "summary"), `null`) {
					t.Errorf("failed update %s: want the runtime's error and the partial summary cleared", f.Raw)
				}
			},
		},
		{
			prompt:   "/compact failearly",
			standard: []string{upd("cmp_1", "in_progress"), upd("cmp_1", "failed"), endTurn},
			fallback: []string{tool("cmp_1", "in_progress"), toolUp("cmp_1", "failed"), endTurn},
			check: func(t *testing.T, m mode, turn []client.Message) {
				if m.capable {
					f := find(t, turn, "failed update", update("compaction_update", "cmp_1", "failed"))
					if !sameJSON(field(f, "error"), `"summarizer model unavailable"`) {
						t.Errorf("failed update %s", f.Raw)
					}
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
					if s := field(done, "summary"); s != nil {
						t.Errorf("flood completes keeping the streamed summary, but sent summary %.80s", s)
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
					if !sameJSON(field(f, "error"), fmt.Sprintf("%q", emitter.ErrAgentCrashed.Error())) {
						t.Errorf("failed update %s", f.Raw)
					}
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
				if _, turn := r.prompt(sid, "hello"); !equalWords(seq(turn), message, endTurn) {
					t.Fatalf("warm-up prompt: %v", seq(turn))
				}
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
			if err != nil {
				t.Fatal(err)
			}
			if m.capable {
				r.waitFor(turn.From(), "a second chunk", func(m client.Message) bool {
					return m.Kind == "compaction_summary_chunk" && strings.Contains(string(m.Raw), "Step 2 of")
				})
			} else {
				r.waitFor(turn.From(), "the tool call", update("tool_call", "compact-cmp_1", "in_progress"))
			}
			if err := r.cl.Cancel(r.ctx, sid); err != nil {
				t.Fatal(err)
			}
			o, msgs := r.wait(turn)
			if o.StopReason != "cancelled" {
				t.Errorf("stop reason %q, want cancelled", o.StopReason)
			}
			words := seq(msgs)
			if m.capable {
				if len(words) != 4 || words[0] != upd("cmp_1", "in_progress") || !strings.HasPrefix(words[1], "chunk:cmp_1*") ||
					words[2] != upd("cmp_1", "cancelled") || words[3] != "response:cancelled" {
					t.Errorf("the agent sent %v", words)
				}
				c := find(t, msgs, "cancelled update", update("compaction_update", "cmp_1", "cancelled"))
				// The runtime's own report clears the partial summary and
				// carries its record; the kit's would do neither.
				if !sameJSON(field(c, "summary"), "null") || record(t, c)["summarizer"] == nil {
					t.Errorf("cancelled update %s was not the runtime's report", c.Raw)
				}
			} else {
				wantSeq(t, msgs, tool("cmp_1", "in_progress"), toolUp("cmp_1", "failed"), "response:cancelled")
				c := find(t, msgs, "settled tool call", update("tool_call_update", "compact-cmp_1", "failed"))
				if !strings.Contains(string(c.Raw), "Compaction cancelled") || record(t, c)["summarizer"] == nil {
					t.Errorf("settled tool call %s was not the runtime's cancel", c.Raw)
				}
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
	if o.StopReason != "end_turn" {
		t.Errorf("stop reason %q", o.StopReason)
	}
	wantSeq(t, turn, upd("cmp_1", "in_progress"), chunks("cmp_1", 50), upd("cmp_1", "completed"), usage, endTurn)
	r.finish()
}

// hangCancelled runs /compact hang and cancels it once it is on the wire.
func hangCancelled(t *testing.T, r *rig) (client.Outcome, []client.Message) {
	t.Helper()
	sid := r.session()
	turn, err := r.cl.StartPrompt(r.ctx, sid, "/compact hang")
	if err != nil {
		t.Fatal(err)
	}
	r.waitFor(turn.From(), "the start", func(m client.Message) bool {
		return m.CompactionID == "cmp_1" || m.ToolCallID == "compact-cmp_1"
	})
	if err := r.cl.Cancel(r.ctx, sid); err != nil {
		t.Fatal(err)
	}
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
			if o.StopReason != "cancelled" {
				t.Errorf("stop reason %q", o.StopReason)
			}
			if m.capable {
				wantSeq(t, turn, upd("cmp_1", "in_progress"), upd("cmp_1", "cancelled"), "response:cancelled")
				c := find(t, turn, "cancelled update", update("compaction_update", "cmp_1", "cancelled"))
				if field(c, "summary") != nil {
					t.Errorf("the kit's settlement %s patches the summary", c.Raw)
				}
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
			if o.StopReason != "cancelled" {
				t.Errorf("stop reason %q", o.StopReason)
			}
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
			if o.StopReason != "end_turn" {
				t.Errorf("stop reason %q", o.StopReason)
			}
			if m.capable {
				wantSeq(t, turn, upd("cmp_1", "in_progress"), upd("cmp_1", "failed"), endTurn)
				f := find(t, turn, "failed update", update("compaction_update", "cmp_1", "failed"))
				if !sameJSON(field(f, "error"), `"compaction timed out after 100ms"`) {
					t.Errorf("failed update %s", f.Raw)
				}
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
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	r.waitFor(turn.From(), "a heartbeat", func(m client.Message) bool {
		if m.Kind == "compaction_update" && m.Status == "in_progress" {
			seen++
		}
		return seen == 2
	})
	if err := r.cl.Cancel(r.ctx, sid); err != nil {
		t.Fatal(err)
	}
	_, msgs := r.wait(turn)
	words := seq(msgs)
	if len(words) != 3 || !strings.HasPrefix(words[0], upd("cmp_1", "in_progress")+"*") ||
		words[1] != upd("cmp_1", "cancelled") || words[2] != "response:cancelled" {
		t.Errorf("the agent sent %v", words)
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
			if !sameJSON(record(t, done)["trigger"], `"auto"`) {
				t.Errorf("record %s: want trigger auto", field(done, "_meta"))
			}
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
				if o, _ := r.prompt(sid, p); o.StopReason != "end_turn" {
					t.Errorf("%s: stop reason %q", p, o.StopReason)
				}
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
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("code %d", tc.code)) {
			t.Errorf("%s %v: got %v, want error code %d", tc.method, tc.params, err, tc.code)
		}
	}
	r.finish()
}

func TestScenarioConfigErrors(t *testing.T) {
	if _, err := scenario.New(scenario.Config{Fallback: "smoke-signals"}); err == nil {
		t.Error("an unknown fallback name was accepted")
	}
	if _, err := scenario.New(scenario.Config{AutoCompactEvery: -1}); err == nil {
		t.Error("a negative AutoCompactEvery was accepted")
	}
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
	if _, err := cl.Initialize(ctx, 1, true); err != nil {
		t.Fatal(err)
	}
	sid, err := cl.NewSession(ctx, "/work")
	if err != nil {
		t.Fatal(err)
	}
	turn, err := cl.StartPrompt(ctx, sid, "/compact hang")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Wait(ctx, turn.From(), update("compaction_update", "cmp_1", "in_progress")); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-served; !errors.Is(err, context.Canceled) {
		t.Errorf("Serve returned %v, want context.Canceled", err)
	}
	<-cl.Done()
	f := find(t, cl.Messages(), "the settlement", update("compaction_update", "cmp_1", "failed"))
	if !sameJSON(field(f, "error"), fmt.Sprintf("%q", emitter.ErrConnectionClosed.Error())) {
		t.Errorf("settlement %s", f.Raw)
	}
}
