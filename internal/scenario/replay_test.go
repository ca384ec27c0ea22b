package scenario_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/scenario"
	"github.com/acpcompact/acpcompact/internal/scenario/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// timeline rebuilds the client's view of session sid from a record, with
// the reference reducer.
func timeline(t *testing.T, msgs []client.Message, version int, sid string) []conformance.Item {
	t.Helper()
	red := conformance.NewReducer(version)
	for _, m := range msgs {
		if m.Dir == conformance.FromAgent {
			require.NoError(t, red.ApplyMessage(m.Raw), "reducer")
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
			require.NoError(t, err, "live.cl.StartPrompt")
			live.waitFor(slow.From(), "the slow compaction", func(m client.Message) bool {
				return m.CompactionID == "cmp_3" || m.ToolCallID == "compact-cmp_3"
			})
			require.NoError(t, live.cl.Cancel(live.ctx, sid), "live.cl.Cancel")
			live.wait(slow)
			for _, p := range []string{"/compact failearly", "/compact nosummary", "/compact flood 5"} {
				live.prompt(sid, p)
			}
			liveMsgs := live.finish()

			loaded := connect(t, a, m)
			from := loaded.cl.Len()
			require.NoError(t, loaded.cl.Load(loaded.ctx, sid, "/work"), "session/load")
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
				require.Equal(t, 6, len(was), "compaction rows live")
				require.Equal(t, 6, len(now), "compaction rows replayed")
				for i := range was {
					lj, _ := json.Marshal(was[i])
					rj, _ := json.Marshal(now[i])
					assert.Equal(t, string(lj), string(rj), "row %d differs between live and replay", i)
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
	require.NoError(t, loaded.cl.Load(loaded.ctx, sid, "/work"), "loaded.cl.Load")
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
	require.NoError(t, err, "live.cl.StartPrompt")
	live.waitFor(turn.From(), "the start", update("compaction_update", "cmp_1", "in_progress"))

	other := connect(t, a, capableV1)
	from := other.cl.Len()
	require.NoError(t, other.cl.Load(other.ctx, sid, "/work"), "other.cl.Load")
	wantSeq(t, other.cl.Messages()[from:], "user_message_chunk", "response:session/load")

	require.NoError(t, live.cl.Cancel(live.ctx, sid), "live.cl.Cancel")
	o, _ := live.wait(turn)
	assert.Equal(t, "cancelled", o.StopReason, "stop reason")
	live.finish()

	from = other.cl.Len()
	require.NoError(t, other.cl.Load(other.ctx, sid, "/work"), "other.cl.Load")
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
		assert.Equal(t, "end_turn", o.StopReason, "outcome %+v", o)
		assert.JSONEq(t, `{"messageId":"msg_user_1"}`, string(o.Response), "outcome %+v", o)
		wantSeq(t, turn, append(head, upd("cmp_1", "in_progress"), chunks("cmp_1", 4), upd("cmp_1", "completed"),
			usage, message, "state_update:idle:end_turn")...)
		r.finish()
	})
	t.Run("slow cancelled", func(t *testing.T) {
		t.Parallel()
		r := connect(t, newAgent(t), v2)
		sid := r.session()
		turn, err := r.cl.StartPrompt(r.ctx, sid, "/compact slow")
		require.NoError(t, err, "r.cl.StartPrompt")
		r.waitFor(turn.From(), "a chunk", func(m client.Message) bool { return m.Kind == "compaction_summary_chunk" })
		require.NoError(t, r.cl.Cancel(r.ctx, sid), "r.cl.Cancel")
		o, msgs := r.wait(turn)
		words := seq(msgs)
		assert.Equal(t, "cancelled", o.StopReason, "stop reason")
		if assert.Len(t, words, 7, "the agent sent %v", words) {
			assert.Equal(t, append(head, upd("cmp_1", "in_progress")), words[:4], "the agent sent %v", words)
			assert.True(t, strings.HasPrefix(words[4], "chunk:cmp_1"), "the agent sent %v", words)
			assert.Equal(t, upd("cmp_1", "cancelled"), words[5], "the agent sent %v", words)
			assert.Equal(t, "state_update:idle:cancelled", words[6], "the agent sent %v", words)
		}
		r.finish()
	})
	t.Run("session/close cancels the turn", func(t *testing.T) {
		t.Parallel()
		r := connect(t, newAgent(t), v2)
		sid := r.session()
		turn, err := r.cl.StartPrompt(r.ctx, sid, "/compact slow")
		require.NoError(t, err, "r.cl.StartPrompt")
		r.waitFor(turn.From(), "a chunk", func(m client.Message) bool { return m.Kind == "compaction_summary_chunk" })
		require.NoError(t, r.cl.Call(r.ctx, "session/close", map[string]any{"sessionId": sid}, nil), "r.cl.Call")
		o, msgs := r.wait(turn)
		assert.Equal(t, "cancelled", o.StopReason, "stop reason; the agent sent %v", seq(msgs))
		r.finish()
	})
	t.Run("panic", func(t *testing.T) {
		t.Parallel()
		r := connect(t, newAgent(t), v2)
		sid := r.session()
		o, turn := r.prompt(sid, "/compact panic")
		wantSeq(t, turn, append(head, upd("cmp_1", "in_progress"), chunks("cmp_1", 1), upd("cmp_1", "failed"), "state_update:idle:error")...)
		assert.Equal(t, "error", o.StopReason, "outcome %+v", o)
		assert.JSONEq(t, `{"code":-32603,"message":"internal error: the agent runtime panicked during the turn"}`, string(o.IdleError), "idle error of %+v", o)
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
		require.NoError(t, resumed.cl.Resume(resumed.ctx, sid, "/work", true), "resumed.cl.Resume")
		replay := resumed.cl.Messages()[from:]
		wantSeq(t, replay, "user_message", "agent_message", "user_message", upd("cmp_1", "completed"), "agent_message",
			"state_update:idle", "response:session/resume")
		// Upserts and the authoritative summary: replayed over the live
		// view, the client's timeline does not change.
		was := timeline(t, liveMsgs, 2, sid)
		now := timeline(t, append(liveMsgs[:len(liveMsgs):len(liveMsgs)], replay...), 2, sid)
		require.Equal(t, len(was), len(now), "timeline rows on replay")
		for i := range was {
			assert.True(t, sameItem(was[i], now[i]), "row %d changed on replay: %+v -> %+v", i, was[i], now[i])
		}
		require.NoError(t, resumed.cl.Resume(resumed.ctx, sid, "/work", false), "resumed.cl.Resume")
		err := resumed.cl.Call(resumed.ctx, "session/resume", map[string]any{"sessionId": sid, "cwd": "/work", "replayFrom": map[string]any{"type": "_cursor"}}, nil)
		assert.ErrorContains(t, err, "-32602", "an unsupported replay cursor")
		resumed.finish()
	})
}
