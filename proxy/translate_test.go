package proxy_test

import (
	"fmt"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	toolStart     = `{"sessionUpdate":"tool_call","toolCallId":"toolu_1","title":"Compact conversation","kind":"think","status":"in_progress","_meta":{"claudeCode":{"toolName":"compact"}}}`
	toolCompleted = `{"sessionUpdate":"tool_call_update","toolCallId":"toolu_1","status":"completed"}`
	toolFailed    = `{"sessionUpdate":"tool_call_update","toolCallId":"toolu_1","status":"failed","content":[{"type":"content","content":{"type":"text","text":"Compaction failed: context window still exceeded"}}]}`
)

// codexHeadsUp is the warning codex-acp 0.16 sends right after its
// "Context compacted\n".
const codexHeadsUp = "Heads up: Long threads and multiple compactions can cause the model to be less accurate. Start a new thread when possible to keep threads small and targeted."

func marker(status, id, reason, extra string) string {
	m := fmt.Sprintf(`{"status":%q,"messageId":%q,"reason":%q%s}`, status, id, reason, extra)
	return `{"sessionUpdate":"session_info_update","_meta":{"opencode/compaction":` + m + `}}`
}

// --- Claude text ---

func TestProxyClaudeTextBecomesStandardForCapableClient(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	cmp := mintedID("s1", proxy.ClaudeText, 1)
	h.agent(upd("s1", text("Compacting...")))
	h.emitted(upd("s1", cmpUpdate(cmp, "in_progress")))
	h.agent(upd("s1", text("\n\nCompacting completed.")))
	h.emitted(upd("s1", cmpUpdate(cmp, "completed")))
	h.relay(upd("s1", text("Done.")))
	h.relay(promptResponse(id, "end_turn"))
}

func TestProxyClaudeTextFailureKeepsItsReason(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.prompt("s1")
	cmp := mintedID("s1", proxy.ClaudeText, 1)
	h.agent(upd("s1", text("Compacting...")))
	h.emitted(upd("s1", cmpUpdate(cmp, "in_progress")))
	h.agent(upd("s1", text("\n\nCompacting failed: provider overloaded")))
	h.emitted(upd("s1", cmpUpdate(cmp, "failed", `"error":"provider overloaded"`)))
	h.agent(upd("s1", text("Compacting...")))
	h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.ClaudeText, 2), "in_progress")))
	h.agent(upd("s1", text("\n\nCompacting failed.")))
	h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.ClaudeText, 2), "failed", `"error":"Compaction failed"`)))
}

func TestProxyClaudeTextUntouchedForClientWithoutCapability(t *testing.T) {
	for _, params := range []string{v1Plain, v1False} {
		h := start(t)
		h.handshake(params, 1)
		id := h.prompt("s1")
		h.relay(upd("s1", text("Compacting...")))
		h.relay(upd("s1", text("\n\nCompacting completed.")))
		h.relay(promptResponse(id, "end_turn"))
		h.end()
	}
}

func TestProxyClaudeTextRenderedWithConfiguredFallback(t *testing.T) {
	h := start(t, proxy.WithFallback(fallback.Marker()))
	h.handshake(v1Plain, 1)
	h.prompt("s1")
	cmp := mintedID("s1", proxy.ClaudeText, 1)
	// The text says nothing of the trigger, so the marker states none.
	h.agent(upd("s1", text("Compacting...")))
	h.emitted(upd("s1", `{"sessionUpdate":"session_info_update","_meta":{"acpcompact/compaction":{"status":"started","compactionId":"`+cmp+`"}}}`))
	h.agent(upd("s1", text("\n\nCompacting completed.")))
	h.emitted(upd("s1", `{"sessionUpdate":"session_info_update","_meta":{"acpcompact/compaction":{"status":"completed","compactionId":"`+cmp+`"}}}`))
}

func TestProxyProseThatOnlyLooksLikeAnOutcomeIsForwarded(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.prompt("s1")
	h.relay(upd("s1", text("\n\nCompacting completed.")))
	h.relay(upd("s1", text("Compacting... the list, as you asked.")))
}

func TestProxyClaudeTextLeftOpenIsSettledBeforePromptResponse(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	cmp := mintedID("s1", proxy.ClaudeText, 1)
	h.agent(upd("s1", text("Compacting...")))
	h.emitted(upd("s1", cmpUpdate(cmp, "in_progress")))
	h.agent(promptResponse(id, "end_turn"))
	h.emitted(upd("s1", cmpUpdate(cmp, "failed", `"error":"the turn ended before the compaction finished"`)))
	h.forwarded(promptResponse(id, "end_turn"))
	// The agent's late outcome, right after the turn, must not reach the
	// client as prose or as a second terminal.
	h.agent(upd("s1", text("\n\nCompacting completed.")))
	h.relay(upd("s1", `{"sessionUpdate":"session_info_update","title":"t"}`)) // it was read before the next prompt
	// In the next turn the same text is the model's prose.
	id = h.prompt("s1")
	h.relay(upd("s1", text("\n\nCompacting completed.")))
	h.relay(promptResponse(id, "end_turn"))
}

func TestProxyClaudeTextLeftOpenOnCancelIsCancelled(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	cmp := mintedID("s1", proxy.ClaudeText, 1)
	h.agent(upd("s1", text("Compacting...")))
	h.emitted(upd("s1", cmpUpdate(cmp, "in_progress")))
	h.cancel("s1")
	h.agent(promptResponse(id, "cancelled"))
	h.emitted(upd("s1", cmpUpdate(cmp, "cancelled")))
	h.forwarded(promptResponse(id, "cancelled"))
}

func TestProxyClaudeTextVerbatimIsSettledInItsOwnForm(t *testing.T) {
	h := start(t)
	h.handshake(v1Plain, 1)
	id := h.prompt("s1")
	h.relay(upd("s1", text("Compacting...")))
	h.agent(promptResponse(id, "end_turn"))
	h.emitted(upd("s1", text("\n\nCompacting failed: the turn ended before the compaction finished\n\n")))
	h.forwarded(promptResponse(id, "end_turn"))

	id = h.prompt("s1")
	h.relay(upd("s1", text("Compacting...")))
	h.cancel("s1")
	h.agent(promptResponse(id, "cancelled"))
	h.emitted(upd("s1", text("\n\nCompacting cancelled.\n\n")))
	h.forwarded(promptResponse(id, "cancelled"))
}

func TestProxyDisabledTranslatorLeavesItsSignalAlone(t *testing.T) {
	h := start(t, proxy.WithoutTranslators(proxy.ClaudeText))
	h.handshake(v1Capable, 1)
	h.prompt("s1")
	h.relay(upd("s1", text("Compacting...")))
	h.relay(upd("s1", text("\n\nCompacting completed.")))
}

// --- tool call ---

func TestProxyToolCallBecomesStandard(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.prompt("s1")
	h.agent(upd("s1", toolStart))
	h.emitted(upd("s1", cmpUpdate("toolu_1", "in_progress")))
	h.agent(upd("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"toolu_1","status":"in_progress"}`))
	h.agent(upd("s1", toolCompleted))
	h.emitted(upd("s1", cmpUpdate("toolu_1", "completed")))
	// Other tools are not touched.
	h.relay(upd("s1", `{"sessionUpdate":"tool_call","toolCallId":"toolu_9","title":"Read file","kind":"read","status":"in_progress"}`))
	h.relay(upd("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"toolu_9","status":"completed"}`))
}

func TestProxyToolCallFailureKeepsItsReason(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.prompt("s1")
	h.agent(upd("s1", toolStart))
	h.emitted(upd("s1", cmpUpdate("toolu_1", "in_progress")))
	h.agent(upd("s1", toolFailed))
	h.emitted(upd("s1", cmpUpdate("toolu_1", "failed", `"error":"context window still exceeded"`)))
}

func TestProxyToolCallLeftInProgressOnCancelIsSettled(t *testing.T) {
	t.Run("capable", func(t *testing.T) {
		h := start(t)
		h.handshake(v1Capable, 1)
		id := h.prompt("s1")
		h.agent(upd("s1", toolStart))
		h.emitted(upd("s1", cmpUpdate("toolu_1", "in_progress")))
		h.cancel("s1")
		h.agent(promptResponse(id, "cancelled"))
		h.emitted(upd("s1", cmpUpdate("toolu_1", "cancelled")))
		h.forwarded(promptResponse(id, "cancelled"))
		// A late completion is dropped: the client holds the terminal.
		h.prompt("s1")
		h.agent(upd("s1", toolCompleted))
		h.relay(upd("s1", text("next")))
	})
	t.Run("verbatim", func(t *testing.T) {
		h := start(t)
		h.handshake(v1Plain, 1)
		id := h.prompt("s1")
		h.relay(upd("s1", toolStart))
		h.cancel("s1")
		h.agent(promptResponse(id, "cancelled"))
		h.emitted(upd("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"toolu_1","status":"failed","content":[{"type":"content","content":{"type":"text","text":"Compaction cancelled"}}]}`))
		h.forwarded(promptResponse(id, "cancelled"))
	})
}

// --- opencode marker ---

func TestProxyOpencodeMarkerBecomesStandard(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.prompt("s1")
	h.agent(upd("s1", marker("started", "msg_c1", "auto", "")))
	h.emitted(upd("s1", cmpUpdate("msg_c1", "in_progress")))
	h.agent(upd("s1", marker("started", "msg_c1", "auto", ""))) // a repeat is idempotent
	h.agent(upd("s1", marker("completed", "msg_c1", "auto", "")))
	h.emitted(upd("s1", cmpUpdate("msg_c1", "completed")))
}

func TestProxyOpencodeAbortIsCancelOnlyAfterUserCancel(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	h.agent(upd("s1", marker("started", "msg_a", "manual", "")))
	h.emitted(upd("s1", cmpUpdate("msg_a", "in_progress")))
	h.cancel("s1")
	h.agent(upd("s1", marker("failed", "msg_a", "manual", `,"error":{"type":"aborted","message":"The operation was aborted."}`)))
	h.emitted(upd("s1", cmpUpdate("msg_a", "cancelled")))
	h.relay(promptResponse(id, "cancelled"))

	// Without a user cancel an interruption is a failure.
	h.prompt("s1")
	h.agent(upd("s1", marker("started", "msg_b", "auto", "")))
	h.emitted(upd("s1", cmpUpdate("msg_b", "in_progress")))
	h.agent(upd("s1", marker("failed", "msg_b", "auto", `,"error":{"type":"compaction.interrupted","message":"provider stream reset"}`)))
	h.emitted(upd("s1", cmpUpdate("msg_b", "failed", `"error":"provider stream reset"`)))
}

func TestProxyOpencodeSecondStartDoesNotStrandTheFirst(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	h.agent(upd("s1", marker("started", "msg_1", "auto", "")))
	h.emitted(upd("s1", cmpUpdate("msg_1", "in_progress")))
	h.agent(upd("s1", marker("started", "msg_2", "auto", "")))
	h.emitted(upd("s1", cmpUpdate("msg_2", "in_progress")))
	h.agent(upd("s1", marker("completed", "msg_2", "auto", "")))
	h.emitted(upd("s1", cmpUpdate("msg_2", "completed")))
	h.agent(promptResponse(id, "end_turn"))
	h.emitted(upd("s1", cmpUpdate("msg_1", "failed", `"error":"the turn ended before the compaction finished"`)))
	h.forwarded(promptResponse(id, "end_turn"))
}

func TestProxyOpencodeMarkerOnARealInfoUpdateKeepsTheRest(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.prompt("s1")
	h.agent(upd("s1", `{"sessionUpdate":"session_info_update","title":"Fix <proxy>","_meta":{"opencode/compaction":{"status":"started","messageId":"msg_1","reason":"auto"},"x/y":1}}`))
	h.emitted(upd("s1", cmpUpdate("msg_1", "in_progress")))
	h.emitted(upd("s1", `{"sessionUpdate":"session_info_update","title":"Fix <proxy>","_meta":{"x/y":1}}`))
}

func TestProxyOpencodeMarkerVerbatimSettledAsAborted(t *testing.T) {
	h := start(t)
	h.handshake(v1Plain, 1)
	id := h.prompt("s1")
	h.relay(upd("s1", marker("started", "msg_1", "auto", "")))
	h.cancel("s1")
	h.agent(promptResponse(id, "cancelled"))
	h.emitted(upd("s1", marker("failed", "msg_1", "auto", `,"error":{"type":"aborted","message":"Compaction cancelled"}`)))
	h.forwarded(promptResponse(id, "cancelled"))
}

// --- codex ---

func TestProxyCodexTextIsACompletedCompaction(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.prompt("s1")
	cmp := mintedID("s1", proxy.CodexText, 1)
	h.agent(upd("s1", text("Context compacted\n")))
	h.agent(upd("s1", text(codexHeadsUp)))
	h.emitted(upd("s1", cmpUpdate(cmp, "in_progress")))
	h.emitted(upd("s1", cmpUpdate(cmp, "completed")))
	h.forwarded(upd("s1", text(codexHeadsUp)))
	h.relay(upd("s1", text("Continuing.")))
}

func TestProxyCodexNoticeFormsAreCompletedCompactions(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.prompt("s1")
	c1, c2 := mintedID("s1", proxy.CodexNotice, 1), mintedID("s1", proxy.CodexNotice, 2)
	h.agent(upd("s1", `{"sessionUpdate":"notice","severity":"info","title":"Context compacted"}`))
	h.emitted(upd("s1", cmpUpdate(c1, "in_progress")))
	h.emitted(upd("s1", cmpUpdate(c1, "completed")))
	h.agent(upd("s1", text("*Context compacted to fit the model's context window.*\n\n")))
	h.emitted(upd("s1", cmpUpdate(c2, "in_progress")))
	h.emitted(upd("s1", cmpUpdate(c2, "completed")))
}

func TestProxyCodexUntouchedWithoutCapability(t *testing.T) {
	h := start(t)
	h.handshake(v1Plain, 1)
	h.prompt("s1")
	h.relay(upd("s1", text("Context compacted\n")))
	h.relay(upd("s1", `{"sessionUpdate":"notice","severity":"info","title":"Context compacted"}`))
}

func TestProxyCodexWithTextFallback(t *testing.T) {
	h := start(t, proxy.WithFallback(fallback.Text()))
	h.handshake(v1Plain, 1)
	h.prompt("s1")
	h.agent(upd("s1", text("Context compacted\n")))
	h.agent(upd("s1", text(codexHeadsUp)))
	h.emitted(upd("s1", text("Compacting...")))
	h.emitted(upd("s1", text("\n\nCompacting completed.\n\n")))
	h.forwarded(upd("s1", text(codexHeadsUp)))
}

// --- the capability gate ---

func TestProxyStandardUpdatesToClientWithoutCapabilityAreRewritten(t *testing.T) {
	inProgress := upd("s1", cmpUpdate("cmp_g1", "in_progress"))
	chunk := upd("s1", `{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_g1","content":{"type":"text","text":"## Retained"}}`)
	completed := upd("s1", cmpUpdate("cmp_g1", "completed", `"summary":[{"type":"text","text":"## Retained\n\nAll of it."}]`))
	failed := upd("s1", cmpUpdate("cmp_g2", "failed", `"error":"provider overloaded"`))

	t.Run("default toolcall", func(t *testing.T) {
		for _, params := range []string{v1Plain, v1False} {
			h := start(t)
			h.handshake(params, 1)
			h.prompt("s1")
			h.agent(inProgress)
			h.emitted(upd("s1", `{"sessionUpdate":"tool_call","toolCallId":"compact-cmp_g1","title":"Compact conversation","kind":"think","status":"in_progress"}`))
			h.agent(chunk)
			h.agent(completed)
			h.emitted(upd("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"compact-cmp_g1","status":"completed"}`))
			h.agent(failed)
			h.emitted(upd("s1", `{"sessionUpdate":"tool_call","toolCallId":"compact-cmp_g2","title":"Compact conversation","kind":"think","status":"in_progress"}`))
			h.emitted(upd("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"compact-cmp_g2","status":"failed","content":[{"type":"content","content":{"type":"text","text":"Compaction failed: provider overloaded"}}]}`))
			h.end()
		}
	})
	t.Run("text fallback", func(t *testing.T) {
		h := start(t, proxy.WithFallback(fallback.Text(fallback.WithSummary())))
		h.handshake(v1Plain, 1)
		h.prompt("s1")
		h.agent(inProgress)
		h.emitted(upd("s1", text("Compacting...")))
		h.agent(chunk)
		h.agent(completed)
		h.emitted(upd("s1", text("\n\nCompacting completed.\n\n")))
		h.emitted(upd("s1", text("## Retained\n\nAll of it.")))
	})
	t.Run("none drops them", func(t *testing.T) {
		h := start(t, proxy.WithFallback(fallback.None{}))
		h.handshake(v1Plain, 1)
		h.prompt("s1")
		h.agent(inProgress)
		h.agent(chunk)
		h.agent(completed)
		h.relay(upd("s1", text("after")))
	})
	t.Run("malformed is dropped", func(t *testing.T) {
		h := start(t)
		h.handshake(v1Plain, 1)
		h.prompt("s1")
		h.agent(upd("s1", `{"sessionUpdate":"compaction_update","compactionId":"cmp_x"}`))
		h.relay(upd("s1", text("after")))
	})
}

// --- settlement of the agent's own standard updates ---

func TestProxyStandardLeftOpenIsSettledAndLateUpdatesDropped(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	h.relay(upd("s1", cmpUpdate("cmp_o1", "in_progress")))
	h.relay(upd("s1", `{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_o1","content":{"type":"text","text":"## Partial"}}`))
	h.relay(upd("s1", cmpUpdate("cmp_ok", "in_progress")))
	h.relay(upd("s1", cmpUpdate("cmp_ok", "completed")))
	h.agent(promptResponse(id, "end_turn"))
	h.emitted(upd("s1", cmpUpdate("cmp_o1", "failed", `"error":"the turn ended before the compaction finished"`)))
	h.forwarded(promptResponse(id, "end_turn"))
	h.agent(upd("s1", `{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_o1","content":{"type":"text","text":" more"}}`))
	h.agent(upd("s1", cmpUpdate("cmp_o1", "completed")))
	h.prompt("s1")
	h.relay(upd("s1", text("After.")))
}

func TestProxyStandardChunkFirstIsFollowed(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	h.relay(upd("s1", `{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_c","content":{"type":"text","text":"x"}}`))
	h.agent(promptResponse(id, "end_turn"))
	h.emitted(upd("s1", cmpUpdate("cmp_c", "failed", `"error":"the turn ended before the compaction finished"`)))
	h.forwarded(promptResponse(id, "end_turn"))
}

func TestProxyV2SettlesBeforeIdleStateUpdate(t *testing.T) {
	h := start(t)
	h.handshake(v2Init, 2)
	id := h.prompt("s1")
	h.relay(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, id))
	h.relay(upd("s1", `{"sessionUpdate":"state_update","state":"running"}`))
	h.relay(upd("s1", cmpUpdate("cmp_v1", "in_progress")))
	cmp := mintedID("s1", proxy.ClaudeText, 1)
	h.agent(upd("s1", text("Compacting...")))
	h.emitted(upd("s1", cmpUpdate(cmp, "in_progress")))
	idle := upd("s1", `{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}`)
	h.agent(idle)
	h.emitted(upd("s1", cmpUpdate("cmp_v1", "failed", `"error":"the turn ended before the compaction finished"`)))
	h.emitted(upd("s1", cmpUpdate(cmp, "failed", `"error":"the turn ended before the compaction finished"`)))
	h.forwarded(idle)
}

// --- the agent's exit ---

func TestProxyAgentExitSettlesWhatIsOpen(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.prompt("s1")
	h.relay(upd("s1", cmpUpdate("cmp_c1", "in_progress")))
	h.agent(upd("s1", toolStart))
	h.emitted(upd("s1", cmpUpdate("toolu_1", "in_progress")))
	rest, err := h.end()
	require.NoError(t, err, "Run")
	require.Equal(t, 2, len(rest), "after the agent's exit the client got %q", rest)
	for i, id := range []string{"cmp_c1", "toolu_1"} {
		want := upd("s1", cmpUpdate(id, "failed", `"error":"the agent crashed during compaction"`))
		assert.JSONEq(t, want, string(rest[i]), "line %d", i)
	}
}

func TestProxyAgentExitAfterCancelSettlesAsCancelled(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.prompt("s1")
	h.relay(upd("s1", cmpUpdate("cmp_c1", "in_progress")))
	h.cancel("s1")
	rest, _ := h.end()
	require.Equal(t, 1, len(rest), "got %q, want one cancelled update", rest)
	require.JSONEq(t, upd("s1", cmpUpdate("cmp_c1", "cancelled")), string(rest[0]), "want one cancelled update")
}

func TestProxyAgentFinalLineWithoutNewlineIsNotJoinedToSettlement(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.prompt("s1")
	h.relay(upd("s1", cmpUpdate("cmp_c1", "in_progress")))
	last := upd("s1", text("cut"))
	h.agentRaw(last)
	rest, _ := h.end()
	require.Equal(t, 2, len(rest), "got %q", rest)
	require.Equal(t, last+"\n", string(rest[0]), "the agent's last line")
}

// --- cancel grace ---

func TestProxyCancelGraceSettlesForAHungAgent(t *testing.T) {
	h := start(t, proxy.WithCancelGrace(20e6))
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	h.relay(upd("s1", cmpUpdate("cmp_h", "in_progress")))
	h.cancel("s1")
	h.emitted(upd("s1", cmpUpdate("cmp_h", "cancelled")))
	// The agent wakes up: its outcome is dropped, its response goes on.
	h.agent(upd("s1", cmpUpdate("cmp_h", "completed")))
	h.relay(promptResponse(id, "cancelled"))
}

// --- history replay ---

func TestProxyReplayedLegacySignalsAreTerminalFirst(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.client(`{"jsonrpc":"2.0","id":5,"method":"session/load","params":{"sessionId":"s1","cwd":"/tmp","mcpServers":[]}}`)
	h.agent(upd("s1", marker("started", "msg_r", "auto", "")))
	h.agent(upd("s1", marker("completed", "msg_r", "auto", "")))
	h.emitted(upd("s1", cmpUpdate("msg_r", "completed", `"summary":null`, `"error":null`)))
	h.agent(upd("s1", text("Compacting...")))
	h.agent(upd("s1", text("\n\nCompacting completed.")))
	h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.ClaudeText, 1), "completed", `"summary":null`, `"error":null`)))
	h.relay(upd("s1", cmpUpdate("cmp_std", "completed")))
	h.relay(`{"jsonrpc":"2.0","id":5,"result":{}}`)
	// Live again: the next ID-less compaction counts on from the replay.
	h.prompt("s1")
	h.agent(upd("s1", text("Compacting...")))
	h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.ClaudeText, 2), "in_progress")))
}

// --- robustness ---

func TestProxyMalformedLinesAreForwardedAndLogged(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.client(`{"jsonrpc":"2.0","method":"session/cancel","params":`)
	h.clientRaw("not json at all\r\n")
	h.relay(`this is not JSON {`)
	h.relay(`[1,2,3]`)
	h.relay(upd("s1", text("still fine")))
	// The client received a line and a batch of three messages it cannot
	// read: the checker says so.
	h.checker.want = []conformance.Rule{conformance.RuleMalformed, conformance.RuleMalformed, conformance.RuleMalformed, conformance.RuleMalformed}
	h.end()
	logs := h.logs.String()
	for _, want := range []string{"side=client line=3", "side=client line=4", "side=agent line=3", "side=agent line=4"} {
		assert.True(t, contains(logs, "malformed line", want), "log lacks a malformed-line entry with %q:\n%s", want, logs)
	}
}

// TestProxyOverlongLinesStreamThrough: lines longer than the limit and the
// read buffer arrive whole, byte for byte, and what follows them too.
func TestProxyOverlongLinesStreamThrough(t *testing.T) {
	h := start(t, proxy.WithMaxLineBytes(256))
	h.handshake(v1Capable, 1)
	long := upd("s1", text(repeat("x", 70000)))
	h.client(`{"jsonrpc":"2.0","id":99,"method":"x/long","params":{"pad":"` + repeat("y", 70000) + `"}}`)
	h.relay(long)
	h.relay(upd("s1", text("after")))
}

func TestProxyByteIdenticalForwarding(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.clientRaw("{ \"jsonrpc\" : \"2.0\", \"method\":\"x/odd\" ,\"params\":{\"s\":\"\\u00e9\\u2028<>&\"}}\r\n")
	h.clientRaw("\n")
	h.clientRaw("   \n")
	h.agentRaw("{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"s1\",\"update\":{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"\\u00e9 <b> & \"}}}}\r\n")
	require.Equal(t, "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"s1\",\"update\":{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"\\u00e9 <b> & \"}}}}\r\n",
		string(h.next()), "the agent's line, byte for byte")
	h.agentRaw("\n")
	require.Equal(t, "\n", string(h.next()), "the agent's empty line")
}

func TestProxyCheckerReportsTheAgentsBugs(t *testing.T) {
	rc := newRecordingChecker(t)
	h := startWith(t, harnessOpt{noChecker: true}, proxy.WithChecker(rc, proxy.CheckAgent))
	h.handshake(v1Plain, 1)
	id := h.prompt("s1")
	h.agent(upd("s1", cmpUpdate("cmp_g1", "in_progress")))
	h.emitted(upd("s1", `{"sessionUpdate":"tool_call","toolCallId":"compact-cmp_g1","title":"Compact conversation","kind":"think","status":"in_progress"}`))
	h.agent(promptResponse(id, "end_turn"))
	h.next()
	h.forwarded(promptResponse(id, "end_turn"))
	h.end()
	rc.want = []conformance.Rule{conformance.RuleCapability}
	rc.close()
	assert.True(t, contains(h.logs.String(), "conformance:", "rule=capability"), "violation not logged:\n%s", h.logs.String())
}

func TestProxyGatedStandardReplayIsTerminalFirstFallback(t *testing.T) {
	h := start(t)
	h.handshake(v1Plain, 1)
	h.client(`{"jsonrpc":"2.0","id":5,"method":"session/load","params":{"sessionId":"s1","cwd":"/tmp","mcpServers":[]}}`)
	h.agent(upd("s1", cmpUpdate("cmp_r", "in_progress")))
	h.agent(upd("s1", cmpUpdate("cmp_r", "failed", `"error":"context window still exceeded"`)))
	h.emitted(upd("s1", `{"sessionUpdate":"tool_call","toolCallId":"compact-cmp_r","title":"Compact conversation","kind":"think","status":"failed","content":[{"type":"content","content":{"type":"text","text":"Compaction failed: context window still exceeded"}}]}`))
	h.relay(`{"jsonrpc":"2.0","id":5,"result":{}}`)
}

func TestProxyCancelRequestForThePromptIsAUserCancel(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	h.relay(upd("s1", cmpUpdate("cmp_1", "in_progress")))
	h.client(fmt.Sprintf(`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":%d}}`, id))
	h.agent(promptResponse(id, "cancelled"))
	h.emitted(upd("s1", cmpUpdate("cmp_1", "cancelled")))
	h.forwarded(promptResponse(id, "cancelled"))
}
