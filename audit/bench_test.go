package audit_test

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/audit"
)

// benchHistory is a coding session's history of about size bytes: prose,
// tool output and references, with new paths, hashes, URLs and
// identifiers every few hundred bytes, so the Auditor keeps growing as a
// real session's does.
func benchHistory(size int) []audit.Item {
	var items []audit.Item
	n := 0
	for i := 0; n < size; i++ {
		sum := sha1.Sum([]byte(fmt.Sprint(i)))
		h := hex.EncodeToString(sum[:])
		var it audit.Item
		switch i % 4 {
		case 0:
			it = audit.Item{Role: audit.User, Text: fmt.Sprintf("Please look at internal/pkg%d/file%d.go: the test TestThing%d fails since commit %s, see #%d and https://example.com/issues/%d. It started with v1.%d.%d.", i%97, i, i, h[:9], i, i, i%10, i%7)}
		case 1:
			it = audit.Item{Role: audit.Tool, Text: fmt.Sprintf("Read internal/pkg%d/file%d.go\npackage pkg%d\n\n// Thing%d does the work; it returns ENOENT when the file is missing.\nfunc Thing%d(ctx context.Context, path string) error {\n\treturn nil\n}\n", i%97, i, i%97, i, i),
				Locations: []string{fmt.Sprintf("/work/repo/internal/pkg%d/file%d.go", i%97, i)}, RawInput: json.RawMessage(fmt.Sprintf(`{"file_path":"/work/repo/internal/pkg%d/file%d.go"}`, i%97, i))}
		case 2:
			it = audit.Item{Role: audit.Agent, Text: fmt.Sprintf("The failure comes from `Thing%d`: it ignores the context. The checksum of the fixture is sha256:%s%s. I changed the call in cmd/tool%d/main.go and the tests pass now.", i, h, h[:24], i%13)}
		default:
			it = audit.Item{Role: audit.Tool, Text: strings.Repeat("ok  \tgithub.com/acme/app/internal/pkg\t0.012s\n", 6), EndsTurn: true}
		}
		n += len(it.Text)
		items = append(items, it)
	}
	return items
}

func historyBytes(items []audit.Item) []byte {
	var b bytes.Buffer
	for _, it := range items {
		b.WriteString(it.Text)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// BenchmarkAudit measures the audit in MB/s of history, beside baselines
// over the same bytes in the same run (docs/conformance.md, "Cost"):
//
//   - scan: bytes.Count over the history, the cheapest look at every byte;
//   - tokens: a byte loop that splits the history into tokens, as the
//     extractors do before reading any token;
//   - add: Auditor.Add of every item (extracting every reference);
//   - check: add, then Check of a summary of about 2% of the history's size
//     (a summary is small beside what it replaces);
//   - decode: json.Unmarshal of every item's wire line into a map, what any
//     consumer of the wire pays (the proxy, the checker);
//   - follow: the Follower over those wire lines (decode, rebuild, audit).
func BenchmarkAudit(b *testing.B) {
	items := benchHistory(4 << 20)
	hist := historyBytes(items)
	var summary strings.Builder
	for i, it := range items {
		if i%40 == 2 && it.Role == audit.Agent {
			summary.WriteString(it.Text[:len(it.Text)/2] + "\n")
		}
	}
	var wire [][]byte
	for i, it := range items {
		kind := "agent_message_chunk"
		if it.Role == audit.User {
			kind = "user_message_chunk"
		}
		u := map[string]any{"sessionUpdate": kind, "content": map[string]any{"type": "text", "text": it.Text}}
		if it.Role == audit.Tool {
			u = map[string]any{"sessionUpdate": "tool_call", "toolCallId": fmt.Sprint("call_", i), "title": it.Text, "locations": []map[string]string{{"path": fmt.Sprint(it.Locations)}}, "rawInput": it.RawInput}
		}
		line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": "s", "update": u}})
		wire = append(wire, line)
	}
	end, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": "s",
		"update": map[string]any{"sessionUpdate": "compaction_update", "compactionId": "c", "status": "completed", "summary": []map[string]string{{"type": "text", "text": summary.String()}}}}})
	wire = append(wire, end)

	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(hist)))
		for b.Loop() {
			_ = bytes.Count(hist, []byte{'\n'})
		}
	})
	b.Run("tokens", func(b *testing.B) {
		b.SetBytes(int64(len(hist)))
		for b.Loop() {
			n, in := 0, false
			for _, c := range hist {
				sp := c == ' ' || c == '\n' || c == '\t' || c == '\r'
				if !sp && !in {
					n++
				}
				in = !sp
			}
			_ = n
		}
	})
	b.Run("add", func(b *testing.B) {
		b.SetBytes(int64(len(hist)))
		for b.Loop() {
			a := audit.NewAuditor()
			for _, it := range items {
				a.Add(it)
			}
		}
	})
	b.Run("check", func(b *testing.B) {
		b.SetBytes(int64(len(hist)))
		var refs, lost int
		for b.Loop() {
			a := audit.NewAuditor()
			for _, it := range items {
				a.Add(it)
			}
			lost = len(a.CheckText(summary.String()))
			refs = a.Len()
		}
		b.ReportMetric(float64(refs), "refs")
		b.ReportMetric(float64(lost), "losses")
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(hist)))
		for b.Loop() {
			for _, l := range wire {
				var m map[string]any
				_ = json.Unmarshal(l, &m)
			}
		}
	})
	b.Run("follow", func(b *testing.B) {
		b.SetBytes(int64(len(hist)))
		for b.Loop() {
			f := audit.NewFollower()
			for _, l := range wire {
				f.Observe(audit.FromAgent, "", l)
			}
		}
	})
}
