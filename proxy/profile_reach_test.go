package proxy_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/proxy"
	"github.com/acpcompact/acpcompact/proxy/agents"
)

// The profiles of issue 28 (the Claude adapter's earlier name, pi-acp,
// JetBrains AIR, Qwen Code's notice and warning, the silent agents), from
// the recordings in test/peers/testdata: the lines below are theirs.

const (
	claudeZed   = "@zed-industries/claude-agent-acp"
	piACP       = "pi-acp"
	piCompacted = "Compaction completed.\nTokens before: 110\n\nNo prior history.\n\n---\n\n**Turn Context (split turn):**\n\n<state_snapshot>MOCK SUMMARY: the user said hello and the assistant greeted them.</state_snapshot>"
	qwenNotice  = `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Compression instructions were truncated to 2000 characters."},"_meta":{"contextCompressionNotice":{"phase":"notice","instructionsLimit":2000},"source":"slash_command"}}`
	qwenProg    = `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Compressing context..."},"_meta":{"contextCompression":{"phase":"progress"},"source":"slash_command"}}`
	qwenWarned  = `{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Context compressed (100 -> ~78).  \n⚠️ Compaction model \"mock-small\" context window (8,000 tokens) is too small for the current payload (~21,713 tokens); using the main model for this compression."},"_meta":{"contextCompression":{"phase":"done","originalTokenCount":100,"newTokenCount":78,"originalTokenCountIsEstimated":false,"newTokenCountIsEstimated":true,"warning":"Compaction model \"mock-small\" context window (8,000 tokens) is too small for the current payload (~21,713 tokens); using the main model for this compression."},"source":"slash_command"}}`
	airTool     = `{"sessionUpdate":"tool_call","toolCallId":"d05b2cd7","title":"Compact conversation","kind":"think","status":"in_progress","_meta":{"jetbrains":{"air":{"version":1,"contextCompaction":{"version":1}}}}}`
	airToolDone = `{"sessionUpdate":"tool_call_update","toolCallId":"d05b2cd7","status":"completed"}`
	airFacts    = `{"sessionUpdate":"tool_call_update","toolCallId":"d05b2cd7","_meta":{"jetbrains":{"air":{"contextCompaction":{"version":1,"trigger":"manual","preTokens":110,"postTokens":2537,"durationMs":736}}}}}`
)

// The Claude adapter under its earlier name: from 0.20 its texts are
// compactions; the same text from the model, which always begins its
// reply with an empty chunk, stays prose; before 0.20 it says nothing
// live.
func TestProfileZedClaudeAdapter(t *testing.T) {
	t.Run("0.23.1", func(t *testing.T) {
		h := startProfiled(t)
		h.handshakeAgent(v1Capable, claudeZed, "0.23.1")
		id := h.promptText("s1", "/compact")
		cmp := mintedID("s1", proxy.ClaudeText, 1)
		h.agent(upd("s1", text("Compacting...")))
		h.wantUpdate(cmp, "in_progress")
		h.agent(upd("s1", text("\n\nCompacting completed.")))
		h.wantUpdate(cmp, "completed")
		h.relay(promptResponse(id, "end_turn"))
		// The model's reply "Compacting..." after its empty chunk.
		id = h.prompt("s1")
		h.relay(upd("s1", text("")))
		h.relay(upd("s1", text("Compacting...")))
		h.relay(promptResponse(id, "end_turn"))
		rest, _ := h.end()
		assert.Empty(t, rest, "at the end the client got more")
	})
	t.Run("0.20.0's failure text", func(t *testing.T) {
		failed := "Error: Error during compaction: Error: API Error: 529 overloaded"
		h := startProfiled(t)
		h.handshakeAgent(v1Capable, claudeZed, "0.20.0")
		id := h.promptText("s1", "/compact")
		cmp := mintedID("s1", proxy.ClaudeText, 1)
		h.agent(upd("s1", text("Compacting...")))
		h.wantUpdate(cmp, "in_progress")
		h.agent(upd("s1", text(failed)))
		h.wantUpdate(cmp, "failed", "API Error: 529 overloaded")
		h.relay(promptResponse(id, "end_turn"))

		// Without the capability its own lines pass, and the text form's
		// own outcome follows the one a client does not know.
		h = startProfiled(t)
		h.handshakeAgent(v1Plain, claudeZed, "0.20.0")
		id = h.promptText("s1", "/compact")
		h.relay(upd("s1", text("Compacting...")))
		h.agent(upd("s1", text(failed)))
		line := string(h.next())
		assert.Contains(t, line, `Compacting failed: Error: API Error: 529 overloaded`, "the text form's failure comes with it")
		h.forwarded(upd("s1", text(failed)))
		h.relay(promptResponse(id, "end_turn"))
	})
	t.Run("0.17.1", func(t *testing.T) {
		h := startProfiled(t)
		h.handshakeAgent(v1Capable, claudeZed, "0.17.1")
		id := h.promptText("s1", "/compact")
		h.relay(upd("s1", text("Compacting..."))) // not a form of this release: prose
		h.relay(promptResponse(id, "end_turn"))
	})
}

// pi-acp's /compact result becomes a completed compaction with pi's
// summary and its token count; a failure is the prompt's error; a cancel
// says nothing of a compaction.
func TestProfilePiACP(t *testing.T) {
	t.Run("completed", func(t *testing.T) {
		h := startProfiled(t)
		h.handshakeAgent(v1Capable, piACP, "0.0.34")
		id := h.promptText("s1", "/compact")
		cmp := mintedID("s1", agents.Pi, 1)
		h.agent(upd("s1", text(piCompacted)))
		h.wantUpdate(cmp, "in_progress")
		h.wantUpdate(cmp, "completed", `<state_snapshot>MOCK SUMMARY`, `"tokensBefore":110`, `"trigger":"manual"`)
		h.relay(promptResponse(id, "end_turn"))
		// In any other turn the same text is prose.
		id = h.prompt("s1")
		h.relay(upd("s1", text(piCompacted)))
		h.relay(promptResponse(id, "end_turn"))
	})
	t.Run("failed", func(t *testing.T) {
		h := startProfiled(t)
		h.handshakeAgent(v1Capable, piACP, "0.0.34")
		id := h.promptText("s1", "/compact")
		failure := `{"jsonrpc":"2.0","id":` + itoa(id) + `,"error":{"code":-32603,"message":"Internal error","data":{"details":"pi compact failed: Summarization failed: 500"}}}`
		h.agent(failure)
		cmp := mintedID("s1", agents.Pi, 1)
		h.wantUpdate(cmp, "in_progress")
		h.wantUpdate(cmp, "failed", `pi compact failed: Summarization failed: 500`)
		h.forwarded(failure)
	})
	t.Run("cancelled", func(t *testing.T) {
		h := startProfiled(t)
		h.handshakeAgent(v1Capable, piACP, "0.0.34")
		id := h.promptText("s1", "/compact")
		h.cancel("s1")
		h.relay(`{"jsonrpc":"2.0","id":` + itoa(id) + `,"error":{"code":-32603,"message":"Internal error","data":{"details":"pi compact failed: Compaction cancelled"}}}`)
	})
}

// Claude ACP to a JetBrains AIR client without the capability: its tool
// call carries the facts in _meta.jetbrains.air, with no rawOutput; the
// record keeps them.
func TestProfileClaudeToAJetBrainsAIRClient(t *testing.T) {
	h := startProfiled(t, proxy.WithFallback(fallback.ToolCall()))
	h.handshakeAgent(v1Plain, claudeACP, "0.101.0")
	h.prompt("s1")
	h.agent(upd("s1", airTool))
	h.emitted(upd("s1", airTool))
	h.agent(upd("s1", airToolDone))
	h.agent(upd("s1", airFacts))
	line := string(h.next())
	require.Contains(t, line, `"toolCallId":"d05b2cd7"`)
	require.Contains(t, line, `"status":"completed"`)
	for _, fact := range []string{`"trigger":"manual"`, `"tokensBefore":110`, `"tokensAfter":2537`, `"durationMs":736`} {
		assert.Contains(t, line, fact, "the record keeps the AIR client's facts")
	}
}

// Qwen Code 0.24.4: the truncation notice before /compress is no
// compaction, and the warning a done carries reaches the client.
func TestProfileQwenNoticeAndWarning(t *testing.T) {
	h := startProfiled(t)
	h.handshakeAgent(v1Capable, "qwen-code", "0.24.4")
	id := h.promptText("s1", "/compress "+strings.Repeat("keep it ", 300))
	h.relay(upd("s1", qwenNotice))
	h.agent(upd("s1", qwenProg))
	cmp := mintedID("s1", proxy.Qwen, 1)
	h.wantUpdate(cmp, "in_progress")
	h.agent(upd("s1", qwenWarned))
	h.wantUpdate(cmp, "completed", `"tokensBefore":100`)
	h.forwarded(upd("s1", qwenWarned))
	h.relay(promptResponse(id, "end_turn"))
}

// The agents that say nothing about compaction are listed, and their lines
// pass as they came.
func TestProfileSilentAgentsAreListed(t *testing.T) {
	names := map[string]bool{}
	for _, p := range proxy.Profiles() {
		names[p.Name] = true
	}
	for _, want := range []string{"auggie", "cline", "cursor-agent-acp", "gemini-cli", "pi-acp", "claude-agent-acp", "claude-agent-acp-0.17"} {
		assert.True(t, names[want], "no profile %q", want)
	}
	h := startProfiled(t)
	h.handshakeAgent(v1Capable, "cline", "3.0.65")
	id := h.promptText("s1", "/compact")
	h.relay(upd("s1", text("Compacting...")))
	h.relay(upd("s1", `{"sessionUpdate":"session_info_update","updatedAt":"2026-12-01T00:00:00Z"}`))
	h.relay(promptResponse(id, "end_turn"))
}

func itoa(n int) string { return strconv.Itoa(n) }
