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
		{agentClaude, "0.75.0", "claude-acp-toolcall", ""},
		{agentClaude, "0.100.3", "claude-acp-toolcall", ""},
		{agentClaude, "0.101.0-beta.2", "claude-acp-toolcall", ""}, // a pre-release sorts before its release
		{agentClaude, "0.101.0", "claude-acp", ""},
		{agentClaude, "v0.101.1", "claude-acp", "newer than the last one observed (0.101.0)"},
		{agentClaude, "1.2", "claude-acp", "newer than the last one observed"},
		{agentClaude, "", "claude-acp", "not a semantic version"},
		{agentCodexTS, "2.6.0", "codex-acp", ""},
		{agentCodexTS, "2.5.1", "codex-acp", ""},
		{agentCodexRS, "0.16.0", "codex-acp-rs", ""},
		{agentOpencode, "1.18.33", "opencode-1.18", ""},
		{agentOpencode, "1.18.34", "opencode", ""},
		{"opencode", "1.0.0", "opencode-1.18", ""}, // the name, case aside
		{agentQwen, "0.24.4", "qwen-code", ""},
		{agentQwen, "0.30.0", "qwen-code", "newer than the last one observed (0.24.4)"},
		{agentGemini, "0.61.0", "gemini-cli", ""},
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

func TestProfileRangesCoverEveryVersion(t *testing.T) {
	agents := map[string][]*Profile{}
	for i := range profiles {
		agents[profiles[i].Agent] = append(agents[profiles[i].Agent], &profiles[i])
	}
	for agent, ps := range agents {
		if !ps[0].min.zero() || !ps[len(ps)-1].below.zero() {
			t.Errorf("%s: the profiles do not cover every version", agent)
		}
		for i := 1; i < len(ps); i++ {
			if ps[i].min != ps[i-1].below {
				t.Errorf("%s: a gap or an overlap between %s and %s", agent, ps[i-1].Name, ps[i].Name)
			}
		}
	}
}

func TestSemverCompare(t *testing.T) {
	order := []string{"0.1.0", "0.9.0", "0.10.0-alpha", "0.10.0-alpha.1", "0.10.0-alpha.beta", "0.10.0-beta.2", "0.10.0-beta.11", "0.10.0", "0.10.1", "1.0.0"}
	for i := 1; i < len(order); i++ {
		a, _ := parseSemver(order[i-1])
		b, ok := parseSemver(order[i])
		if !ok || a.compare(b) >= 0 || b.compare(a) <= 0 {
			t.Errorf("%s should sort before %s", order[i-1], order[i])
		}
	}
	for _, bad := range []string{"", "x", "1.2.3.4", "1.-2"} {
		if _, ok := parseSemver(bad); ok {
			t.Errorf("parseSemver(%q) accepted it", bad)
		}
	}
}
