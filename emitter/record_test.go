package emitter_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
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
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", "record", name+".json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatalf("update golden file: %v", err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./emitter -run TestRecordJSONIsPinnedByGoldenFiles -update)", err)
			}
			if string(got) != string(want) {
				t.Errorf("Marshal differs from %s:\n got %s\nwant %s", path, got, want)
			}

			var back emitter.Record
			if err := json.Unmarshal(want, &back); err != nil {
				t.Fatalf("Unmarshal %s: %v", path, err)
			}
			if !reflect.DeepEqual(back, rec) {
				t.Errorf("%s read back:\n got %s\nwant %s", path, recordJSON(back), recordJSON(rec))
			}
		})
	}
}

// TestRecordJSONReadsVersion1WithUnknownFields: a version 1 record with
// fields this reader does not know (a newer writer's optional additions,
// a store's own keys) decodes, the unknown fields ignored.
func TestRecordJSONReadsVersion1WithUnknownFields(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "record", "v1-unknown-fields.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got emitter.Record
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	want := emitter.Record{
		ID: "cmp_001", Status: protocol.Completed, Trigger: protocol.Auto, After: "msg_41", Displayable: true,
		Summary: []protocol.ContentBlock{protocol.Text("## Retained context")},
		Details: &emitter.Details{Status: protocol.Completed, TokensAfter: 42000, DurationMs: 1500},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded record:\n got %s\nwant %s", recordJSON(got), recordJSON(want))
	}
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
			if !errors.Is(err, tc.want) {
				t.Fatalf("Unmarshal %s: got %v, want %v", tc.data, err, tc.want)
			}
			if want := (emitter.Record{ID: "kept"}); !reflect.DeepEqual(rec, want) {
				t.Errorf("record after the refusal: got %s, want %s (nothing decoded)", recordJSON(rec), recordJSON(want))
			}
		})
	}
	for _, bad := range []string{`{"v":1,"compactionId":"cmp_1"}`, `{"v":1,"compactionId":"cmp_1","status":5}`, `[]`, `{"v":1,"compactionId":"c","status":"completed","summary":[null]}`} {
		var rec emitter.Record
		if err := json.Unmarshal([]byte(bad), &rec); err == nil {
			t.Errorf("Unmarshal %s: no error", bad)
		}
		if err := json.Unmarshal([]byte(bad), &rec); errors.Is(err, emitter.ErrRecordVersion) {
			t.Errorf("Unmarshal %s: got %v, want an error other than ErrRecordVersion (a version 1 record, malformed)", bad, err)
		}
	}
}

// TestRecordJSONRefusesToWriteWhatItCouldNotRead: a record without an ID
// or a status is not written.
func TestRecordJSONRefusesToWriteWhatItCouldNotRead(t *testing.T) {
	_, err := json.Marshal(emitter.Record{Status: protocol.Completed})
	if !errors.Is(err, protocol.ErrInvalidID) {
		t.Fatalf("Marshal of a record without an ID: got %v, want protocol.ErrInvalidID", err)
	}
	_, err = json.Marshal(emitter.Record{ID: "cmp_1"})
	if err == nil {
		t.Fatal("Marshal of a record without a status: no error")
	}
}

// FuzzRecordJSON: whatever a record's JSON decodes to encodes, and decodes
// back to a record that encodes the same: the form round-trips once read.
// The seeds are the golden records and testdata/fuzz/FuzzRecordJSON.
func FuzzRecordJSON(f *testing.F) {
	for _, name := range slices.Sorted(maps.Keys(goldenRecords())) {
		data, err := os.ReadFile(filepath.Join("testdata", "record", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
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
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v\ninput: %s", err, data)
		}
		var r2 emitter.Record
		if err := json.Unmarshal(b1, &r2); err != nil {
			t.Fatalf("an encoded record does not decode: %v\nencoded: %s", err, b1)
		}
		b2, err := json.Marshal(r2)
		if err != nil {
			t.Fatalf("a re-decoded record does not encode: %v\nencoded: %s", err, b1)
		}
		if !bytes.Equal(b1, b2) {
			t.Fatalf("the form does not round-trip:\nfirst:  %s\nsecond: %s", b1, b2)
		}
	})
}
