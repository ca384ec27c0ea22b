package scenario_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/scenario"
	"github.com/acpcompact/acpcompact/internal/scenario/client"
)

// timeline rebuilds the client's view of session sid from a record, with
// the reference reducer.
func timeline(t *testing.T, msgs []client.Message, version int, sid string) []conformance.Item {
	t.Helper()
	red := conformance.NewReducer(version)
	for _, m := range msgs {
		if m.Dir == conformance.FromAgent {
			if err := red.ApplyMessage(m.Raw); err != nil {
				t.Fatalf("reducer: %v", err)
			}
		}
	}
	return red.Timeline(sid)
}

func compactions(items []conformance.Item) []conformance.Item {
	var out []conformance.Item
	for _, it := range items {
		if it.Kind == conformance.KindCompaction {
			out = append(out, it)
		}
	}
	return out
}

func sameItem(a, b conformance.Item) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// TestLoadReplaysTheSessionOnAFreshConnection: session/load replays every
// message and each settled compaction as one terminal update at its
// position, in the form the loading client takes, and the client ends up
// with the compaction rows it had live.
func TestScenarioLoadReplaysTheSessionOnAFreshConnection(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			a := newAgent(t)
			live := connect(t, a, m)
			sid := live.session()
			for _, p := range []string{"hello", "/compact", "/compact fail"} {
				live.prompt(sid, p)
			}
			slow, err := live.cl.StartPrompt(live.ctx, sid, "/compact slow")
			if err != nil {
				t.Fatal(err)
			}
			live.waitFor(slow.From(), "the slow compaction", func(m client.Message) bool {
				return m.CompactionID == "cmp_3" || m.ToolCallID == "compact-cmp_3"
			})
			if err := live.cl.Cancel(live.ctx, sid); err != nil {
				t.Fatal(err)
			}
			live.wait(slow)
			for _, p := range []string{"/compact failearly", "/compact nosummary", "/compact flood 5"} {
				live.prompt(sid, p)
			}
			liveMsgs := live.finish()

			loaded := connect(t, a, m)
			from := loaded.cl.Len()
			if err := loaded.cl.Load(loaded.ctx, sid, "/work"); err != nil {
				t.Fatalf("session/load: %v", err)
			}
			replay := loaded.cl.Messages()[from:]
			user, agent := "user_message_chunk", message
			if m.capable {
				wantSeq(t, replay, user, agent, user, upd("cmp_1", "completed"), agent, user, upd("cmp_2", "failed"),
					user, upd("cmp_3", "cancelled"), user, upd("cmp_4", "failed"), user, upd("cmp_5", "completed"),
					user, upd("cmp_6", "completed"), "response:session/load")
			} else {
				wantSeq(t, replay, user, agent, user, tool("cmp_1", "completed"), agent, user, tool("cmp_2", "failed"),
					user, tool("cmp_3", "failed"), user, tool("cmp_4", "failed"), user, tool("cmp_5", "completed"),
					user, tool("cmp_6", "completed"), "response:session/load")
			}

			if m.capable {
				// Live and replayed, the client holds the same compaction
				// rows: status, summary, error and record.
				was, now := compactions(timeline(t, liveMsgs, 1, sid)), compactions(timeline(t, replay, 1, sid))
				if len(was) != 6 || len(now) != 6 {
					t.Fatalf("compaction rows: %d live, %d replayed", len(was), len(now))
				}
				for i := range was {
					if !sameItem(was[i], now[i]) {
						lj, _ := json.Marshal(was[i])
						rj, _ := json.Marshal(now[i])
						t.Errorf("row %d differs\n  live   %s\n  replay %s", i, lj, rj)
					}
				}
			}

			// Compaction IDs go on where the session left off.
			_, turn := loaded.prompt(sid, "/compact nosummary")
			if m.capable {
				wantSeq(t, turn, upd("cmp_7", "in_progress"), upd("cmp_7", "completed"), usage, endTurn)
			} else {
				wantSeq(t, turn, tool("cmp_7", "in_progress"), toolUp("cmp_7", "completed"), usage, endTurn)
			}
			msgs := loaded.finish()
			if !m.capable {
				noStandardUpdates(t, msgs)
			}
		})
	}
}

// TestLoadAcrossCapabilityModes: a session compacted for a capable client
// replays in the fallback form to a client without the capability.
func TestScenarioLoadAcrossCapabilityModes(t *testing.T) {
	a := newAgent(t)
	live := connect(t, a, capableV1)
	sid := live.session()
	live.prompt(sid, "/compact")
	live.finish()

	loaded := connect(t, a, plainV1)
	from := loaded.cl.Len()
	if err := loaded.cl.Load(loaded.ctx, sid, "/work"); err != nil {
		t.Fatal(err)
	}
	wantSeq(t, loaded.cl.Messages()[from:], "user_message_chunk", tool("cmp_1", "completed"), message, "response:session/load")
	noStandardUpdates(t, loaded.finish())
}

// TestLoadSkipsACompactionStillRunning: a compaction still in progress on
// another connection is not replayed; once settled, it is.
func TestScenarioLoadSkipsACompactionStillRunning(t *testing.T) {
	a := newAgent(t, func(c *scenario.Config) { c.CancelGrace = new(20 * time.Millisecond) })
	live := connect(t, a, capableV1)
	sid := live.session()
	turn, err := live.cl.StartPrompt(live.ctx, sid, "/compact hang")
	if err != nil {
		t.Fatal(err)
	}
	live.waitFor(turn.From(), "the start", update("compaction_update", "cmp_1", "in_progress"))

	other := connect(t, a, capableV1)
	from := other.cl.Len()
	if err := other.cl.Load(other.ctx, sid, "/work"); err != nil {
		t.Fatal(err)
	}
	wantSeq(t, other.cl.Messages()[from:], "user_message_chunk", "response:session/load")

	if err := live.cl.Cancel(live.ctx, sid); err != nil {
		t.Fatal(err)
	}
	if o, _ := live.wait(turn); o.StopReason != "cancelled" {
		t.Errorf("stop reason %q", o.StopReason)
	}
	live.finish()

	from = other.cl.Len()
	if err := other.cl.Load(other.ctx, sid, "/work"); err != nil {
		t.Fatal(err)
	}
	wantSeq(t, other.cl.Messages()[from:], "user_message_chunk", upd("cmp_1", "cancelled"), "response:session/load")
	other.finish()
}

// TestV2 runs the scripts that differ in v2: the prompt is acknowledged
// with its messageId and the turn ends with an idle state_update.
func TestScenarioV2(t *testing.T) {
	head := []string{"state_update:running", "user_message", "response:messageId"}
	t.Run("compact", func(t *testing.T) {
		t.Parallel()
		r := connect(t, newAgent(t), v2)
		sid := r.session()
		o, turn := r.prompt(sid, "/compact")
		if o.StopReason != "end_turn" || !sameJSON(o.Response, `{"messageId":"msg_user_1"}`) {
			t.Errorf("outcome %+v", o)
		}
		wantSeq(t, turn, append(head, upd("cmp_1", "in_progress"), chunks("cmp_1", 4), upd("cmp_1", "completed"),
			usage, message, "state_update:idle:end_turn")...)
		r.finish()
	})
	t.Run("slow cancelled", func(t *testing.T) {
		t.Parallel()
		r := connect(t, newAgent(t), v2)
		sid := r.session()
		turn, err := r.cl.StartPrompt(r.ctx, sid, "/compact slow")
		if err != nil {
			t.Fatal(err)
		}
		r.waitFor(turn.From(), "a chunk", func(m client.Message) bool { return m.Kind == "compaction_summary_chunk" })
		if err := r.cl.Cancel(r.ctx, sid); err != nil {
			t.Fatal(err)
		}
		o, msgs := r.wait(turn)
		words := seq(msgs)
		if o.StopReason != "cancelled" || len(words) != 7 || !slices.Equal(words[:4], append(head, upd("cmp_1", "in_progress"))) ||
			!strings.HasPrefix(words[4], "chunk:cmp_1") || words[5] != upd("cmp_1", "cancelled") || words[6] != "state_update:idle:cancelled" {
			t.Errorf("stop reason %q, the agent sent %v", o.StopReason, words)
		}
		r.finish()
	})
	t.Run("session/close cancels the turn", func(t *testing.T) {
		t.Parallel()
		r := connect(t, newAgent(t), v2)
		sid := r.session()
		turn, err := r.cl.StartPrompt(r.ctx, sid, "/compact slow")
		if err != nil {
			t.Fatal(err)
		}
		r.waitFor(turn.From(), "a chunk", func(m client.Message) bool { return m.Kind == "compaction_summary_chunk" })
		if err := r.cl.Call(r.ctx, "session/close", map[string]any{"sessionId": sid}, nil); err != nil {
			t.Fatal(err)
		}
		if o, msgs := r.wait(turn); o.StopReason != "cancelled" {
			t.Errorf("stop reason %q, the agent sent %v", o.StopReason, seq(msgs))
		}
		r.finish()
	})
	t.Run("panic", func(t *testing.T) {
		t.Parallel()
		r := connect(t, newAgent(t), v2)
		sid := r.session()
		o, turn := r.prompt(sid, "/compact panic")
		wantSeq(t, turn, append(head, upd("cmp_1", "in_progress"), chunks("cmp_1", 1), upd("cmp_1", "failed"), "state_update:idle:error")...)
		if o.StopReason != "error" || !sameJSON(o.IdleError, `{"code":-32603,"message":"internal error: the agent runtime panicked during the turn"}`) {
			t.Errorf("outcome %+v (idle error %s)", o, o.IdleError)
		}
		_, after := r.prompt(sid, "still there?")
		wantSeq(t, after, append(head, message, "state_update:idle:end_turn")...)
		r.finish()
	})
	t.Run("resume replays", func(t *testing.T) {
		t.Parallel()
		a := newAgent(t)
		live := connect(t, a, v2)
		sid := live.session()
		live.prompt(sid, "hello")
		live.prompt(sid, "/compact")
		liveMsgs := live.finish()

		resumed := connect(t, a, v2)
		from := resumed.cl.Len()
		if err := resumed.cl.Resume(resumed.ctx, sid, "/work", true); err != nil {
			t.Fatal(err)
		}
		replay := resumed.cl.Messages()[from:]
		wantSeq(t, replay, "user_message", "agent_message", "user_message", upd("cmp_1", "completed"), "agent_message",
			"state_update:idle", "response:session/resume")
		// Upserts and the authoritative summary: replayed over the live
		// view, the client's timeline does not change.
		was := timeline(t, liveMsgs, 2, sid)
		now := timeline(t, append(liveMsgs[:len(liveMsgs):len(liveMsgs)], replay...), 2, sid)
		if len(was) != len(now) {
			t.Fatalf("timeline grew from %d to %d rows on replay", len(was), len(now))
		}
		for i := range was {
			if !sameItem(was[i], now[i]) {
				t.Errorf("row %d changed on replay: %+v -> %+v", i, was[i], now[i])
			}
		}
		if err := resumed.cl.Resume(resumed.ctx, sid, "/work", false); err != nil {
			t.Fatal(err)
		}
		err := resumed.cl.Call(resumed.ctx, "session/resume", map[string]any{"sessionId": sid, "cwd": "/work", "replayFrom": map[string]any{"type": "_cursor"}}, nil)
		if err == nil || !strings.Contains(err.Error(), "-32602") {
			t.Errorf("an unsupported replay cursor: %v", err)
		}
		resumed.finish()
	})
}
