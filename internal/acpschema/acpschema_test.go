package acpschema

import "testing"

func TestOfficialSchemaAcceptsRFDExamplesAndRejectsBrokenOnes(t *testing.T) {
	good := []string{
		`{"sessionUpdate":"compaction_update","compactionId":"cmp_001","status":"in_progress"}`,
		`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_001","content":{"type":"text","text":"## Retained context\n\n"}}`,
		`{"sessionUpdate":"compaction_update","compactionId":"cmp_001","status":"completed","summary":[{"type":"text","text":"x"}]}`,
		`{"sessionUpdate":"compaction_update","compactionId":"c","status":"_vendor_state","summary":null,"error":null,"_meta":null}`,
	}
	bad := []string{
		`{"sessionUpdate":"compaction_update","compactionId":"cmp_001"}`,
		`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_001","content":"text"}`,
		`{"sessionUpdate":"compaction_update","compactionId":"c","status":"completed","summary":"x"}`,
		`{"sessionUpdate":"compaction_update","compactionId":"c","status":"failed","error":7}`,
	}
	for _, ver := range []int{1, 2} {
		v, err := For(ver)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range good {
			if err := v.Update([]byte(g)); err != nil {
				t.Errorf("v%d rejected valid update: %v", ver, err)
			}
		}
		for _, b := range bad {
			if err := v.Update([]byte(b)); err == nil {
				t.Errorf("v%d accepted invalid update %s", ver, b)
			}
		}
	}
}
