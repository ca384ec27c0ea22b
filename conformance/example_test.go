package conformance_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/acpcompact/acpcompact/conformance"
)

// A client timeline for the RFD's running example: text before the
// boundary stays before it, text after stays after, and the completed
// update's summary replaces the streamed chunks in place.
func ExampleReducer() {
	r := conformance.NewReducer(1)
	for _, u := range []string{
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Compacting now."}}`,
		`{"sessionUpdate":"compaction_update","compactionId":"cmp_001","status":"in_progress"}`,
		`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_001","content":{"type":"text","text":"## Retained context\n\n"}}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Carrying on."}}`,
		`{"sessionUpdate":"compaction_update","compactionId":"cmp_001","status":"completed","summary":[{"type":"text","text":"## Retained context\n\nThe user is updating the ACP schema..."}]}`,
	} {
		if err := r.Apply("s1", json.RawMessage(u)); err != nil {
			fmt.Println(err)
		}
	}
	_ = r.Render(os.Stdout, "s1")
	// Output:
	// [agent] Compacting now.
	// [compaction cmp_001] completed  summary: ## Retained context\n\nThe user is updating the ACP schema...
	// [agent] Carrying on.
}

// A live proxy feeds each message to the Checker as it passes; here the
// agent answers the prompt before the compaction settles, then settles it
// too late.
func ExampleChecker() {
	c := conformance.NewChecker()
	msgs := []struct {
		dir conformance.Direction
		raw string
	}{
		{conformance.FromClient, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`},
		{conformance.FromAgent, `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`},
		{conformance.FromClient, `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}`},
		{conformance.FromAgent, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"in_progress"}}}`},
		{conformance.FromAgent, `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`},
		{conformance.FromAgent, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"completed"}}}`},
	}
	for i, m := range msgs {
		for _, v := range c.Observe(m.dir, i+1, json.RawMessage(m.raw)) {
			fmt.Println(v)
		}
	}
	for _, v := range c.Close() {
		fmt.Println(v)
	}
	// Output:
	// line 5: settlement: session "s1": compaction "cmp_1" is still "in_progress" when the agent answered session/prompt id 1; it must reach completed, failed or cancelled first (first seen at line 4)
	// line 6: after-turn: session "s1": compaction_update for compaction "cmp_1" (status "completed") arrived with no turn open (the turn ended at line 5); a client reads it as a new turn
}

// CheckTranscript reads the "client <json>" / "agent <json>" format. This
// v1 client sent "compaction": true, which is not the object the
// capability requires.
func ExampleCheckTranscript() {
	transcript := `# codex-acp reads any non-null value as support
client {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":true}}}}
agent {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}
client {"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}
agent {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"completed"}}}
agent {"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}
`
	vs, err := conformance.CheckTranscript(strings.NewReader(transcript))
	if err != nil {
		fmt.Println(err)
	}
	for _, v := range vs {
		fmt.Println(v)
	}
	// Output:
	// line 5: capability: session "s1": compaction_update for compaction "cmp_1" sent to a v1 client that did not advertise clientCapabilities.session.compaction as an object
}
