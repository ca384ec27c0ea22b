package conformance_test

import (
	"bytes"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/stretchr/testify/require"
)

// TestRuleReplayWithStrictReplayIsTerminalFirst: the project's own rule for
// what it sends flags the legal re-stream, and still passes a terminal-first
// replay.
func TestRuleReplayWithStrictReplayIsTerminalFirst(t *testing.T) {
	strict := conformance.WithStrictReplay()
	t.Run("a re-stream is flagged", func(t *testing.T) {
		got, err := conformance.CheckTranscript(bytes.NewReader(readTestdata(t, "clean_v1_replay_restreamed.jsonl")), strict)
		require.NoError(t, err, "conformance.CheckTranscript")
		expect(t, got,
			want{11, conformance.RuleReplay, `first replayed update for compaction "cmp_1" has status "in_progress" during session/load replay; strict replay must be terminal-first`},
			want{12, conformance.RuleReplay, `compaction_summary_chunk for compaction "cmp_1" during session/load replay; a replayed compaction is one terminal compaction_update (strict replay)`},
			want{13, conformance.RuleReplay, `compaction_summary_chunk for compaction "cmp_1"`},
			want{22, conformance.RuleReplay, `first replayed update for compaction "cmp_1" has status "in_progress"`},
			want{24, conformance.RuleReplay, `first replayed update for compaction "cmp_2" has status "in_progress"`},
			want{25, conformance.RuleReplay, `compaction_summary_chunk for compaction "cmp_2"`},
		)
	})
	t.Run("the summary replayed twice on reconnect", func(t *testing.T) {
		checkFile(t, "defect_summary_replayed_twice.jsonl", strict)
	})
	t.Run("terminal-first stays clean", func(t *testing.T) {
		checkFile(t, "clean_v1_replay.jsonl", strict)
		checkFile(t, "clean_v2_resume_replay.jsonl", strict)
	})
}
