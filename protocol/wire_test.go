package protocol_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/acpcompact/acpcompact/internal/acpschema"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/golden")

// wireShapes is every compaction update shape on the wire, by golden name.
func wireShapes() map[string]any {
	image := protocol.ContentBlock{Type: "image", Extra: map[string]json.RawMessage{
		"data": json.RawMessage(`"iVBORw0KGgo="`), "mimeType": json.RawMessage(`"image/png"`)}}
	annotated := protocol.ContentBlock{Type: "text", Text: "kept", Extra: map[string]json.RawMessage{
		"annotations": json.RawMessage(`{"audience":["user"]}`), "_meta": json.RawMessage(`{"x.example/y":1}`)}}
	return map[string]any{
		"update_in_progress":       protocol.CompactionUpdate{CompactionID: "cmp_001", Status: protocol.InProgress},
		"update_completed_summary": protocol.CompactionUpdate{CompactionID: "cmp_001", Status: protocol.Completed, Summary: protocol.Set([]protocol.ContentBlock{protocol.Text("## Retained context\n\nThe user is updating the ACP schema...")})},
		"update_completed_omitted": protocol.CompactionUpdate{CompactionID: "cmp_001", Status: protocol.Completed},
		"update_completed_null":    protocol.CompactionUpdate{CompactionID: "cmp_001", Status: protocol.Completed, Summary: protocol.Null[[]protocol.ContentBlock]()},
		"update_completed_empty":   protocol.CompactionUpdate{CompactionID: "cmp_001", Status: protocol.Completed, Summary: protocol.Set([]protocol.ContentBlock{})},
		"update_failed_error":      protocol.CompactionUpdate{CompactionID: "cmp_002", Status: protocol.Failed, Error: protocol.Set("summary request failed")},
		"update_failed_error_null": protocol.CompactionUpdate{CompactionID: "cmp_002", Status: protocol.Failed, Error: protocol.Null[string](), Summary: protocol.Null[[]protocol.ContentBlock]()},
		"update_cancelled":         protocol.CompactionUpdate{CompactionID: "cmp_003", Status: protocol.Cancelled},
		"update_unknown_status":    protocol.CompactionUpdate{CompactionID: "cmp_004", Status: "paused"},
		"update_extension_status":  protocol.CompactionUpdate{CompactionID: "cmp_004", Status: "_vendor_waiting"},
		"update_meta":              protocol.CompactionUpdate{CompactionID: "cmp_005", Status: protocol.Completed, Meta: protocol.Set(protocol.Meta{"acpcompact/record": json.RawMessage(`{"tokensBefore":1000}`)})},
		"update_meta_null":         protocol.CompactionUpdate{CompactionID: "cmp_005", Status: protocol.Completed, Meta: protocol.Null[protocol.Meta]()},
		"update_multi_block":       protocol.CompactionUpdate{CompactionID: "cmp_006", Status: protocol.Completed, Summary: protocol.Set([]protocol.ContentBlock{protocol.Text("a"), image, annotated})},
		"chunk_text":               protocol.CompactionSummaryChunk{CompactionID: "cmp_001", Content: protocol.Text("## Retained context\n\n")},
		"chunk_image":              protocol.CompactionSummaryChunk{CompactionID: "cmp_001", Content: image},
		"chunk_meta":               protocol.CompactionSummaryChunk{CompactionID: "cmp_001", Content: annotated, Meta: protocol.Set(protocol.Meta{"seq": json.RawMessage(`3`)})},
		"chunk_meta_null":          protocol.CompactionSummaryChunk{CompactionID: "cmp_001", Content: protocol.Text("<b>&</b>\u2028"), Meta: protocol.Null[protocol.Meta]()},
	}
}

func TestGoldenWireShapesMatchAndValidateAgainstOfficialSchema(t *testing.T) {
	validators := map[int]*acpschema.Validator{}
	for _, v := range []int{1, 2} {
		validators[v] = schematest.For(t, v)
	}
	for name, shape := range wireShapes() {
		t.Run(name, func(t *testing.T) {
			got, err := json.Marshal(shape)
			require.NoError(t, err, "marshal %s", name)
			path := filepath.Join("testdata", "golden", name+".json")
			if *update {
				require.NoError(t, os.WriteFile(path, append(got, '\n'), 0o644), "update golden file")
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "missing golden file; run go test ./protocol -run Golden -update")
			assert.Equal(t, string(bytes.TrimSpace(want)), string(got), "wire differs from %s", path)
			for v, val := range validators {
				assert.NoError(t, val.Update(got), "protocol v%d: %s does not validate", v, got)
			}
		})
	}
}

func TestUsageUpdateValidatesAgainstOfficialSchema(t *testing.T) {
	got, err := json.Marshal(protocol.UsageUpdate{Used: 22_000, Size: 200_000})
	require.NoError(t, err, "marshal UsageUpdate")
	assert.Equal(t, `{"sessionUpdate":"usage_update","used":22000,"size":200000}`, string(got), "UsageUpdate wire")
	for _, v := range []int{1, 2} {
		assert.NoError(t, schematest.For(t, v).Update(got), "protocol v%d: %s does not validate", v, got)
	}
}

// Every golden file must read back into the same value and marshal to the
// same bytes: omitted, null and concrete patches survive exactly.
func TestGoldenFilesRoundTripExactly(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	require.NoError(t, err, "glob golden files")
	require.NotEmpty(t, files, "no golden files under testdata/golden")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err, "read golden file")
		raw = bytes.TrimSpace(raw)
		v, err := protocol.UnmarshalUpdate(raw)
		require.NoError(t, err, "%s: UnmarshalUpdate", f)
		again, err := json.Marshal(v)
		require.NoError(t, err, "%s: marshal again", f)
		assert.JSONEq(t, string(raw), string(again), "%s: round trip", f)
		assert.Equal(t, string(raw), string(again), "byte-exact round trip of %s", f)
	}
}

func TestPatchFieldsDistinguishOmittedNullAndValue(t *testing.T) {
	var u protocol.CompactionUpdate
	require.NoError(t, json.Unmarshal([]byte(`{"sessionUpdate":"compaction_update","compactionId":"c","status":"completed"}`), &u), "unmarshal omitted fields")
	if assert.True(t, u.Summary.IsZero(), "omitted fields: got summary %v, error %v, _meta %v; want all <omitted>", u.Summary, u.Error, u.Meta) {
		if assert.True(t, u.Error.IsZero(), "omitted fields: got summary %v, error %v, _meta %v; want all <omitted>", u.Summary, u.Error, u.Meta) {
			assert.True(t, u.Meta.IsZero(), "omitted fields: got summary %v, error %v, _meta %v; want all <omitted>", u.Summary, u.Error, u.Meta)
		}
	}

	require.NoError(t, json.Unmarshal([]byte(`{"compactionId":"c","status":"completed","summary":null,"error":null,"_meta":null}`), &u), "unmarshal null fields")
	if assert.True(t, u.Summary.IsNull(), "null fields: got summary %v, error %v, _meta %v; want all null", u.Summary, u.Error, u.Meta) {
		if assert.True(t, u.Error.IsNull(), "null fields: got summary %v, error %v, _meta %v; want all null", u.Summary, u.Error, u.Meta) {
			assert.True(t, u.Meta.IsNull(), "null fields: got summary %v, error %v, _meta %v; want all null", u.Summary, u.Error, u.Meta)
		}
	}

	require.NoError(t, json.Unmarshal([]byte(`{"compactionId":"c","status":"failed","summary":[],"error":"boom","_meta":{}}`), &u), "unmarshal set fields")
	s, ok := u.Summary.Get()
	if assert.True(t, ok, "summary []: got %#v (set %v), want a set, non-nil, empty slice", s, ok) {
		if assert.NotNil(t, s, "summary []") {
			assert.Empty(t, s, "summary []")
		}
	}
	e, _ := u.Error.Get()
	assert.Equal(t, "boom", e, "error \"boom\"")
	m, ok := u.Meta.Get()
	if assert.True(t, ok, "_meta {}: got %v (set %v), want a set, empty map", m, ok) {
		assert.Empty(t, m, "_meta {}")
	}
	for _, tc := range []struct{ got, want string }{
		{protocol.Patch[int]{}.String(), "<omitted>"},
		{protocol.Null[int]().String(), "null"},
		{protocol.Set(3).String(), "3"},
	} {
		assert.Equal(t, tc.want, tc.got, "Patch.String()")
	}
}

func TestUnknownStatusesRoundTripAndAreNotTerminal(t *testing.T) {
	for _, s := range []protocol.Status{"paused", "_vendor", "_"} {
		raw, err := json.Marshal(protocol.CompactionUpdate{CompactionID: "c", Status: s})
		require.NoError(t, err, "marshal status %q", s)
		var back protocol.CompactionUpdate
		require.NoError(t, json.Unmarshal(raw, &back), "unmarshal %s", raw)
		assert.Equal(t, s, back.Status, "status round trip")
		assert.False(t, s.Terminal(), "unknown status %q is terminal", s)
	}
	assert.True(t, protocol.Status("_x").Extension(), "Status(\"_x\") is not an extension")
	assert.False(t, protocol.Status("paused").Extension(), "Status(\"paused\") is an extension")
	for _, s := range []protocol.Status{protocol.Completed, protocol.Failed, protocol.Cancelled} {
		assert.True(t, s.Terminal(), "status %q is not terminal", s)
	}
	assert.False(t, protocol.InProgress.Terminal(), "status %q is terminal", protocol.InProgress)
}

func TestContentBlocksKeepUnknownFields(t *testing.T) {
	in := `{"type":"resource_link","uri":"file:///a.go","name":"a.go","_future":{"x":[1,2]}}`
	var b protocol.ContentBlock
	require.NoError(t, json.Unmarshal([]byte(in), &b), "unmarshal %s", in)
	assert.Equal(t, "resource_link", b.Type, "Type")
	out, err := json.Marshal(b)
	require.NoError(t, err, "marshal resource_link block")
	assert.JSONEq(t, in, string(out), "resource_link round trip")

	in = `{"type":"text","text":"hi","annotations":{"priority":0.5},"_meta":null}`
	require.NoError(t, json.Unmarshal([]byte(in), &b), "unmarshal %s", in)
	assert.Equal(t, "hi", b.Text, "Text")
	out, err = json.Marshal(b)
	require.NoError(t, err, "marshal text block")
	assert.JSONEq(t, in, string(out), "text round trip")
}

func TestMalformedUpdatesAreClearErrors(t *testing.T) {
	cases := map[string]string{
		"missing status":        `{"sessionUpdate":"compaction_update","compactionId":"c"}`,
		"null status":           `{"sessionUpdate":"compaction_update","compactionId":"c","status":null}`,
		"missing id":            `{"sessionUpdate":"compaction_update","status":"completed"}`,
		"empty id":              `{"sessionUpdate":"compaction_update","compactionId":"","status":"completed"}`,
		"numeric id":            `{"sessionUpdate":"compaction_update","compactionId":7,"status":"completed"}`,
		"summary not array":     `{"sessionUpdate":"compaction_update","compactionId":"c","status":"completed","summary":"x"}`,
		"error not string":      `{"sessionUpdate":"compaction_update","compactionId":"c","status":"failed","error":7}`,
		"chunk without content": `{"sessionUpdate":"compaction_summary_chunk","compactionId":"c"}`,
		"chunk null content":    `{"sessionUpdate":"compaction_summary_chunk","compactionId":"c","content":null}`,
		"chunk content string":  `{"sessionUpdate":"compaction_summary_chunk","compactionId":"c","content":"x"}`,
		"block without type":    `{"sessionUpdate":"compaction_summary_chunk","compactionId":"c","content":{"text":"x"}}`,
		"text without text":     `{"sessionUpdate":"compaction_summary_chunk","compactionId":"c","content":{"type":"text"}}`,
		"other kind":            `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}`,
		"not json":              `{"sessionUpdate":`,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := protocol.UnmarshalUpdate([]byte(in))
			assert.Error(t, err, "UnmarshalUpdate(%s): no error", in)
		})
	}
	_, err := protocol.UnmarshalUpdate([]byte(`{"sessionUpdate":"plan","entries":[]}`))
	assert.ErrorIs(t, err, protocol.ErrNotCompaction, "UnmarshalUpdate(plan)")
	_, err = json.Marshal(protocol.CompactionUpdate{Status: protocol.Completed})
	assert.ErrorIs(t, err, protocol.ErrInvalidID, "marshal without an ID")
}

// The decoders' error texts are part of what callers see (logs, the
// proxy's refusals): a refactoring must not change a byte of them.
func TestDecodeErrorTextsStayTheSame(t *testing.T) {
	updates := map[string]string{
		`{"sessionUpdate":"compaction_summary_chunk","compactionId":"c","status":"completed"}`: `protocol: sessionUpdate is "compaction_summary_chunk", not "compaction_update"`,
		`{"sessionUpdate":7,"compactionId":"c","status":"completed"}`:                          `protocol: compaction_update: json: cannot unmarshal number into Go struct field .sessionUpdate of type string`,
		`{"status":"completed"}`:                     `protocol: "compactionId" is required and non-null`,
		`{"compactionId":null,"status":"completed"}`: `protocol: "compactionId" is required and non-null`,
		`{"compactionId":7,"status":"completed"}`:    `protocol: "compactionId" must be a string`,
		`{"compactionId":"","status":"completed"}`:   `protocol: compaction ID must be a non-empty string`,
		`{"compactionId":"c"}`:                       `protocol: "status" is required and non-null`,
	}
	for in, want := range updates {
		var u protocol.CompactionUpdate
		err := u.UnmarshalJSON([]byte(in))
		if assert.Error(t, err, "CompactionUpdate.UnmarshalJSON(%s)", in) {
			assert.Equal(t, want, err.Error(), "CompactionUpdate.UnmarshalJSON(%s)", in)
		}
	}
	chunks := map[string]string{
		`{"sessionUpdate":"compaction_update","compactionId":"c","content":{"type":"text","text":"x"}}`: `protocol: sessionUpdate is "compaction_update", not "compaction_summary_chunk"`,
		`{"sessionUpdate":7,"compactionId":"c"}`:                                                        `protocol: compaction_summary_chunk: json: cannot unmarshal number into Go struct field .sessionUpdate of type string`,
		`{"content":{"type":"text","text":"x"}}`:                                                        `protocol: "compactionId" is required and non-null`,
		`{"compactionId":7,"content":{"type":"text","text":"x"}}`:                                       `protocol: "compactionId" must be a string`,
		`{"compactionId":"","content":{"type":"text","text":"x"}}`:                                      `protocol: compaction ID must be a non-empty string`,
		`{"compactionId":"c"}`:                                                                          `protocol: compaction_summary_chunk needs a non-null content block`,
	}
	for in, want := range chunks {
		var c protocol.CompactionSummaryChunk
		err := c.UnmarshalJSON([]byte(in))
		if assert.Error(t, err, "CompactionSummaryChunk.UnmarshalJSON(%s)", in) {
			assert.Equal(t, want, err.Error(), "CompactionSummaryChunk.UnmarshalJSON(%s)", in)
		}
	}
}

func FuzzUnmarshalUpdate(f *testing.F) {
	for _, s := range wireShapes() {
		raw, _ := json.Marshal(s)
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := protocol.UnmarshalUpdate(data)
		if err != nil {
			return
		}
		// Whatever decodes must encode again and decode to the same thing.
		out, err := json.Marshal(v)
		require.NoError(t, err, "decoded %q but cannot encode it", data)
		v2, err := protocol.UnmarshalUpdate(out)
		require.NoError(t, err, "re-decode of %s", out)
		out2, _ := json.Marshal(v2)
		require.Equal(t, out2, out, "unstable encoding\n%s", out2)
	})
}
