package interop_test

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/test/interop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProxyWithTypeScriptSDK puts `acpcompact proxy` between the official
// TypeScript SDK and a legacy-style fake agent (proxy/internal/fakeagent):
// each legacy or faulty behaviour must reach a capable client as standard
// updates the SDK accepts (zero rejected), valid against the schema, with
// every compaction settled before the prompt response.
func TestProxyWithTypeScriptSDK(t *testing.T) {
	t.Parallel()
	needNode(t)
	proxyCmd := acpcompactCmd.build(t)
	if out, _ := exec.Command(proxyCmd, "help").CombinedOutput(); !strings.Contains(string(out), "proxy") {
		t.Skip("SKIPPING: this build of acpcompact has no proxy command")
	}
	fake := fakeAgent.build(t)
	cases := []struct {
		behavior string
		cancel   string
		status   string // the status every compaction ends with
		errText  string // the error of a failed one, when known
		stop     string
	}{
		{behavior: "claude-text", status: "completed", stop: "end_turn"},
		{behavior: "claude-text-failed", status: "failed", errText: "provider overloaded", stop: "end_turn"},
		{behavior: "claude-text-open", status: "failed", stop: "end_turn"},
		{behavior: "toolcall", status: "completed", stop: "end_turn"},
		{behavior: "toolcall-failed", status: "failed", errText: "context window still exceeded", stop: "end_turn"},
		{behavior: "toolcall-cancel", cancel: "first-compaction", status: "cancelled", stop: "cancelled"},
		{behavior: "opencode-marker", status: "completed", stop: "end_turn"},
		{behavior: "opencode-abort", cancel: "first-compaction", status: "cancelled", stop: "cancelled"},
		{behavior: "codex-text", status: "completed", stop: "end_turn"},
		{behavior: "codex-notice", status: "completed", stop: "end_turn"},
		{behavior: "ignore-gate", status: "completed", stop: "end_turn"},
		{behavior: "open-standard", status: "failed", stop: "end_turn"},
	}
	fs := make([]*future, len(cases))
	for i, tc := range cases {
		fs[i] = launch(interop.Options{
			Protocol: 1, Capability: interop.CapObject,
			Steps: []interop.Step{{Prompt: "go", Cancel: tc.cancel}},
			// The fake agent sends no agentInfo, so no profile reads its
			// legacy signals: name them all.
			Agent: []string{proxyCmd, "proxy", "--translate=all", "--", fake, "-behavior", tc.behavior},
		})
	}
	plain := []string{"ignore-gate", "open-standard"}
	pfs := make([]*future, len(plain))
	for i, behavior := range plain {
		pfs[i] = launch(interop.Options{
			Protocol: 1, Capability: interop.CapAbsent,
			Steps: []interop.Step{{Prompt: "go"}},
			Agent: []string{proxyCmd, "proxy", "--translate=all", "--", fake, "-behavior", behavior},
		})
	}
	for i, tc := range cases {
		t.Run(tc.behavior, func(t *testing.T) {
			res := fs[i].get(t)
			r := checkCommon(t, res, true)
			cs := compactions(r, res.SessionID)
			require.NotEmpty(t, cs, "no compaction reached the client; timeline:\n%s", render(r, res.SessionID))
			for _, c := range cs {
				assert.Equal(t, tc.status, c.Status, "compaction %s: status", c.ID)
				if tc.errText != "" && assert.NotNil(t, c.Error, "compaction %s: error", c.ID) {
					assert.Equal(t, tc.errText, *c.Error, "compaction %s: error", c.ID)
				}
			}
			assert.Equal(t, tc.stop, stopReason(t, res, res.Steps[len(res.Steps)-1]), "stopReason")
		})
	}
	// A v1 client without the capability: an agent that ignores the gate
	// is rewritten into a fallback, and one that leaves a compaction open
	// is settled, with no standard update on the wire either way.
	// A standard agent behind the proxy: a v2 connection passes through
	// with its lifecycle intact.
	agent := scenarioAgent.build(t)
	v2 := []scenario{scenarios[0], scenarios[slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == "cancel-slow" })]}
	v2fs := make([]*future, len(v2))
	for i, sc := range v2 {
		v2fs[i] = launch(interop.Options{Protocol: 2, Scenario: sc.name, Agent: []string{proxyCmd, "proxy", "--", agent}})
	}
	for i, sc := range v2 {
		t.Run("scenario-agent/v2/"+sc.name, func(t *testing.T) {
			checkScenario(t, v2fs[i].get(t), sc, v2Client)
		})
	}
	for i, behavior := range plain {
		t.Run(behavior+"/no-capability", func(t *testing.T) {
			checkCommon(t, pfs[i].get(t), false)
		})
	}
}

// TestProxyReadsLinesAsTheTypeScriptSDKReadsThem: the official SDK client
// reads a line framed with a BOM, a form feed, a line separator or a
// no-break space, or nested 10,001 deep; through the proxy, a v1 client
// without the capability is delivered no compaction update from such
// lines (the gate's tool call instead), and the answer that ends its
// turn, framed so too, comes after that tool call's terminal update.
func TestProxyReadsLinesAsTheTypeScriptSDKReadsThem(t *testing.T) {
	t.Parallel()
	needNode(t)
	proxyCmd := acpcompactCmd.build(t)
	fake := fakeAgent.build(t)
	res := launch(interop.Options{
		Protocol: 1, Capability: interop.CapAbsent,
		Steps: []interop.Step{{Prompt: "go"}},
		Agent: []string{proxyCmd, "proxy", "--", fake, "-behavior", "lenient-lines"},
	}).get(t)
	assert.Zero(t, res.Rejected, "updates the SDK rejected: %q", res.ConsoleErrors)
	assert.Empty(t, res.ConsoleErrors, "what the SDK logged")
	prompt, ok := res.Steps[len(res.Steps)-1].Prompt()
	require.True(t, ok, "the last step is not a prompt")
	require.Nil(t, prompt.Error, "the prompt was not answered: %+v", prompt)
	// What the SDK delivered before the answer: the gate's tool call,
	// started and settled, and the agent's text.
	toolStatus := map[string]string{}
	var kinds []string
	for i, u := range res.Updates {
		kind := u.Kind()
		kinds = append(kinds, kind)
		assert.NotContains(t, []string{"compaction_update", "compaction_summary_chunk"}, kind, "a client without the capability was delivered %s", u.Update)
		if i >= prompt.UpdatesBefore || (kind != "tool_call" && kind != "tool_call_update") {
			continue
		}
		var tc struct {
			ID     string `json:"toolCallId"`
			Status string `json:"status"`
		}
		require.NoError(t, json.Unmarshal(u.Update, &tc), "json.Unmarshal")
		if tc.Status != "" {
			toolStatus[tc.ID] = tc.Status
		}
	}
	assert.Equal(t, []string{"tool_call", "agent_message_chunk", "tool_call_update"}, kinds, "the updates delivered\n%s", res.Transcript())
	assert.Equal(t, "failed", toolStatus["compact-cmp_l1"], "the gate's tool call when the answer arrives: want it settled by the proxy")
	assert.Equal(t, "end_turn", stopReason(t, res, res.Steps[len(res.Steps)-1]), "stopReason")
}
