package proxy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The profile table of docs/proxy.md (section "Agent profiles") is generated from
// proxy.Profiles(): TestReadmeProfileTable fails when the two disagree,
// and rewrites the table when ACPCOMPACT_UPDATE_README=1.
const (
	profilesBegin = "<!-- profiles:begin: generated from proxy.Profiles(); `ACPCOMPACT_UPDATE_README=1 go test ./proxy -run TestReadmeProfileTable` rewrites it -->\n"
	profilesEnd   = "<!-- profiles:end -->\n"
)

// profileTable renders proxy.Profiles() as the README's table: one row per
// profile, its range stated once, and a last row for every other agent.
func profileTable(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("| profile | agent (`agentInfo.name`) | versions | recorded | what it sends | what the client gets through the proxy |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	cell := func(s string) string {
		assert.False(t, strings.ContainsAny(s, "|\n"), "a profile's text holds a table separator or a newline: %q", s)
		return s
	}
	for _, p := range proxy.Profiles() {
		seen := strings.Join(p.Seen, ", ")
		if seen == "" {
			seen = "none (release notes)"
		}
		b.WriteString("| `" + p.Name + "` | `" + cell(p.Agent) + "` | `" + cell(p.Range) + "` | " + seen + " | " + cell(p.Sends) + " | " + cell(p.Gets) + " |\n")
	}
	b.WriteString("| (none) | any other agent, or none | | | | the universal rules only, and no text matching unless translators are named with `--translate` |\n")
	return b.String()
}

func TestReadmeProfileTable(t *testing.T) {
	path := filepath.Join("..", "docs", "proxy.md")
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("no docs/proxy.md in the module: %v", err)
	}
	s := string(readme)
	i := strings.Index(s, profilesBegin)
	j := strings.Index(s, profilesEnd)
	require.GreaterOrEqual(t, i, 0, "docs/proxy.md has no generated profile table (no %q)", profilesBegin)
	require.GreaterOrEqual(t, j, i, "docs/proxy.md has no generated profile table (no %q after %q)", profilesEnd, profilesBegin)
	sec := strings.Index(s, "## Agent profiles\n")
	assert.True(t, sec >= 0 && sec <= i, "the generated profile table is not in the section \"Agent profiles\"")
	want := profileTable(t)
	got := s[i+len(profilesBegin) : j]
	if got == want {
		return
	}
	if os.Getenv("ACPCOMPACT_UPDATE_README") == "1" {
		require.NoError(t, os.WriteFile(path, []byte(s[:i+len(profilesBegin)]+want+s[j:]), 0o644), "os.WriteFile")
		t.Logf("rewrote the profile table of %s", path)
		return
	}
	assert.Equal(t, want, got, "the profile table of docs/proxy.md disagrees with proxy.Profiles(); run ACPCOMPACT_UPDATE_README=1 go test ./proxy -run TestReadmeProfileTable")
}
