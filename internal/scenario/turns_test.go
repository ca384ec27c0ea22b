package scenario_test

import (
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/scenario"
	"github.com/acpcompact/acpcompact/internal/scenario/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			require.NoError(t, err, "r.cl.StartPrompt")
			running := func(m client.Message) bool {
				return m.Kind == "compaction_summary_chunk" || m.Kind == "tool_call" && m.Status == "in_progress"
			}
			r.waitFor(first.From(), "the compaction under way", running)
			rejectedAt := r.cl.Len()
			second, err := r.cl.StartPrompt(r.ctx, sid, "hello")
			require.NoError(t, err, "r.cl.StartPrompt")
			o, err := second.Wait(r.ctx)
			require.NoError(t, err, "the second prompt")
			require.NotNil(t, o.Err, "the second prompt: %+v; want the agent's rejection", o)
			require.Equal(t, "a prompt is already running in this session", o.Err.Message, "the second prompt's rejection")
			o, _ = r.wait(first)
			assert.Equal(t, "end_turn", o.StopReason, "the running prompt's stop reason")
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
			if m.capable {
				assert.NotZero(t, chunks, "after the rejection: want more chunks (with the capability)\nwire:\n%s", dump(msgs))
			}
			assert.Equal(t, "completed", strings.Join(settled, ","), "after the rejection: settlements\nwire:\n%s", dump(msgs))
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
