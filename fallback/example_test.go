package fallback_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/protocol"
)

// stdout is a Notifier that prints each session/update notification as the
// line an agent writes to its client.
func stdout() emitter.Notifier {
	return emitter.NotifierFunc(func(_ context.Context, sessionID string, update any) error {
		line, err := json.Marshal(map[string]any{
			"jsonrpc": "2.0", "method": "session/update",
			"params": map[string]any{"sessionId": sessionID, "update": update},
		})
		if err != nil {
			return err
		}
		fmt.Println(string(line))
		return nil
	})
}

// A v1 client that did not advertise the compaction capability gets prose.
// The streamed chunk is not echoed into the conversation.
func ExampleText() {
	ctx := context.Background()
	em := emitter.New(stdout(),
		emitter.WithNegotiation(capability.Negotiation{Version: capability.V1}),
		emitter.WithFallback(fallback.Text()))

	c, _ := em.Session("sess_1").Start(ctx, emitter.WithID("cmp_1"), emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable())
	_ = c.Chunk(ctx, protocol.Text("## Retained context"))
	_ = c.Complete(ctx)

	c, _ = em.Session("sess_1").Start(ctx, emitter.WithID("cmp_2"))
	_ = c.Fail(ctx, errors.New("provider overloaded"))
	// Output:
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Compacting..."}}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\n\nCompacting completed.\n\n"}}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Compacting..."}}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\n\nCompacting failed: provider overloaded\n\n"}}}}
}

// The marker lets a client that knows its key track each compaction by ID;
// other clients ignore it.
func ExampleMarker() {
	ctx := context.Background()
	em := emitter.New(stdout(),
		emitter.WithNegotiation(capability.Negotiation{Version: capability.V1}),
		emitter.WithFallback(fallback.Marker()))

	c, _ := em.Session("sess_1").Start(ctx, emitter.WithID("cmp_1"), emitter.WithTrigger(protocol.Auto))
	_ = c.Cancel(ctx)

	c, _ = em.Session("sess_1").Start(ctx, emitter.WithID("cmp_9"), emitter.WithTrigger(protocol.Idle))
	_ = c.Fail(ctx, errors.New("provider overloaded"))
	// Output:
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"session_info_update","_meta":{"acpcompact/compaction":{"status":"started","compactionId":"cmp_1","trigger":"auto"}}}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"session_info_update","_meta":{"acpcompact/compaction":{"status":"cancelled","compactionId":"cmp_1","trigger":"auto"}}}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"session_info_update","_meta":{"acpcompact/compaction":{"status":"started","compactionId":"cmp_9","trigger":"idle"}}}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"session_info_update","_meta":{"acpcompact/compaction":{"status":"failed","compactionId":"cmp_9","trigger":"idle","error":"provider overloaded"}}}}}
}

// A settled compaction replayed by session/load is a single tool call that
// is already in its terminal status; a cancel is failed, since ACP tool
// calls have no cancelled status.
func ExampleToolCall() {
	em := emitter.New(stdout(),
		emitter.WithNegotiation(capability.Negotiation{Version: capability.V1}),
		emitter.WithFallback(fallback.ToolCall()))
	_ = em.Session("sess_1").Replay(context.Background(), emitter.Record{ID: "cmp_1", Status: protocol.Cancelled})
	// Output:
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"tool_call","toolCallId":"compact-cmp_1","title":"Compact conversation","kind":"think","status":"failed","content":[{"type":"content","content":{"type":"text","text":"Compaction cancelled"}}]}}}
}

// A marker for tooling plus prose for people.
func ExampleCompose() {
	em := emitter.New(stdout(),
		emitter.WithNegotiation(capability.Negotiation{Version: capability.V1}),
		emitter.WithFallback(fallback.Compose(fallback.OpencodeMarker(), fallback.Text())))
	_ = em.Session("sess_1").Replay(context.Background(), emitter.Record{ID: "msg_1", Status: protocol.Completed, Trigger: protocol.Auto})
	// Output:
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"session_info_update","_meta":{"opencode/compaction":{"status":"completed","messageId":"msg_1","reason":"auto"}}}}}
	// {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\n\nCompacting completed.\n\n"}}}}
}

// ByName turns a CLI flag into a renderer.
func ExampleByName() {
	if _, err := fallback.ByName("marker,text"); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	_, err := fallback.ByName("banner")
	fmt.Println(errors.Is(err, fallback.ErrUnknownRenderer))
	fmt.Println(err)
	// Output:
	// true
	// fallback: unknown renderer "banner" (known: text, marker, opencode-marker, toolcall, none)
}
