package sessionlog_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/acpcompact/acpcompact/sessionlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// viaEmitter is what a record is after emitter's own JSON round trip.
func viaEmitter(t testing.TB, rec emitter.Record) emitter.Record {
	t.Helper()
	raw, err := json.Marshal(rec)
	require.NoError(t, err, "json.Marshal")
	var out emitter.Record
	require.NoError(t, json.Unmarshal(raw, &out), "json.Unmarshal")
	return out
}

// TestRecordsReadBackAsEmitterWroteThem: whatever a record holds (text
// that needs escaping, invalid UTF-8, other block types with verbatim
// fields, _meta, details), reading it back from a log gives what emitter's
// own JSON round trip gives.
func TestRecordsReadBackAsEmitterWroteThem(t *testing.T) {
	image := protocol.ContentBlock{Type: "image", Extra: map[string]json.RawMessage{
		"data": json.RawMessage(`"iVBORw0KGgo="`), "mimeType": json.RawMessage("\"image/png\""),
		"annotations": json.RawMessage("{\n  \"priority\": 1\n}"), // whitespace kept verbatim by the block
	}}
	withExtra := protocol.ContentBlock{Type: "text", Text: "annotated", Extra: map[string]json.RawMessage{"annotations": json.RawMessage(`{"audience":["user"]}`)}}
	texts := []string{"", "plain", "quote \" backslash \\ slash /", "line\nbreak\r\ttab\x00nul\x1f", "<html> & \u2028\u2029", "héllo wörld 日本 🎉", "bad \xff\xfe utf-8 \xc3"}
	var blocks []protocol.ContentBlock
	for _, s := range texts {
		blocks = append(blocks, protocol.Text(s))
	}
	blocks = append(blocks, image, withExtra)
	recs := []emitter.Record{
		{ID: "c1", Status: protocol.Completed, Trigger: protocol.Auto, After: "m \"1\"", Displayable: true, Summary: blocks,
			Meta: protocol.Meta{"x/y": json.RawMessage("{\n\"k\": [1, 2]\n}")},
			Details: &emitter.Details{Trigger: protocol.Auto, Status: protocol.Completed, TokensBefore: 10, TokensAfter: 2,
				Summarizer: &emitter.Summarizer{Model: "m", Config: map[string]json.RawMessage{"t": json.RawMessage("0.5")}}}},
		{ID: "c2", Status: protocol.Failed, Error: "multi\nline <error>"},
		{ID: "c3", Status: protocol.InProgress, Trigger: protocol.Manual},
		{ID: "c4", Status: protocol.Cancelled, Summary: []protocol.ContentBlock{image}},
	}
	s := open(t)
	l := create(t, s, "s")
	for _, rec := range recs {
		must(t, l.AppendRecord(rec))
	}
	must(t, l.Close())
	r, err := s.Read("s")
	must(t, err)
	defer r.Close()
	i := 0
	for e, err := range r.Entries() {
		must(t, err)
		want := viaEmitter(t, recs[i])
		if recs[i].Status == protocol.InProgress {
			want.Status, want.Error = protocol.Failed, sessionlog.ErrInterrupted.Error()
		}
		assert.Equal(t, want, e.Record, "record %s", recs[i].ID)

		i++
	}
	assert.Len(t, recs, i, "%d records read", i)
}

// FuzzRecordText: any summary text reads back as emitter's round trip
// reads it.
func FuzzRecordText(f *testing.F) {
	for _, s := range []string{"", "a", "\"\\", "\n\x00\x7f", "\xff", "日本", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		rec := emitter.Record{ID: "c", Status: protocol.Completed, Summary: []protocol.ContentBlock{protocol.Text(text), protocol.Text(text + "!")}}
		s := open(t)
		l := create(t, s, "s")
		must(t, l.AppendRecord(rec))
		must(t, l.Close())
		_, entries := read(t, s, "s")
		assert.Equal(t, viaEmitter(t, rec), entries[0].Record, "%q read back as %q", text, entries[0].Record.Summary)
	})
}

// BenchmarkAppendRecord appends the final record of /compact flood 20000:
// 20,000 summary blocks. "marshal" is emitter's MarshalJSON alone, for
// comparison.
func BenchmarkAppendRecord(b *testing.B) {
	rec := emitter.Record{ID: "cmp_1", Status: protocol.Completed, Trigger: protocol.Manual, After: "msg_1", Displayable: true,
		Details: &emitter.Details{TokensBefore: 150_000, TokensAfter: 6_000, ContextWindow: 200_000}}
	for i := range 20_000 {
		rec.Summary = append(rec.Summary, protocol.Text(fmt.Sprintf("chunk %d of %d\n", i+1, 20_000)))
	}
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, err := rec.MarshalJSON()
			require.NoError(b, err, "MarshalJSON")
		}
	})
	b.Run("append", func(b *testing.B) {
		s, err := sessionlog.Open(b.TempDir())
		require.NoError(b, err, "sessionlog.Open")
		l, err := s.Create("s", nil)
		require.NoError(b, err, "s.Create")
		defer l.Close()
		b.ReportAllocs()
		for b.Loop() {
			if err := l.AppendRecord(rec); err != nil { // require only on failure: its t.Helper would be timed
				require.NoError(b, err, "l.AppendRecord")
			}
		}
	})
}
