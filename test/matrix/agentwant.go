package matrix

// The scenario agent's timelines, as Verify renders agent runs: compaction
// IDs renamed c1, c2, ... and _meta left out; "*" matches any text, so the
// rows do not depend on the wording of the agent's summaries and messages.
// They follow the scripts documented in internal/scenario.
// On v1 the agent's message chunks carry a messageId, and chunks append:
// a client that keeps its timeline across session/load holds the replayed
// text twice, which is v1's message semantics, not a compaction matter.
// Compactions are never doubled (Verify checks each replayed entity).

const (
	agentSummary   = "[compaction c1] completed  summary: ## Retained context*"
	agentMessage1  = "[agent] Context compacted*"
	agentFailed    = "[compaction c1] failed  error: summary request failed"
	agentToolCall  = "[tool_call compact-cmp_1] completed  Compact conversation"
	agentOlderHalf = "[compaction c1] completed  summary: ## Retained context (older half)*"
	agentNewerHalf = "[compaction c2] completed  summary: ## Retained context (newer half)*"
)

// agentCapabilityWant: /compact, then session/load on the same connection,
// seen by a v1 client that keeps its timeline.
func agentCapabilityWant(capable bool) []string {
	if capable {
		return []string{agentSummary, agentMessage1, "[user] /compact"}
	}
	return []string{agentMessage1, "[user] /compact"}
}

// agentReplayWant: the same, rebuilt from the replay alone.
func agentReplayWant(capable bool) []string {
	if capable {
		return []string{"[user] /compact", agentSummary, agentMessage1}
	}
	return []string{"[user] /compact", agentMessage1}
}

func agentFallbackWant() []string { return []string{agentToolCall, agentMessage1, "[user] /compact"} }
func agentFallbackReplayWant() []string {
	return []string{"[user] /compact", agentToolCall, agentMessage1}
}
func agentCompactWant() []string   { return []string{agentSummary, agentMessage1} }
func agentNoSummaryWant() []string { return []string{"[compaction c1] completed"} }
func agentFailWant() []string      { return []string{agentFailed} }
func agentTwiceWant() []string     { return []string{agentOlderHalf, agentNewerHalf} }

// v2 messages are upserts by ID: the replay leaves the held timeline as
// it was.
func agentV2ReplayWant() []string     { return []string{"[user] /compact", agentSummary, agentMessage1} }
func agentV2ReplayOnlyWant() []string { return agentV2ReplayWant() }
func agentReplayTwiceWant() []string {
	return []string{agentSummary, agentMessage1, "[user] /compact/compact"}
}
func agentFailReplayWant() []string     { return []string{agentFailed, "[user] /compact fail"} }
func agentFailReplayOnlyWant() []string { return []string{"[user] /compact fail", agentFailed} }
func agentV2CompactWant() []string      { return []string{"[user] /compact", agentSummary, agentMessage1} }
func agentV2FailWant() []string         { return []string{"[user] /compact fail", agentFailed} }
func agentV2CancelWant() []string {
	return []string{"[user] /compact slow", "[compaction c1] cancelled"}
}
func agentV2NoSummaryWant() []string {
	return []string{"[user] /compact nosummary", "[compaction c1] completed"}
}
