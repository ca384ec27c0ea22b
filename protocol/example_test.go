package protocol_test

import (
	"encoding/json"
	"fmt"

	"github.com/acpcompact/acpcompact/protocol"
)

// A Patch tells the three states of an optional field apart: omitted
// leaves the client's stored value, null clears it, a value replaces it.
func ExamplePatch() {
	summaries := []protocol.Patch[[]protocol.ContentBlock]{
		{}, // omitted, the zero value
		protocol.Null[[]protocol.ContentBlock](),
		protocol.Set([]protocol.ContentBlock{protocol.Text("## Retained context")}),
	}
	for _, p := range summaries {
		b, _ := json.Marshal(protocol.CompactionUpdate{CompactionID: "cmp_1", Status: protocol.Completed, Summary: p})
		fmt.Println(string(b))
	}
	// Output:
	// {"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"completed"}
	// {"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"completed","summary":null}
	// {"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"completed","summary":[{"type":"text","text":"## Retained context"}]}
}

func ExampleUnmarshalUpdate() {
	for _, raw := range []string{
		`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_1","content":{"type":"text","text":"## Retained"}}`,
		`{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"failed","error":"summary request failed","summary":null}`,
		`{"sessionUpdate":"plan","entries":[]}`,
	} {
		switch u, err := protocol.UnmarshalUpdate([]byte(raw)); u := u.(type) {
		case *protocol.CompactionSummaryChunk:
			fmt.Printf("chunk of %s: %q\n", u.CompactionID, u.Content.Text)
		case *protocol.CompactionUpdate:
			e, _ := u.Error.Get()
			fmt.Printf("%s is %s (terminal %v): %q, summary %s\n", u.CompactionID, u.Status, u.Status.Terminal(), e, u.Summary)
		default:
			fmt.Println(err)
		}
	}
	// Output:
	// chunk of cmp_1: "## Retained"
	// cmp_1 is failed (terminal true): "summary request failed", summary null
	// protocol: not a compaction session update: "plan"
}
