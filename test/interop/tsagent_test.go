package interop_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/test/interop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, err, "moduleRoot")
	agent := filepath.Join(root, "test", "bench", "tsagent", "agent.mjs")
	res := run(t, interop.Options{Protocol: 1, Capability: interop.CapObject, Scenario: "flood", Agent: []string{"node", agent}})
	r := checkCommon(t, res, true)
	c := one(t, res, r)
	assert.Equal(t, "completed", c.Status, "status")
	var want strings.Builder
	for i := range 100 {
		fmt.Fprintf(&want, "chunk %d ", i)
	}
	assert.Equal(t, want.String(), summaryText(c.Summary), "summary: want the 100 chunks in order")
	assert.Equal(t, 100, countKind(res, "compaction_summary_chunk", 0, len(res.Updates)), "summary chunks")
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
	assert.Equal(t, "in_progress,completed", strings.Join(kinds, ","), "compaction_update statuses")
	assert.Equal(t, "end_turn", stopReason(t, res, res.Steps[len(res.Steps)-1]), "stopReason")
}
