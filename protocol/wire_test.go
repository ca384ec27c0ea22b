package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/acpcompact/acpcompact/internal/acpschema"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/protocol"
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
			if err != nil {
				t.Fatalf("marshal %s: %v", name, err)
			}
			path := filepath.Join("testdata", "golden", name+".json")
			if *update {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatalf("update golden file: %v", err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("missing golden file; run go test ./protocol -run Golden -update: %v", err)
			}
			if w := string(bytes.TrimSpace(want)); string(got) != w {
				t.Errorf("wire differs from %s:\ngot  %s\nwant %s", path, got, w)
			}
			for v, val := range validators {
				if err := val.Update(got); err != nil {
					t.Errorf("protocol v%d: %s does not validate: %v", v, got, err)
				}
			}
		})
	}
}

func TestUsageUpdateValidatesAgainstOfficialSchema(t *testing.T) {
	got, err := json.Marshal(protocol.UsageUpdate{Used: 22_000, Size: 200_000})
	if err != nil {
		t.Fatalf("marshal UsageUpdate: %v", err)
	}
	if want := `{"sessionUpdate":"usage_update","used":22000,"size":200000}`; string(got) != want {
		t.Errorf("UsageUpdate wire:\ngot  %s\nwant %s", got, want)
	}
	for _, v := range []int{1, 2} {
		if err := schematest.For(t, v).Update(got); err != nil {
			t.Errorf("protocol v%d: %s does not validate: %v", v, got, err)
		}
	}
}

// Every golden file must read back into the same value and marshal to the
// same bytes: omitted, null and concrete patches survive exactly.
func TestGoldenFilesRoundTripExactly(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	if err != nil {
		t.Fatalf("glob golden files: %v", err)
	}
	if len(files) == 0 {
		t.Fatalf("no golden files under testdata/golden")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("read golden file: %v", err)
		}
		raw = bytes.TrimSpace(raw)
		v, err := protocol.UnmarshalUpdate(raw)
		if err != nil {
			t.Fatalf("%s: UnmarshalUpdate: %v", f, err)
		}
		again, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: marshal again: %v", f, err)
		}
		if err := sameJSON(raw, again); err != nil {
			t.Errorf("%s: round trip: %v:\ngot  %s\nwant %s", f, err, again, raw)
		}
		if string(again) != string(raw) {
			t.Errorf("byte-exact round trip of %s:\ngot  %s\nwant %s", f, again, raw)
		}
	}
}

func TestPatchFieldsDistinguishOmittedNullAndValue(t *testing.T) {
	var u protocol.CompactionUpdate
	if err := json.Unmarshal([]byte(`{"sessionUpdate":"compaction_update","compactionId":"c","status":"completed"}`), &u); err != nil {
		t.Fatalf("unmarshal omitted fields: %v", err)
	}
	if !u.Summary.IsZero() || !u.Error.IsZero() || !u.Meta.IsZero() {
		t.Errorf("omitted fields: got summary %v, error %v, _meta %v; want all <omitted>", u.Summary, u.Error, u.Meta)
	}

	if err := json.Unmarshal([]byte(`{"compactionId":"c","status":"completed","summary":null,"error":null,"_meta":null}`), &u); err != nil {
		t.Fatalf("unmarshal null fields: %v", err)
	}
	if !u.Summary.IsNull() || !u.Error.IsNull() || !u.Meta.IsNull() {
		t.Errorf("null fields: got summary %v, error %v, _meta %v; want all null", u.Summary, u.Error, u.Meta)
	}

	if err := json.Unmarshal([]byte(`{"compactionId":"c","status":"failed","summary":[],"error":"boom","_meta":{}}`), &u); err != nil {
		t.Fatalf("unmarshal set fields: %v", err)
	}
	s, ok := u.Summary.Get()
	if !ok || s == nil || len(s) != 0 {
		t.Errorf("summary []: got %#v (set %v), want a set, non-nil, empty slice", s, ok)
	}
	if e, _ := u.Error.Get(); e != "boom" {
		t.Errorf("error: got %q, want %q", e, "boom")
	}
	m, ok := u.Meta.Get()
	if !ok || len(m) != 0 {
		t.Errorf("_meta {}: got %v (set %v), want a set, empty map", m, ok)
	}
	for _, tc := range []struct{ got, want string }{
		{protocol.Patch[int]{}.String(), "<omitted>"},
		{protocol.Null[int]().String(), "null"},
		{protocol.Set(3).String(), "3"},
	} {
		if tc.got != tc.want {
			t.Errorf("Patch.String(): got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestUnknownStatusesRoundTripAndAreNotTerminal(t *testing.T) {
	for _, s := range []protocol.Status{"paused", "_vendor", "_"} {
		raw, err := json.Marshal(protocol.CompactionUpdate{CompactionID: "c", Status: s})
		if err != nil {
			t.Fatalf("marshal status %q: %v", s, err)
		}
		var back protocol.CompactionUpdate
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatalf("unmarshal %s: %v", raw, err)
		}
		if back.Status != s {
			t.Errorf("status round trip: got %q, want %q", back.Status, s)
		}
		if s.Terminal() {
			t.Errorf("unknown status %q is terminal", s)
		}
	}
	if !protocol.Status("_x").Extension() {
		t.Errorf(`Status("_x") is not an extension`)
	}
	if protocol.Status("paused").Extension() {
		t.Errorf(`Status("paused") is an extension`)
	}
	for _, s := range []protocol.Status{protocol.Completed, protocol.Failed, protocol.Cancelled} {
		if !s.Terminal() {
			t.Errorf("status %q is not terminal", s)
		}
	}
	if protocol.InProgress.Terminal() {
		t.Errorf("status %q is terminal", protocol.InProgress)
	}
}

func TestContentBlocksKeepUnknownFields(t *testing.T) {
	in := `{"type":"resource_link","uri":"file:///a.go","name":"a.go","_future":{"x":[1,2]}}`
	var b protocol.ContentBlock
	if err := json.Unmarshal([]byte(in), &b); err != nil {
		t.Fatalf("unmarshal %s: %v", in, err)
	}
	if b.Type != "resource_link" {
		t.Errorf("Type: got %q, want %q", b.Type, "resource_link")
	}
	out, err := json.Marshal(b)
	if err != nil {
		t.Fatalf("marshal resource_link block: %v", err)
	}
	if err := sameJSON([]byte(in), out); err != nil {
		t.Errorf("resource_link round trip: %v:\ngot  %s\nwant %s", err, out, in)
	}

	in = `{"type":"text","text":"hi","annotations":{"priority":0.5},"_meta":null}`
	if err := json.Unmarshal([]byte(in), &b); err != nil {
		t.Fatalf("unmarshal %s: %v", in, err)
	}
	if b.Text != "hi" {
		t.Errorf("Text: got %q, want %q", b.Text, "hi")
	}
	out, err = json.Marshal(b)
	if err != nil {
		t.Fatalf("marshal text block: %v", err)
	}
	if err := sameJSON([]byte(in), out); err != nil {
		t.Errorf("text round trip: %v:\ngot  %s\nwant %s", err, out, in)
	}
}

// sameJSON returns nil when want and got encode the same JSON value: the
// round trips above may reorder members, so only the meaning must match.
func sameJSON(want, got []byte) error {
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		return fmt.Errorf("want is not JSON: %w", err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		return fmt.Errorf("got is not JSON: %w", err)
	}
	if !reflect.DeepEqual(w, g) {
		return errors.New("not the same JSON value")
	}
	return nil
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
			if _, err := protocol.UnmarshalUpdate([]byte(in)); err == nil {
				t.Errorf("UnmarshalUpdate(%s): no error", in)
			}
		})
	}
	_, err := protocol.UnmarshalUpdate([]byte(`{"sessionUpdate":"plan","entries":[]}`))
	if !errors.Is(err, protocol.ErrNotCompaction) {
		t.Errorf("UnmarshalUpdate(plan): got error %v, want %v", err, protocol.ErrNotCompaction)
	}
	_, err = json.Marshal(protocol.CompactionUpdate{Status: protocol.Completed})
	if !errors.Is(err, protocol.ErrInvalidID) {
		t.Errorf("marshal without an ID: got error %v, want %v", err, protocol.ErrInvalidID)
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
		if err != nil {
			t.Fatalf("decoded %q but cannot encode it: %v", data, err)
		}
		v2, err := protocol.UnmarshalUpdate(out)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", out, err)
		}
		out2, _ := json.Marshal(v2)
		if !bytes.Equal(out, out2) {
			t.Fatalf("unstable encoding:\n%s\n%s", out, out2)
		}
	})
}
