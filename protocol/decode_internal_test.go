package protocol

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func filled(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + (seed+byte(i))%26
	}
	return b
}

// UnmarshalLongUpdate reads every long update exactly as UnmarshalUpdate
// does, whatever its long strings hold and wherever they are.
func TestDecodeUpdateMatchesUnmarshalUpdate(t *testing.T) {
	long := string(filled(longUpdate, 1))
	esc := strings.Repeat(`tab\there \"quoted\" \u00e9 \ud800 `, longUpdate/30)
	bad := strings.Repeat("bad \xff\xfe utf8 ", longUpdate/12)
	mark := `\u0000acpcompact-hole:0`
	for _, tc := range []struct{ name, raw string }{
		{"summary text", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","summary":[{"type":"text","text":"` + long + `"}]}`},
		{"escaped text", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","summary":[{"type":"text","text":"` + esc + `"}]}`},
		{"invalid UTF-8", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","summary":[{"type":"text","text":"` + bad + `"}]}`},
		{"blocks", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","summary":[{"type":"text","text":"` + long + `"},{"type":"image","mimeType":"image/png","data":"` + long + `","_meta":{"k":["` + long + `"]}},{"type":"text","text":"short"}]}`},
		{"error and meta", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"failed","error":"` + long + `","_meta":{"x":"` + long + `","y":{"z":"` + esc + `"}}}`},
		{"member name", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","_meta":{"` + long + `":1}}`},
		{"chunk", ` {"sessionUpdate" : "compaction_summary_chunk", "compactionId":"c1","content":{"type":"text","text" : "` + long + `" , "annotations":{"a":"` + long + `"}}} `},
		{"unknown member", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","future":"` + long + `"}`},
		{"stand-in look-alike", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","summary":[{"type":"text","text":"` + mark + `"},{"type":"text","text":"` + long + `"}]}`},
		{"long id", `{"sessionUpdate":"compaction_update","compactionId":"` + long + `","status":"completed"}`},
		{"not compaction", `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + long + `"}}`},
		{"unterminated", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","summary":[{"type":"text","text":"` + long},
		{"not a string", `{"sessionUpdate":"compaction_update","compactionId":"c1","status":"completed","summary":[{"type":"text","text":["` + long + `"]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, own := range []bool{false, true} {
				raw := []byte(tc.raw)
				want, werr := UnmarshalUpdate(raw)
				got, gerr := UnmarshalLongUpdate(raw, func([]byte) bool { return own })
				require.Equal(t, gerr == nil, werr == nil, "own %v: error %v, UnmarshalUpdate's %v", own, gerr, werr)
				if werr == nil {
					require.Equal(t, want, got, "own %v: decoded differently from UnmarshalUpdate", own)
				}

			}
		})
	}
}
