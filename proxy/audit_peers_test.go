package proxy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/acpcompact/acpcompact/audit"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With WithAudit, a summary a real agent sends reaches the record of the
// compaction the client holds with what it lost, and the proxy's audit
// says what an audit of the client's own transcript says: the same
// (kind, value) pairs. The recordings are of real releases whose summary
// reaches the proxy: Claude ACP's own compaction_update, forwarded as it
// came (0.88, 0.101) or kept back until its facts follow (0.101 to a
// JetBrains AIR client), and pi-acp's /compact text, which the proxy turns
// into a compaction with pi's summary. Before the proxy's audit followed
// what the client receives, Claude ACP's forwarded completion carried no
// record, and the AIR one a record without its loss.
func TestAuditOfRealSummariesThroughTheProxy(t *testing.T) {
	cases := []struct {
		recording string
		// want is what the proxy's record must say at least: a loss the
		// summary really lacks (checked by hand against the recording).
		want []emitter.Loss
	}{
		{recording: "claude-acp-0.101.0/compact-cap.jsonl", want: []emitter.Loss{
			{Kind: "url", Value: "https://code.claude.com/docs/en/auto-mode-classifier-billing"},
		}},
		{recording: "claude-acp-air-0.101.0/compact-cap.jsonl", want: []emitter.Loss{
			{Kind: "url", Value: "https://code.claude.com/docs/en/auto-mode-classifier-billing"},
		}},
		{recording: "claude-acp-0.88.0/compact-cap.jsonl"},
		{recording: "pi-acp-0.0.34/compact-cap.jsonl"},
	}
	for _, c := range cases {
		t.Run(c.recording, func(t *testing.T) {
			path := filepath.Join("..", "test", "peers", "testdata", c.recording)
			run := runPeer(t, path, clientMode{name: "cap", capable: true, opts: []proxy.Option{proxy.WithAudit()}})

			// What the proxy recorded, per compaction the client saw
			// complete; none when the summary lost nothing.
			recorded := map[string][]emitter.Loss{}
			for _, line := range run.received {
				if id, loss, ok := completedRecord(t, line); ok {
					recorded[id] = loss
				}
			}

			// What an audit of the client's side of the connection says.
			f := audit.NewFollower()
			var reports []audit.Report
			for i, e := range run.events {
				side := audit.FromAgent
				if e.fromClient {
					side = audit.FromClient
				}
				reports = append(reports, f.Observe(side, fmt.Sprintf("line %d", i+1), bytes.TrimSpace(e.raw))...)
			}
			reports = append(reports, f.Close()...)
			require.NotEmpty(t, reports, "the client got no compaction with a summary:\n%s", run.logs.String())
			for _, r := range reports {
				got := recorded[r.CompactionID]
				t.Logf("compaction %s: %d history items, lost %v", r.CompactionID, r.HistoryItems, kindValues(got))
				assert.Equal(t, kindValues(audit.Known(r.KnownLoss)), kindValues(got), "compaction %s: the proxy's audit and the client transcript's", r.CompactionID)
				for _, w := range c.want {
					assert.Contains(t, kindValues(got), w.Kind+" "+w.Value, "compaction %s: the record's known loss", r.CompactionID)
				}
			}
		})
	}
}

// completedRecord returns the ID and the record's known loss of a
// completed compaction_update line carrying a record.
func completedRecord(t *testing.T, line []byte) (string, []emitter.Loss, bool) {
	t.Helper()
	var m struct {
		Method string `json:"method"`
		Params struct {
			Update struct {
				Kind   string                     `json:"sessionUpdate"`
				ID     string                     `json:"compactionId"`
				Status string                     `json:"status"`
				Meta   map[string]json.RawMessage `json:"_meta"`
			} `json:"update"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != "session/update" {
		return "", nil, false
	}
	u := m.Params.Update
	rec, ok := u.Meta[emitter.DefaultRecordKey]
	if u.Kind != "compaction_update" || u.Status != "completed" || !ok {
		return "", nil, false
	}
	var r struct {
		KnownLoss []emitter.Loss `json:"knownLoss"`
	}
	require.NoError(t, json.Unmarshal(rec, &r), "the record: %s", rec)
	return u.ID, r.KnownLoss, true
}

// kindValues lists losses as "kind value", sorted: where a loss was is
// named differently by each side (the proxy's lines, the transcript's).
func kindValues(ls []emitter.Loss) []string {
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		out = append(out, l.Kind+" "+l.Value)
	}
	slices.Sort(out)
	return out
}
