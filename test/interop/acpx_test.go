package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/internal/acpschema"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/test/interop"
)

// TestAcpxThroughTheProxy runs a real ACP client, acpx (pinned in
// package.json), against `acpcompact proxy -- scenario-agent`, configured
// the way docs/proxy.md tells acpx users to (an agents entry of
// ~/.acpx/config.json, here in a temporary HOME), and sends /compact as a
// one-shot prompt. acpx advertises no compaction capability and prints
// only message text, tool calls and plans (peers-observed.md, "Real
// clients"), so the compaction must reach it as the "Compact conversation"
// tool call, started and completed, followed by the agent's reply (what
// docs/proxy.md shows it printing); the
// proxy's own conformance check of what acpx received (--check=client,
// against the official schema) must find nothing.
func TestAcpxThroughTheProxy(t *testing.T) {
	t.Parallel()
	needNode(t)
	dir, err := interop.Dir()
	require.NoError(t, err)
	cli := filepath.Join(dir, "node_modules", "acpx", "dist", "cli.js")
	if _, err := os.Stat(cli); err != nil {
		schematest.Node(t, fmt.Errorf("acpx is not installed in test/interop/node_modules (%v); run `make test-deps`", err))
	}
	proxyCmd, agent := acpcompactCmd.build(t), scenarioAgent.build(t)

	home := t.TempDir()
	config := map[string]any{"agents": map[string]any{
		"scenario": map[string]any{"argv": []string{proxyCmd, "proxy", "--check=client", "--", agent, "--state-dir="}},
	}}
	b, err := json.Marshal(config)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".acpx"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".acpx", "config.json"), b, 0o600))

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// --verbose puts the agent's stderr (the proxy's log) on acpx's; its
	// stdout is the same with or without it.
	cmd := exec.CommandContext(ctx, "node", cli, "--approve-all", "--verbose", "scenario", "exec", "/compact")
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home,
		acpschema.EnvDir+"="+filepath.Join(dir, "node_modules", "@agentclientprotocol", "sdk", "schema"))
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "acpx failed\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	t.Logf("acpx printed:\n%s", stdout.String())

	// What the acpx user sees, in order, and as docs/proxy.md shows it
	// ("acpx"): the compaction's tool call started, then completed, then
	// the agent's reply.
	assertInOrder(t, stdout.String(),
		"[tool] Compact conversation (running)",
		"[tool] Compact conversation (completed)",
		"Context compacted: a summary now stands in for the earlier conversation.",
		"[done] end_turn",
	)
	assert.NotContains(t, stdout.String(), "(failed)")
	root, err := moduleRoot()
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "proxy.md"))
	require.NoError(t, err)
	const first = "```\n[tool] Compact conversation (running)\n"
	i := strings.Index(string(doc), first)
	require.GreaterOrEqual(t, i, 0, "docs/proxy.md shows no acpx output starting %q", first)
	shown, _, ok := strings.Cut(string(doc)[i+len("```\n"):], "\n```")
	require.True(t, ok, "docs/proxy.md: the acpx output block does not end")
	assert.True(t, strings.HasSuffix(strings.TrimSpace(stdout.String()), strings.TrimSpace(shown)),
		"docs/proxy.md shows acpx printing\n%s\nbut it printed\n%s", shown, stdout.String())
	// What the proxy saw and checked.
	assert.Contains(t, stderr.String(), `msg="initialize negotiated" src=acpcompact-proxy version=1 capability=false`,
		"acpx advertises no compaction capability")
	assert.Contains(t, stderr.String(), "acpcompact proxy: --check=client: ok, no violations", "stderr:\n%s", stderr.String())
	assert.NotContains(t, stderr.String(), "schema validation off", "the check ran without the official schema")
}

// assertInOrder asserts that each of wants occurs in s, after the one
// before it.
func assertInOrder(t *testing.T, s string, wants ...string) {
	t.Helper()
	rest := s
	for _, w := range wants {
		i := strings.Index(rest, w)
		if !assert.GreaterOrEqual(t, i, 0, "%q is missing, or out of order, in:\n%s", w, s) {
			return
		}
		rest = rest[i+len(w):]
	}
}
