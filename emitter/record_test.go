package emitter_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/record/*.json (the golden records) from the current MarshalJSON")

// goldenRecords are the records whose JSON form is pinned under
// testdata/record/<name>.json: what a store written today holds, which
// every later version must still read.
func goldenRecords() map[string]emitter.Record {
	start := time.Date(2026, 7, 22, 9, 30, 0, 0, time.UTC)
	return map[string]emitter.Record{
		"completed": {
			ID: "cmp_001", Status: protocol.Completed, Trigger: protocol.Auto, After: "msg_41", Displayable: true,
			Summary: []protocol.ContentBlock{
				protocol.Text("## Retained context\n\nThe user is updating the ACP schema."),
				{Type: "resource_link", Extra: map[string]json.RawMessage{"name": json.RawMessage(`"schema.json"`), "uri": json.RawMessage(`"file:///repo/schema.json"`)}},
			},
			Meta: protocol.Meta{"example.com/usage": json.RawMessage(`{"tokensAfter":42000}`)},
			Details: &emitter.Details{
				Trigger: protocol.Auto, Status: protocol.Completed, TokensBefore: 180000, TokensAfter: 42000, ContextWindow: 200000,
				StartedAt: start, EndedAt: start.Add(1500 * time.Millisecond), DurationMs: 1500,
				Source:     &emitter.MessageRange{FirstMessageID: "msg_1", LastMessageID: "msg_40", Count: 40},
				KeptTail:   &emitter.MessageRange{FirstMessageID: "msg_41", LastMessageID: "msg_41", Count: 1},
				Summarizer: &emitter.Summarizer{Model: "summarizer-1", PromptID: "compact-v3"},
				KnownLoss:  []string{"verbatim tool output older than the summary"}, SummaryBytes: 58,
			},
		},
		"failed":              {ID: "cmp_002", Status: protocol.Failed, Trigger: protocol.Manual, After: "msg_7", Error: "provider overloaded"},
		"failed-before-start": {ID: "cmp_003", Status: protocol.Failed, Trigger: protocol.Manual, Error: "summarizer model unavailable"},
		"cancelled":           {ID: "cmp_004", Status: protocol.Cancelled, Trigger: protocol.Manual, After: "msg_9"},
		"in-progress":         {ID: "cmp_005", Status: protocol.InProgress, Trigger: protocol.Idle, After: "msg_12"},
	}
}

// recordJSON is r's JSON form, for failure messages: %+v shows Meta as
// bytes and Details as a pointer, while the JSON form has every field.
func recordJSON(r emitter.Record) string {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Sprintf("%+v (no JSON form: %v)", r, err)
	}
	return string(b)
}

// TestRecordJSONIsPinnedByGoldenFiles: json.Marshal of a Record writes the
// documented, versioned form byte for byte, and reading it back gives the
// record. Regenerate with -update only for a deliberate change of the
// form (which for anything but an added optional field is a new version).
func TestRecordJSONIsPinnedByGoldenFiles(t *testing.T) {
	for name, rec := range goldenRecords() {
		t.Run(name, func(t *testing.T) {
			got, err := json.Marshal(rec)
			require.NoError(t, err, "Marshal")
			got = append(got, '\n')
			path := filepath.Join("testdata", "record", name+".json")
			if *update {
				require.NoError(t, os.WriteFile(path, got, 0o644), "update golden file")
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "(run go test ./emitter -run TestRecordJSONIsPinnedByGoldenFiles -update)")
			assert.Equal(t, string(want), string(got), "Marshal differs from %s", path)

			var back emitter.Record
			require.NoError(t, json.Unmarshal(want, &back), "Unmarshal %s", path)
			assert.Equal(t, rec, back, "%s read back", path)
		})
	}
}

// TestRecordJSONReadsVersion1WithUnknownFields: a version 1 record with
// fields this reader does not know (a newer writer's optional additions,
// a store's own keys) decodes, the unknown fields ignored.
func TestRecordJSONReadsVersion1WithUnknownFields(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "record", "v1-unknown-fields.json"))
	require.NoError(t, err, "os.ReadFile")
	var got emitter.Record
	require.NoError(t, json.Unmarshal(data, &got), "Unmarshal")
	want := emitter.Record{
		ID: "cmp_001", Status: protocol.Completed, Trigger: protocol.Auto, After: "msg_41", Displayable: true,
		Summary: []protocol.ContentBlock{protocol.Text("## Retained context")},
		Details: &emitter.Details{Status: protocol.Completed, TokensAfter: 42000, DurationMs: 1500},
	}
	assert.Equal(t, want, got, "decoded record")
}

// TestRecordJSONRefusesWhatItCannotRead: a future major version, a record
// without "v" or with a "v" that is not an integer is refused with
// ErrRecordVersion; a record without its compaction ID with
// protocol.ErrInvalidID; and nothing is written into the record.
func TestRecordJSONRefusesWhatItCannotRead(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       error
	}{
		{"a future version", `{"v":2,"compactionId":"cmp_1","status":"completed"}`, emitter.ErrRecordVersion},
		{"a far future version", `{"v":1000,"id":"x"}`, emitter.ErrRecordVersion},
		{"no version", `{"compactionId":"cmp_1","status":"completed"}`, emitter.ErrRecordVersion},
		{"a version in a string", `{"v":"1","compactionId":"cmp_1","status":"completed"}`, emitter.ErrRecordVersion},
		{"a fractional version", `{"v":1.5,"compactionId":"cmp_1","status":"completed"}`, emitter.ErrRecordVersion},
		{"a null version", `{"v":null,"compactionId":"cmp_1","status":"completed"}`, emitter.ErrRecordVersion},
		{"no compaction ID", `{"v":1,"status":"completed"}`, protocol.ErrInvalidID},
		{"an empty compaction ID", `{"v":1,"compactionId":"","status":"completed"}`, protocol.ErrInvalidID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := emitter.Record{ID: "kept"}
			err := json.Unmarshal([]byte(tc.data), &rec)
			require.ErrorIs(t, err, tc.want, "Unmarshal %s", tc.data)
			assert.Equal(t, (emitter.Record{ID: "kept"}), rec, "record after the refusal (nothing decoded)")
		})
	}
	for _, bad := range []string{`{"v":1,"compactionId":"cmp_1"}`, `{"v":1,"compactionId":"cmp_1","status":5}`, `[]`, `{"v":1,"compactionId":"c","status":"completed","summary":[null]}`} {
		var rec emitter.Record
		assert.Error(t, json.Unmarshal([]byte(bad), &rec), "Unmarshal %s: no error", bad)
		assert.NotErrorIs(t, json.Unmarshal([]byte(bad), &rec), emitter.ErrRecordVersion, "Unmarshal %s (a version 1 record, malformed)", bad)
	}
}

// TestRecordJSONRefusesToWriteWhatItCouldNotRead: a record without an ID
// or a status is not written.
func TestRecordJSONRefusesToWriteWhatItCouldNotRead(t *testing.T) {
	_, err := json.Marshal(emitter.Record{Status: protocol.Completed})
	require.ErrorIs(t, err, protocol.ErrInvalidID, "Marshal of a record without an ID")
	_, err = json.Marshal(emitter.Record{ID: "cmp_1"})
	require.Error(t, err, "Marshal of a record without a status: no error")
}

// FuzzRecordJSON: whatever a record's JSON decodes to encodes, and decodes
// back to a record that encodes the same: the form round-trips once read.
// The seeds are the golden records and testdata/fuzz/FuzzRecordJSON.
func FuzzRecordJSON(f *testing.F) {
	for _, name := range slices.Sorted(maps.Keys(goldenRecords())) {
		data, err := os.ReadFile(filepath.Join("testdata", "record", name+".json"))
		require.NoError(f, err, "os.ReadFile")
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r1 emitter.Record
		if err := json.Unmarshal(data, &r1); err != nil {
			return
		}
		if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
			return // null leaves the record as it was: nothing to encode
		}
		b1, err := json.Marshal(r1)
		require.NoError(t, err, "a decoded record does not encode\ninput: %s", data)
		var r2 emitter.Record
		require.NoError(t, json.Unmarshal(b1, &r2), "an encoded record does not decode\nencoded: %s", b1)
		b2, err := json.Marshal(r2)
		require.NoError(t, err, "a re-decoded record does not encode\nencoded: %s", b1)
		require.Equal(t, b2, b1, "the form does not round-trip:\nfirst\nsecond")
	})
}
