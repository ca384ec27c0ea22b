package proxy_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The wire rules the proxy takes from the one wire engine (package
// internal/turn), each on real pipes through proxy.Run with the test
// playing the agent line by line.

const turnEndedError = `"error":"the turn ended before the compaction finished"`

// quiet expects the client to receive nothing for d.
func (h *harness) quiet(d time.Duration) {
	h.t.Helper()
	select {
	case l := <-h.toClient:
		require.FailNow(h.t, "the client got a line too early", "%s", clipQ(l))
	case <-time.After(d):
	}
}

// upTo reads the client's lines up to and including the agent's line.
func (h *harness) upTo(line string) {
	h.t.Helper()
	for {
		if got := h.next(); string(got) == line+"\n" {
			return
		}
	}
}

// --- turns: only the running prompt's response ends a v1 turn ---

func TestProxyRejectedSecondPromptEndsNothing(t *testing.T) {
	// The conformance checker settles at any prompt response of the
	// session, the rejected one's included, so it is left out here: this
	// is the rule it disagrees with.
	h := startWith(t, harnessOpt{noChecker: true})
	h.handshake(v1Capable, 1)
	first := h.prompt("s1")
	h.relay(upd("s1", cmpUpdate("cmp_1", "in_progress")))
	second := h.prompt("s1")
	h.relay(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32600,"message":"a prompt is already running"}}`, second))
	// The running turn goes on: its summary and its completion reach the
	// client as the agent sent them, and only its own response ends it.
	h.relay(upd("s1", `{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_1","content":{"type":"text","text":"## Retained"}}`))
	h.relay(upd("s1", cmpUpdate("cmp_1", "completed")))
	h.relay(upd("s1", text("Done.")))
	h.relay(promptResponse(first, "end_turn"))
}

// --- request ids by JSON value ---

func TestProxyInitializeAnswerMatchedByJSONValueOfItsID(t *testing.T) {
	h := start(t)
	h.version = 1
	h.client(`{"jsonrpc":"2.0","id":"init-é","method":"initialize","params":` + v1Plain + `}`)
	h.relay(`{"jsonrpc":"2.0","id":"init-\u00e9","result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}`)
	h.client(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	h.relay(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
	h.prompt("s1")
	// The answer negotiated the connection: the client lacks the
	// capability, so the agent's standard update reaches it rewritten.
	h.agent(upd("s1", cmpUpdate("cmp_g1", "in_progress")))
	h.emitted(upd("s1", `{"sessionUpdate":"tool_call","toolCallId":"compact-cmp_g1","title":"Compact conversation","kind":"think","status":"in_progress"}`))
}

func TestProxyPromptIDWithEscapesIsSettledBeforeItsResponse(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.client(`{"jsonrpc":"2.0","id":"a<b&c","method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"go on"}]}}`)
	h.relay(upd("s1", cmpUpdate("cmp_1", "in_progress")))
	response := `{"jsonrpc":"2.0","id":"a\u003cb\u0026c","result":{"stopReason":"end_turn"}}`
	h.agent(response)
	h.emitted(upd("s1", cmpUpdate("cmp_1", "failed", turnEndedError)))
	h.forwarded(response)
}

func TestProxyAnsweredPromptLeavesNoCancelBehind(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	h.client(`{"jsonrpc":"2.0","id":"p-é","method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"go on"}]}}`)
	h.cancel("s1")
	h.relay(`{"jsonrpc":"2.0","id":"p-\u00e9","result":{"stopReason":"cancelled"}}`)
	// The cancel ended with its turn: the next turn was not cancelled, so
	// a compaction it leaves open failed.
	id := h.prompt("s1")
	h.relay(upd("s1", cmpUpdate("cmp_2", "in_progress")))
	h.agent(promptResponse(id, "end_turn"))
	h.emitted(upd("s1", cmpUpdate("cmp_2", "failed", turnEndedError)))
	h.forwarded(promptResponse(id, "end_turn"))
}

// --- v2: a prompt behind a cancelled turn belongs to it ---

func TestProxyV2PromptBehindCancelledTurnKeepsTheCancel(t *testing.T) {
	idle := upd("s1", `{"sessionUpdate":"state_update","state":"idle","stopReason":"cancelled"}`)
	cancelledTurn := func(t *testing.T, opts ...proxy.Option) *harness {
		h := start(t, opts...)
		h.handshake(v2Init, 2)
		id := h.prompt("s1")
		h.relay(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, id))
		h.relay(upd("s1", `{"sessionUpdate":"state_update","state":"running"}`))
		h.relay(upd("s1", cmpUpdate("cmp_v", "in_progress")))
		h.cancel("s1")
		next := h.prompt("s1")
		h.relay(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, next))
		return h
	}
	t.Run("the grace still runs out", func(t *testing.T) {
		h := cancelledTurn(t, proxy.WithCancelGrace(50*time.Millisecond))
		h.emitted(upd("s1", cmpUpdate("cmp_v", "cancelled")))
		h.relay(idle)
	})
	t.Run("settled as cancelled at idle", func(t *testing.T) {
		h := cancelledTurn(t, proxy.WithCancelGrace(-1))
		h.agent(idle)
		h.emitted(upd("s1", cmpUpdate("cmp_v", "cancelled")))
		h.forwarded(idle)
	})
}

// --- lines longer than the inspection limit ---

func TestProxyOverlongPromptIsFollowedFromItsHead(t *testing.T) {
	h := start(t, proxy.WithMaxLineBytes(256))
	h.handshake(v1Capable, 1)
	h.nextID++
	id := h.nextID
	// Longer than the proxy's read buffer too, so only its head is read.
	h.client(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":%q}]}}`,
		id, repeat("p", 200000)))
	h.relay(upd("s1", cmpUpdate("cmp_1", "in_progress")))
	h.agent(promptResponse(id, "end_turn"))
	h.emitted(upd("s1", cmpUpdate("cmp_1", "failed", turnEndedError)))
	h.forwarded(promptResponse(id, "end_turn"))
}

func TestProxyLineOverTheLimitNeverSwallowsTheNext(t *testing.T) {
	h := start(t, proxy.WithMaxLineBytes(256))
	h.handshake(v1Capable, 1)
	// Over the limit, but read whole: the prompt after it is a line of
	// its own, read and followed.
	h.client(`{"jsonrpc":"2.0","method":"x/long","params":{"pad":"` + repeat("y", 1000) + `"}}`)
	id := h.prompt("s1")
	h.relay(upd("s1", cmpUpdate("cmp_1", "in_progress")))
	h.agent(promptResponse(id, "end_turn"))
	h.emitted(upd("s1", cmpUpdate("cmp_1", "failed", turnEndedError)))
	h.forwarded(promptResponse(id, "end_turn"))
}

func TestProxyOverlongGatedCompactionUpdateIsDropped(t *testing.T) {
	h := start(t, proxy.WithMaxLineBytes(256))
	h.handshake(v1Plain, 1)
	h.prompt("s1")
	h.agent(upd("s1", cmpUpdate("cmp_big", "completed", `"summary":[{"type":"text","text":"`+repeat("s", 200000)+`"}]`)))
	h.relay(upd("s1", text("after")))
	assert.True(t, contains(h.logs.String(), "dropped a compaction update longer than the inspection limit", "side=agent", "line=3"), "the drop is not logged:\n%s", h.logs.String())
}

// --- the gate holds for malformed envelopes ---

func TestProxyMalformedCompactionEnvelopeNeverPassesTheGate(t *testing.T) {
	inProgress := cmpUpdate("cmp_m", "in_progress")
	chunk := `{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_m","content":{"type":"text","text":"x"}}`
	for _, tc := range []struct{ name, line string }{
		{"sessionId not a string", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":7,"update":` + inProgress + `}}`},
		{"sessionId null", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":null,"update":` + inProgress + `}}`},
		{"sessionId missing", `{"jsonrpc":"2.0","method":"session/update","params":{"update":` + inProgress + `}}`},
		{"summary chunk without sessionId", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":{"id":"s1"},"update":` + chunk + `}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t)
			h.handshake(v1Plain, 1)
			h.prompt("s1")
			h.agent(tc.line)
			h.relay(upd("s1", text("after")))
			assert.True(t, contains(h.logs.String(), "dropped a malformed compaction update", "side=agent", "line=3"), "the drop is not logged:\n%s", h.logs.String())
		})
	}
	t.Run("inside a batch", func(t *testing.T) {
		h := start(t)
		h.handshake(v1Plain, 1)
		id := h.prompt("s1")
		before := upd("s1", text("before"))
		response := promptResponse(id, "end_turn")
		h.agent("[" + before + "," + upd("s1", inProgress) + "," + upd("s1", chunk) + "," + response + "]")
		h.emitted("[" + before + "," + response + "]")
		// The response in the batch ended the turn.
		h.agent("[" + upd("s1", cmpUpdate("cmp_n", "completed")) + "]")
		h.prompt("s1")
		h.relay(upd("s1", text("next")))
		assert.True(t, contains(h.logs.String(), "dropped a compaction update inside a batch", "side=agent", "line=3"), "the drop is not logged:\n%s", h.logs.String())
	})
	t.Run("a capable client gets the batch as it came", func(t *testing.T) {
		h := start(t)
		h.handshake(v1Capable, 1)
		h.prompt("s1")
		h.relay("[" + upd("s1", text("before")) + "," + upd("s1", inProgress) + "," + upd("s1", cmpUpdate("cmp_m", "completed")) + "]")
	})
}

// --- nothing about compaction after the turn ---

// Claude Agent ACP 0.101 without the capability, as observed
// (shared/spec/peers-observed.md): the compaction's tool call is left
// in_progress on cancel, and after the prompt response a new terminal-first
// tool call arrives with another ID.
const (
	claudeInit          = `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true},"agentInfo":{"name":"@agentclientprotocol/claude-agent-acp","title":"Claude Agent","version":"0.101.0"}}}`
	claudeCompactStart  = `{"sessionUpdate":"tool_call","toolCallId":"toolu_01","title":"Compact conversation","kind":"think","status":"in_progress","_meta":{"claudeCode":{"toolName":"compact"}}}`
	claudeCompactAbort  = `{"sessionUpdate":"tool_call","toolCallId":"toolu_02","title":"Compact conversation","kind":"think","status":"failed","content":[{"type":"content","content":{"type":"text","text":"Compaction failed: API Error: Request was aborted."}}],"_meta":{"claudeCode":{"toolName":"compact"}}}`
	claudeCompactAbort3 = `{"sessionUpdate":"tool_call","toolCallId":"toolu_03","title":"Compact conversation","kind":"think","status":"failed","content":[{"type":"content","content":{"type":"text","text":"Compaction failed: API Error: Request was aborted."}}],"_meta":{"claudeCode":{"toolName":"compact"}}}`
)

func TestProxyNothingAboutCompactionAfterTheCancelledTurn(t *testing.T) {
	claudeHandshake := func(h *harness, params string) {
		h.version = 1
		h.client(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + params + `}`)
		h.relay(claudeInit)
		h.client(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
		h.relay(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
	}
	// cancelled plays the observed turn up to the straggler, which the
	// client must never see: the agent's next line reaches it next.
	cancelled := func(h *harness, straggler string) {
		id := h.prompt("s1")
		h.agent(upd("s1", claudeCompactStart))
		h.cancel("s1")
		h.agent(promptResponse(id, "cancelled"))
		h.upTo(promptResponse(id, "cancelled"))
		h.agent(upd("s1", straggler))
		h.relay(upd("s1", `{"sessionUpdate":"available_commands_update","availableCommands":[]}`))
		h.prompt("s1")
		assert.True(h.t, contains(h.logs.String(), "dropped a compaction signal that arrived after the cancelled turn ended"), "the drop is not logged:\n%s", h.logs.String())
	}
	t.Run("capable", func(t *testing.T) {
		h := start(t)
		claudeHandshake(h, v1Capable)
		cancelled(h, claudeCompactAbort)
		// In a turn, the same form is a compaction the client sees.
		h.agent(upd("s1", claudeCompactAbort3))
		h.emitted(upd("s1", cmpUpdate("toolu_03", "in_progress")))
		h.emitted(upd("s1", cmpUpdate("toolu_03", "failed", `"error":"API Error: Request was aborted."`)))
	})
	t.Run("toolcall fallback", func(t *testing.T) {
		h := start(t, proxy.WithFallback(fallback.ToolCall()))
		claudeHandshake(h, v1Plain)
		cancelled(h, claudeCompactAbort)
	})
	t.Run("legacy signals untouched", func(t *testing.T) {
		h := start(t)
		claudeHandshake(h, v1Plain)
		cancelled(h, claudeCompactAbort)
	})
	t.Run("the agent's own standard update", func(t *testing.T) {
		for _, params := range []string{v1Capable, v1Plain} {
			h := start(t)
			h.handshake(params, 1)
			id := h.prompt("s1")
			h.agent(upd("s1", cmpUpdate("cmp_1", "in_progress")))
			h.cancel("s1")
			h.agent(promptResponse(id, "cancelled"))
			h.upTo(promptResponse(id, "cancelled"))
			h.agent(upd("s1", cmpUpdate("cmp_2", "failed", `"error":"Request was aborted."`)))
			h.relay(upd("s1", `{"sessionUpdate":"available_commands_update","availableCommands":[]}`))
			h.end()
		}
	})
}

// --- the cancel grace ---

func TestProxyCancelGraceMeansWhatItMeansForTheKits(t *testing.T) {
	cancelled := func(t *testing.T, opts ...proxy.Option) (*harness, int) {
		h := start(t, opts...)
		h.handshake(v1Capable, 1)
		id := h.prompt("s1")
		h.relay(upd("s1", cmpUpdate("cmp_h", "in_progress")))
		return h, id
	}
	t.Run("zero settles at once", func(t *testing.T) {
		h, id := cancelled(t, proxy.WithCancelGrace(0))
		h.cancel("s1")
		h.emitted(upd("s1", cmpUpdate("cmp_h", "cancelled")))
		h.agent(upd("s1", cmpUpdate("cmp_h", "cancelled"))) // the agent's own, too late: dropped
		h.relay(promptResponse(id, "cancelled"))
	})
	t.Run("positive settles after it", func(t *testing.T) {
		const grace = 150 * time.Millisecond
		h, id := cancelled(t, proxy.WithCancelGrace(grace))
		at := time.Now()
		h.cancel("s1")
		h.emitted(upd("s1", cmpUpdate("cmp_h", "cancelled")))
		assert.GreaterOrEqual(t, time.Since(at), grace, "time from the cancel to the settlement")
		h.relay(promptResponse(id, "cancelled"))
	})
	t.Run("negative waits for the end of the turn", func(t *testing.T) {
		h, id := cancelled(t, proxy.WithCancelGrace(-time.Nanosecond))
		h.cancel("s1")
		h.quiet(300 * time.Millisecond)
		h.agent(promptResponse(id, "cancelled"))
		h.emitted(upd("s1", cmpUpdate("cmp_h", "cancelled")))
		h.forwarded(promptResponse(id, "cancelled"))
	})
}

func TestProxyCancelGraceDefaultsToTheKits(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the default grace in -short mode")
	}
	t.Parallel()
	h := start(t)
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	h.relay(upd("s1", cmpUpdate("cmp_h", "in_progress")))
	at := time.Now()
	h.cancel("s1")
	h.emitted(upd("s1", cmpUpdate("cmp_h", "cancelled")))
	assert.GreaterOrEqual(t, time.Since(at), proxy.DefaultCancelGrace, "time from the cancel to the settlement")
	assert.Equal(t, 5*time.Second, proxy.DefaultCancelGrace, "the default grace: want the kits'")
	h.relay(promptResponse(id, "cancelled"))
}

func TestProxyCompactionStartedAfterTheGraceRanOutGetsAGraceOfItsOwn(t *testing.T) {
	h := start(t, proxy.WithCancelGrace(30*time.Millisecond))
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	h.cancel("s1")
	time.Sleep(100 * time.Millisecond) // the grace runs out with nothing open
	h.relay(upd("s1", cmpUpdate("cmp_late", "in_progress")))
	h.emitted(upd("s1", cmpUpdate("cmp_late", "cancelled")))
	h.relay(promptResponse(id, "cancelled"))
}

func TestProxySessionCloseSettlesWhatIsOpen(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	h.relay(upd("s1", cmpUpdate("cmp_1", "in_progress")))
	h.client(`{"jsonrpc":"2.0","id":50,"method":"session/close","params":{"sessionId":"s1"}}`)
	h.agent(`{"jsonrpc":"2.0","id":50,"result":{}}`)
	h.emitted(upd("s1", cmpUpdate("cmp_1", "cancelled")))
	h.forwarded(`{"jsonrpc":"2.0","id":50,"result":{}}`)
	// The prompt's late answer ends nothing any more.
	h.relay(promptResponse(id, "cancelled"))
	h.end()
}

// A compaction the agent opens between turns is held; closing the session
// ends it with the session, and the client, which never saw it, sees
// nothing of it.
func TestProxyCompactionHeldBetweenTurnsGoesWithItsSession(t *testing.T) {
	h := start(t)
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	h.relay(promptResponse(id, "end_turn"))
	h.agent(upd("s1", cmpUpdate("cmp_idle", "in_progress")))
	h.client(`{"jsonrpc":"2.0","id":50,"method":"session/close","params":{"sessionId":"s1"}}`)
	h.agent(`{"jsonrpc":"2.0","id":50,"result":{}}`)
	h.forwarded(`{"jsonrpc":"2.0","id":50,"result":{}}`)
	rest, _ := h.end()
	assert.Zero(t, len(rest), "after the close the client got %q", rest)
}
