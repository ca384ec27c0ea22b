package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckFlagsWhatAJavaScriptClientShows: `acpcompact check` of the
// transcripts of the hardening issue's false negatives exits 1 with the
// violation a JavaScript client's view has (a compaction left in_progress
// at the turn's end: two lone surrogate IDs are two compactions; a cancel
// sent before a prompt is not that prompt's), and passes their twins.
func TestCheckFlagsWhatAJavaScriptClientShows(t *testing.T) {
	testdata := filepath.Join("..", "..", "conformance", "testdata")
	for _, tc := range []struct {
		file, want string
	}{
		{"defect_lone_surrogate_compaction_ids.jsonl", `settlement: session "s1": compaction "\ud800" is still "in_progress"`},
		{"defect_invalid_utf8_compaction_ids.jsonl", `settlement: session "s1": compaction "` + "\ufffd" + `" is still "in_progress"`},
		{"defect_lone_surrogate_session_ids.jsonl", `after-turn: session "s\udc00": compaction_update for compaction "cmp_1"`},
		{"defect_cancel_before_next_prompt.jsonl", `cancel: session "s1": compaction "cmp_1" ended cancelled`},
		{"clean_invalid_utf8_compaction_ids.jsonl", ""},
		{"clean_cancel_while_next_prompt_waits.jsonl", ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			p := filepath.Join(testdata, tc.file)
			_, err := os.Stat(p)
			require.NoError(t, err)
			r := checkRun(t, "", p)
			if tc.want == "" {
				assert.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
				return
			}
			assert.Equal(t, 1, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			assert.Contains(t, r.stdout, tc.want)
		})
	}
}
