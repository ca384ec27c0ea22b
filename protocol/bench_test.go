package protocol_test

import (
	"testing"

	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/require"
)

// BenchmarkUnmarshalUpdate decodes the updates a client reads most: the
// start and end of a compaction and a streamed summary chunk.
func BenchmarkUnmarshalUpdate(b *testing.B) {
	for _, c := range []struct{ name, in string }{
		{"in_progress", `{"sessionUpdate":"compaction_update","compactionId":"cmp_001","status":"in_progress"}`},
		{"completed_summary", `{"sessionUpdate":"compaction_update","compactionId":"cmp_001","status":"completed","summary":[{"type":"text","text":"## Retained context\n\nThe user is updating the ACP schema..."}]}`},
		{"chunk", `{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_001","content":{"type":"text","text":"## Retained context\n\n"}}`},
	} {
		data := []byte(c.in)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, err := protocol.UnmarshalUpdate(data)
				require.NoError(b, err) // no message arguments: they would allocate in the loop
			}
		})
	}
}
