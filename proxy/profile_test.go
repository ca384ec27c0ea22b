package proxy_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The agentInfo names of the profiled agents (peers-observed.md).
const (
	claudeACP = "@agentclientprotocol/claude-agent-acp"
	codexTS   = "@agentclientprotocol/codex-acp"
	codexRS   = "codex-acp"
	opencode  = "OpenCode"
	qwenCode  = "qwen-code"
)

// startProfiled runs a proxy that picks translators by the agent's
// profile, as `acpcompact proxy` does by default.
func startProfiled(t *testing.T, opts ...proxy.Option) *harness {
	t.Helper()
	return startWith(t, harnessOpt{profiles: true}, opts...)
}

// handshakeAgent is handshake with an agent that names itself in agentInfo.
func (h *harness) handshakeAgent(clientParams, name, version string) {
	h.t.Helper()
	h.version = 1
	h.client(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + clientParams + `}`)
	h.relay(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true},"agentInfo":{"name":%q,"version":%q}}}`, name, version))
	h.client(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	h.relay(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
}

func (h *harness) load(id int) {
	h.t.Helper()
	h.client(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/load","params":{"sessionId":"s1","cwd":"/tmp","mcpServers":[]}}`, id))
}

// textID is a message chunk with a messageId, as opencode, codex-acp
// (TypeScript) and Claude ACP 0.101 send their model's text.
func textID(s, id string) string {
	b, _ := json.Marshal(s)
	return fmt.Sprintf(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%s},"messageId":%q}`, b, id)
}

// --- profiles: which signals an agent's stream carries ---

// Defect: a reply of the model that merely equals a legacy string was
// rewritten: opencode's or codex's "Context compacted\n" became a
// compaction, Claude 0.101's "Compacting..." was swallowed and a failed
// compaction invented at the end of the turn.
func TestProfileModelProseIsNeverASignal(t *testing.T) {
	for _, agent := range []struct{ name, version, chunkID string }{
		{opencode, "1.18.33", "msg_1"},
		{codexTS, "2.6.0", "msg_mock_1"},
		{claudeACP, "0.101.0", "msg_mock_2"},
		{claudeACP, "0.88.0", "msg_mock_2"},
		{claudeACP, "0.78.0", "msg_mock_1"},
		{claudeACP, "0.75.0", "msg_mock_1"},
		{"@zed-industries/claude-code-acp", "0.16.2", ""},
		{qwenCode, "0.23.4", ""},
		{"Kimi Code CLI", "2.1.0", ""},
		{"Copilot", "1.0.102", ""},
		{codexRS, "0.16.0", ""}, // no messageId: not followed by codex's warning
		{qwenCode, "0.24.4", ""},
		{"gemini-cli", "0.61.0", ""},
		{"some-agent", "1.0.0", ""},
	} {
		t.Run(agent.name, func(t *testing.T) {
			for _, params := range []string{v1Capable, v1Plain} {
				h := startProfiled(t, proxy.WithFallback(fallback.Text()))
				h.handshakeAgent(params, agent.name, agent.version)
				for _, reply := range []string{"Context compacted\n", "Compacting...", "\n\nCompacting completed.", "*Context compacted to fit the model's context window.*\n\n"} {
					id := h.prompt("s1")
					u := text(reply)
					if agent.chunkID != "" {
						u = textID(reply, agent.chunkID)
					}
					h.relay(upd("s1", u))
					h.relay(promptResponse(id, "end_turn"))
				}
				h.end()
			}
		})
	}
}

// Defect: after the proxy settled a text-form compaction the agent left
// open, the same outcome text in a later turn was dropped as its late
// outcome.
func TestProfileLaterOutcomeTextIsProse(t *testing.T) {
	h := startProfiled(t)
	h.handshakeAgent(v1Capable, claudeACP, "0.74.0")
	id := h.prompt("s1")
	cmp := mintedID("s1", proxy.ClaudeText, 1)
	h.agent(upd("s1", text("Compacting...")))
	h.emitted(upd("s1", cmpUpdate(cmp, "in_progress")))
	h.agent(promptResponse(id, "end_turn"))
	h.emitted(upd("s1", cmpUpdate(cmp, "failed", `"error":"the turn ended before the compaction finished"`)))
	h.forwarded(promptResponse(id, "end_turn"))
	id = h.prompt("s1")
	h.relay(upd("s1", text("\n\nCompacting completed.")))
	h.relay(promptResponse(id, "end_turn"))
}

// An agent without a profile gets the universal rules only: its texts and
// tool calls pass, the gate still holds; a translator named for it runs.
func TestProfileUnknownAgentGetsTheUniversalRules(t *testing.T) {
	h := startProfiled(t)
	h.handshake(v1Capable, 1) // no agentInfo
	h.prompt("s1")
	h.relay(upd("s1", text("Compacting...")))
	h.relay(upd("s1", toolStart))
	h.relay(upd("s1", cmpUpdate("cmp_u", "in_progress")))
	h.relay(upd("s1", cmpUpdate("cmp_u", "completed")))
	h.agent(upd("s1", cmpUpdate("cmp_u", "completed"))) // one terminal per ID
	h.relay(upd("s1", text("after")))
	assert.True(t, contains(h.logs.String(), "no profile for this agent"), "the log does not say the agent has no profile:\n%s", h.logs.String())
	h.end()

	h = startProfiled(t)
	h.handshake(v1Plain, 1)
	h.prompt("s1")
	h.agent(upd("s1", cmpUpdate("cmp_g", "in_progress")))
	h.emitted(upd("s1", `{"sessionUpdate":"tool_call","toolCallId":"compact-cmp_g","title":"Compact conversation","kind":"think","status":"in_progress"}`))
	h.end()

	h = startProfiled(t, proxy.WithTranslators(proxy.ClaudeText))
	h.handshake(v1Capable, 1)
	h.prompt("s1")
	h.agent(upd("s1", text("Compacting...")))
	h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.ClaudeText, 1), "in_progress")))
}

func TestProfileNewerReleaseGetsTheNewestProfileAndSaysSo(t *testing.T) {
	h := startProfiled(t)
	h.handshakeAgent(v1Capable, claudeACP, "0.140.2")
	h.end()
	assert.True(t, contains(h.logs.String(), "agent profile", "profile=claude-acp", "newer than the last one observed (0.101.0)"),
		"the log does not name the profile and the newer release:\n%s", h.logs.String())
}

func TestProfileCanBeForcedOrSwitchedOff(t *testing.T) {
	h := startProfiled(t, proxy.WithProfile("codex-acp-rs"))
	h.handshake(v1Capable, 1)
	h.prompt("s1")
	h.agent(upd("s1", text("Context compacted\n")))
	h.agent(upd("s1", text(codexHeadsUp)))
	cmp := mintedID("s1", proxy.CodexText, 1)
	h.emitted(upd("s1", cmpUpdate(cmp, "in_progress")))
	h.emitted(upd("s1", cmpUpdate(cmp, "completed")))
	h.forwarded(upd("s1", text(codexHeadsUp)))
	h.end()

	h = startProfiled(t, proxy.WithProfile("none"))
	h.handshakeAgent(v1Capable, codexRS, "0.16.0")
	h.prompt("s1")
	h.relay(upd("s1", text("Context compacted\n")))
	h.relay(upd("s1", text(codexHeadsUp)))
	h.end()

	_, err := proxy.New(proxy.WithProfile("bogus"))
	assert.ErrorIs(t, err, proxy.ErrUnknownProfile, "New(WithProfile(bogus))")
}

// --- codex-acp 0.16 ---

// Its "Context compacted\n" is a signal only when its warning follows at
// once; otherwise it is the model's, and reaches the client unchanged,
// whatever comes next: another line, nothing for a while, the end.
func TestProfileCodexTextWithoutItsWarningIsProse(t *testing.T) {
	h := startProfiled(t)
	h.handshakeAgent(v1Capable, codexRS, "0.16.0")
	id := h.prompt("s1")
	h.agent(upd("s1", text("Context compacted\n")))
	h.forwarded(upd("s1", text("Context compacted\n"))) // released after a while
	h.agent(upd("s1", text("Context compacted\n")))
	h.agent(upd("s1", `{"sessionUpdate":"usage_update","used":110,"size":258400}`))
	h.forwarded(upd("s1", text("Context compacted\n")))
	h.forwarded(upd("s1", `{"sessionUpdate":"usage_update","used":110,"size":258400}`))
	h.agent(upd("s1", text("Context compacted\n")))
	h.agent(promptResponse(id, "end_turn"))
	h.forwarded(upd("s1", text("Context compacted\n")))
	h.forwarded(promptResponse(id, "end_turn"))
	h.prompt("s1")
	h.agent(upd("s1", text("Context compacted\n")))
	rest, _ := h.end()
	require.Equal(t, 1, len(rest), "at the end the client got %q, want the held text", rest)
	require.Equal(t, upd("s1", text("Context compacted\n"))+"\n", string(rest[0]), "at the end the client got the held text")
}

// --- the agents' own standard updates ---

// Defect: Claude ACP 0.101 sends a second, field-less completed for the
// same ID; it was forwarded, so the client saw two terminal updates.
func TestProfileSecondTerminalUpdateIsDropped(t *testing.T) {
	for _, params := range []string{v1Capable, v1Plain} {
		h := startProfiled(t)
		h.handshakeAgent(params, claudeACP, "0.101.0")
		id := h.prompt("s1")
		if params == v1Capable {
			h.relay(upd("s1", cmpUpdate("c-1", "in_progress")))
			h.relay(upd("s1", cmpUpdate("c-1", "completed", `"summary":[{"type":"text","text":"MOCK SUMMARY"}]`)))
		} else {
			h.agent(upd("s1", cmpUpdate("c-1", "in_progress")))
			h.next()
			h.agent(upd("s1", cmpUpdate("c-1", "completed", `"summary":[{"type":"text","text":"MOCK SUMMARY"}]`)))
			h.next()
		}
		h.agent(upd("s1", cmpUpdate("c-1", "completed")))
		h.relay(promptResponse(id, "end_turn"))
		h.end()
	}
}

// Defect: a replayed in_progress compaction was forwarded to a capable
// client and never settled (and dropped for a client without the
// capability). A replay shows settled compactions: it is left out for
// both; a replayed compaction streamed as chunks keeps them as its summary.
func TestProfileReplayedRunningCompactionIsLeftOut(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.load(5)
	h.agent(upd("s1", cmpUpdate("cmp_run", "in_progress")))
	h.agent(upd("s1", `{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_run","content":{"type":"text","text":"partial"}}`))
	h.agent(upd("s1", cmpUpdate("cmp_done", "in_progress")))
	h.agent(upd("s1", `{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_done","content":{"type":"text","text":"## Retained"}}`))
	h.agent(upd("s1", cmpUpdate("cmp_done", "completed")))
	h.emitted(upd("s1", cmpUpdate("cmp_done", "completed", `"summary":[{"type":"text","text":"## Retained"}]`)))
	h.relay(`{"jsonrpc":"2.0","id":5,"result":{}}`)
	h.relay(upd("s1", text("after")))
	rest, _ := h.end()
	require.Zero(t, len(rest), "the replayed running compaction was settled at the end: %q", rest)
}

// --- settling what the agent left open, with its own words ---

// Defect: a compaction left open when the prompt fails with a JSON-RPC
// error was settled with a generic reason instead of the error's text.
func TestProfilePromptErrorGivesItsTextToWhatIsOpen(t *testing.T) {
	for _, e := range []struct{ errMember, want string }{
		{`{"code":-32603,"message":"Internal error","data":{"details":"Could not compress chat history due to an API error."}}`, "Could not compress chat history due to an API error."},
		{`{"code":-32603,"message":"Internal error","data":{"message":"We're currently experiencing high demand."}}`, "We're currently experiencing high demand."},
		{`{"code":-32000,"message":"Provider overloaded"}`, "Provider overloaded"},
	} {
		h := start(t)
		h.handshake(v1Capable, 1)
		id := h.prompt("s1")
		h.relay(upd("s1", cmpUpdate("cmp_e", "in_progress")))
		resp := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":%s}`, id, e.errMember)
		h.agent(resp)
		h.emitted(upd("s1", cmpUpdate("cmp_e", "failed", fmt.Sprintf(`"error":%q`, e.want))))
		h.forwarded(resp)
		h.end()
	}
}

// Defect: a tool call failed with "Compaction cancelled" (this project's
// tool call fallback's cancel) in a turn the user cancelled was reported as
// failed.
func TestProfileToolCallCancelledTextIsACancel(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	h.agent(upd("s1", toolStart))
	h.emitted(upd("s1", cmpUpdate("toolu_1", "in_progress")))
	h.cancel("s1")
	h.agent(upd("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"toolu_1","status":"failed","content":[{"type":"content","content":{"type":"text","text":"Compaction cancelled"}}]}`))
	h.emitted(upd("s1", cmpUpdate("toolu_1", "cancelled")))
	h.relay(promptResponse(id, "cancelled"))
}

// codex-acp (TypeScript) leaves its tool call open on failure and says
// why in a message chunk: the proxy's settlement carries those words.
func TestProfileCodexToolCallFailsWithTheProvidersText(t *testing.T) {
	for _, params := range []string{v1Capable, v1Plain} {
		h := startProfiled(t)
		h.handshakeAgent(params, codexTS, "2.6.0")
		id := h.prompt("s1")
		start := upd("s1", `{"sessionUpdate":"tool_call","toolCallId":"it_1","kind":"think","title":"Compact conversation","status":"in_progress"}`)
		if params == v1Capable {
			h.agent(start)
			h.emitted(upd("s1", cmpUpdate("it_1", "in_progress")))
		} else {
			h.relay(start)
		}
		h.relay(upd("s1", text("We're currently experiencing high demand, which may cause temporary errors.\n\n")))
		h.agent(promptResponse(id, "end_turn"))
		if params == v1Capable {
			h.emitted(upd("s1", cmpUpdate("it_1", "failed", `"error":"We're currently experiencing high demand, which may cause temporary errors."`)))
		} else {
			h.emitted(upd("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"it_1","status":"failed","content":[{"type":"content","content":{"type":"text","text":"Compaction failed: We're currently experiencing high demand, which may cause temporary errors."}}]}`))
		}
		h.forwarded(promptResponse(id, "end_turn"))
		h.end()
	}
}

// --- history replay of the text forms ---

// Defect: the after-the-fact forms (codex's texts and notice) were
// replayed as failed although they were completed live.
func TestProfileReplayedAfterTheFactFormsAreCompleted(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.load(5)
	h.agent(upd("s1", text("Context compacted\n")))
	h.agent(upd("s1", text(codexHeadsUp)))
	h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.CodexText, 1), "completed", `"summary":null`, `"error":null`)))
	h.forwarded(upd("s1", text(codexHeadsUp)))
	h.agent(upd("s1", `{"sessionUpdate":"notice","severity":"info","title":"Context compacted"}`))
	h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.CodexNotice, 1), "completed", `"summary":null`, `"error":null`)))
	h.agent(upd("s1", text("*Context compacted to fit the model's context window.*\n\n")))
	h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.CodexNotice, 2), "completed", `"summary":null`, `"error":null`)))
	h.relay(`{"jsonrpc":"2.0","id":5,"result":{}}`)
}

// Defect: after a session/load whose replay leaves a compaction out, the
// next ID-less compaction got a minted ID already used live: the emitter
// refused it and its outcome text leaked to the client as prose.
func TestProfileMintedIDIsNotReusedAfterAReplay(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	for n := 1; n <= 2; n++ {
		id := h.prompt("s1")
		h.agent(upd("s1", text("Compacting...")))
		h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.ClaudeText, n), "in_progress")))
		h.agent(upd("s1", text("\n\nCompacting completed.")))
		h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.ClaudeText, n), "completed")))
		h.relay(promptResponse(id, "end_turn"))
	}
	// The replay shows only the first.
	h.load(50)
	h.agent(upd("s1", text("Compacting...")))
	h.agent(upd("s1", text("\n\nCompacting completed.")))
	h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.ClaudeText, 1), "completed", `"summary":null`, `"error":null`)))
	h.relay(`{"jsonrpc":"2.0","id":50,"result":{}}`)
	id := h.prompt("s1")
	h.agent(upd("s1", text("Compacting...")))
	h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.ClaudeText, 3), "in_progress")))
	h.agent(upd("s1", text("\n\nCompacting completed.")))
	h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.ClaudeText, 3), "completed")))
	h.relay(promptResponse(id, "end_turn"))
}

// --- rewriting keeps what the agent said ---

const (
	claudeTool       = `{"sessionUpdate":"tool_call","toolCallId":"toolu_c","title":"Compact conversation","kind":"think","status":"in_progress","_meta":{"claudeCode":{"toolName":"compact"}}}`
	claudeToolDone   = `{"sessionUpdate":"tool_call_update","toolCallId":"toolu_c","status":"completed","_meta":{"claudeCode":{"toolName":"compact"}}}`
	claudeToolFacts  = `{"sessionUpdate":"tool_call_update","toolCallId":"toolu_c","rawOutput":{"trigger":"automatic","preTokens":990014,"postTokens":2592,"durationMs":175},"_meta":{"claudeCode":{"toolName":"compact"}}}`
	claudeRecordAuto = `"acpcompact/record":{"trigger":"auto","status":"completed","tokensBefore":990014,"tokensAfter":2592,"durationMs":175}`
)

// Claude ACP 0.101's rawOutput (trigger, tokens, duration) goes into the
// compaction record for a capable client; its completion waits for it.
func TestProfileClaudeRawOutputGoesIntoTheRecord(t *testing.T) {
	h := startProfiled(t)
	h.handshakeAgent(v1Capable, claudeACP, "0.101.0")
	id := h.prompt("s1")
	h.agent(upd("s1", claudeTool))
	h.emitted(upd("s1", cmpUpdate("toolu_c", "in_progress")))
	h.agent(upd("s1", claudeToolDone))
	h.relay(upd("s1", `{"sessionUpdate":"session_info_update","title":"Say hello."}`))
	h.agent(upd("s1", claudeToolFacts))
	h.emitted(upd("s1", cmpUpdate("toolu_c", "completed", `"_meta":{`+claudeRecordAuto+`}`)))
	h.relay(promptResponse(id, "end_turn"))

	// Without the facts, the completion goes out before the turn ends.
	id = h.prompt("s1")
	h.agent(upd("s1", strings.ReplaceAll(claudeTool, "toolu_c", "toolu_d")))
	h.emitted(upd("s1", cmpUpdate("toolu_d", "in_progress")))
	h.agent(upd("s1", strings.ReplaceAll(claudeToolDone, "toolu_c", "toolu_d")))
	h.agent(promptResponse(id, "end_turn"))
	h.emitted(upd("s1", cmpUpdate("toolu_d", "completed")))
	h.forwarded(promptResponse(id, "end_turn"))
}

// Defect: --fallback toolcall replaced the agent's own tool call with one
// of its own, losing the tool call ID, its rawOutput and its _meta; and a
// marker fallback stated trigger manual for an automatic compaction.
func TestProfileFallbackKeepsTheAgentsToolCallAndTrigger(t *testing.T) {
	t.Run("toolcall", func(t *testing.T) {
		h := startProfiled(t, proxy.WithFallback(fallback.ToolCall()))
		h.handshakeAgent(v1Plain, claudeACP, "0.101.0")
		h.prompt("s1")
		h.agent(upd("s1", claudeTool))
		h.emitted(upd("s1", claudeTool))
		h.agent(upd("s1", claudeToolDone))
		h.agent(upd("s1", claudeToolFacts))
		h.emitted(upd("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"toolu_c","status":"completed",`+
			`"rawOutput":{"trigger":"automatic","preTokens":990014,"postTokens":2592,"durationMs":175},`+
			`"_meta":{"claudeCode":{"toolName":"compact"},`+claudeRecordAuto+`}}`))
	})
	t.Run("marker", func(t *testing.T) {
		h := startProfiled(t, proxy.WithFallback(fallback.Marker()))
		h.handshakeAgent(v1Plain, claudeACP, "0.101.0")
		h.prompt("s1")
		h.agent(upd("s1", claudeTool))
		h.emitted(upd("s1", `{"sessionUpdate":"session_info_update","_meta":{"acpcompact/compaction":{"status":"started","compactionId":"toolu_c"}}}`))
		h.agent(upd("s1", claudeToolDone))
		h.agent(upd("s1", claudeToolFacts))
		h.emitted(upd("s1", `{"sessionUpdate":"session_info_update","_meta":{"acpcompact/compaction":{"status":"completed","compactionId":"toolu_c","trigger":"auto"},`+claudeRecordAuto+`}}`))
	})
	t.Run("unknown trigger", func(t *testing.T) {
		h := startProfiled(t, proxy.WithFallback(fallback.Marker()))
		h.handshakeAgent(v1Plain, codexRS, "0.16.0")
		h.prompt("s1")
		h.agent(upd("s1", text("Context compacted\n")))
		h.agent(upd("s1", text(codexHeadsUp)))
		cmp := mintedID("s1", proxy.CodexText, 1)
		h.emitted(upd("s1", `{"sessionUpdate":"session_info_update","_meta":{"acpcompact/compaction":{"status":"started","compactionId":"`+cmp+`"}}}`))
		h.emitted(upd("s1", `{"sessionUpdate":"session_info_update","_meta":{"acpcompact/compaction":{"status":"completed","compactionId":"`+cmp+`"}}}`))
	})
}

// A record the agent sent itself is kept as it is.
func TestProfileAgentsOwnRecordIsKept(t *testing.T) {
	rec := `"acpcompact/record":{"trigger":"idle","status":"completed","tokensBefore":5000,"tokensAfter":900,"durationMs":1234,"summarizer":{"model":"m"}}`
	h := start(t)
	h.handshake(v1Plain, 1)
	h.prompt("s1")
	h.agent(upd("s1", cmpUpdate("cmp_r", "in_progress")))
	h.next()
	h.agent(upd("s1", cmpUpdate("cmp_r", "completed", `"_meta":{`+rec+`}`)))
	h.emitted(upd("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"compact-cmp_r","status":"completed","_meta":{`+rec+`}}`))
}

// --- Claude ACP 0.101's continuation on session/load ---

const continuation = "This session is being continued from a previous conversation that ran out of context. The summary below covers the earlier portion of the conversation.\n\n\nSummary:\nThe user said hello.\n<system-reminder>internal</system-reminder>\n\nIf you need specific details from before compaction (like exact code snippets, error messages, or content you generated), read the full transcript at: /home/u/.claude/projects/p/s.jsonl\nContinue the conversation from where it left off without asking the user any further questions."

func continuationChunk() string {
	b, _ := json.Marshal(continuation)
	return `{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":` + string(b) + `},"messageId":"3058e3b2"}`
}

func TestProfileClaudeContinuationOnLoad(t *testing.T) {
	t.Run("capable", func(t *testing.T) {
		h := startProfiled(t)
		h.handshakeAgent(v1Capable, claudeACP, "0.101.0")
		h.load(5)
		h.agent(upd("s1", continuationChunk()))
		var got struct {
			Params struct {
				Update struct {
					Kind    string          `json:"sessionUpdate"`
					ID      string          `json:"compactionId"`
					Status  string          `json:"status"`
					Summary json.RawMessage `json:"summary"`
				} `json:"update"`
			} `json:"params"`
		}
		line := h.next()
		require.NoError(t, json.Unmarshal(line, &got), "json.Unmarshal")
		u := got.Params.Update
		require.Equal(t, "compaction_update", u.Kind, "client got %s, want a terminal-first completed compaction without a summary", line)
		require.Equal(t, "completed", u.Status, "client got %s, want a terminal-first completed compaction without a summary", line)
		require.Equal(t, "null", string(u.Summary), "client got %s, want a terminal-first completed compaction without a summary", line)
		require.NotEmpty(t, u.ID, "client got %s, want a terminal-first completed compaction with an ID", line)
		h.relay(`{"jsonrpc":"2.0","id":5,"result":{}}`)
	})
	t.Run("summaries allowed", func(t *testing.T) {
		h := startProfiled(t, proxy.WithSummaryPolicy(emitter.AllSummaries))
		h.handshakeAgent(v1Capable, claudeACP, "0.101.0")
		h.load(5)
		h.agent(upd("s1", continuationChunk()))
		line := string(h.next())
		require.Contains(t, line, `"summary":[{"type":"text","text":"The user said hello."}]`, "want the summary without its framing")
	})
	t.Run("without the capability", func(t *testing.T) {
		for _, opts := range [][]proxy.Option{nil, {proxy.WithFallback(fallback.ToolCall())}} {
			h := startProfiled(t, opts...)
			h.handshakeAgent(v1Plain, claudeACP, "0.101.0")
			h.load(5)
			h.relay(upd("s1", continuationChunk()))
			h.relay(`{"jsonrpc":"2.0","id":5,"result":{}}`)
			h.end()
		}
	})
	t.Run("live, it is a user message", func(t *testing.T) {
		h := startProfiled(t)
		h.handshakeAgent(v1Capable, claudeACP, "0.101.0")
		h.prompt("s1")
		h.relay(upd("s1", continuationChunk()))
	})
}

// --- Qwen Code ---

func qwenChunk(text, meta string) string {
	b, _ := json.Marshal(text)
	return `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":` + string(b) + `},"_meta":` + meta + `}`
}

const (
	qwenProgress = `{"contextCompression":{"phase":"progress"},"source":"slash_command"}`
	qwenDone     = `{"contextCompression":{"phase":"done","originalTokenCount":100,"newTokenCount":72,"originalTokenCountIsEstimated":false,"newTokenCountIsEstimated":true},"source":"slash_command"}`
	qwenNoop     = `{"contextCompression":{"phase":"noop"},"source":"slash_command"}`
	qwenAuto     = "IMPORTANT: This conversation approached the input token limit for mock-model. A compressed context will be sent for future messages (compressed from: 190000 to ~1020 tokens)."
)

// Defect: the proxy did nothing for Qwen Code, whose compression forms are
// structured.
func TestProfileQwenCompressionBecomesCompactions(t *testing.T) {
	h := startProfiled(t)
	h.handshakeAgent(v1Capable, qwenCode, "0.24.4")
	id := h.prompt("s1")
	c1 := mintedID("s1", proxy.Qwen, 1)
	h.agent(upd("s1", qwenChunk("Compressing context...", qwenProgress)))
	h.emitted(upd("s1", cmpUpdate(c1, "in_progress")))
	h.agent(upd("s1", qwenChunk("Context compressed (100 -> ~72).", qwenDone)))
	line := string(h.next())
	for _, want := range []string{`"compactionId":"` + c1 + `"`, `"status":"completed"`, `"trigger":"manual"`, `"tokensBefore":100`, `"tokensAfter":72`} {
		assert.Contains(t, line, want, "the completion")
	}
	h.relay(promptResponse(id, "end_turn"))

	// /compress-fast with nothing to do: completed, and its text stays.
	id = h.prompt("s1")
	c2 := mintedID("s1", proxy.Qwen, 2)
	h.agent(upd("s1", qwenChunk("Compressing context (fast)...", qwenProgress)))
	h.emitted(upd("s1", cmpUpdate(c2, "in_progress")))
	noop := upd("s1", qwenChunk("No compression needed.", qwenNoop))
	h.agent(noop)
	h.emitted(upd("s1", cmpUpdate(c2, "completed")))
	h.forwarded(noop)
	h.relay(promptResponse(id, "end_turn"))

	// Automatic: after the fact, with its token counts.
	id = h.prompt("s1")
	c3 := mintedID("s1", proxy.Qwen, 3)
	h.agent(upd("s1", text(qwenAuto)))
	h.emitted(upd("s1", cmpUpdate(c3, "in_progress")))
	h.emitted(upd("s1", cmpUpdate(c3, "completed", `"_meta":{"acpcompact/record":{"trigger":"auto","status":"completed","tokensBefore":190000,"tokensAfter":1020}}`)))
	h.relay(promptResponse(id, "end_turn"))

	// A failure: no closing update, the prompt's error says why.
	id = h.prompt("s1")
	c4 := mintedID("s1", proxy.Qwen, 4)
	h.agent(upd("s1", qwenChunk("Compressing context...", qwenProgress)))
	h.emitted(upd("s1", cmpUpdate(c4, "in_progress")))
	resp := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32603,"message":"Internal error","data":{"details":"Could not compress chat history due to an API error."}}}`, id)
	h.agent(resp)
	h.emitted(upd("s1", cmpUpdate(c4, "failed", `"error":"Could not compress chat history due to an API error."`)))
	h.forwarded(resp)

	// An automatic compression that failed fails the prompt.
	id = h.prompt("s1")
	c5 := mintedID("s1", proxy.Qwen, 5)
	details := "Context is too large to send safely after automatic compression. Estimated prompt tokens: 190014; hard limit: 177000; compression status: COMPRESSION_FAILED_API_ERROR. Start a new session or reduce the resumed history before continuing."
	resp = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32603,"message":"Internal error","data":{"details":%q}}}`, id, details)
	h.agent(resp)
	h.emitted(upd("s1", cmpUpdate(c5, "in_progress")))
	h.emitted(upd("s1", cmpUpdate(c5, "failed", fmt.Sprintf(`"error":%q`, details))))
	h.forwarded(resp)
}

func TestProfileQwenReplayIsTerminalFirstWithAStableID(t *testing.T) {
	replayed := qwenChunk("Compressing context...  \nContext compressed (100 -> ~72).",
		`{"source":"slash_command","contextCompression":{"phase":"done","originalTokenCount":100,"newTokenCount":72},"timestamp":1,"qwenTranscript":{"sourceRecordIds":["rec-1"],"segmentId":"rec-1:0"}}`)
	wantStableQwenReplay(t, "0.24.4", replayed, "")
	// Without the capability (and no fallback) the lines pass unchanged.
	h := startProfiled(t)
	h.handshakeAgent(v1Plain, qwenCode, "0.24.4")
	h.load(5)
	h.relay(upd("s1", replayed))
}

// wantStableQwenReplay loads session s1 on two connections to Qwen Code
// release version, which replays line replayed each time: the client must
// get one terminal-first completed update (holding want, when not ""),
// with the same ID both times, since a replay names its transcript record.
func wantStableQwenReplay(t *testing.T, version, replayed, want string) {
	t.Helper()
	var ids []string
	for range 2 {
		h := startProfiled(t)
		h.handshakeAgent(v1Capable, qwenCode, version)
		h.load(5)
		h.agent(upd("s1", replayed))
		var got struct {
			Params struct {
				Update struct {
					ID     string `json:"compactionId"`
					Status string `json:"status"`
				} `json:"update"`
			} `json:"params"`
		}
		line := h.next()
		_ = json.Unmarshal(line, &got)
		require.Equal(t, "completed", got.Params.Update.Status, "client got %s, want one terminal-first completed update", line)
		require.Contains(t, string(line), want, "client got one terminal-first completed update, but without the ID")
		ids = append(ids, got.Params.Update.ID)
		h.relay(`{"jsonrpc":"2.0","id":5,"result":{}}`)
		h.end()
	}
	assert.Equal(t, ids[0], ids[1], "two loads gave two IDs: want one, from the transcript record")
}

// --- heartbeat ---

// Defect: while Claude Code retries a failing summary the agent says
// nothing for minutes, and clients time out. The proxy re-sends the
// progress of what the client sees open.
func TestProfileHeartbeatDuringSilence(t *testing.T) {
	const d = 40 * time.Millisecond
	t.Run("capable", func(t *testing.T) {
		h := start(t, proxy.WithHeartbeat(d))
		h.handshake(v1Capable, 1)
		id := h.prompt("s1")
		h.relay(upd("s1", cmpUpdate("cmp_s", "in_progress")))
		// The heartbeat is the agent's own line again, byte for byte.
		for range 2 {
			require.JSONEq(t, upd("s1", cmpUpdate("cmp_s", "in_progress")), string(h.next()), "want a field-less in_progress")
		}
		h.agent(upd("s1", cmpUpdate("cmp_s", "failed", `"error":"overloaded"`)))
		// Lines already beating may precede it.
		for {
			l := h.next()
			if strings.Contains(string(l), `"failed"`) {
				break
			}
		}
		h.relay(promptResponse(id, "end_turn"))
		time.Sleep(4 * d)
		h.relay(upd("s1", text("quiet: nothing is open")))
	})
	t.Run("the agent's own tool call", func(t *testing.T) {
		h := start(t, proxy.WithHeartbeat(d))
		h.handshake(v1Plain, 1)
		h.prompt("s1")
		h.relay(upd("s1", toolStart))
		h.emitted(upd("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"toolu_1","status":"in_progress"}`))
	})
	t.Run("the gate's tool call", func(t *testing.T) {
		h := start(t, proxy.WithHeartbeat(d))
		h.handshake(v1Plain, 1)
		h.prompt("s1")
		h.agent(upd("s1", cmpUpdate("cmp_g", "in_progress")))
		h.next()
		h.emitted(upd("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"compact-cmp_g","status":"in_progress"}`))
	})
	t.Run("off", func(t *testing.T) {
		h := start(t, proxy.WithHeartbeat(0))
		h.handshake(v1Capable, 1)
		h.prompt("s1")
		h.relay(upd("s1", cmpUpdate("cmp_s", "in_progress")))
		time.Sleep(4 * d)
		h.relay(upd("s1", text("nothing came in between")))
	})
}

func TestProfilesAreListed(t *testing.T) {
	names := map[string]bool{}
	for _, p := range proxy.Profiles() {
		names[p.Name] = true
		assert.NotEmpty(t, p.Agent, "profile %q: Agent", p.Name)
		assert.NotEmpty(t, p.Range, "profile %q: Range", p.Name)
		assert.NotEmpty(t, p.Sends, "profile %q: Sends", p.Name)
		assert.NotEmpty(t, p.Gets, "profile %q: Gets", p.Name)
	}
	for _, want := range []string{"claude-acp-text", "claude-acp-toolcall", "claude-acp-replay", "claude-acp", "claude-code-acp", "codex-acp", "codex-acp-rs",
		"opencode-1.18", "opencode", "qwen-code-0.24.0", "qwen-code", "gemini-cli", "kimi-code", "copilot-cli"} {
		assert.True(t, names[want], "no profile %q", want)
	}
}
