package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets the demo re-execute the test binary as its new agent
// process ("acpcompact demo-agent").
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == demoAgentCommand {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

type demoResult struct {
	code           int
	stdout, stderr string
}

func demoRun(t *testing.T, args ...string) demoResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, append([]string{"demo"}, args...), strings.NewReader(""), &stdout, &stderr)
	return demoResult{code, stdout.String(), stderr.String()}
}

// demoSection returns the part of the demo's output about one client.
func demoSection(t *testing.T, out, client string) string {
	t.Helper()
	start := strings.Index(out, "\nClient "+client+"  (")
	require.GreaterOrEqual(t, start, 0, "no section for client %s in:\n%s", client, out)
	rest := out[start+1:]
	if end := strings.Index(rest[1:], "\nClient "); end >= 0 {
		return rest[:end+1]
	}
	return rest
}

func TestDemoPrintsEachClientsTimeline(t *testing.T) {
	r := demoRun(t)
	require.Equal(t, 0, r.code, "exit code\nstderr:\n%s", r.stderr)
	a, b := demoSection(t, r.stdout, "A"), demoSection(t, r.stdout, "B")
	live, replay, ok := strings.Cut(a, "After a restart: that agent was stopped; a new agent process (pid ")
	require.True(t, ok, "client A has no replay section:\n%s", a)
	for _, want := range []string{
		"    you         hello, scenario agent\n    agent       hello, scenario agent\n                turn ends: end_turn\n",
		"    compaction  cmp_1  completed\n                updates: in_progress, 4 chunks, completed\n                summary: ## Retained context\n",
		`- The conversation began with "hello, scenario agent".`,
		"record:  manual, ",
		"by scenario-summarizer",
		"of 200,000 tokens in use (usage_update)",
		"    compaction  cmp_2  failed: summary request failed\n                updates: in_progress, 1 chunk, failed\n",
		"    compaction  cmp_3  cancelled\n                updates: in_progress, ",
		"(cancel: session/cancel, after ",
		"turn ends: cancelled",
	} {
		assert.Contains(t, live, want, "client A's live timeline")
	}
	for _, want := range []string{
		"    compaction  cmp_1  completed\n                updates: completed (replayed: one terminal update)\n                summary: ## Retained context\n",
		"    compaction  cmp_2  failed: summary request failed\n                updates: failed (replayed: one terminal update)\n",
		"    compaction  cmp_3  cancelled\n                updates: cancelled (replayed: one terminal update)\n",
	} {
		assert.Contains(t, replay, want, "client A's replayed timeline")
	}
	// One row per compaction, updated in place.
	assert.Equal(t, 1, strings.Count(live, "compaction  cmp_1"), "client A's live timeline: rows for cmp_1")
	for _, want := range []string{
		"    tool call   compact-cmp_1  \"Compact conversation\"  completed\n                updates: in_progress, completed\n",
		"    tool call   compact-cmp_2  \"Compact conversation\"  failed\n                updates: in_progress, failed\n                content: Compaction failed: summary request failed\n",
		"    tool call   compact-cmp_3  \"Compact conversation\"  failed\n                updates: in_progress, failed\n                content: Compaction cancelled\n",
		"updates: completed (replayed: one tool_call)",
		"turn ends: cancelled",
	} {
		assert.Contains(t, b, want, "client B's timeline")
	}
	assert.NotContains(t, b, "compaction  cmp_", "client B, without the capability, shows a standard compaction row")
	assert.Equal(t, 4, strings.Count(r.stdout, "no violations"), "connections that passed the conformance checker, of 4:\n%s", r.stdout)
	// The reload is a new process: not this one, and not the other
	// client's.
	var pids []int
	for _, sec := range []string{a, b} {
		var live, loaded int
		_, err := fmt.Sscanf(sec[strings.Index(sec, "(the agent runs in this process, pid "):], "(the agent runs in this process, pid %d)", &live)
		require.NoError(t, err, "no live pid:\n%s", sec)
		_, err = fmt.Sscanf(sec[strings.Index(sec, "a new agent process (pid "):], "a new agent process (pid %d)", &loaded)
		require.NoError(t, err, "no new process:\n%s", sec)
		assert.Equal(t, os.Getpid(), live, "the live agent's pid: want this test's")
		assert.NotEqual(t, live, loaded, "the loading agent's pid: want a new process")
		pids = append(pids, loaded)
	}
	assert.NotEqual(t, pids[0], pids[1], "both clients loaded from the same process")
}

// TestDemoWireOutputPassesTheChecker: `acpcompact demo --wire > t.jsonl &&
// acpcompact check t.jsonl` succeeds, with the official schema, for every
// fallback form.
func TestDemoWireOutputPassesTheChecker(t *testing.T) {
	v1 := schematest.For(t, 1)
	schema := "--schema=on"
	if v1 == nil {
		schema = "--schema=off"
	}
	for _, fb := range fallback.Names() {
		t.Run(fb, func(t *testing.T) {
			r := demoRun(t, "--wire", "--fallback", fb)
			require.Equal(t, 0, r.code, "exit code\nstderr:\n%s", r.stderr)
			sc := bufio.NewScanner(strings.NewReader(r.stdout))
			sc.Buffer(nil, 1<<20)
			lines, client := 0, ""
			for sc.Scan() {
				line := sc.Text()
				lines++
				switch {
				case strings.HasPrefix(line, "# client "):
					client = line[len("# client "):][:1]
				case strings.HasPrefix(line, "client {"), strings.HasPrefix(line, "agent {"):
					if client == "B" {
						assert.NotContains(t, line, `"compaction_update"`, "line %d: client B got a standard update", lines)
					}
				default:
					assert.Fail(t, "not a transcript line", "line %d: %q", lines, line)
				}
			}
			assert.GreaterOrEqual(t, lines, 60, "transcript lines:\n%s", r.stdout)

			vs, err := conformance.CheckTranscript(strings.NewReader(r.stdout), conformance.WithSchema(v1, nil), conformance.WithStrictReplay())
			require.NoError(t, err, "conformance.CheckTranscript")
			assert.Empty(t, vs, "conformance violations")

			// And through the command itself.
			file := filepath.Join(t.TempDir(), "t.jsonl")
			require.NoError(t, os.WriteFile(file, []byte(r.stdout), 0o600), "os.WriteFile")
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"check", schema, file}, strings.NewReader(""), &stdout, &stderr)
			assert.Equal(t, 0, code, "acpcompact check: exit code\n%s%s", stdout.String(), stderr.String())
		})
	}
}

func TestDemoFlags(t *testing.T) {
	for _, args := range [][]string{{"--fallback", "smoke"}, {"extra"}, {"--no-such-flag"}} {
		r := demoRun(t, args...)
		assert.Equal(t, 2, r.code, "%v: exit code", args)
		assert.Empty(t, r.stdout, "%v: stdout", args)
	}
	r := demoRun(t, "-h")
	assert.Equal(t, 0, r.code, "-h: exit code")
	assert.Contains(t, r.stderr, "acpcompact demo --wire > t.jsonl && acpcompact check t.jsonl", "-h: usage")
	r = demoRun(t, "--verbose", "--fallback", "marker")
	assert.Equal(t, 0, r.code, "--verbose --fallback marker: exit code\nstderr:\n%s", r.stderr)
	assert.Contains(t, r.stderr, "compaction settled", "--verbose --fallback marker: stderr")
	assert.Contains(t, r.stdout, "marker      cmp_1  completed", "--verbose --fallback marker: stdout")
}
