package proxy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Copilot CLI and Gemini CLI compact automatically without a word on the
// wire. Could a sharp drop of usage_update.used stand for such a
// compaction, reported after the fact? Only if, on the recorded real
// transcripts, such drops come with a compaction and compactions come with
// such drops. TestPeersUsageDropIsNoCompactionSignal measures both, for
// several thresholds, and holds the decision docs/proxy.md states: no profile
// reads a usage drop as a compaction.

// silentCompactions are the compactions the recordings show only outside
// the wire (the mock saw the summary request; test/peers/README.md): per
// agent directory prefix and scenario, the 1-based prompt turn of the
// session in whose usage they would show.
var silentCompactions = map[string]map[string][]int{
	// Copilot CLI compacts in the background after the overflowing turn.
	"copilot-cli-": {"auto": {2}},
	// opencode streams the summary as agent text: inside the overflowing
	// turn, and as /compact's answer.
	"opencode-": {"auto": {1}, "compact": {2}, "load-before": {2}},
	// Gemini CLI compresses silently in the turn after the overflow.
	"gemini-cli-": {"auto": {2}},
}

// usageTurn is what one prompt turn of a session showed: the drops of
// usage_update.used between consecutive updates (as a fraction of the
// earlier), and the compactions that completed.
type usageTurn struct {
	file, session string
	turn          int
	drops         []usageDrop
	compactions   int
}

type usageDrop struct {
	from, to int64
}

func (d usageDrop) ratio() float64 { return float64(d.from-d.to) / float64(d.from) }

func TestPeersUsageDropIsNoCompactionSignal(t *testing.T) {
	files, err := filepath.Glob(peersGlob)
	require.NoError(t, err, "filepath.Glob")
	if len(files) == 0 {
		t.Skipf("no recordings under %s", peersGlob)
	}
	var turns []*usageTurn
	pairs, agentsWithUsage := 0, map[string]bool{}
	for _, f := range files {
		ts, n := usageTurns(t, f)
		turns = append(turns, ts...)
		pairs += n
		if n > 0 {
			agentsWithUsage[filepath.Base(filepath.Dir(f))] = true
		}
	}
	// Only the releases that send usage_update can show a drop, and only
	// a prompt turn's compaction is reported live: the rest is left out.
	turns = slices.DeleteFunc(turns, func(tu *usageTurn) bool {
		return tu.turn == 0 || !agentsWithUsage[strings.Split(tu.file, "/")[0]]
	})
	type row struct {
		threshold                float64
		drops, tp, fp, fn, comps int
		fps                      []string
	}
	measure := func(turns []*usageTurn, th float64) row {
		r := row{threshold: th}
		for _, tu := range turns {
			d := 0
			for _, drop := range tu.drops {
				if drop.ratio() > th {
					d++
				}
			}
			tp := min(d, tu.compactions)
			r.drops += d
			r.tp += tp
			r.fp += d - tp
			r.fn += tu.compactions - tp
			r.comps += tu.compactions
			if d > tp {
				r.fps = append(r.fps, fmt.Sprintf("%s turn %d", tu.file, tu.turn))
			}
		}
		slices.Sort(r.fps)
		return r
	}
	var report strings.Builder
	fmt.Fprintf(&report, "%d transcripts; %d consecutive usage_update pairs, from the %d recorded releases that send usage_update\n", len(files), pairs, len(agentsWithUsage))
	thresholds := []float64{0.25, 0.50, 0.75, 0.90, 0.99}
	var all []row
	for _, part := range []struct {
		name string
		keep func(*usageTurn) bool
	}{
		{"every scenario", func(*usageTurn) bool { return true }},
		{"without auto and auto-fail (where the mock reported a nearly full window, then a normal one)", func(tu *usageTurn) bool { return !strings.Contains(tu.file, "/auto") }},
	} {
		sel := slices.DeleteFunc(slices.Clone(turns), func(tu *usageTurn) bool { return !part.keep(tu) })
		fmt.Fprintf(&report, "\n%s: %d prompt turns, %d live compactions\n", part.name, len(sel), measure(sel, 0).comps)
		fmt.Fprintf(&report, "| drop of used > | drops | with a compaction (TP) | without one (FP) | compactions without such a drop (FN) |\n|---|---|---|---|---|\n")
		for _, th := range thresholds {
			r := measure(sel, th)
			all = append(all, r)
			fmt.Fprintf(&report, "| %.0f%% | %d | %d | %d | %d |\n", th*100, r.drops, r.tp, r.fp, r.fn)
		}
		fmt.Fprintf(&report, "false positives at 99%%: %s\n", strings.Join(measure(sel, 0.99).fps, "; "))
	}
	t.Log("\n" + report.String())
	// The decision: at every threshold, in every part, a drop without a
	// compaction and a compaction without a drop are both on record, so no
	// profile reads a usage drop as a compaction (translatorTable has no
	// such recogniser; the README's "Agent profiles" says why).
	for _, r := range all {
		assert.True(t, r.fp != 0 && r.fn != 0, "at a drop of more than %.0f%%: %d false positives, %d false negatives: the recordings no longer rule a usage-drop signal out; revisit the decision (docs/proxy.md, \"Agent profiles\")",
			r.threshold*100, r.fp, r.fn)
	}
}

// usageTurns reads one transcript's prompt turns: the drops of
// usage_update.used and the compactions that completed in each (the
// lines between turns count for the turn before). n is the number of
// consecutive usage_update pairs.
func usageTurns(t *testing.T, path string) (out []*usageTurn, n int) {
	agentDir := filepath.Base(filepath.Dir(path))
	scenario, _, _ := cutMode(strings.TrimSuffix(filepath.Base(path), ".jsonl"))
	file := agentDir + "/" + filepath.Base(path)
	type session struct {
		turns    []*usageTurn
		used     int64
		hasUsed  bool
		done     map[string]bool // compaction IDs (and tool call IDs) already completed
		compacts map[string]bool // compaction tool call IDs
	}
	sessions := map[string]*session{}
	get := func(sid string) *session {
		s := sessions[sid]
		if s == nil {
			s = &session{done: map[string]bool{}, compacts: map[string]bool{}}
			sessions[sid] = s
		}
		return s
	}
	current := func(s *session, sid string) *usageTurn {
		if len(s.turns) == 0 {
			s.turns = append(s.turns, &usageTurn{file: file, session: sid})
		}
		return s.turns[len(s.turns)-1]
	}
	for _, l := range readRecording(t, path) {
		var m struct {
			Method string `json:"method"`
			Params struct {
				SessionID string `json:"sessionId"`
				Update    struct {
					Kind       string `json:"sessionUpdate"`
					Used       *int64 `json:"used"`
					ID         string `json:"compactionId"`
					Status     string `json:"status"`
					ToolCallID string `json:"toolCallId"`
					Title      string `json:"title"`
					Content    struct {
						Text string `json:"text"`
					} `json:"content"`
					Meta struct {
						CC *struct {
							Phase string `json:"phase"`
						} `json:"contextCompression"`
						Source string `json:"source"`
					} `json:"_meta"`
				} `json:"update"`
			} `json:"params"`
		}
		if json.Unmarshal(l.raw, &m) != nil {
			continue
		}
		sid := m.Params.SessionID
		if l.fromClient {
			if m.Method == "session/prompt" && sid != "" {
				s := get(sid)
				s.turns = append(s.turns, &usageTurn{file: file, session: sid, turn: len(s.turns) + 1})
			}
			continue
		}
		if m.Method != "session/update" || sid == "" {
			continue
		}
		s, u := get(sid), m.Params.Update
		tu := current(s, sid)
		switch u.Kind {
		case "usage_update":
			if u.Used == nil {
				continue
			}
			if s.hasUsed {
				n++
				if *u.Used < s.used && s.used > 0 {
					tu.drops = append(tu.drops, usageDrop{s.used, *u.Used})
				}
			}
			s.used, s.hasUsed = *u.Used, true
		case "compaction_update":
			if u.Status == "completed" && !s.done[u.ID] {
				s.done[u.ID] = true
				tu.compactions++
			}
		case "tool_call", "tool_call_update":
			if u.Title == "Compact conversation" || bytes.Contains(l.raw, []byte(`"toolName":"compact"`)) {
				s.compacts[u.ToolCallID] = true
			}
			if s.compacts[u.ToolCallID] && u.Status == "completed" && !s.done[u.ToolCallID] {
				s.done[u.ToolCallID] = true
				tu.compactions++
			}
		case "agent_message_chunk":
			text := u.Content.Text
			switch {
			case text == "\n\nCompacting completed.", text == "Context compacted\n",
				strings.HasPrefix(text, "IMPORTANT: This conversation "),
				u.Meta.CC != nil && u.Meta.CC.Phase == "done",
				u.Meta.CC == nil && u.Meta.Source == "slash_command" && strings.HasPrefix(text, "Context compressed ("),
				strings.HasPrefix(text, "Compaction completed."),
				strings.HasPrefix(text, "Compacted conversation history"):
				tu.compactions++
			}
		}
	}
	for prefix, byScenario := range silentCompactions {
		if !strings.HasPrefix(agentDir, prefix) {
			continue
		}
		for _, turn := range byScenario[scenario] {
			for sid, s := range sessions {
				if turn <= len(s.turns) {
					current(s, sid) // the session exists
					s.turns[turn-1].compactions++
				}
			}
		}
	}
	for _, s := range sessions {
		out = append(out, s.turns...)
	}
	return out, n
}
