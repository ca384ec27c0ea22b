package proxy

import (
	"strings"
	"testing"
)

func TestMatchProfileByNameAndVersion(t *testing.T) {
	for _, c := range []struct {
		name, version, want, note string
	}{
		{agentClaude, "0.12.0", "claude-acp-text", ""},
		{agentClaude, "0.74.9", "claude-acp-text", ""},
		{agentClaude, "0.75.0-rc.1", "claude-acp-text", ""}, // a pre-release sorts before its release
		{agentClaude, "0.75.0", "claude-acp-toolcall", ""},
		{agentClaude, "0.77.3", "claude-acp-toolcall", ""},
		{agentClaude, "0.78.0", "claude-acp-replay", ""},
		{agentClaude, "0.96.9", "claude-acp-replay", ""},
		{agentClaude, "0.97.0-beta.2", "claude-acp-replay", ""},
		{agentClaude, "0.97.0", "claude-acp", ""},
		{agentClaude, "0.100.3", "claude-acp", ""},
		{agentClaude, "0.101.0", "claude-acp", ""},
		{agentClaude, "v0.101.1", "claude-acp", "newer than the last one observed (0.101.0)"},
		{agentClaude, "0.101.0+build.7", "claude-acp", ""}, // build metadata is not a release
		{agentClaude, "1.2", "claude-acp", "newer than the last one observed"},
		{agentClaude, "", "claude-acp", "not a semantic version"},
		{agentClaude, "0.101.0.1", "claude-acp", "not a semantic version"},
		{agentClaudeOld, "0.16.2", "claude-code-acp", ""},
		{agentClaudeOld, "0.10.0", "claude-code-acp", ""},
		{agentCodexTS, "2.6.0", "codex-acp", ""},
		{agentCodexTS, "2.5.1", "codex-acp", ""},
		{agentCodexRS, "0.16.0", "codex-acp-rs", ""},
		{agentOpencode, "1.18.33", "opencode-1.18", ""},
		{agentOpencode, "1.18.34", "opencode", ""},
		{"opencode", "1.0.0", "opencode-1.18", ""}, // the name, case aside
		{agentQwen, "0.23.4", "qwen-code-0.24.0", ""},
		{agentQwen, "0.24.0", "qwen-code-0.24.0", ""},
		{agentQwen, "0.24.1", "qwen-code-0.24.0", ""}, // never released; before 0.24.2
		{agentQwen, "0.24.2", "qwen-code", ""},
		{agentQwen, "0.24.4", "qwen-code", ""},
		{agentQwen, "0.30.0", "qwen-code", "newer than the last one observed (0.24.4)"},
		{agentGemini, "0.61.0", "gemini-cli", ""},
		{agentKimi, "2.1.0", "kimi-code", ""},
		{agentKimi, "2.2.0", "kimi-code", "newer than the last one observed (2.1.0)"},
		{agentCopilot, "1.0.102", "copilot-cli", ""},
		{"goose", "1.0.0", "", ""},
		{"", "", "", ""},
	} {
		p, note := matchProfile(c.name, c.version)
		got := ""
		if p != nil {
			got = p.Name
		}
		if got != c.want || !strings.Contains(note, c.note) || (c.note == "" && note != "") {
			t.Errorf("matchProfile(%q, %q) = %q, %q; want %q, %q", c.name, c.version, got, note, c.want, c.note)
		}
	}
}

// Each profile states its range once; one agent's ranges are contiguous,
// cover every version and do not overlap, and each release a profile was
// recorded from is inside its range.
func TestProfileRangesCoverEveryVersion(t *testing.T) {
	agents := map[string][]int{}
	for i := range profiles {
		agents[profiles[i].Agent] = append(agents[profiles[i].Agent], i)
	}
	for agent, ps := range agents {
		first, last := profileRanges[ps[0]], profileRanges[ps[len(ps)-1]]
		if first.min != "" || last.below != "" {
			t.Errorf("%s: the profiles do not cover every version", agent)
		}
		for j := 1; j < len(ps); j++ {
			if profileRanges[ps[j]].min != profileRanges[ps[j-1]].below || profileRanges[ps[j]].min == "" {
				t.Errorf("%s: a gap or an overlap between %s and %s", agent, profiles[ps[j-1]].Name, profiles[ps[j]].Name)
			}
		}
	}
	for i, p := range profiles {
		for _, seen := range p.Seen {
			v, ok := canonicalVersion(seen)
			if !ok || !profileRanges[i].covers(v) {
				t.Errorf("%s: recorded release %s is outside its range %q", p.Name, seen, p.Range)
			}
		}
	}
}

func TestParseRange(t *testing.T) {
	for _, c := range []struct {
		in        string
		min, want string
	}{
		{"all", "", ""},
		{">= 0.78", "v0.78.0", ""},
		{"< 0.24.2", "", "v0.24.2"},
		{">= 0.75, < 0.78", "v0.75.0", "v0.78.0"},
	} {
		r, err := parseRange(c.in)
		if err != nil || r.min != c.min || r.below != c.want {
			t.Errorf("parseRange(%q) = %+v, %v; want min %q below %q", c.in, r, err, c.min, c.want)
		}
	}
	for _, bad := range []string{"", "0.75", "> 0.75", "<= 0.75", ">= 0.78, < 0.75", "< 0.75, >= 0.70", ">= x", ">= 0.75, < 0.78, < 0.79"} {
		if _, err := parseRange(bad); err == nil {
			t.Errorf("parseRange(%q) accepted it", bad)
		}
	}
}

func TestCanonicalVersion(t *testing.T) {
	order := []string{"0.1.0", "0.9.0", "0.10.0-alpha", "0.10.0-alpha.1", "0.10.0-alpha.beta", "0.10.0-beta.2", "0.10.0-beta.11", "0.10.0", "0.10.1", "1.0.0"}
	for i := 1; i < len(order); i++ {
		a, _ := canonicalVersion(order[i-1])
		b, ok := canonicalVersion(order[i])
		if !ok || !(versionRange{below: b}).covers(a) || (versionRange{below: a}).covers(b) {
			t.Errorf("%s should sort before %s", order[i-1], order[i])
		}
	}
	for in, want := range map[string]string{"0.24": "v0.24.0", "v1": "v1.0.0", " 2.1.0 ": "v2.1.0", "1.2.3+b": "v1.2.3"} {
		if got, ok := canonicalVersion(in); !ok || got != want {
			t.Errorf("canonicalVersion(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "x", "1.2.3.4", "1.-2", "01.2.3"} {
		if _, ok := canonicalVersion(bad); ok {
			t.Errorf("canonicalVersion(%q) accepted it", bad)
		}
	}
}
