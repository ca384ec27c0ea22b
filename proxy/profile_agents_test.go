package proxy_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The profiles added for issue 20: Claude ACP 0.75 to 0.96, the old
// Claude package, Qwen Code before 0.24.2, Kimi Code, Copilot CLI. The
// wire forms are those of the recordings (test/peers/testdata).

const (
	claudeOld  = "@zed-industries/claude-code-acp"
	kimiCode   = "Kimi Code CLI"
	copilotCLI = "Copilot"

	kimiStarted   = "Context compaction started — it runs in the background and the compacted context applies once it finishes."
	kimiDone      = "Compaction completed.\n- Messages compacted: 3\n- Tokens before: 21,171\n- Tokens after: 21,743"
	kimiCancelled = "Compaction cancelled."
	kimiAuto      = "Compacting conversation context…"
	kimiBlocked   = "Compaction is blocked by the current turn; retry when the turn is idle."
	kimiRunning   = "A context compaction is already running."
	kimiSummary   = "The conversation so far has been compacted to free up context. What follows is your own working summary of this task — use it to continue your train of thought rather than starting over.\n<state_snapshot>MOCK SUMMARY</state_snapshot>\n\n## Context Recovery\nEverything before this note is still on disk in this agent's event log (read-only, append-only):\n  /tmp/wire.jsonl\n"
	kimiReminder  = "<system-reminder>\nContext compaction is complete — continue the work that was in progress when it began.\n</system-reminder>"

	copilotDone    = "Compacted conversation history and removed 1 message and 0 tokens."
	copilotFail    = "Failed to run /compact: Error: Failed to get response from the AI model; retried 5 times (total retry wait time: 14.85 seconds)"
	copilotNothing = "Failed to run /compact: Error: Nothing to compact."

	qwenOldStart = "Compressing context..."
	qwenOldDone  = "Context compressed (100 -> ~72)."
	qwenSource   = `{"source":"slash_command"}`
)

// promptText is prompt with the prompt's text.
func (h *harness) promptText(sid, text string) int {
	h.t.Helper()
	h.nextID++
	b, _ := json.Marshal(text)
	h.client(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":%s}]}}`, h.nextID, sid, b))
	return h.nextID
}

func userText(s string) string {
	b, _ := json.Marshal(s)
	return `{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":` + string(b) + `}}`
}

// wantUpdate reads the client's next line as a compaction_update and checks
// its ID, its status and that it contains each of wants.
func (h *harness) wantUpdate(id, status string, wants ...string) {
	h.t.Helper()
	line := string(h.next())
	require.Contains(h.t, line, `"sessionUpdate":"compaction_update"`, "want a %s compaction_update of %s", status, id)
	require.Contains(h.t, line, `"compactionId":"`+id+`"`, "want a %s compaction_update of %s", status, id)
	require.Contains(h.t, line, `"status":"`+status+`"`, "want a %s compaction_update of %s", status, id)
	for _, w := range wants {
		assert.Contains(h.t, line, w, "the update")
	}
}

// Each new profile's own texts, written by the model in an ordinary turn,
// stay prose: for a capable client and for one without the capability
// under a fallback, every line passes unchanged and nothing is added.
func TestProfileNewAgentsOwnTextsFromTheModelStayProse(t *testing.T) {
	for _, agent := range []struct {
		name, version string
		chunks        []string
	}{
		{kimiCode, "2.1.0", []string{text(kimiStarted), text(kimiDone), text(kimiCancelled), text(kimiBlocked), text(kimiRunning), text(kimiAuto), text("Compacting conversation context with instruction: be brief")}},
		{copilotCLI, "1.0.102", []string{text(copilotDone), text(copilotFail), text(copilotNothing)}},
		{qwenCode, "0.23.4", []string{text(qwenOldStart), text(qwenOldDone), text("No compression needed."), text(qwenOldStart + "  \n" + qwenOldDone)}},
		{claudeOld, "0.16.2", []string{text(kimiDone), userText("<local-command-stdout>Compacted </local-command-stdout>"), userText("<local-command-stderr>Error: Compaction canceled.</local-command-stderr>"), userText(continuation)}},
		{claudeACP, "0.75.0", []string{text("\n\nCompacting completed."), text(kimiDone)}},
		{claudeACP, "0.78.0", []string{text(copilotDone), text(qwenOldDone)}},
	} {
		t.Run(agent.name+"@"+agent.version, func(t *testing.T) {
			for _, params := range []string{v1Capable, v1Plain} {
				h := startProfiled(t, proxy.WithFallback(fallback.ToolCall()))
				h.handshakeAgent(params, agent.name, agent.version)
				for _, c := range agent.chunks {
					id := h.prompt("s1")
					// Each text, then another line: a text held for the line
					// that would confirm it is let go as it came.
					h.agent(upd("s1", c))
					h.agent(upd("s1", text("more prose")))
					h.forwarded(upd("s1", c))
					h.forwarded(upd("s1", text("more prose")))
					h.relay(promptResponse(id, "end_turn"))
				}
				rest, _ := h.end()
				assert.Zero(t, len(rest), "at the end the client got %q", rest)
			}
		})
	}
}

// Kimi Code answers /compact at once and compacts in the background; its
// outcome comes after the turn. Nothing about it reaches the client
// outside a turn: the client sees it, settled, terminal-first and with
// its counts, when the session's next turn begins.
func TestProfileKimiBackgroundCompactionIsDeliveredAtTheNextTurn(t *testing.T) {
	usage := upd("s1", `{"sessionUpdate":"usage_update","used":110,"size":262144}`)
	t.Run("capable", func(t *testing.T) {
		h := startProfiled(t)
		h.handshakeAgent(v1Capable, kimiCode, "2.1.0")
		id := h.promptText("s1", "/compact")
		h.relay(upd("s1", text(kimiStarted))) // the only word in the turn that one runs
		h.relay(promptResponse(id, "end_turn"))
		h.agent(upd("s1", text(kimiDone))) // between turns: held
		h.relay(usage)
		id = h.prompt("s1")
		h.wantUpdate(mintedID("s1", proxy.Kimi, 1), "completed",
			`"trigger":"manual"`, `"tokensBefore":21171`, `"tokensAfter":21743`, `"source":{"count":3}`)
		h.relay(upd("s1", text("Hello! How can I help?")))
		h.relay(promptResponse(id, "end_turn"))

		// A failure is "Compaction cancelled.": failed, since nobody cancelled.
		id = h.promptText("s1", "/compact")
		h.relay(upd("s1", text(kimiStarted)))
		h.relay(promptResponse(id, "end_turn"))
		h.agent(upd("s1", text(kimiCancelled)))
		h.relay(usage)
		h.prompt("s1")
		h.wantUpdate(mintedID("s1", proxy.Kimi, 2), "failed", `"error":"Kimi Code reported the compaction cancelled, but no cancel was asked for`)
		rest, _ := h.end()
		assert.Zero(t, len(rest), "at the end the client got %q", rest)
	})
	t.Run("a second /compact while one runs", func(t *testing.T) {
		h := startProfiled(t)
		h.handshakeAgent(v1Capable, kimiCode, "2.1.0")
		id := h.promptText("s1", "/compact")
		h.relay(upd("s1", text(kimiStarted)))
		h.relay(promptResponse(id, "end_turn"))
		id = h.promptText("s1", "/compact")
		h.relay(upd("s1", text(kimiRunning)))
		h.agent(upd("s1", text(kimiDone))) // in a turn: shown at once, terminal-first
		h.wantUpdate(mintedID("s1", proxy.Kimi, 1), "completed", `"source":{"count":3}`)
		h.relay(promptResponse(id, "end_turn"))
	})
	t.Run("fallback", func(t *testing.T) {
		h := startProfiled(t, proxy.WithFallback(fallback.ToolCall()))
		h.handshakeAgent(v1Plain, kimiCode, "2.1.0")
		id := h.promptText("s1", "/compact")
		h.relay(upd("s1", text(kimiStarted)))
		h.relay(promptResponse(id, "end_turn"))
		h.agent(upd("s1", text(kimiDone)))
		h.relay(usage)
		h.prompt("s1")
		line := string(h.next())
		require.Contains(t, line, `"sessionUpdate":"tool_call"`, "want a terminal-first completed tool call")
		require.Contains(t, line, `"status":"completed"`, "want a terminal-first completed tool call")
	})
	t.Run("without the capability, the texts as they come", func(t *testing.T) {
		h := startProfiled(t)
		h.handshakeAgent(v1Plain, kimiCode, "2.1.0")
		id := h.promptText("s1", "/compact")
		h.relay(upd("s1", text(kimiStarted)))
		h.relay(promptResponse(id, "end_turn"))
		h.relay(upd("s1", text(kimiDone)))
		h.prompt("s1")
		h.relay(upd("s1", text("Hello!")))
		rest, _ := h.end()
		assert.Zero(t, len(rest), "at the end the client got %q", rest)
	})
}

// Kimi's automatic compaction runs inside the turn: its start, confirmed
// by the "blocked" line, opens it; its outcome settles it. "Compaction
// cancelled." is a cancel only after the user's.
func TestProfileKimiAutomaticCompaction(t *testing.T) {
	h := startProfiled(t)
	h.handshakeAgent(v1Capable, kimiCode, "2.1.0")
	id := h.prompt("s1")
	h.agent(upd("s1", text(kimiAuto)))
	h.agent(upd("s1", text(kimiBlocked)))
	c1 := mintedID("s1", proxy.Kimi, 1)
	h.emitted(upd("s1", cmpUpdate(c1, "in_progress")))
	h.agent(upd("s1", text(kimiDone)))
	h.wantUpdate(c1, "completed", `"trigger":"auto"`, `"tokensBefore":21171`, `"source":{"count":3}`)
	h.relay(upd("s1", text("Hello! How can I help?")))
	h.relay(promptResponse(id, "end_turn"))

	id = h.prompt("s1")
	h.agent(upd("s1", text(kimiAuto)))
	h.agent(upd("s1", text(kimiBlocked)))
	c2 := mintedID("s1", proxy.Kimi, 2)
	h.emitted(upd("s1", cmpUpdate(c2, "in_progress")))
	h.agent(upd("s1", text(kimiCancelled)))
	h.wantUpdate(c2, "failed", `no cancel was asked for`)
	h.relay(promptResponse(id, "end_turn"))

	id = h.prompt("s1")
	h.agent(upd("s1", text(kimiAuto)))
	h.agent(upd("s1", text(kimiBlocked)))
	c3 := mintedID("s1", proxy.Kimi, 3)
	h.emitted(upd("s1", cmpUpdate(c3, "in_progress")))
	h.cancel("s1")
	h.agent(upd("s1", text(kimiCancelled)))
	h.emitted(upd("s1", cmpUpdate(c3, "cancelled")))
	h.relay(promptResponse(id, "cancelled"))
}

// On session/load Kimi replays its last summary as a user message, then a
// system reminder: a capable client gets one terminal-first completed
// compaction in their place; a client without the capability the lines.
func TestProfileKimiSummaryOnLoad(t *testing.T) {
	h := startProfiled(t)
	h.handshakeAgent(v1Capable, kimiCode, "2.1.0")
	h.load(5)
	h.relay(upd("s1", userText("Say hello.")))
	h.agent(upd("s1", userText(kimiSummary)))
	h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.Kimi, 1), "completed", `"summary":null`, `"error":null`)))
	h.agent(upd("s1", userText(kimiReminder)))
	h.relay(`{"jsonrpc":"2.0","id":5,"result":{}}`)
	// Live, they are the user's messages.
	h.prompt("s1")
	h.relay(upd("s1", userText(kimiSummary)))
	h.relay(upd("s1", userText(kimiReminder)))

	h = startProfiled(t, proxy.WithFallback(fallback.ToolCall()))
	h.handshakeAgent(v1Plain, kimiCode, "2.1.0")
	h.load(5)
	h.relay(upd("s1", userText(kimiSummary)))
	h.relay(upd("s1", userText(kimiReminder)))
	h.relay(`{"jsonrpc":"2.0","id":5,"result":{}}`)
}

// Copilot CLI says only what /compact did, after the fact: a completed or
// failed compaction in a /compact turn; "Nothing to compact." is not one.
func TestProfileCopilotCompactResults(t *testing.T) {
	h := startProfiled(t)
	h.handshakeAgent(v1Capable, copilotCLI, "1.0.102")
	id := h.promptText("s1", "/compact")
	c1 := mintedID("s1", proxy.Copilot, 1)
	h.agent(upd("s1", text(copilotDone)))
	h.emitted(upd("s1", cmpUpdate(c1, "in_progress")))
	h.wantUpdate(c1, "completed", `"acpcompact/record":{"trigger":"manual","status":"completed","source":{"count":1}}`)
	h.relay(promptResponse(id, "end_turn"))

	id = h.promptText("s1", "/compact")
	c2 := mintedID("s1", proxy.Copilot, 2)
	h.agent(upd("s1", text(copilotFail)))
	h.emitted(upd("s1", cmpUpdate(c2, "in_progress")))
	h.emitted(upd("s1", cmpUpdate(c2, "failed", `"error":"Failed to get response from the AI model; retried 5 times (total retry wait time: 14.85 seconds)"`)))
	h.relay(promptResponse(id, "end_turn"))

	id = h.promptText("s1", "/compact")
	h.relay(upd("s1", text(copilotNothing)))
	h.relay(promptResponse(id, "end_turn"))

	// Without the capability and without a fallback: the text as it came.
	h = startProfiled(t)
	h.handshakeAgent(v1Plain, copilotCLI, "1.0.102")
	id = h.promptText("s1", "/compact")
	h.relay(upd("s1", text(copilotDone)))
	h.relay(promptResponse(id, "end_turn"))
	rest, _ := h.end()
	assert.Zero(t, len(rest), "at the end the client got %q", rest)
}

// Qwen Code before 0.24.2 marks its /compress texts with _meta.source
// only: the same compaction entities as 0.24.2 and later.
func TestProfileQwenBefore0242(t *testing.T) {
	h := startProfiled(t)
	h.handshakeAgent(v1Capable, qwenCode, "0.23.4")
	id := h.promptText("s1", "/compress")
	c1 := mintedID("s1", proxy.QwenText, 1)
	h.agent(upd("s1", qwenChunk(qwenOldStart, qwenSource)))
	h.emitted(upd("s1", cmpUpdate(c1, "in_progress")))
	h.agent(upd("s1", qwenChunk(qwenOldDone, qwenSource)))
	h.wantUpdate(c1, "completed", `"trigger":"manual"`, `"tokensBefore":100`, `"tokensAfter":72`)
	h.relay(promptResponse(id, "end_turn"))

	// /compress-fast with nothing to do (the text is localised): completed,
	// and its text stays.
	id = h.promptText("s1", "/compress-fast")
	c2 := mintedID("s1", proxy.QwenText, 2)
	h.agent(upd("s1", qwenChunk("Compressing context (fast)...", qwenSource)))
	h.emitted(upd("s1", cmpUpdate(c2, "in_progress")))
	noop := upd("s1", qwenChunk("无需压缩。", qwenSource))
	h.agent(noop)
	h.emitted(upd("s1", cmpUpdate(c2, "completed")))
	h.forwarded(noop)
	h.relay(promptResponse(id, "end_turn"))

	// A failure: no closing update, the prompt's error says why.
	id = h.promptText("s1", "/compress")
	c3 := mintedID("s1", proxy.QwenText, 3)
	h.agent(upd("s1", qwenChunk(qwenOldStart, qwenSource)))
	h.emitted(upd("s1", cmpUpdate(c3, "in_progress")))
	resp := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32603,"message":"Internal error","data":{"details":"Could not compress chat history due to an API error."}}}`, id)
	h.agent(resp)
	h.emitted(upd("s1", cmpUpdate(c3, "failed", `"error":"Could not compress chat history due to an API error."`)))
	h.forwarded(resp)

	// Another command's output, marked the same, is not a compaction.
	id = h.promptText("s1", "/stats")
	h.relay(upd("s1", qwenChunk("Context compressed (this is prose)", qwenSource)))
	h.relay(upd("s1", qwenChunk("Session stats: 3 turns.", qwenSource)))
	h.relay(promptResponse(id, "end_turn"))

	// The replay: one terminal-first completed, its ID from the transcript
	// record, the same in every load.
	replayed := qwenChunk(qwenOldStart+"  \n"+qwenOldDone,
		`{"source":"slash_command","timestamp":1,"qwenTranscript":{"sourceRecordIds":["rec-1"],"segmentId":"rec-1:0"}}`)
	wantStableQwenReplay(t, "0.24.0", replayed, `"tokensAfter":72`)
}

// The old Claude package reports nothing live; its session/load replays the
// continuation and the /compact results: one compaction each, for a
// capable client.
func TestProfileOldClaudeReplaysItsCompactions(t *testing.T) {
	caveat := userText("<local-command-caveat>Caveat: The messages below were generated by the user while running local commands.</local-command-caveat>")
	command := userText("<command-name>/compact</command-name>\n            <command-message>compact</command-message>\n            <command-args></command-args>")
	cont := userText(continuation) // no messageId: this package sends none
	lines := []string{
		cont, caveat, command, userText("<local-command-stdout>Compacted </local-command-stdout>"),
		caveat, command, userText("<local-command-stderr>Error: Error during compaction: Error: API Error: 500 boom</local-command-stderr>"),
		caveat, command, userText("<local-command-stderr>Error: Compaction canceled.</local-command-stderr>"),
		userText("<local-command-stdout>\x1b[2mCompacted (ctrl+o to see full summary)\x1b[22m</local-command-stdout>"),
	}
	h := startProfiled(t)
	h.handshakeAgent(v1Capable, claudeOld, "0.16.2")
	h.load(5)
	h.agent(upd("s1", lines[0]))
	h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.ClaudeContinuation, 1), "completed", `"summary":null`, `"error":null`)))
	h.relay(upd("s1", lines[1]))
	h.relay(upd("s1", lines[2]))
	h.agent(upd("s1", lines[3])) // the continuation's own result: nothing more
	h.relay(upd("s1", lines[4]))
	h.relay(upd("s1", lines[5]))
	h.agent(upd("s1", lines[6]))
	h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.ClaudeLocalCommand, 1), "failed", `"summary":null`, `"error":"Error during compaction: Error: API Error: 500 boom"`)))
	h.relay(upd("s1", lines[7]))
	h.relay(upd("s1", lines[8]))
	h.agent(upd("s1", lines[9]))
	h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.ClaudeLocalCommand, 2), "cancelled", `"summary":null`, `"error":null`)))
	// A result with no continuation before it is a compaction of its own.
	h.agent(upd("s1", lines[10]))
	h.emitted(upd("s1", cmpUpdate(mintedID("s1", proxy.ClaudeLocalCommand, 3), "completed", `"summary":null`, `"error":null`)))
	h.relay(`{"jsonrpc":"2.0","id":5,"result":{}}`)

	for _, opts := range [][]proxy.Option{nil, {proxy.WithFallback(fallback.ToolCall())}} {
		h := startProfiled(t, opts...)
		h.handshakeAgent(v1Plain, claudeOld, "0.16.2")
		h.load(5)
		for _, l := range lines {
			h.relay(upd("s1", l))
		}
		h.relay(`{"jsonrpc":"2.0","id":5,"result":{}}`)
	}
}
