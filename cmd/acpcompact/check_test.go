package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/internal/acpschema"
	"github.com/acpcompact/acpcompact/test/conformance"
)

const (
	checkInitV1 = `client {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}
agent {"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}
client {"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}
`
	checkCleanTranscript = checkInitV1 + `agent {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"completed"}}}
agent {"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}
`
	// Only the schema sees this: the SDK silently drops a string summary.
	checkSchemaOnlyTranscript = checkInitV1 + `agent {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"completed","summary":"text"}}}
agent {"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}
`
)

type checkResult struct {
	code           int
	stdout, stderr string
}

func checkRun(t *testing.T, stdin string, args ...string) checkResult {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runCheck(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return checkResult{code, out.String(), errOut.String()}
}

func checkWriteFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckCleanTranscriptExitsZero(t *testing.T) {
	p := checkWriteFile(t, checkCleanTranscript)
	r := checkRun(t, "", p)
	if r.code != 0 || r.stdout != p+": ok, no violations\n" || r.stderr != "" {
		t.Errorf("got %+v", r)
	}
}

func TestCheckPrintsFileLineRuleMessageAndExitsOne(t *testing.T) {
	p := filepath.Join("..", "..", "test", "conformance", "testdata", "defect_terminal_after_turn.jsonl")
	r := checkRun(t, "", p)
	want := []string{
		p + `:7: settlement: session "s1": compaction "cmp_1" is still "in_progress" when the agent answered session/prompt id 2`,
		p + `:9: after-turn: session "s1": compaction_update for compaction "cmp_1" (status "completed") arrived with no turn open`,
		p + `: 2 violations (after-turn 1, settlement 1)`,
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 1 || len(lines) != len(want) {
		t.Fatalf("got %+v", r)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], w)
		}
	}
}

func TestCheckReadsStdin(t *testing.T) {
	r := checkRun(t, "client {}\nnonsense\n", "-")
	if r.code != 1 || !strings.HasPrefix(r.stdout, "<stdin>:2: transcript: ") || !strings.HasSuffix(r.stdout, "<stdin>: 1 violation (transcript 1)\n") {
		t.Errorf("got %+v", r)
	}
}

func TestCheckSchemaModes(t *testing.T) {
	if _, err := acpschema.For(1); err != nil {
		t.Fatal(err)
	}
	p := checkWriteFile(t, checkSchemaOnlyTranscript)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{p}, 1}, // auto finds the installed schema
		{[]string{"--schema=on", p}, 1},
		{[]string{p, "--schema", "off"}, 0}, // flags may follow the file
		{[]string{"--schema=off", "--", p}, 0},
	} {
		r := checkRun(t, "", tc.args...)
		if r.code != tc.code {
			t.Errorf("%v: got %+v, want exit %d", tc.args, r, tc.code)
		}
		if tc.code == 1 && !strings.Contains(r.stdout, p+":4: schema: session/update fails the v1 schema") {
			t.Errorf("%v: stdout %q lacks the schema violation", tc.args, r.stdout)
		}
	}
}

func TestCheckWithoutTheSchema(t *testing.T) {
	p := checkWriteFile(t, checkCleanTranscript)
	missing := func() (conformance.Option, error) { return nil, acpschema.ErrSchemaMissing }
	for _, tc := range []struct {
		mode   string
		code   int
		stderr string
	}{
		{"on", 2, "acpcompact check: acpschema: official ACP schema not installed"},
		{"auto", 0, "schema checks skipped"},
		{"off", 0, ""},
	} {
		var out, errOut bytes.Buffer
		code := runCheckWith(context.Background(), []string{"--schema=" + tc.mode, p}, nil, &out, &errOut, missing)
		if code != tc.code || !strings.Contains(errOut.String(), tc.stderr) || (tc.stderr == "" && errOut.Len() > 0) {
			t.Errorf("--schema=%s: got %d, stdout %q, stderr %q", tc.mode, code, out.String(), errOut.String())
		}
	}
}

func TestCheckUsageAndIOErrorsExitTwo(t *testing.T) {
	p := checkWriteFile(t, checkCleanTranscript)
	for name, args := range map[string][]string{
		"no file":        nil,
		"two files":      {p, p},
		"missing file":   {filepath.Join(t.TempDir(), "missing.jsonl")},
		"unknown flag":   {"--frobnicate", p},
		"bad schema arg": {"--schema=maybe", p},
		"directory":      {t.TempDir()},
	} {
		if r := checkRun(t, "", args...); r.code != 2 || r.stderr == "" {
			t.Errorf("%s: got %+v", name, r)
		}
	}
	if r := checkRun(t, "", "-h"); r.code != 0 || !strings.Contains(r.stderr, "usage: acpcompact check") {
		t.Errorf("-h: got %+v", r)
	}
}

func TestCheckStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	code := runCheck(ctx, []string{"-"}, strings.NewReader(checkCleanTranscript), &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "context canceled") {
		t.Errorf("got %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}
