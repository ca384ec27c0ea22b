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
	if start < 0 {
		t.Fatalf("no section for client %s in:\n%s", client, out)
	}
	rest := out[start+1:]
	if end := strings.Index(rest[1:], "\nClient "); end >= 0 {
		return rest[:end+1]
	}
	return rest
}

func TestDemoPrintsEachClientsTimeline(t *testing.T) {
	r := demoRun(t)
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	a, b := demoSection(t, r.stdout, "A"), demoSection(t, r.stdout, "B")
	live, replay, ok := strings.Cut(a, "After a restart: that agent was stopped; a new agent process (pid ")
	if !ok {
		t.Fatalf("client A has no replay section:\n%s", a)
	}
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
		if !strings.Contains(live, want) {
			t.Errorf("client A's live timeline lacks %q:\n%s", want, live)
		}
	}
	for _, want := range []string{
		"    compaction  cmp_1  completed\n                updates: completed (replayed: one terminal update)\n                summary: ## Retained context\n",
		"    compaction  cmp_2  failed: summary request failed\n                updates: failed (replayed: one terminal update)\n",
		"    compaction  cmp_3  cancelled\n                updates: cancelled (replayed: one terminal update)\n",
	} {
		if !strings.Contains(replay, want) {
			t.Errorf("client A's replayed timeline lacks %q:\n%s", want, replay)
		}
	}
	// One row per compaction, updated in place.
	if n := strings.Count(live, "compaction  cmp_1"); n != 1 {
		t.Errorf("client A's live timeline has %d rows for cmp_1", n)
	}
	for _, want := range []string{
		"    tool call   compact-cmp_1  \"Compact conversation\"  completed\n                updates: in_progress, completed\n",
		"    tool call   compact-cmp_2  \"Compact conversation\"  failed\n                updates: in_progress, failed\n                content: Compaction failed: summary request failed\n",
		"    tool call   compact-cmp_3  \"Compact conversation\"  failed\n                updates: in_progress, failed\n                content: Compaction cancelled\n",
		"updates: completed (replayed: one tool_call)",
		"turn ends: cancelled",
	} {
		if !strings.Contains(b, want) {
			t.Errorf("client B's timeline lacks %q:\n%s", want, b)
		}
	}
	if strings.Contains(b, "compaction  cmp_") {
		t.Errorf("client B, without the capability, shows a standard compaction row:\n%s", b)
	}
	if n := strings.Count(r.stdout, "no violations"); n != 4 {
		t.Errorf("%d of 4 connections passed the conformance checker:\n%s", n, r.stdout)
	}
	// The reload is a new process: not this one, and not the other
	// client's.
	var pids []int
	for _, sec := range []string{a, b} {
		var live, loaded int
		if _, err := fmt.Sscanf(sec[strings.Index(sec, "(the agent runs in this process, pid "):], "(the agent runs in this process, pid %d)", &live); err != nil {
			t.Fatalf("no live pid: %v\n%s", err, sec)
		}
		if _, err := fmt.Sscanf(sec[strings.Index(sec, "a new agent process (pid "):], "a new agent process (pid %d)", &loaded); err != nil {
			t.Fatalf("no new process: %v\n%s", err, sec)
		}
		if live != os.Getpid() || loaded == live {
			t.Errorf("live in pid %d (this test is %d), loaded in pid %d", live, os.Getpid(), loaded)
		}
		pids = append(pids, loaded)
	}
	if pids[0] == pids[1] {
		t.Errorf("both clients loaded from process %d", pids[0])
	}
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
			if r.code != 0 {
				t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
			}
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
					if client == "B" && strings.Contains(line, `"compaction_update"`) {
						t.Errorf("line %d: client B got a standard update: %s", lines, line)
					}
				default:
					t.Errorf("line %d is not a transcript line: %q", lines, line)
				}
			}
			if lines < 60 {
				t.Errorf("only %d lines:\n%s", lines, r.stdout)
			}

			vs, err := conformance.CheckTranscript(strings.NewReader(r.stdout), conformance.WithSchema(v1, nil), conformance.WithStrictReplay())
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vs {
				t.Errorf("conformance: %v", v)
			}

			// And through the command itself.
			file := filepath.Join(t.TempDir(), "t.jsonl")
			if err := os.WriteFile(file, []byte(r.stdout), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), []string{"check", schema, file}, strings.NewReader(""), &stdout, &stderr); code != 0 {
				t.Errorf("acpcompact check: exit %d\n%s%s", code, stdout.String(), stderr.String())
			}
		})
	}
}

func TestDemoFlags(t *testing.T) {
	for _, args := range [][]string{{"--fallback", "smoke"}, {"extra"}, {"--no-such-flag"}} {
		if r := demoRun(t, args...); r.code != 2 || r.stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, want 2 and nothing", args, r.code, r.stdout)
		}
	}
	r := demoRun(t, "-h")
	if r.code != 0 || !strings.Contains(r.stderr, "acpcompact demo --wire > t.jsonl && acpcompact check t.jsonl") {
		t.Errorf("-h: exit %d, usage:\n%s", r.code, r.stderr)
	}
	r = demoRun(t, "--verbose", "--fallback", "marker")
	if r.code != 0 || !strings.Contains(r.stderr, "compaction settled") || !strings.Contains(r.stdout, "marker      cmp_1  completed") {
		t.Errorf("--verbose --fallback marker: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}
