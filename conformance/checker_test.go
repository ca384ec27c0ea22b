package conformance_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// In these tests the initialize exchange takes lines 1 and 2, so the first
// line after it is line 3.

func TestRuleTranscriptReportsMalformedLinesAndGoesOn(t *testing.T) {
	got := check(t, nil,
		initV1Capable,
		`hello there`,
		`agent {"jsonrpc":`,
		`client [1,2]`,
		prompt(2, "s1"),
		upd(cu("cmp_1", "completed")),
		answer(2, "end_turn"),
	)
	expect(t, got,
		want{3, conformance.RuleTranscript, `want "client <json>"`},
		want{4, conformance.RuleTranscript, "invalid JSON"},
		want{5, conformance.RuleTranscript, "not a JSON object"},
	)
}

func TestRuleMalformedNamesWhatAClientWouldDrop(t *testing.T) {
	got := check(t, nil,
		initV1Capable,
		prompt(2, "s1"),
		upd(`{"sessionUpdate":"compaction_update","status":"in_progress"}`),
		upd(`{"sessionUpdate":"compaction_update","compactionId":"cmp_1"}`),
		upd(`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_1","content":"text"}`),
		`agent {"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"usage_update"}}}`,
		upd(`{"sessionUpdate":"compaction_update","compactionId":null,"status":"in_progress"}`),
		upd(`{"sessionUpdate":"compaction_update","compactionId":"cmp_2","status":null}`),
		answer(2, "end_turn"),
	)
	expect(t, got,
		want{4, conformance.RuleMalformed, "compaction_update without a string compactionId"},
		want{5, conformance.RuleMalformed, `compaction "cmp_1" without a string status`},
		want{6, conformance.RuleMalformed, "content is not a content block"},
		want{7, conformance.RuleMalformed, "string sessionId"},
		want{8, conformance.RuleMalformed, "compaction_update without a string compactionId"},
		want{9, conformance.RuleMalformed, `compaction "cmp_2" without a string status`},
	)
}

func TestRuleProtocol(t *testing.T) {
	t.Run("session/update before any handshake is reported once", func(t *testing.T) {
		got := check(t, nil,
			prompt(2, "s1"),
			upd(cu("cmp_1", "in_progress")),
			upd(cu("cmp_1", "completed")),
			answer(2, "end_turn"),
		)
		expect(t, got, want{2, conformance.RuleProtocol, "before any initialize handshake"})
	})
	t.Run("WithAssumedProtocol stands in for a handshake the transcript lacks", func(t *testing.T) {
		got := check(t, []conformance.Option{conformance.WithAssumedProtocol(1, false)},
			prompt(2, "s1"),
			upd(cu("cmp_1", "completed")),
			answer(2, "end_turn"),
		)
		expect(t, got, want{2, conformance.RuleCapability, `compaction "cmp_1"`})
	})
	t.Run("the agent may not answer a version above the client's", func(t *testing.T) {
		got := check(t, nil,
			`client {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`,
			`agent {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"info":{"name":"a","version":"1"}}}`,
		)
		expect(t, got, want{2, conformance.RuleProtocol, "answered protocolVersion 2 to a client that asked for 1"})
	})
	t.Run("the client's version decides the gate when the agent answers a newer one", func(t *testing.T) {
		got := check(t, nil,
			`client {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`,
			`agent {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"info":{"name":"a","version":"1"}}}`,
			prompt(2, "s1"),
			upd(cu("cmp_1", "completed")),
			answer(2, "end_turn"),
		)
		expect(t, got,
			want{2, conformance.RuleProtocol, "answered protocolVersion 2 to a client that asked for 1"},
			want{4, conformance.RuleCapability, `compaction "cmp_1"`})
	})
	t.Run("the response must carry an integer protocolVersion", func(t *testing.T) {
		got := check(t, nil,
			`client {"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1}}`,
			`agent {"jsonrpc":"2.0","id":"init","result":{"protocolVersion":"1"}}`,
		)
		expect(t, got, want{2, conformance.RuleProtocol, "no integer result.protocolVersion"})
	})
	t.Run("an unknown version is checked with v1 rules", func(t *testing.T) {
		got := check(t, nil,
			`client {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":3}}`,
			`agent {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":3}}`,
			prompt(2, "s1"),
			upd(cu("cmp_1", "completed")),
			answer(2, "end_turn"),
		)
		expect(t, got,
			want{2, conformance.RuleProtocol, "neither 1 nor 2"},
			want{4, conformance.RuleCapability, `compaction "cmp_1"`},
		)
	})
	t.Run("an initialize error changes nothing; the latest successful one counts", func(t *testing.T) {
		got := check(t, nil,
			initV1Incapable,
			`client {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`,
			`agent {"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"busy"}}`,
			prompt(2, "s1"),
			upd(cu("cmp_1", "completed")),
			answer(2, "end_turn"),
			`client {"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`,
			`agent {"jsonrpc":"2.0","id":3,"result":{"protocolVersion":1}}`,
			prompt(4, "s1"),
			upd(cu("cmp_2", "completed")),
			answer(4, "end_turn"),
		)
		expect(t, got, want{6, conformance.RuleCapability, `compaction "cmp_1"`})
	})
}

func TestRuleCapabilityCountsOnlyAnObject(t *testing.T) {
	for _, tc := range []struct {
		capabilities string
		supported    bool
	}{
		{`{"session":{"compaction":{}}}`, true},
		{`{"session":{"compaction":{"future":true}}}`, true},
		{`{}`, false},
		{`{"session":null}`, false},
		{`{"session":{}}`, false},
		{`{"session":{"compaction":null}}`, false},
		{`{"session":{"compaction":false}}`, false}, // opencode reads this as support
		{`{"session":{"compaction":true}}`, false},  // codex-acp: any non-null
		{`{"session":{"compaction":""}}`, false},
		{`{"session":{"compaction":[]}}`, false},
		{`{"session":{"compaction":0}}`, false},
		{`{"session":"compaction"}`, false},
		{`null`, false},
	} {
		t.Run(tc.capabilities, func(t *testing.T) {
			got := check(t, nil,
				initV1(tc.capabilities),
				prompt(2, "s1"),
				upd(cu("cmp_1", "in_progress")),
				upd(chunk("cmp_1", "x")),
				upd(cu("cmp_1", "completed")),
				answer(2, "end_turn"),
			)
			if tc.supported {
				expect(t, got)
				return
			}
			expect(t, got,
				want{4, conformance.RuleCapability, `compaction_update for compaction "cmp_1" sent to a v1 client`},
				want{5, conformance.RuleCapability, `compaction_summary_chunk for compaction "cmp_1"`},
				want{6, conformance.RuleCapability, `compaction_update for compaction "cmp_1"`},
			)
		})
	}
}

func TestRuleCapabilityV2NeedsNone(t *testing.T) {
	got := check(t, nil,
		initV2,
		prompt(2, "s1"),
		upd(cu("cmp_1", "completed")),
		upd(state("idle")),
	)
	expect(t, got)
}

func TestRuleCapabilityIsReadFromTheV1ShapeOnly(t *testing.T) {
	// A client that offered v2 and was answered v1 sent "capabilities",
	// not "clientCapabilities", so it advertised nothing v1 can read.
	got := check(t, nil,
		`client {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,"capabilities":{"session":{"compaction":{}}}}}`,
		`agent {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`,
		prompt(2, "s1"),
		upd(cu("cmp_1", "completed")),
		answer(2, "end_turn"),
	)
	expect(t, got, want{4, conformance.RuleCapability, `compaction "cmp_1"`})
}

func TestRuleSettlement(t *testing.T) {
	t.Run("v1: terminal before the prompt response", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			prompt(2, "s1"),
			upd(cu("cmp_1", "in_progress")),
			upd(cu("cmp_2", "in_progress")),
			upd(cu("cmp_2", "failed", `"error":"boom"`)),
			answer(2, "end_turn"),
		)
		expect(t, got, want{7, conformance.RuleSettlement, `compaction "cmp_1" is still "in_progress" when the agent answered session/prompt id 2`})
	})
	t.Run("v1: the response is matched by JSON-RPC id and session", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			prompt(2, "s1"),
			prompt(3, "s2"),
			upd(cu("cmp_1", "in_progress")),
			updFor("s2", cu("cmp_9", "in_progress")),
			answer(3, "end_turn"),
			upd(cu("cmp_1", "completed")),
			answer(2, "end_turn"),
		)
		expect(t, got, want{7, conformance.RuleSettlement, `session "s2": compaction "cmp_9" is still "in_progress" when the agent answered session/prompt id 3`})
	})
	t.Run("v2: terminal before the idle state_update; the prompt response is only an acknowledgement", func(t *testing.T) {
		got := check(t, nil,
			initV2,
			prompt(2, "s1"),
			`agent {"jsonrpc":"2.0","id":2,"result":{"messageId":"m1"}}`,
			upd(state("running")),
			upd(cu("cmp_1", "in_progress")),
			upd(state("requires_action")),
			upd(state("idle")),
		)
		expect(t, got, want{8, conformance.RuleSettlement, `compaction "cmp_1" is still "in_progress" when the agent reported the idle state_update`})
	})
	t.Run("unknown statuses are not terminal", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			prompt(2, "s1"),
			upd(cu("cmp_1", "_vendor_paused")),
			upd(cu("cmp_2", "paused")),
			answer(2, "end_turn"),
		)
		expect(t, got,
			want{6, conformance.RuleSettlement, `compaction "cmp_1" is still "_vendor_paused"`},
			want{6, conformance.RuleSettlement, `compaction "cmp_2" is still "paused"`},
		)
	})
	t.Run("end of stream: an unanswered prompt is fine, an open compaction never settled", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			prompt(2, "s1"),
			upd(cu("cmp_1", "completed")),
			upd(chunk("cmp_2", "partial")),
		)
		expect(t, got, want{5, conformance.RuleSettlement, `compaction "cmp_2" never settled: still "in_progress" when the transcript ended`})
	})
	t.Run("a compaction reported unsettled at the turn end is not reported again at the end", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			prompt(2, "s1"),
			upd(cu("cmp_1", "in_progress")),
			answer(2, "end_turn"),
		)
		expect(t, got, want{5, conformance.RuleSettlement, `compaction "cmp_1" is still "in_progress"`})
	})
}

func TestRuleAfterTurn(t *testing.T) {
	t.Run("v1: before any turn and after the prompt response", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			upd(cu("cmp_0", "completed")),
			prompt(2, "s1"),
			upd(cu("cmp_1", "completed")),
			answer(2, "end_turn"),
			upd(chunk("cmp_2", "late")),
			upd(cu("cmp_2", "completed")),
		)
		expect(t, got,
			want{3, conformance.RuleAfterTurn, `compaction "cmp_0" (status "completed") arrived with no turn open (no turn has started)`},
			want{7, conformance.RuleAfterTurn, `compaction_summary_chunk for compaction "cmp_2" arrived with no turn open (the turn ended at line 6)`},
			want{8, conformance.RuleAfterTurn, `compaction "cmp_2" (status "completed")`},
		)
	})
	t.Run("v2: after the idle state_update; agent-initiated work opens a turn", func(t *testing.T) {
		got := check(t, nil,
			initV2,
			prompt(2, "s1"),
			upd(state("running")),
			upd(state("idle")),
			upd(cu("cmp_1", "completed")),
			upd(state("running")),
			upd(cu("cmp_2", "completed")),
			upd(state("idle")),
		)
		expect(t, got, want{6, conformance.RuleAfterTurn, `compaction "cmp_1" (status "completed") arrived with no turn open (the turn ended at line 5)`})
	})
}

func TestRuleTerminal(t *testing.T) {
	got := check(t, nil,
		initV1Capable,
		prompt(2, "s1"),
		upd(cu("cmp_1", "completed")),
		upd(chunk("cmp_1", "more")),
		upd(cu("cmp_1", "failed")),
		upd(cu("cmp_1", "in_progress")),
		upd(cu("cmp_1", "_vendor")),
		answer(2, "end_turn"),
	)
	expect(t, got,
		want{5, conformance.RuleTerminal, `chunk after terminal: compaction_summary_chunk for compaction "cmp_1" after its terminal "completed" at line 4`},
		want{6, conformance.RuleTerminal, `second terminal: compaction "cmp_1" got status "failed" after its terminal "completed"`},
		want{7, conformance.RuleTerminal, `ID reused: compaction "cmp_1" got status "in_progress"`},
		want{8, conformance.RuleTerminal, `ID reused: compaction "cmp_1" got status "_vendor"`},
	)
}

func TestRuleTerminalIDsAreScopedToTheSession(t *testing.T) {
	got := check(t, nil,
		initV1Capable,
		prompt(2, "s1"),
		prompt(3, "s2"),
		upd(cu("cmp_1", "completed")),
		updFor("s2", cu("cmp_1", "completed")),
		answer(2, "end_turn"),
		answer(3, "end_turn"),
	)
	expect(t, got)
}

func TestAChunkMayOpenACompaction(t *testing.T) {
	got := check(t, nil,
		initV1Capable,
		prompt(2, "s1"),
		upd(chunk("cmp_1", "## Retained")),
		upd(cu("cmp_1", "completed")),
		answer(2, "end_turn"),
	)
	expect(t, got)
}

func TestRuleReplay(t *testing.T) {
	t.Run("terminal-first replay is clean, even for IDs the connection saw live", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			prompt(2, "s1"),
			upd(cu("cmp_1", "in_progress")),
			upd(cu("cmp_1", "completed")),
			answer(2, "end_turn"),
			load(3, "s1"),
			upd(cu("cmp_1", "completed", `"summary":[{"type":"text","text":"s"}]`)),
			upd(cu("cmp_2", "cancelled")),
			loaded(3),
		)
		expect(t, got)
	})
	strict := []conformance.Option{conformance.WithStrictReplay()}
	t.Run("strict: in_progress or a chunk first is a violation; later updates in replay too", func(t *testing.T) {
		got := check(t, strict,
			initV1Capable,
			load(1, "s1"),
			upd(cu("cmp_1", "in_progress")),
			upd(cu("cmp_1", "_vendor")),
			upd(cu("cmp_1", "completed")),
			upd(chunk("cmp_2", "x")),
			upd(cu("cmp_3", "completed")),
			upd(chunk("cmp_3", "again")),
			upd(cu("cmp_3", "completed")),
			loaded(1),
		)
		expect(t, got,
			want{4, conformance.RuleReplay, `first replayed update for compaction "cmp_1" has status "in_progress"`},
			want{5, conformance.RuleReplay, `compaction_update for compaction "cmp_1" (status "_vendor") during session/load replay`},
			want{7, conformance.RuleReplay, `compaction_summary_chunk for compaction "cmp_2" during session/load replay`},
			want{9, conformance.RuleTerminal, `chunk after terminal: compaction_summary_chunk for compaction "cmp_3"`},
			want{10, conformance.RuleTerminal, `second terminal: compaction "cmp_3"`},
		)
	})
	t.Run("not strict: the same replay breaks only the terminal rules", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			load(1, "s1"),
			upd(cu("cmp_1", "in_progress")),
			upd(cu("cmp_1", "_vendor")),
			upd(cu("cmp_1", "completed")),
			upd(chunk("cmp_2", "x")),
			upd(cu("cmp_3", "completed")),
			upd(chunk("cmp_3", "again")),
			upd(cu("cmp_3", "completed")),
			loaded(1),
		)
		expect(t, got,
			want{7, conformance.RuleSettlement, `compaction "cmp_2" never settled`},
			want{9, conformance.RuleTerminal, `chunk after terminal: compaction_summary_chunk for compaction "cmp_3"`},
			want{10, conformance.RuleTerminal, `second terminal: compaction "cmp_3"`},
		)
	})
	t.Run("strict: a replayed compaction left open is reported once, as replay", func(t *testing.T) {
		got := check(t, strict,
			initV1Capable,
			load(1, "s1"),
			upd(cu("cmp_1", "in_progress")),
			loaded(1),
		)
		expect(t, got, want{4, conformance.RuleReplay, `compaction "cmp_1"`})
	})
	t.Run("not strict: a replayed compaction left open never settled", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			load(1, "s1"),
			upd(cu("cmp_1", "in_progress")),
			loaded(1),
		)
		expect(t, got, want{4, conformance.RuleSettlement, `compaction "cmp_1" never settled: still "in_progress" when the transcript ended`})
	})
	t.Run("not strict: a compaction re-streamed by the replay may settle in a later turn", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			load(1, "s1"),
			upd(cu("cmp_1", "in_progress")),
			loaded(1),
			prompt(2, "s1"),
			upd(cu("cmp_1", "completed")),
			answer(2, "end_turn"),
		)
		expect(t, got)
	})
	t.Run("after the load response a replayed ID is settled history", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			load(1, "s1"),
			upd(cu("cmp_1", "completed")),
			loaded(1),
			prompt(2, "s1"),
			upd(cu("cmp_1", "in_progress")),
			answer(2, "end_turn"),
		)
		expect(t, got, want{7, conformance.RuleTerminal, `ID reused: compaction "cmp_1"`})
	})
	t.Run("v2: session/resume with replayFrom replays; without it, it does not", func(t *testing.T) {
		got := check(t, strict,
			initV2,
			`client {"jsonrpc":"2.0","id":1,"method":"session/resume","params":{"sessionId":"s1","cwd":"/p","replayFrom":{"type":"start"}}}`,
			upd(cu("cmp_1", "in_progress")),
			`agent {"jsonrpc":"2.0","id":1,"result":{}}`,
			`client {"jsonrpc":"2.0","id":2,"method":"session/resume","params":{"sessionId":"s2","cwd":"/p"}}`,
			updFor("s2", cu("cmp_2", "completed")),
			`agent {"jsonrpc":"2.0","id":2,"result":{}}`,
		)
		expect(t, got,
			want{4, conformance.RuleReplay, `compaction "cmp_1" has status "in_progress" during session/resume replay`},
			want{7, conformance.RuleAfterTurn, `compaction "cmp_2"`},
		)
	})
}

func TestRuleCancel(t *testing.T) {
	t.Run("cancelled without session/cancel", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			prompt(2, "s1"),
			upd(cu("cmp_1", "in_progress")),
			upd(cu("cmp_1", "cancelled")),
			answer(2, "end_turn"),
		)
		expect(t, got, want{5, conformance.RuleCancel, `compaction "cmp_1" ended cancelled but the client sent no session/cancel`})
	})
	t.Run("a cancel of another session or an earlier turn does not count", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			prompt(2, "s1"),
			prompt(3, "s2"),
			cancel("s2"),
			answer(3, "cancelled"),
			cancel("s1"),
			answer(2, "cancelled"),
			prompt(4, "s1"),
			upd(cu("cmp_1", "cancelled")),
			answer(4, "end_turn"),
		)
		expect(t, got, want{10, conformance.RuleCancel, `compaction "cmp_1"`})
	})
	t.Run("session/cancel, $/cancel_request for the prompt and session/close all count", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			prompt(2, "s1"),
			cancel("s1"),
			upd(cu("cmp_1", "cancelled")),
			answer(2, "cancelled"),
			prompt(3, "s1"),
			`client {"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":3}}`,
			upd(cu("cmp_2", "cancelled")),
			answer(3, "cancelled"),
		)
		expect(t, got)
		got = check(t, nil,
			initV2,
			prompt(2, "s1"),
			upd(state("running")),
			`client {"jsonrpc":"2.0","id":3,"method":"session/close","params":{"sessionId":"s1"}}`,
			upd(cu("cmp_1", "cancelled")),
			upd(state("idle")),
		)
		expect(t, got)
	})
	t.Run("the acpcompact fallback marker is held to the same rule", func(t *testing.T) {
		got := check(t, nil,
			initV1Incapable,
			prompt(2, "s1"),
			upd(marker("acpcompact/compaction", `{"status":"started","compactionId":"cmp_1","trigger":"auto"}`)),
			upd(marker("acpcompact/compaction", `{"status":"cancelled","compactionId":"cmp_1","trigger":"auto"}`)),
			answer(2, "end_turn"),
		)
		expect(t, got, want{5, conformance.RuleCancel, `acpcompact/compaction marker for compactionId "cmp_1" is cancelled`})
	})
}

func marker(key, value string) string {
	return fmt.Sprintf(`{"sessionUpdate":"session_info_update","_meta":{%q:%s}}`, key, value)
}

func TestRuleFallback(t *testing.T) {
	t.Run("the tool call is recognised by title or by claudeCode toolName", func(t *testing.T) {
		got := check(t, nil,
			initV1Incapable,
			prompt(2, "s1"),
			upd(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Compact conversation","status":"in_progress"}`),
			upd(`{"sessionUpdate":"tool_call","toolCallId":"t2","title":"Compacting","status":"pending","_meta":{"claudeCode":{"toolName":"compact"}}}`),
			upd(`{"sessionUpdate":"tool_call","toolCallId":"t3","title":"Read file","status":"in_progress"}`),
			upd(`{"sessionUpdate":"tool_call_update","toolCallId":"t2","status":"failed"}`),
			answer(2, "end_turn"),
		)
		expect(t, got, want{8, conformance.RuleFallback, `fallback tool call "t1" (Compact conversation) is still "in_progress" when the agent answered session/prompt id 2`})
	})
	t.Run("markers need a terminal marker for the same ID", func(t *testing.T) {
		got := check(t, nil,
			initV1Incapable,
			prompt(2, "s1"),
			upd(marker("acpcompact/compaction", `{"status":"started","compactionId":"cmp_1","trigger":"manual"}`)),
			upd(marker("acpcompact/compaction", `{"status":"completed","compactionId":"cmp_2","trigger":"manual"}`)),
			upd(marker("opencode/compaction", `{"status":"started","messageId":"msg_1","reason":"auto"}`)),
			upd(marker("opencode/compaction", `{"status":"failed","messageId":"msg_1","reason":"auto","error":{"type":"aborted","message":"x"}}`)),
			answer(2, "end_turn"),
		)
		expect(t, got, want{8, conformance.RuleFallback, `acpcompact/compaction marker for compactionId "cmp_1" is still "started"`})
	})
	t.Run("a fallback still open at the end of the transcript never settled", func(t *testing.T) {
		got := check(t, nil,
			initV1Incapable,
			prompt(2, "s1"),
			upd(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Compact conversation","status":"in_progress"}`),
		)
		expect(t, got, want{4, conformance.RuleFallback, `fallback tool call "t1" (Compact conversation) never settled`})
	})
	t.Run("fallback forms are judged only for a v1 client without the capability", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			prompt(2, "s1"),
			upd(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Compact conversation","status":"in_progress"}`),
			answer(2, "end_turn"),
		)
		expect(t, got)
	})
}

// fakeSchema rejects updates containing a marker string, so the wiring of
// WithSchema can be tested without the official schema.
type fakeSchema struct {
	name string
	seen *[]string
}

func (f fakeSchema) Notification(params []byte) error {
	*f.seen = append(*f.seen, f.name)
	if strings.Contains(string(params), "REJECT") {
		return errors.New("rejected\n   by " + f.name)
	}
	return nil
}

func TestRuleSchemaUsesTheNegotiatedVersionsValidator(t *testing.T) {
	var seen []string
	opts := []conformance.Option{conformance.WithSchema(fakeSchema{"v1", &seen}, fakeSchema{"v2", &seen})}
	got := check(t, opts,
		initV2,
		prompt(2, "s1"),
		upd(state("running")),
		upd(msg("agent_message_chunk", "REJECT")),
		upd(state("idle")),
	)
	expect(t, got, want{5, conformance.RuleSchema, "fails the v2 schema: rejected by v2"})
	assert.Equal(t, "v2,v2,v2", strings.Join(seen, ","), "validators used: %v", seen)
}

func TestRuleSchemaWithTheOfficialSchema(t *testing.T) {
	got := check(t, []conformance.Option{requireSchema(t)},
		initV1Capable,
		prompt(2, "s1"),
		// The SDK silently drops these malformed optional fields and
		// delivers the update, so only the raw wire shows them.
		upd(cu("cmp_1", "in_progress", `"summary":"text"`)),
		upd(cu("cmp_1", "failed", `"error":7`)),
		// A client drops an update without status; the schema says why,
		// so it is not reported again as malformed.
		upd(`{"sessionUpdate":"compaction_update","compactionId":"cmp_2"}`),
		upd(cu("cmp_3", "completed")),
		answer(2, "end_turn"),
	)
	expect(t, got,
		want{4, conformance.RuleSchema, "fails the v1 schema: params/update/summary: got string, want null or array"},
		want{5, conformance.RuleSchema, "fails the v1 schema: params/update/error: got number, want null or string"},
		want{6, conformance.RuleSchema, "fails the v1 schema: params/update: missing property 'status'"},
	)
}

type schemaFunc func([]byte) error

func (f schemaFunc) Notification(p []byte) error { return f(p) }

// A union's error lists every variant; the message keeps the causes of the
// variants whose discriminator matched, or lists the allowed values when
// none did.
func TestRuleSchemaMessageNamesTheCauseNotEveryVariant(t *testing.T) {
	tree := func(leaves string) error {
		return errors.New("acpschema: {...}: jsonschema validation failed with 'x#/$defs/SessionNotification'\n" +
			"- at '/update': 'oneOf' failed, none matched\n" +
			"  - at '/update': validation failed\n" +
			"    - at '/update/sessionUpdate': value must be 'tool_call'\n" +
			"    - at '/update': missing property 'toolCallId'\n" +
			"  - at '/update/sessionUpdate': value must be 'session_info_update'\n" +
			"  - at '/update': 'not' failed\n" +
			leaves)
	}
	validator := schemaFunc(func(p []byte) error {
		switch {
		case strings.Contains(string(p), "compaction_update"):
			return tree("  - at '/update': 'allOf' failed\n    - at '/update/summary': got string, want null or array\n")
		case strings.Contains(string(p), "usage_update"):
			return tree("")
		}
		return nil
	})
	got := check(t, []conformance.Option{conformance.WithSchema(validator, nil)},
		initV1Capable,
		prompt(2, "s1"),
		upd(cu("cmp_1", "completed")),
		upd(`{"sessionUpdate":"usage_update"}`),
		answer(2, "end_turn"),
	)
	expect(t, got,
		want{4, conformance.RuleSchema, "fails the v1 schema: params/update/summary: got string, want null or array"},
		want{5, conformance.RuleSchema, "fails the v1 schema: params/update/sessionUpdate: must be one of 'tool_call', 'session_info_update'"},
	)
	for _, v := range got {
		if assert.NotContains(t, v.Message, "toolCallId", "message keeps noise") {
			assert.NotContains(t, v.Message, "acpschema", "message keeps noise")
		}
	}
}

func TestObserveStreamsAndCloseIsIdempotent(t *testing.T) {
	c := conformance.NewChecker()
	lines, errs := conformance.ReadTranscript(strings.NewReader(transcript(
		initV1Capable,
		prompt(2, "s1"),
		upd(cu("cmp_1", "in_progress")),
		answer(2, "end_turn"),
		upd(chunk("cmp_2", "x")),
	)))
	require.Empty(t, errs, "conformance.ReadTranscript")
	var perLine [][]conformance.Violation
	for _, l := range lines {
		perLine = append(perLine, c.Observe(l.Dir, l.N, l.Raw))
	}
	if assert.Len(t, perLine[4], 1, "response line") {
		assert.Equal(t, conformance.RuleSettlement, perLine[4][0].Rule, "response line")
	}
	if assert.Len(t, perLine[5], 1, "late chunk line") {
		assert.Equal(t, conformance.RuleAfterTurn, perLine[5][0].Rule, "late chunk line")
	}
	expect(t, c.Close(), want{6, conformance.RuleSettlement, `compaction "cmp_2" never settled`})
	expect(t, c.Close())
	// A proxy may hand over raw bytes that are not a JSON object.
	expect(t, c.Observe(conformance.FromAgent, 7, json.RawMessage(`[]`)), want{7, conformance.RuleMalformed, "not a JSON object"})
	expect(t, c.Observe(conformance.Direction(9), 8, json.RawMessage(`{}`)), want{8, conformance.RuleMalformed, "unknown direction"})
}

type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

func TestCheckTranscriptReturnsTheReadersError(t *testing.T) {
	boom := errors.New("disk on fire")
	_, err := conformance.CheckTranscript(failingReader{boom})
	require.ErrorIs(t, err, boom, "conformance.CheckTranscript")
}

func TestViolationString(t *testing.T) {
	v := conformance.Violation{Line: 7, Rule: conformance.RuleCancel, Message: "m"}
	assert.Equal(t, "line 7: cancel: m", v.String(), "String()")
}

// A transcript may hold several connections in a row: each initialize
// starts a new one. Request IDs restart, the new client holds nothing, and
// what the old connection left open is reported when it ends.
func TestCheckerTreatsEachInitializeAsANewConnection(t *testing.T) {
	t.Run("a reconnect with reused request ids and a replay is clean", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			prompt(2, "s1"),
			upd(cu("cmp_1", "in_progress")),
			upd(cu("cmp_1", "completed")),
			answer(2, "end_turn"),
			initV1Capable,
			load(2, "s1"),
			upd(cu("cmp_1", "completed", `"summary":null`)),
			loaded(2),
		)
		expect(t, got)
	})
	t.Run("the new connection's gate is its own", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			initV1(`{}`),
			load(2, "s1"),
			upd(cu("cmp_1", "completed")),
			loaded(2),
		)
		expect(t, got, want{6, conformance.RuleCapability, ""})
	})
	t.Run("a compaction left open by the old connection is reported when it ends", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			prompt(2, "s1"),
			upd(cu("cmp_1", "in_progress")),
			initV1Capable,
		)
		expect(t, got, want{4, conformance.RuleSettlement, `never settled: still "in_progress" when the connection ended (a new initialize began)`})
	})
}
