package interop_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/test/interop"
)

// TestTSAgentFloodsChunks is the smoke test of the benchmark agent built on
// the official TypeScript SDK (test/bench/tsagent/agent.mjs): driven by the
// SDK's own client, `/compact flood 100` yields one compaction that starts,
// receives exactly 100 chunks in order and completes before the end_turn
// response, all valid against the schema and clean under the checker.
func TestTSAgentFloodsChunks(t *testing.T) {
	t.Parallel()
	needNode(t)
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(root, "test", "bench", "tsagent", "agent.mjs")
	res := run(t, interop.Options{Protocol: 1, Capability: interop.CapObject, Scenario: "flood", Agent: []string{"node", agent}})
	r := checkCommon(t, res, true)
	c := one(t, res, r)
	if c.Status != "completed" {
		t.Errorf("status %s, want completed", c.Status)
	}
	var want strings.Builder
	for i := range 100 {
		fmt.Fprintf(&want, "chunk %d ", i)
	}
	if got := summaryText(c.Summary); got != want.String() {
		t.Errorf("summary %q, want the 100 chunks in order", got)
	}
	if n := countKind(res, "compaction_summary_chunk", 0, len(res.Updates)); n != 100 {
		t.Errorf("%d chunks, want 100", n)
	}
	var kinds []string
	for _, u := range res.Updates {
		var s struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(u.Update, &s)
		if u.Kind() == "compaction_update" {
			kinds = append(kinds, s.Status)
		}
	}
	if strings.Join(kinds, ",") != "in_progress,completed" {
		t.Errorf("compaction_update statuses %v, want in_progress then completed", kinds)
	}
	if got := stopReason(t, res, res.Steps[len(res.Steps)-1]); got != "end_turn" {
		t.Errorf("stopReason %q, want end_turn", got)
	}
}
