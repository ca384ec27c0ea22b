package proxy_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
)

// Nothing about compaction outside a turn: a compaction the agent starts,
// streams and settles after the prompt's response (an agent compacting in
// the background) is held, never sent and never lost, and the client gets
// it, terminal-first with what it streamed as its summary, when the
// session's next turn begins.
func TestProxyHoldsCompactionsBetweenTurnsUntilTheNextTurn(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	h.relay(promptResponse(id, "end_turn"))
	h.agent(upd("s1", cmpUpdate("cmp_bg", "in_progress")))
	h.agent(upd("s1", `{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_bg","content":{"type":"text","text":"## Retained"}}`))
	h.agent(upd("s1", cmpUpdate("cmp_bg", "completed")))
	// Nothing of it between turns: the next line the client gets is this.
	h.relay(upd("s1", text("idle")))
	id = h.prompt("s1")
	h.emitted(upd("s1", cmpUpdate("cmp_bg", "completed", `"summary":[{"type":"text","text":"## Retained"}]`)))
	// A repeat of its terminal update (Claude's second completed) adds
	// nothing.
	h.agent(upd("s1", cmpUpdate("cmp_bg", "completed")))
	h.relay(promptResponse(id, "end_turn"))
	h.end()
}

// A held compaction still running when the next turn begins is shown then
// (in_progress and what it streamed), and from then on it is that turn's:
// the agent's own outcome reaches the client through the proxy, once.
func TestProxyHeldCompactionStillRunningIsShownWhenTheNextTurnBegins(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	h.relay(promptResponse(id, "end_turn"))
	// (Spelt with their members in another order than the proxy writes
	// them, so the test tells the two apart.)
	h.agent(upd("s1", `{"status":"in_progress","compactionId":"cmp_bg","sessionUpdate":"compaction_update"}`))
	h.agent(upd("s1", `{"content":{"type":"text","text":"a"},"compactionId":"cmp_bg","sessionUpdate":"compaction_summary_chunk"}`))
	h.relay(upd("s1", text("idle")))
	id = h.prompt("s1")
	h.emitted(upd("s1", cmpUpdate("cmp_bg", "in_progress")))
	h.emitted(upd("s1", `{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_bg","content":{"type":"text","text":"a"}}`))
	h.agent(upd("s1", `{"content":{"type":"text","text":"b"},"compactionId":"cmp_bg","sessionUpdate":"compaction_summary_chunk"}`))
	h.emitted(upd("s1", `{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_bg","content":{"type":"text","text":"b"}}`))
	h.agent(upd("s1", `{"status":"completed","compactionId":"cmp_bg","sessionUpdate":"compaction_update"}`))
	h.emitted(upd("s1", cmpUpdate("cmp_bg", "completed")))
	h.relay(promptResponse(id, "end_turn"))
	h.end()
}

// The same held compaction reaches a client without the capability as one
// fallback tool call, settled, in the next turn.
func TestProxyHeldCompactionReachesAFallbackClientInTheNextTurn(t *testing.T) {
	h := start(t)
	h.handshake(v1Plain, 1)
	id := h.prompt("s1")
	h.relay(promptResponse(id, "end_turn"))
	h.agent(upd("s1", cmpUpdate("cmp_bg", "in_progress")))
	h.agent(upd("s1", cmpUpdate("cmp_bg", "failed", `"error":"summary request failed"`)))
	h.relay(upd("s1", text("idle")))
	id = h.prompt("s1")
	h.emitted(upd("s1", `{"sessionUpdate":"tool_call","toolCallId":"compact-cmp_bg","title":"Compact conversation","kind":"think","status":"failed","content":[{"type":"content","content":{"type":"text","text":"Compaction failed: summary request failed"}}]}`))
	h.relay(promptResponse(id, "end_turn"))
	h.end()
}

// The proxy's heartbeat is for a client in a turn: a compaction held
// between turns gets none. (The heartbeat ticks every millisecond; the
// pause gives it many chances to go wrong, and the assertion is only the
// order of what the client got.)
func TestProxyNoHeartbeatBetweenTurns(t *testing.T) {
	h := start(t, proxy.WithHeartbeat(4*time.Millisecond))
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	h.relay(promptResponse(id, "end_turn"))
	h.agent(upd("s1", cmpUpdate("cmp_bg", "in_progress")))
	time.Sleep(50 * time.Millisecond)
	h.relay(upd("s1", text("still idle")))
	h.client(`{"jsonrpc":"2.0","id":50,"method":"session/close","params":{"sessionId":"s1"}}`)
	h.relay(`{"jsonrpc":"2.0","id":50,"result":{}}`)
	h.end()
}

// The client's request decides the version it speaks: an agent answering
// protocolVersion 2 to a v1 client without the capability does not lift
// the gate.
func TestProxyGateFollowsTheClientsVersion(t *testing.T) {
	h := start(t)
	h.version = 1
	h.client(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + v1Plain + `}`)
	h.relay(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"agentCapabilities":{"loadSession":true}}}`)
	h.client(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	h.relay(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
	id := h.prompt("s1")
	h.agent(upd("s1", cmpUpdate("cmp_1", "in_progress")))
	h.emitted(upd("s1", `{"sessionUpdate":"tool_call","toolCallId":"compact-cmp_1","title":"Compact conversation","kind":"think","status":"in_progress"}`))
	h.agent(upd("s1", cmpUpdate("cmp_1", "completed")))
	h.emitted(upd("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"compact-cmp_1","status":"completed"}`))
	h.relay(promptResponse(id, "end_turn"))
	// The agent's answer breaks the protocol; the checker says so.
	h.checker.want = []conformance.Rule{conformance.RuleProtocol}
	h.end()
}

// Ids match by numeric value, as the clients match them: an initialize
// answered with id 0.0 negotiates, and a prompt answered with 12.0 (or
// 12e0) ends its turn, after the settlement of what it left open.
func TestProxyNumericIDsMatchByValue(t *testing.T) {
	for _, spell := range []func(int) string{
		func(n int) string { return fmt.Sprintf("%d.0", n) },
		func(n int) string { return fmt.Sprintf("%de0", n) },
	} {
		t.Run(spell(0), func(t *testing.T) {
			h := start(t)
			h.version = 1
			h.client(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + v1Plain + `}`)
			h.relay(`{"jsonrpc":"2.0","id":` + spell(0) + `,"result":{"protocolVersion":1,"agentCapabilities":{}}}`)
			h.client(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
			h.relay(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
			id := h.prompt("s1")
			// Negotiated: the client without the capability gets the
			// fallback, never the standard update.
			h.agent(upd("s1", cmpUpdate("cmp_1", "in_progress")))
			h.emitted(upd("s1", `{"sessionUpdate":"tool_call","toolCallId":"compact-cmp_1","title":"Compact conversation","kind":"think","status":"in_progress"}`))
			answer := `{"jsonrpc":"2.0","id":` + spell(id) + `,"result":{"stopReason":"end_turn"}}`
			h.agent(answer)
			h.emitted(upd("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"compact-cmp_1","status":"failed","content":[{"type":"content","content":{"type":"text","text":"Compaction failed: the turn ended before the compaction finished"}}]}`))
			h.forwarded(answer)
			h.end()
		})
	}
}

// A compaction update the proxy cannot hold, because it cannot read it
// whole (longer than the inspection limit) or cannot follow it (inside a
// JSON-RPC batch), is dropped and logged between turns, even for a capable
// client: forwarded, it would reach the client outside a turn.
func TestProxyDropsBetweenTurnsWhatItCannotHold(t *testing.T) {
	t.Run("longer than the inspection limit", func(t *testing.T) {
		h := start(t, proxy.WithMaxLineBytes(256))
		h.handshake(v1Capable, 1)
		id := h.prompt("s1")
		h.relay(promptResponse(id, "end_turn"))
		h.agent(upd("s1", cmpUpdate("cmp_big", "completed", `"summary":[{"type":"text","text":"`+repeat("s", 200000)+`"}]`)))
		h.relay(upd("s1", text("idle")))
		assert.True(t, contains(h.logs.String(), "dropped a compaction update longer than the inspection limit sent between turns", "side=agent", "line=4"), "the drop is not logged:\n%s", h.logs.String())
	})
	t.Run("longer than the inspection limit, in a turn", func(t *testing.T) {
		h := start(t, proxy.WithMaxLineBytes(256))
		h.handshake(v1Capable, 1)
		h.prompt("s1")
		big := upd("s1", cmpUpdate("cmp_big", "completed", `"summary":[{"type":"text","text":"`+repeat("s", 200000)+`"}]`))
		h.relay(big)
	})
	t.Run("inside a batch", func(t *testing.T) {
		h := start(t)
		h.handshake(v1Capable, 1)
		id := h.prompt("s1")
		h.relay(promptResponse(id, "end_turn"))
		before := upd("s1", text("before"))
		h.agent("[" + before + "," + upd("s1", cmpUpdate("cmp_b", "in_progress")) + "," + upd("s1", cmpUpdate("cmp_b", "completed")) + "]")
		h.emitted("[" + before + "]")
		h.relay(upd("s1", text("idle")))
		assert.True(t, contains(h.logs.String(), "dropped a compaction update inside a batch sent between turns", "side=agent", "line=4"), "the drop is not logged:\n%s", h.logs.String())
	})
}
