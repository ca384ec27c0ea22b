package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheCheckedInMatrixIsCurrent regenerates the matrix from the
// recordings and fails when docs/matrix.md or docs/matrix.html differs:
// run `go run ./test/peers/cmd/matrix` from the repository root.
func TestTheCheckedInMatrixIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("replays every recording through the proxy")
	}
	root := filepath.Join("..", "..", "..", "..")
	m, err := Build(filepath.Join(root, "test/peers/testdata"))
	require.NoError(t, err)
	require.NotEmpty(t, m.Releases)
	for name, want := range map[string]string{"docs/matrix.md": m.Markdown(), "docs/matrix.html": m.HTML()} {
		got, err := os.ReadFile(filepath.Join(root, name))
		require.NoError(t, err)
		assert.Equal(t, want, string(got), "%s is stale: run `go run ./test/peers/cmd/matrix` from the repository root", name)
	}
}

// Every release directory is a row, so recordings added by hand or by
// make record-peers show up without editing the generator.
func TestEveryRecordedReleaseIsARow(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("..", "..", "testdata", "kimi-code-2.1.0", "hello-cap.jsonl")
	body, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "new-agent-9.9.9"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "new-agent-9.9.9", "hello-cap.jsonl"), body, 0o644))
	m, err := Build(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"new-agent-9.9.9"}, m.Releases)
	assert.Contains(t, m.Markdown(), "| new-agent-9.9.9 |")
}
