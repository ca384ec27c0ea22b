package sessionlog_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/acpcompact/acpcompact/protocol"
	"github.com/acpcompact/acpcompact/sessionlog"
	"github.com/stretchr/testify/require"
)

// TestPlacementByAfter: a compaction goes right after the message its
// After names, wherever its entries are in the file; without After, or
// with an After that names no message of the log, where its first entry
// is. The lines are written as a writer of the format writes them, with
// "after" members.
func TestPlacementByAfter(t *testing.T) {
	m := func(id string) string { return fmt.Sprintf(`"kind":"message","id":%q,"data":{"text":%q}`, id, id) }
	rec := func(kind, id, after string) string {
		st := protocol.Completed
		if kind == "start" {
			st = protocol.InProgress
		}
		raw, err := json.Marshal(final(id, st, ""))
		require.NoError(t, err, "json.Marshal")
		a := ""
		if after != "" {
			a = fmt.Sprintf(`,"after":%q`, after)
		}
		return fmt.Sprintf(`"kind":%q,"id":%q%s,"record":%s`, kind, id, a, raw)
	}
	for _, tc := range []struct {
		name  string
		lines []string
		want  []string
	}{
		{"a record settled turns later goes back to its message",
			[]string{m("m1"), m("m2"), m("m3"), rec("record", "c1", "m1")},
			[]string{"m:m1:m1", "c:c1:completed", "m:m2:m2", "m:m3:m3"}},
		{"a start before its message waits for it",
			[]string{rec("start", "c1", "m2"), m("m1"), m("m2"), m("m3"), rec("record", "c1", "m2")},
			[]string{"m:m1:m1", "m:m2:m2", "c:c1:completed", "m:m3:m3"}},
		{"two after one message keep their order",
			[]string{m("m1"), m("m2"), rec("record", "c2", "m1"), rec("record", "c1", "m1")},
			[]string{"m:m1:m1", "c:c2:completed", "c:c1:completed", "m:m2:m2"}},
		{"an After that names no message: where its first entry is",
			[]string{m("m1"), rec("start", "c1", "ghost"), m("m2"), rec("record", "c1", "ghost")},
			[]string{"m:m1:m1", "c:c1:completed", "m:m2:m2"}},
		{"no After: where its first entry is",
			[]string{rec("start", "c1", ""), m("m1"), rec("record", "c2", ""), m("m2"), rec("record", "c1", "")},
			[]string{"c:c1:completed", "m:m1:m1", "c:c2:completed", "m:m2:m2"}},
		{"interrupted, after its message",
			[]string{m("m1"), m("m2"), rec("start", "c1", "m1"), m("m3")},
			[]string{"m:m1:m1", "c:c1:failed!", "m:m2:m2", "m:m3:m3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			l := create(t, s, "s")
			must(t, l.Close())
			path, _ := s.Path("s")
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			must(t, err)
			for _, line := range tc.lines {
				_, err := f.Write(sessionlog.RawLine(line))
				must(t, err)
			}
			must(t, f.Close())
			words, _ := read(t, s, "s")
			wantWords(t, words, tc.want...)
		})
	}
}
