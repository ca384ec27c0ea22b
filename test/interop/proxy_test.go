package interop_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/test/interop"
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
			if len(cs) == 0 {
				t.Fatalf("no compaction reached the client; timeline:\n%s", render(r, res.SessionID))
			}
			for _, c := range cs {
				if c.Status != tc.status {
					t.Errorf("compaction %s is %s, want %s", c.ID, c.Status, tc.status)
				}
				if tc.errText != "" && (c.Error == nil || *c.Error != tc.errText) {
					t.Errorf("compaction %s error %v, want %q", c.ID, c.Error, tc.errText)
				}
			}
			if got := stopReason(t, res, res.Steps[len(res.Steps)-1]); got != tc.stop {
				t.Errorf("stopReason %q, want %q", got, tc.stop)
			}
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
