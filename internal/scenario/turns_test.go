package scenario_test

import (
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/scenario"
	"github.com/acpcompact/acpcompact/internal/scenario/client"
)

// TestScenarioSecondPromptRejectedWhileOneRunsEndsNothing: a second
// session/prompt sent while /compact slow runs is answered with an error
// ("a prompt is already running in this session"). Only the running
// prompt's response ends the turn: the rejection settles nothing, and the
// rest of the slow compaction (its chunks, with the capability) and its
// completion still reach the client, before the running prompt's own
// response.
func TestScenarioSecondPromptRejectedWhileOneRunsEndsNothing(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			r := connect(t, newAgent(t), m)
			sid := r.session()
			first, err := r.cl.StartPrompt(r.ctx, sid, "/compact slow")
			if err != nil {
				t.Fatal(err)
			}
			running := func(m client.Message) bool {
				return m.Kind == "compaction_summary_chunk" || m.Kind == "tool_call" && m.Status == "in_progress"
			}
			r.waitFor(first.From(), "the compaction under way", running)
			rejectedAt := r.cl.Len()
			second, err := r.cl.StartPrompt(r.ctx, sid, "hello")
			if err != nil {
				t.Fatal(err)
			}
			if o, err := second.Wait(r.ctx); err != nil || o.Err == nil || o.Err.Message != "a prompt is already running in this session" {
				t.Fatalf("the second prompt: %+v, %v; want the agent's rejection", o, err)
			}
			o, _ := r.wait(first)
			if o.StopReason != "end_turn" {
				t.Errorf("the running prompt's stop reason %q, want end_turn", o.StopReason)
			}
			msgs := r.finish() // the conformance checker and the schema
			var chunks int
			var settled []string
			for _, msg := range msgs[rejectedAt:] {
				switch {
				case msg.Dir != conformance.FromAgent:
				case msg.Kind == "compaction_summary_chunk":
					chunks++
				case msg.Kind == "compaction_update" || msg.Kind == "tool_call_update":
					settled = append(settled, msg.Status)
				}
			}
			if m.capable && chunks == 0 || strings.Join(settled, ",") != "completed" {
				t.Errorf("after the rejection: %d chunks, settlements %v; want more chunks (with the capability), then completed\nwire:\n%s", chunks, settled, dump(msgs))
			}
		})
	}
}

// TestScenarioCancelGraceOfZeroSettlesAtOnce: Config.CancelGrace 0 means
// at once, as it does for agentkit.WithCancelGrace; /compact hang, which
// never reports again, is settled cancelled by the grace, and only then
// answered.
func TestScenarioCancelGraceOfZeroSettlesAtOnce(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			r := connect(t, newAgent(t, func(c *scenario.Config) { c.CancelGrace = new(time.Duration(0)) }), m)
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
