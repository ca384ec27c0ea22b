package protocol

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The direct encoders of the streaming path must write exactly what
// json.Marshal writes, so the wire does not change with them.

var jsonStrings = []string{
	"", "plain", "## Retained context\n\nThe user", "tab\there", "quote\" backslash\\ slash/",
	"<b>&</b>", "\u2028\u2029", "\x00\x01\x1f\x7f", "héllo wörld ✓ 😀", "bad \xff\xfe utf8 \xc3",
	"\xe2\x80", "\b\f\r", "emoji at end 😀", string([]byte{0xed, 0xa0, 0x80}),
}

func randomStrings(n int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "Z", " ", "\"", "\\", "<", ">", "&", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "✓", "😀", "\u2028", "\u2029", "\xff", "\xc3", "\xe2\x80"}
	out := make([]string, n)
	for i := range out {
		var s string
		for range r.IntN(24) {
			s += alphabet[r.IntN(len(alphabet))]
		}
		out[i] = s
	}
	return out
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range append(jsonStrings, randomStrings(2000)...) {
		want, err := json.Marshal(s)
		require.NoError(t, err, "json.Marshal")
		assert.Equal(t, string(want), string(appendJSONString(nil, s)), "%q", s)
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range jsonStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		assert.Equal(t, string(want), string(appendJSONString(nil, s)), "%q", s)
	})
}

// referenceChunk and referenceUpdate are the generic encodings the direct
// ones replace.
func referenceChunk(c CompactionSummaryChunk) ([]byte, error) {
	return json.Marshal(struct {
		Kind string `json:"sessionUpdate"`
		chunkFields
	}{KindSummaryChunk, chunkFields(c)})
}

func referenceUpdate(u CompactionUpdate) ([]byte, error) {
	return json.Marshal(struct {
		Kind string `json:"sessionUpdate"`
		updateFields
	}{KindUpdate, updateFields(u)})
}

func TestDirectEncodingsMatchEncodingJSON(t *testing.T) {
	strs := append(jsonStrings, randomStrings(300)...)
	for i, s := range strs {
		id := ID("cmp_" + strs[(i+1)%len(strs)])
		if id == "cmp_" {
			id = "cmp_x"
		}
		chunks := []CompactionSummaryChunk{
			{CompactionID: id, Content: Text(s)},
			{CompactionID: id, Content: ContentBlock{Type: s + "t"}},
		}
		for _, c := range chunks {
			got, err := json.Marshal(c) // MarshalJSON, then json's own pass
			require.NoError(t, err, "json.Marshal")
			direct, err := c.MarshalJSON()
			require.NoError(t, err, "c.MarshalJSON")
			want, err := referenceChunk(c)
			require.NoError(t, err, "referenceChunk")
			if assert.Equal(t, string(want), string(direct), "chunk %q:\ndirect %s\njson   %s", s, direct, got) {
				assert.Equal(t, string(want), string(got), "chunk %q:\ndirect %s\njson   %s", s, direct, got)
			}
		}
		updates := []CompactionUpdate{
			{CompactionID: id, Status: InProgress},
			{CompactionID: id, Status: Status(s + "_x")},
			{CompactionID: id, Status: Completed, Summary: Set([]ContentBlock{Text(s), Text("b")})},
			{CompactionID: id, Status: Completed, Summary: Set([]ContentBlock{})},
			{CompactionID: id, Status: Completed, Summary: Set[[]ContentBlock](nil)},
			{CompactionID: id, Status: Completed, Summary: Null[[]ContentBlock]()},
			{CompactionID: id, Status: Failed, Error: Set(s)},
			{CompactionID: id, Status: Failed, Error: Null[string](), Summary: Set([]ContentBlock{Text(s)})},
		}
		for _, u := range updates {
			got, err := json.Marshal(u)
			require.NoError(t, err, "json.Marshal")
			direct, err := u.MarshalJSON()
			require.NoError(t, err, "u.MarshalJSON")
			want, err := referenceUpdate(u)
			require.NoError(t, err, "referenceUpdate")
			if assert.Equal(t, string(want), string(direct), "update %+v:\ndirect %s\njson   %s", u, direct, got) {
				assert.Equal(t, string(want), string(got), "update %+v:\ndirect %s\njson   %s", u, direct, got)
			}
		}
	}
}
