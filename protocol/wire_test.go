package emitter_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/acpschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/golden")

// wireShapes is every shape the emitter puts on the wire, by golden name.
func wireShapes() map[string]any {
	image := emitter.ContentBlock{Type: "image", Extra: map[string]json.RawMessage{
		"data": json.RawMessage(`"iVBORw0KGgo="`), "mimeType": json.RawMessage(`"image/png"`)}}
	annotated := emitter.ContentBlock{Type: "text", Text: "kept", Extra: map[string]json.RawMessage{
		"annotations": json.RawMessage(`{"audience":["user"]}`), "_meta": json.RawMessage(`{"x.example/y":1}`)}}
	return map[string]any{
		"update_in_progress":       emitter.CompactionUpdate{CompactionID: "cmp_001", Status: emitter.InProgress},
		"update_completed_summary": emitter.CompactionUpdate{CompactionID: "cmp_001", Status: emitter.Completed, Summary: emitter.Set([]emitter.ContentBlock{emitter.Text("## Retained context\n\nThe user is updating the ACP schema...")})},
		"update_completed_omitted": emitter.CompactionUpdate{CompactionID: "cmp_001", Status: emitter.Completed},
		"update_completed_null":    emitter.CompactionUpdate{CompactionID: "cmp_001", Status: emitter.Completed, Summary: emitter.Null[[]emitter.ContentBlock]()},
		"update_completed_empty":   emitter.CompactionUpdate{CompactionID: "cmp_001", Status: emitter.Completed, Summary: emitter.Set([]emitter.ContentBlock{})},
		"update_failed_error":      emitter.CompactionUpdate{CompactionID: "cmp_002", Status: emitter.Failed, Error: emitter.Set("summary request failed")},
		"update_failed_error_null": emitter.CompactionUpdate{CompactionID: "cmp_002", Status: emitter.Failed, Error: emitter.Null[string](), Summary: emitter.Null[[]emitter.ContentBlock]()},
		"update_cancelled":         emitter.CompactionUpdate{CompactionID: "cmp_003", Status: emitter.Cancelled},
		"update_unknown_status":    emitter.CompactionUpdate{CompactionID: "cmp_004", Status: "paused"},
		"update_extension_status":  emitter.CompactionUpdate{CompactionID: "cmp_004", Status: "_vendor_waiting"},
		"update_meta":              emitter.CompactionUpdate{CompactionID: "cmp_005", Status: emitter.Completed, Meta: emitter.Set(emitter.Meta{"acpcompact/record": json.RawMessage(`{"tokensBefore":1000}`)})},
		"update_meta_null":         emitter.CompactionUpdate{CompactionID: "cmp_005", Status: emitter.Completed, Meta: emitter.Null[emitter.Meta]()},
		"update_multi_block":       emitter.CompactionUpdate{CompactionID: "cmp_006", Status: emitter.Completed, Summary: emitter.Set([]emitter.ContentBlock{emitter.Text("a"), image, annotated})},
		"chunk_text":               emitter.CompactionSummaryChunk{CompactionID: "cmp_001", Content: emitter.Text("## Retained context\n\n")},
		"chunk_image":              emitter.CompactionSummaryChunk{CompactionID: "cmp_001", Content: image},
		"chunk_meta":               emitter.CompactionSummaryChunk{CompactionID: "cmp_001", Content: annotated, Meta: emitter.Set(emitter.Meta{"seq": json.RawMessage(`3`)})},
		"chunk_meta_null":          emitter.CompactionSummaryChunk{CompactionID: "cmp_001", Content: emitter.Text("<b>&</b>\u2028"), Meta: emitter.Null[emitter.Meta]()},
	}
}

func TestGoldenWireShapesMatchAndValidateAgainstOfficialSchema(t *testing.T) {
	validators := map[int]*acpschema.Validator{}
	for _, v := range []int{1, 2} {
		val, err := acpschema.For(v)
		require.NoError(t, err)
		validators[v] = val
	}
	for name, shape := range wireShapes() {
		t.Run(name, func(t *testing.T) {
			got, err := json.Marshal(shape)
			require.NoError(t, err)
			path := filepath.Join("testdata", "golden", name+".json")
			if *update {
				require.NoError(t, os.WriteFile(path, append(got, '\n'), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "missing golden file; run go test ./emitter -run Golden -update")
			assert.Equal(t, string(bytes.TrimSpace(want)), string(got))
			for v, val := range validators {
				assert.NoError(t, val.Update(got), "protocol v%d", v)
			}
		})
	}
}

// Every golden file must read back into the same value and marshal to the
// same bytes: omitted, null and concrete patches survive exactly.
func TestGoldenFilesRoundTripExactly(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		raw = bytes.TrimSpace(raw)
		v, err := emitter.UnmarshalUpdate(raw)
		require.NoError(t, err, f)
		again, err := json.Marshal(v)
		require.NoError(t, err)
		assert.JSONEq(t, string(raw), string(again), f)
		assert.Equal(t, string(raw), string(again), "byte-exact round trip of %s", f)
	}
}

func TestPatchFieldsDistinguishOmittedNullAndValue(t *testing.T) {
	var u emitter.CompactionUpdate
	require.NoError(t, json.Unmarshal([]byte(`{"sessionUpdate":"compaction_update","compactionId":"c","status":"completed"}`), &u))
	assert.True(t, u.Summary.IsZero())
	assert.True(t, u.Error.IsZero())
	assert.True(t, u.Meta.IsZero())

	require.NoError(t, json.Unmarshal([]byte(`{"compactionId":"c","status":"completed","summary":null,"error":null,"_meta":null}`), &u))
	assert.True(t, u.Summary.IsNull())
	assert.True(t, u.Error.IsNull())
	assert.True(t, u.Meta.IsNull())

	require.NoError(t, json.Unmarshal([]byte(`{"compactionId":"c","status":"failed","summary":[],"error":"boom","_meta":{}}`), &u))
	s, ok := u.Summary.Get()
	assert.True(t, ok)
	assert.NotNil(t, s)
	assert.Empty(t, s)
	e, _ := u.Error.Get()
	assert.Equal(t, "boom", e)
	m, ok := u.Meta.Get()
	assert.True(t, ok)
	assert.Empty(t, m)
	assert.Equal(t, "<omitted>", emitter.Patch[int]{}.String())
	assert.Equal(t, "null", emitter.Null[int]().String())
	assert.Equal(t, "3", emitter.Set(3).String())
}

func TestUnknownStatusesRoundTripAndAreNotTerminal(t *testing.T) {
	for _, s := range []emitter.Status{"paused", "_vendor", "_"} {
		raw, err := json.Marshal(emitter.CompactionUpdate{CompactionID: "c", Status: s})
		require.NoError(t, err)
		var back emitter.CompactionUpdate
		require.NoError(t, json.Unmarshal(raw, &back))
		assert.Equal(t, s, back.Status)
		assert.False(t, s.Terminal())
	}
	assert.True(t, emitter.Status("_x").Extension())
	assert.False(t, emitter.Status("paused").Extension())
	for _, s := range []emitter.Status{emitter.Completed, emitter.Failed, emitter.Cancelled} {
		assert.True(t, s.Terminal())
	}
	assert.False(t, emitter.InProgress.Terminal())
}

func TestContentBlocksKeepUnknownFields(t *testing.T) {
	in := `{"type":"resource_link","uri":"file:///a.go","name":"a.go","_future":{"x":[1,2]}}`
	var b emitter.ContentBlock
	require.NoError(t, json.Unmarshal([]byte(in), &b))
	assert.Equal(t, "resource_link", b.Type)
	out, err := json.Marshal(b)
	require.NoError(t, err)
	assert.JSONEq(t, in, string(out))

	in = `{"type":"text","text":"hi","annotations":{"priority":0.5},"_meta":null}`
	require.NoError(t, json.Unmarshal([]byte(in), &b))
	assert.Equal(t, "hi", b.Text)
	out, err = json.Marshal(b)
	require.NoError(t, err)
	assert.JSONEq(t, in, string(out))
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
			_, err := emitter.UnmarshalUpdate([]byte(in))
			assert.Error(t, err)
		})
	}
	_, err := emitter.UnmarshalUpdate([]byte(`{"sessionUpdate":"plan","entries":[]}`))
	assert.ErrorIs(t, err, emitter.ErrNotCompaction)
	_, err = json.Marshal(emitter.CompactionUpdate{Status: emitter.Completed})
	assert.ErrorIs(t, err, emitter.ErrInvalidID)
}

func FuzzUnmarshalUpdate(f *testing.F) {
	for _, s := range wireShapes() {
		raw, _ := json.Marshal(s)
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := emitter.UnmarshalUpdate(data)
		if err != nil {
			return
		}
		// Whatever decodes must encode again and decode to the same thing.
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("decoded %q but cannot encode it: %v", data, err)
		}
		v2, err := emitter.UnmarshalUpdate(out)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", out, err)
		}
		out2, _ := json.Marshal(v2)
		if !bytes.Equal(out, out2) {
			t.Fatalf("unstable encoding:\n%s\n%s", out, out2)
		}
	})
}
