package conformance_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/acpcompact/acpcompact/internal/acpschema"
	"github.com/acpcompact/acpcompact/test/conformance"
)

// Each defect of peers.md "Known defects in peers" that shows on the wire
// has a crafted transcript whose "# ^" annotations name the violations it
// must produce. Not on the wire, so not here: the 90-170 s silences (a
// transcript has no clock), outcome detection by matching prose (a client
// defect), and the coder/acp-go-sdk and jsonrpc2 notes (library behaviour).
var peerDefects = []struct {
	defect string
	file   string
	rules  []conformance.Rule
}{
	{"opencode counts compaction: false as support", "defect_opencode_false_capability.jsonl", []conformance.Rule{conformance.RuleCapability}},
	{"codex-acp counts any non-null value as support: true", "defect_codex_true_capability.jsonl", []conformance.Rule{conformance.RuleCapability}},
	{"codex-acp counts any non-null value as support: \"\" (gate applies to replay)", "defect_codex_empty_string_capability.jsonl", []conformance.Rule{conformance.RuleCapability}},
	{"opencode: a second start overwrites the first, never settled", "defect_second_start_overwrites.jsonl", []conformance.Rule{conformance.RuleSettlement}},
	{"opencode fallback markers: a second start overwrites the first", "defect_opencode_marker_second_start.jsonl", []conformance.Rule{conformance.RuleFallback}},
	{"Claude ACP / codex-acp leave the fallback tool call in_progress on cancel", "defect_fallback_toolcall_left_on_cancel.jsonl", []conformance.Rule{conformance.RuleFallback}},
	{"Claude ACP maps every interruption to cancelled", "defect_interruption_mapped_to_cancelled.jsonl", []conformance.Rule{conformance.RuleCancel}},
	{"terminal updates arrive after the turn ended", "defect_terminal_after_turn.jsonl", []conformance.Rule{conformance.RuleSettlement, conformance.RuleAfterTurn}},
	{"spinner stuck after a non-cancel stop (v1 error response)", "defect_spinner_stuck_after_error_stop.jsonl", []conformance.Rule{conformance.RuleSettlement}},
	{"spinner stuck after a non-cancel stop (v2 idle, max_tokens)", "defect_v2_spinner_stuck_after_max_tokens.jsonl", []conformance.Rule{conformance.RuleSettlement}},
	{"summary replayed twice on reconnect (in_progress + chunks during load)", "defect_summary_replayed_twice.jsonl", []conformance.Rule{conformance.RuleReplay}},
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
}

func TestKnownPeerDefectsAreCaught(t *testing.T) {
	schema := officialSchema(t)
	for _, d := range peerDefects {
		t.Run(d.file, func(t *testing.T) {
			raw := readTestdata(t, d.file)
			wants := annotations(t, raw)
			if len(wants) == 0 {
				t.Fatalf("%s has no \"# ^\" annotations", d.file)
			}
			got, err := conformance.CheckTranscript(bytes.NewReader(raw), schema)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("defect: %s", d.defect)
			expect(t, got, wants...)
			var rules []conformance.Rule
			for _, v := range got {
				if !slices.Contains(rules, v.Rule) {
					rules = append(rules, v.Rule)
				}
			}
			if !slices.Equal(rules, d.rules) {
				t.Errorf("rules = %v, want %v", rules, d.rules)
			}
		})
	}
}

func TestCleanTranscriptsHaveNoViolations(t *testing.T) {
	schema := officialSchema(t)
	for _, c := range cleanTranscripts {
		t.Run(c.file, func(t *testing.T) {
			raw := readTestdata(t, c.file)
			if a := annotations(t, raw); len(a) != 0 {
				t.Fatalf("a clean transcript carries annotations: %v", a)
			}
			got, err := conformance.CheckTranscript(bytes.NewReader(raw), schema)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("transcript: %s", c.what)
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
			if len(errs) != 0 {
				t.Fatal(errs)
			}
			v, err := acpschema.For(negotiatedVersion(t, lines))
			if err != nil {
				t.Fatal(err)
			}
			updates := 0
			for _, l := range lines {
				if err := v.Message(l.Raw); err != nil {
					t.Errorf("line %d: %v", l.N, err)
				}
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
				if err := v.Notification(p.Params); err != nil {
					t.Errorf("line %d: %v", l.N, err)
				}
				if err := v.Update(m.Params.Update); err != nil {
					t.Errorf("line %d: %v", l.N, err)
				}
			}
			if updates == 0 {
				t.Fatal("no session/update checked")
			}
		})
	}
}

func TestEveryTestdataTranscriptIsListed(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, d := range peerDefects {
		listed[d.file] = true
	}
	for _, c := range cleanTranscripts {
		listed[c.file] = true
	}
	for _, f := range files {
		if !listed[filepath.Base(f)] {
			t.Errorf("%s is in no table of transcripts_test.go", f)
		}
	}
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
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
	t.Fatal("no initialize response")
	return 0
}
