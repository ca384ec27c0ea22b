package conformance_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// defectTranscript is a crafted transcript whose "# ^" annotations name the
// violations it must produce, and whose rules are those of the violations
// in order of first appearance.
type defectTranscript struct {
	defect string
	file   string
	rules  []conformance.Rule
	strict bool // checked WithStrictReplay
}

// Each defect of peers.md "Known defects in peers" that shows on the wire
// has a crafted transcript. Not on the wire, so not here: the 90-170 s
// silences (a transcript has no clock), outcome detection by matching prose
// (a client defect), and the coder/acp-go-sdk and jsonrpc2 notes (library
// behaviour).
var peerDefects = []defectTranscript{
	{"opencode counts compaction: false as support", "defect_opencode_false_capability.jsonl", []conformance.Rule{conformance.RuleCapability}, false},
	{"codex-acp counts any non-null value as support: true", "defect_codex_true_capability.jsonl", []conformance.Rule{conformance.RuleCapability}, false},
	{"codex-acp counts any non-null value as support: \"\" (gate applies to replay)", "defect_codex_empty_string_capability.jsonl", []conformance.Rule{conformance.RuleCapability}, false},
	{"opencode: a second start overwrites the first, never settled", "defect_second_start_overwrites.jsonl", []conformance.Rule{conformance.RuleSettlement}, false},
	{"opencode fallback markers: a second start overwrites the first", "defect_opencode_marker_second_start.jsonl", []conformance.Rule{conformance.RuleFallback}, false},
	{"Claude ACP / codex-acp leave the fallback tool call in_progress on cancel", "defect_fallback_toolcall_left_on_cancel.jsonl", []conformance.Rule{conformance.RuleFallback}, false},
	{"Claude ACP maps every interruption to cancelled", "defect_interruption_mapped_to_cancelled.jsonl", []conformance.Rule{conformance.RuleCancel}, false},
	{"terminal updates arrive after the turn ended", "defect_terminal_after_turn.jsonl", []conformance.Rule{conformance.RuleSettlement, conformance.RuleAfterTurn}, false},
	{"spinner stuck after a non-cancel stop (v1 error response)", "defect_spinner_stuck_after_error_stop.jsonl", []conformance.Rule{conformance.RuleSettlement}, false},
	{"spinner stuck after a non-cancel stop (v2 idle, max_tokens)", "defect_v2_spinner_stuck_after_max_tokens.jsonl", []conformance.Rule{conformance.RuleSettlement}, false},
	// Re-streaming on a fresh connection is legal under the RFD; the
	// project's own terminal-first rule flags it.
	{"summary replayed twice on reconnect (in_progress + chunks during load)", "defect_summary_replayed_twice.jsonl", []conformance.Rule{conformance.RuleReplay}, true},
	{"summary replayed twice: the replay appends to the summary the client holds", "defect_replay_duplicates_held_summary.jsonl", []conformance.Rule{conformance.RuleReplay}, false},
	{"Claude ACP: a terminal-first tool call after the cancelled response; a tool call settled after the response", "defect_fallback_toolcall_after_turn.jsonl", []conformance.Rule{conformance.RuleFallback, conformance.RuleAfterTurn}, false},
}

// Each of the checker's own edge rules has a crafted transcript too.
var ruleDefects = []defectTranscript{
	{"a text fallback Compacting... without its outcome when the connection ends", "defect_text_fallback_without_outcome.jsonl", []conformance.Rule{conformance.RuleFallback}, false},
	{"a non-integer protocolVersion in the initialize response: the client's request decides", "defect_capability_string_protocol_version.jsonl", []conformance.Rule{conformance.RuleProtocol, conformance.RuleCapability}, false},
	{"request ids spelt differently are the same JSON value", "defect_escaped_request_ids.jsonl", []conformance.Rule{conformance.RuleCapability, conformance.RuleCancel}, false},
	{"compaction IDs that are two lone surrogates are two compactions, as JSON.parse keeps them", "defect_lone_surrogate_compaction_ids.jsonl", []conformance.Rule{conformance.RuleSettlement}, false},
	{"compaction IDs of invalid UTF-8 that TextDecoder decodes apart are two compactions", "defect_invalid_utf8_compaction_ids.jsonl", []conformance.Rule{conformance.RuleSettlement}, false},
	{"session IDs that are two lone surrogates are two sessions", "defect_lone_surrogate_session_ids.jsonl", []conformance.Rule{conformance.RuleAfterTurn}, false},
	{"a cancel sent before the next prompt is not that prompt's", "defect_cancel_before_next_prompt.jsonl", []conformance.Rule{conformance.RuleCancel}, false},
}

var cleanTranscripts = []struct {
	what string
	file string
}{
	{"standard v1 with the capability: complete, user cancel, failure", "clean_v1_capability.jsonl"},
	{"v2 with state_update idle ending the turn", "clean_v2_state_idle.jsonl"},
	{"v1 fallback markers (acpcompact, opencode) without the capability", "clean_v1_fallback_marker.jsonl"},
	{"v1 fallback tool call without the capability", "clean_v1_fallback_toolcall.jsonl"},
	{"v1 session/load replay, terminal-first", "clean_v1_replay.jsonl"},
	{"v2 session/resume replay, terminal-first", "clean_v2_resume_replay.jsonl"},
	{"v1 text fallback with its outcomes; prose and model text are no fallback", "clean_v1_fallback_text.jsonl"},
	{"v1 session/load replay that re-streams with live semantics (not strict)", "clean_v1_replay_restreamed.jsonl"},
	{"v1 second prompt rejected while the first runs: only the running prompt's answer ends the turn", "clean_v1_second_prompt_rejected.jsonl"},
	{"compaction IDs of invalid UTF-8 that TextDecoder decodes alike are one compaction", "clean_invalid_utf8_compaction_ids.jsonl"},
	{"a cancel sent while the next prompt waits cancels that prompt's turn too", "clean_cancel_while_next_prompt_waits.jsonl"},
}

// restreamed lists the clean transcripts that only WithStrictReplay flags;
// every other clean transcript is clean under it too.
var restreamed = map[string]bool{"clean_v1_replay_restreamed.jsonl": true}

func TestKnownPeerDefectsAreCaught(t *testing.T) {
	for _, d := range peerDefects {
		t.Run(d.file, func(t *testing.T) { checkDefect(t, d) })
	}
}

func TestCheckerRuleDefectsAreCaught(t *testing.T) {
	for _, d := range ruleDefects {
		t.Run(d.file, func(t *testing.T) { checkDefect(t, d) })
	}
}

func checkDefect(t *testing.T, d defectTranscript) {
	t.Helper()
	opts := []conformance.Option{officialSchema(t)}
	if d.strict {
		opts = append(opts, conformance.WithStrictReplay())
	}
	got := checkFile(t, d.file, opts...)
	t.Logf("defect: %s", d.defect)
	var rules []conformance.Rule
	for _, v := range got {
		if !slices.Contains(rules, v.Rule) {
			rules = append(rules, v.Rule)
		}
	}
	assert.Equal(t, d.rules, rules, "rules")
}

func TestCleanTranscriptsHaveNoViolations(t *testing.T) {
	schema := officialSchema(t)
	for _, c := range cleanTranscripts {
		t.Run(c.file, func(t *testing.T) {
			raw := readTestdata(t, c.file)
			require.Empty(t, annotations(t, raw), "a clean transcript carries annotations")
			got, err := conformance.CheckTranscript(bytes.NewReader(raw), schema)
			require.NoError(t, err, "conformance.CheckTranscript")
			t.Logf("transcript: %s", c.what)
			expect(t, got)
			if restreamed[c.file] {
				return
			}
			got, err = conformance.CheckTranscript(bytes.NewReader(raw), schema, conformance.WithStrictReplay())
			require.NoError(t, err, "conformance.CheckTranscript")
			expect(t, got)
		})
	}
}

// TestCleanTranscriptsMatchOfficialSchema checks the well-formed messages
// themselves, so a clean result cannot come from a transcript the official
// schema would reject: every message against the schema root, every
// session/update's params and update against their definitions.
func TestCleanTranscriptsMatchOfficialSchema(t *testing.T) {
	for _, c := range cleanTranscripts {
		t.Run(c.file, func(t *testing.T) {
			lines, errs := conformance.ReadTranscript(bytes.NewReader(readTestdata(t, c.file)))
			require.Empty(t, errs, "conformance.ReadTranscript")
			v := schematest.Require(t, negotiatedVersion(t, lines))
			updates := 0
			for _, l := range lines {
				assert.NoError(t, v.Message(l.Raw), "line %d", l.N)
				var m struct {
					Method string `json:"method"`
					Params struct {
						Update json.RawMessage `json:"update"`
					} `json:"params"`
				}
				if json.Unmarshal(l.Raw, &m) != nil || m.Method != "session/update" {
					continue
				}
				updates++
				var p struct {
					Params json.RawMessage `json:"params"`
				}
				_ = json.Unmarshal(l.Raw, &p)
				assert.NoError(t, v.Notification(p.Params), "line %d", l.N)
				assert.NoError(t, v.Update(m.Params.Update), "line %d", l.N)
			}
			require.NotEqual(t, 0, updates, "no session/update checked")
		})
	}
}

func TestEveryTestdataTranscriptIsListed(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	require.NoError(t, err, "filepath.Glob")
	listed := map[string]bool{}
	for _, d := range append(slices.Clone(peerDefects), ruleDefects...) {
		listed[d.file] = true
	}
	for _, c := range cleanTranscripts {
		listed[c.file] = true
	}
	for _, f := range files {
		assert.True(t, listed[filepath.Base(f)], "%s is in no table of transcripts_test.go", f)
	}
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err, "os.ReadFile")
	return raw
}

func negotiatedVersion(t *testing.T, lines []conformance.Line) int {
	t.Helper()
	for _, l := range lines {
		var m struct {
			Result struct {
				ProtocolVersion int `json:"protocolVersion"`
			} `json:"result"`
		}
		if l.Dir == conformance.FromAgent && json.Unmarshal(l.Raw, &m) == nil && m.Result.ProtocolVersion != 0 {
			return m.Result.ProtocolVersion
		}
	}
	require.Fail(t, "no initialize response")
	return 0

}
