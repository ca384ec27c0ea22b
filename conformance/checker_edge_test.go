package conformance_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/stretchr/testify/require"
)

// The checker misses nothing and invents nothing: each edge below has a
// crafted transcript under testdata that the checker once got wrong, and a
// legitimate form that must stay clean.

// checkFile checks a testdata transcript and expects exactly the
// violations its "# ^" annotations name (none for a clean one).
func checkFile(t *testing.T, file string, opts ...conformance.Option) []conformance.Violation {
	t.Helper()
	raw := readTestdata(t, file)
	wants := annotations(t, raw)
	if strings.HasPrefix(file, "defect_") {
		require.NotEmpty(t, wants, "%s has no \"# ^\" annotations", file)
	}

	got, err := conformance.CheckTranscript(bytes.NewReader(raw), opts...)
	require.NoError(t, err, "conformance.CheckTranscript")
	expect(t, got, wants...)
	return got
}

func TestRuleAfterTurnFlagsAFallbackToolCallAfterTheResponse(t *testing.T) {
	t.Run("started or settled after the response", func(t *testing.T) {
		checkFile(t, "defect_fallback_toolcall_after_turn.jsonl")
	})
	t.Run("settled before the response, updated after settling, replayed: clean", func(t *testing.T) {
		checkFile(t, "clean_v1_fallback_toolcall.jsonl")
	})
	t.Run("before any turn", func(t *testing.T) {
		got := check(t, nil,
			initV1Incapable,
			upd(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Compact conversation","kind":"think","status":"completed"}`),
			upd(`{"sessionUpdate":"tool_call","toolCallId":"t2","title":"Read file","kind":"read","status":"in_progress"}`),
		)
		expect(t, got, want{3, conformance.RuleAfterTurn, `fallback tool call "t1" (Compact conversation) started (status "completed") with no turn open (no turn has started)`})
	})
}

func TestRuleFallbackFlagsATextFallbackWithoutOutcome(t *testing.T) {
	t.Run("no outcome text when the connection ends", func(t *testing.T) {
		checkFile(t, "defect_text_fallback_without_outcome.jsonl")
	})
	t.Run("outcomes, prose and model text: clean", func(t *testing.T) {
		checkFile(t, "clean_v1_fallback_text.jsonl")
	})
	t.Run("outcomes pair with starts in order; trailing whitespace is tolerated", func(t *testing.T) {
		got := check(t, nil,
			initV1Incapable,
			prompt(2, "s1"),
			upd(msg("agent_message_chunk", "Compacting...")),
			upd(msg("agent_message_chunk", "Compacting...\n\n")),
			upd(msg("agent_message_chunk", "\n\nCompacting completed.\n\n")),
			upd(msg("agent_message_chunk", "Compacting...")),
			upd(msg("agent_message_chunk", "\n\nCompacting failed: boom\n\n")),
			answer(2, "end_turn"),
		)
		expect(t, got, want{7, conformance.RuleFallback, `text fallback "Compacting..." never settled`})
	})
	t.Run("judged only for a v1 client without the capability", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			prompt(2, "s1"),
			upd(msg("agent_message_chunk", "Compacting...")),
			answer(2, "end_turn"),
		)
		expect(t, got)
	})
}

func TestRuleCapabilityWhenTheResponseVersionIsNotAnInteger(t *testing.T) {
	t.Run("a v1 client without the capability", func(t *testing.T) {
		checkFile(t, "defect_capability_string_protocol_version.jsonl")
	})
	t.Run("a v1 client with the capability", func(t *testing.T) {
		got := check(t, nil,
			`client {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`,
			`agent {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"1"}}`,
			prompt(2, "s1"),
			upd(cu("cmp_1", "completed")),
			answer(2, "end_turn"),
		)
		expect(t, got, want{2, conformance.RuleProtocol, "(v1, with the compaction capability)"})
	})
	t.Run("a v2 client needs none", func(t *testing.T) {
		got := check(t, nil,
			`client {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"c","version":"1"}}}`,
			`agent {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2.5}}`,
			prompt(2, "s1"),
			upd(state("running")),
			upd(cu("cmp_1", "completed")),
			upd(state("idle")),
		)
		expect(t, got, want{2, conformance.RuleProtocol, "(v2, no capability needed)"})
	})
}

func TestRequestIDsCompareAsJSONValues(t *testing.T) {
	t.Run("escaped ids no longer hide capability and cancel violations", func(t *testing.T) {
		checkFile(t, "defect_escaped_request_ids.jsonl")
	})
	t.Run(`1 is not "1"`, func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			prompt(2, "s1"),
			upd(cu("cmp_1", "in_progress")),
			`agent {"jsonrpc":"2.0","id":"2","result":{"stopReason":"end_turn"}}`,
			upd(cu("cmp_1", "completed")),
			answer(2, "end_turn"),
		)
		expect(t, got)
	})
	t.Run("numbers compare by value", func(t *testing.T) {
		got := check(t, nil,
			initV1Capable,
			prompt(20, "s1"),
			upd(cu("cmp_1", "in_progress")),
			`agent {"jsonrpc":"2.0","id":2.0e1,"result":{"stopReason":"end_turn"}}`,
			upd(cu("cmp_1", "completed")),
		)
		expect(t, got,
			want{5, conformance.RuleSettlement, `compaction "cmp_1" is still "in_progress" when the agent answered session/prompt id 2.0e1`},
			want{6, conformance.RuleAfterTurn, `compaction "cmp_1"`},
		)
	})
}

func TestRuleReplayAllowsAReStreamedReplay(t *testing.T) {
	t.Run("re-streamed with live semantics: clean", func(t *testing.T) {
		checkFile(t, "clean_v1_replay_restreamed.jsonl")
	})
	t.Run("terminal-first: clean", func(t *testing.T) {
		checkFile(t, "clean_v1_replay.jsonl")
		checkFile(t, "clean_v2_resume_replay.jsonl")
	})
	t.Run("a re-stream on a fresh connection duplicates nothing: the client holds nothing", func(t *testing.T) {
		// Its annotations are the strict rule's (strict_replay_test.go).
		got, err := conformance.CheckTranscript(bytes.NewReader(readTestdata(t, "defect_summary_replayed_twice.jsonl")))
		require.NoError(t, err, "conformance.CheckTranscript")
		expect(t, got)
	})
}

func TestRuleReplayFlagsASummaryAppendedTwice(t *testing.T) {
	t.Run("appended to the summary the client holds", func(t *testing.T) {
		checkFile(t, "defect_replay_duplicates_held_summary.jsonl")
	})
	live := []string{
		initV1Capable,
		prompt(2, "s1"),
		upd(cu("cmp_1", "completed", `"summary":[{"type":"text","text":"## Kept"}]`)),
		upd(cu("cmp_2", "completed")),
		answer(2, "end_turn"),
		load(3, "s1"),
	}
	for _, tc := range []struct {
		name  string
		lines []string
		wants []want
	}{
		{"a chunk first", []string{upd(chunk("cmp_1", "## Kept")), upd(cu("cmp_1", "completed"))},
			[]want{{8, conformance.RuleReplay, `appends to the summary the client already holds (received at line 4)`}}},
		{"cleared with [] first", []string{upd(cu("cmp_1", "in_progress", `"summary":[]`)), upd(chunk("cmp_1", "## Kept")), upd(cu("cmp_1", "completed"))}, nil},
		{"replaced first", []string{upd(cu("cmp_1", "in_progress", `"summary":[{"type":"text","text":"## "}]`)), upd(chunk("cmp_1", "Kept")), upd(cu("cmp_1", "completed"))}, nil},
		{"nothing held", []string{upd(cu("cmp_2", "in_progress")), upd(chunk("cmp_2", "## New")), upd(cu("cmp_2", "completed"))}, nil},
		{"reported once per compaction", []string{upd(cu("cmp_1", "in_progress")), upd(chunk("cmp_1", "## Kept")), upd(chunk("cmp_1", " more")), upd(cu("cmp_1", "completed"))},
			[]want{{9, conformance.RuleReplay, `compaction "cmp_1" during session/load replay appends`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := append(append(append([]string(nil), live...), tc.lines...), loaded(3))
			expect(t, check(t, nil, lines...), tc.wants...)
		})
	}
}

func TestRuleFallbackRecognisesTheCompactionToolCallForms(t *testing.T) {
	got := check(t, nil,
		initV1Incapable,
		prompt(2, "s1"),
		// Codex: title and kind, no _meta.
		upd(`{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Compact conversation","kind":"think","status":"in_progress"}`),
		// This project's fallback.ToolCall under another title.
		upd(`{"sessionUpdate":"tool_call","toolCallId":"compact-cmp_1","title":"Tidying up","kind":"think","status":"in_progress"}`),
		// Kind think alone is another tool (Claude's TodoWrite, say).
		upd(`{"sessionUpdate":"tool_call","toolCallId":"toolu_9","title":"Update todos","kind":"think","status":"in_progress"}`),
		upd(`{"sessionUpdate":"tool_call","toolCallId":"compact-x","title":"Read compact-x","kind":"read","status":"in_progress"}`),
		answer(2, "end_turn"),
	)
	expect(t, got,
		want{8, conformance.RuleFallback, `fallback tool call "c1"`},
		want{8, conformance.RuleFallback, `fallback tool call "compact-cmp_1"`},
	)
}
