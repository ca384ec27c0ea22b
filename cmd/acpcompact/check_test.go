package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/acpschema"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// checkRun runs the command with the official schema when it is installed,
// and without schema checks (see schematest) when it is not.
func checkRun(t *testing.T, stdin string, args ...string) checkResult {
	t.Helper()
	v1, v2 := schematest.For(t, 1), schematest.For(t, 2)
	schema := func() (conformance.Option, error) { return conformance.WithSchema(v1, v2), nil }
	var out, errOut bytes.Buffer
	code := runCheckWith(context.Background(), args, strings.NewReader(stdin), &out, &errOut, schema)
	return checkResult{code, out.String(), errOut.String()}
}

func checkWriteFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600), "os.WriteFile")
	return p
}

func TestCheckCleanTranscriptExitsZero(t *testing.T) {
	p := checkWriteFile(t, checkCleanTranscript)
	r := checkRun(t, "", p)
	assert.Equal(t, checkResult{0, p + ": ok, no violations\n", ""}, r, "a clean transcript")
}

func TestCheckPrintsFileLineRuleMessageAndExitsOne(t *testing.T) {
	p := filepath.Join("..", "..", "conformance", "testdata", "defect_terminal_after_turn.jsonl")
	r := checkRun(t, "", p)
	want := []string{
		p + `:7: settlement: session "s1": compaction "cmp_1" is still "in_progress" when the agent answered session/prompt id 2`,
		p + `:9: after-turn: session "s1": compaction_update for compaction "cmp_1" (status "completed") arrived with no turn open`,
		p + `: 2 violations (after-turn 1, settlement 1)`,
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Equal(t, 1, r.code, "exit code; got %+v", r)
	require.Len(t, lines, len(want), "output lines; got %+v", r)
	for i, w := range want {
		assert.True(t, strings.HasPrefix(lines[i], w), "line %d = %q, want prefix %q", i, lines[i], w)
	}
}

func TestCheckReadsStdin(t *testing.T) {
	r := checkRun(t, "client {}\nnonsense\n", "-")
	assert.Equal(t, 1, r.code, "exit code; got %+v", r)
	assert.True(t, strings.HasPrefix(r.stdout, "<stdin>:2: transcript: "), "stdout does not begin with the violation: %+v", r)
	assert.True(t, strings.HasSuffix(r.stdout, "<stdin>: 1 violation (transcript 1)\n"), "stdout does not end with the count: %+v", r)
}

func TestCheckSchemaModes(t *testing.T) {
	schematest.Require(t, 1)
	schematest.Require(t, 2)
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
		var out, errOut bytes.Buffer
		code := runCheck(context.Background(), tc.args, nil, &out, &errOut)
		r := checkResult{code, out.String(), errOut.String()}
		assert.Equal(t, tc.code, r.code, "%v: exit code; got %+v", tc.args, r)
		if tc.code == 1 {
			assert.Contains(t, r.stdout, p+":4: schema: session/update fails the v1 schema", "%v: stdout lacks the schema violation", tc.args)
		}
	}
}

// Without the schema, auto checks the lifecycle rules and says on stderr
// that schema validation is off and how to install the schema with npm
// alone; on fails naming the places looked in.
func TestCheckWithoutTheSchema(t *testing.T) {
	p := checkWriteFile(t, checkCleanTranscript)
	looked := &acpschema.MissingError{Looked: []acpschema.Location{
		{Source: "user cache", Dir: "/home/u/.cache/acpcompact/schema/node_modules/@agentclientprotocol/sdk/schema", Problem: "no v1/schema.json"},
	}}
	missing := func() (conformance.Option, error) { return nil, looked }
	install := "install it with: " + acpschema.InstallCommand()
	where := "official ACP schema not installed (looked in user cache /home/u/.cache/acpcompact/schema/node_modules/@agentclientprotocol/sdk/schema: no v1/schema.json)"
	for _, tc := range []struct {
		mode   string
		code   int
		stdout string
		stderr []string
	}{
		{"on", 2, "", []string{"acpcompact check: --schema=on: " + where + "\n", install}},
		{"auto", 0, p + ": ok, no violations\n", []string{"acpcompact check: schema validation off, checking the lifecycle rules only: " + where + "\n", install, "--schema=off"}},
		{"off", 0, p + ": ok, no violations\n", nil},
	} {
		var out, errOut bytes.Buffer
		code := runCheckWith(context.Background(), []string{"--schema=" + tc.mode, p}, nil, &out, &errOut, missing)
		ok := code == tc.code && out.String() == tc.stdout && (len(tc.stderr) > 0) == (errOut.Len() > 0)
		for _, s := range tc.stderr {
			ok = ok && strings.Contains(errOut.String(), s)
		}
		if strings.Contains(errOut.String(), "make test-deps") && !strings.Contains(errOut.String(), "in a checkout of acpcompact, `make test-deps`") {
			ok = false // the user may have only the binary
		}
		assert.True(t, ok, "--schema=%s: got %d, stdout %q, stderr %q; want %d, stdout %q, stderr with %q", tc.mode, code, out.String(), errOut.String(), tc.code, tc.stdout, tc.stderr)
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
		r := checkRun(t, "", args...)
		assert.Equal(t, 2, r.code, "%s: exit code; got %+v", name, r)
		assert.NotEmpty(t, r.stderr, "%s: stderr", name)
	}
	r := checkRun(t, "", "-h")
	assert.Equal(t, 0, r.code, "-h: exit code")
	assert.Contains(t, r.stderr, "usage: acpcompact check", "-h: usage")
}

func TestCheckStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	code := runCheck(ctx, []string{"-"}, strings.NewReader(checkCleanTranscript), &out, &errOut)
	assert.Equal(t, 2, code, "exit code; stdout %q", out.String())
	assert.Contains(t, errOut.String(), "context canceled", "stderr")
}

func TestCheckStrictReplay(t *testing.T) {
	p := filepath.Join("..", "..", "conformance", "testdata", "clean_v1_replay_restreamed.jsonl")
	r := checkRun(t, "", p)
	assert.Equal(t, 0, r.code, "without --strict-replay a re-streamed replay is legal: %+v", r)
	r = checkRun(t, "", "--strict-replay", p)
	assert.Equal(t, 1, r.code, "--strict-replay: exit code; got %+v", r)
	assert.Contains(t, r.stdout, p+`:11: replay: session "s1": first replayed update for compaction "cmp_1" has status "in_progress"`, "--strict-replay: stdout")
	assert.True(t, strings.HasSuffix(r.stdout, p+": 6 violations (replay 6)\n"), "--strict-replay: stdout does not end with the count: %+v", r)
}
