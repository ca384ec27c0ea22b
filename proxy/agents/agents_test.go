package agents

import (
	"encoding/json"
	"fmt"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every translator is registered once and recognises something; one with
// text forms declares their prefixes, one that reads updates their kinds.
func TestTranslatorsAreWhole(t *testing.T) {
	seen := map[Translator]bool{}
	for _, d := range registry.defs {
		assert.False(t, seen[d.Name], "%s is registered twice", d.Name)
		seen[d.Name] = true
		assert.True(t, d.Update != nil || d.Text != nil, "%s recognises nothing", d.Name)
		assert.Equal(t, d.Update != nil, len(d.Kinds) > 0, "%s: an update recogniser needs the kinds it reads, and kinds a recogniser", d.Name)
		assert.Equal(t, d.Text != nil, len(d.Prefixes) > 0, "%s: a text recogniser needs its prefixes, and prefixes a recogniser", d.Name)
		assert.Same(t, d, Lookup(d.Name), "Lookup(%s)", d.Name)
	}
	assert.Len(t, Translators(), 12, "the translators the proxy has documented")
	for _, p := range registry.profiles {
		for _, tr := range p.Translators {
			assert.NotNil(t, Lookup(tr), "profile %s names translator %s, which is not registered", p.Name, tr)
		}
	}
}

// The cheap check that turns message chunks away undecoded is derived from
// the registry: every declared prefix passes it, however its first
// character is spelt in JSON, so a translator's text form is never turned
// away by a check that does not know it.
func TestTextPrecheckPassesEveryDeclaredPrefix(t *testing.T) {
	for _, d := range registry.defs {
		s := NewSet(nil, func(t Translator) bool { return t == d.Name })
		for _, p := range d.Prefixes {
			plain, _ := json.Marshal(p)
			r, size := utf8.DecodeRuneInString(p)
			escaped := fmt.Sprintf(`"\u%04x%s"`, r, p[size:])
			for _, spelt := range []string{string(plain), escaped} {
				assert.True(t, s.first[spelt[1]], "%s: a text beginning %q, spelt %s, is turned away", d.Name, p, spelt)
			}
		}
		if d.Text == nil {
			assert.Equal(t, [256]bool{}, s.first, "%s has no text form, but the check lets texts through for it", d.Name)
		}
	}
}

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
		{"gemini-cli", "0.61.0", "gemini-cli", ""},
		{"Kimi Code CLI", "2.1.0", "kimi-code", ""},
		{"Kimi Code CLI", "2.2.0", "kimi-code", "newer than the last one observed (2.1.0)"},
		{"Copilot", "1.0.102", "copilot-cli", ""},
		{"goose", "1.0.0", "", ""},
		{"", "", "", ""},
	} {
		p, note := Match(c.name, c.version)
		got := ""
		if p != nil {
			got = p.Name
		}
		assert.Equal(t, c.want, got, "Match(%q, %q)", c.name, c.version)
		if c.note == "" {
			assert.Empty(t, note, "Match(%q, %q)'s note", c.name, c.version)
		} else {
			assert.Contains(t, note, c.note, "Match(%q, %q)'s note", c.name, c.version)
		}
	}
}

// Each profile states its range once; one agent's ranges are contiguous,
// cover every version and do not overlap, and each release a profile was
// recorded from is inside its range.
func TestProfileRangesCoverEveryVersion(t *testing.T) {
	byAgent := map[string][]*Profile{}
	var order []string
	for i := range registry.profiles {
		p := &registry.profiles[i]
		if byAgent[p.Agent] == nil {
			order = append(order, p.Agent)
		}
		byAgent[p.Agent] = append(byAgent[p.Agent], p)
	}
	for _, agent := range order {
		ps := byAgent[agent]
		assert.Empty(t, ps[0].r.min, "%s: the profiles do not cover every version (the first has a lower bound)", agent)
		assert.Empty(t, ps[len(ps)-1].r.below, "%s: the profiles do not cover every version (the last has an upper bound)", agent)
		for j := 1; j < len(ps); j++ {
			assert.NotEmpty(t, ps[j].r.min, "%s: %s has no lower bound", agent, ps[j].Name)
			assert.Equal(t, ps[j-1].r.below, ps[j].r.min, "%s: a gap or an overlap between %s and %s", agent, ps[j-1].Name, ps[j].Name)
		}
	}
	for _, p := range registry.profiles {
		for _, seen := range p.Seen {
			v, ok := canonicalVersion(seen)
			assert.True(t, ok && p.r.covers(v), "%s: recorded release %s is outside its range %q", p.Name, seen, p.Range)
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
		require.NoError(t, err, "parseRange(%q)", c.in)
		assert.Equal(t, versionRange{min: c.min, below: c.want}, r, "parseRange(%q)", c.in)
	}
	for _, bad := range []string{"", "0.75", "> 0.75", "<= 0.75", ">= 0.78, < 0.75", "< 0.75, >= 0.70", ">= x", ">= 0.75, < 0.78, < 0.79"} {
		_, err := parseRange(bad)
		assert.Error(t, err, "parseRange(%q) accepted it", bad)
	}
}

func TestCanonicalVersion(t *testing.T) {
	order := []string{"0.1.0", "0.9.0", "0.10.0-alpha", "0.10.0-alpha.1", "0.10.0-alpha.beta", "0.10.0-beta.2", "0.10.0-beta.11", "0.10.0", "0.10.1", "1.0.0"}
	for i := 1; i < len(order); i++ {
		a, _ := canonicalVersion(order[i-1])
		b, ok := canonicalVersion(order[i])
		assert.True(t, ok && (versionRange{below: b}).covers(a) && !(versionRange{below: a}).covers(b), "%s should sort before %s", order[i-1], order[i])
	}
	for in, want := range map[string]string{"0.24": "v0.24.0", "v1": "v1.0.0", " 2.1.0 ": "v2.1.0", "1.2.3+b": "v1.2.3"} {
		got, ok := canonicalVersion(in)
		assert.True(t, ok, "canonicalVersion(%q)", in)
		assert.Equal(t, want, got, "canonicalVersion(%q)", in)
	}
	for _, bad := range []string{"", "x", "1.2.3.4", "1.-2", "01.2.3"} {
		_, ok := canonicalVersion(bad)
		assert.False(t, ok, "canonicalVersion(%q) accepted it", bad)
	}
}
