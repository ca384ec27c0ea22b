package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/internal/scenario/client"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestScenarioAgentBinaryOverStdio builds the command, runs one /compact
// over real stdin/stdout, and checks that stdout carries nothing but
// JSON-RPC messages, one a line, while the logs go to stderr.
func TestScenarioAgentBinaryOverStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a hang guard
	defer cancel()
	bin := buildAgent(ctx, t)

	cmd := exec.CommandContext(ctx, bin, "--heartbeat", "0", "--log-level", "debug")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err, "cmd.StdinPipe")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err, "cmd.StdoutPipe")
	var stderr wiretest.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start(), "cmd.Start")
	var raw wiretest.Buffer // every byte the agent wrote to stdout
	cl := client.New(context.Background(), pipes{r: io.TeeReader(stdout, &raw), w: stdin})

	_, err = cl.Initialize(ctx, 1, true)
	require.NoError(t, err, "initialize\nstderr:\n%s", stderr.String())
	sid, err := cl.NewSession(ctx, "/work")
	require.NoError(t, err, "cl.NewSession")
	o, err := cl.Prompt(ctx, sid, "/compact")
	require.NoError(t, err, "prompt")
	require.Equal(t, "end_turn", o.StopReason, "prompt's stop reason in %+v", o)
	_ = stdin.Close() // end of input: the agent exits
	<-cl.Done()
	assert.NoError(t, cmd.Wait(), "agent exit\nstderr:\n%s", stderr.String())

	sc := bufio.NewScanner(bytes.NewReader(raw.Bytes()))
	sc.Buffer(nil, 1<<20)
	lines := 0
	for sc.Scan() {
		lines++
		var m struct {
			JSONRPC string `json:"jsonrpc"`
		}
		if assert.NoError(t, json.Unmarshal(sc.Bytes(), &m), "stdout line %d is not a JSON-RPC message: %q", lines, sc.Text()) {
			assert.Equal(t, "2.0", m.JSONRPC, "stdout line %d is not a JSON-RPC message: %q", lines, sc.Text())
		}
	}
	assert.GreaterOrEqual(t, lines, 8, "stdout lines: want the whole exchange:\n%s", raw.Bytes())
	logs := stderr.String()
	for _, want := range []string{"scenario-agent serving ACP", "compaction negotiated", "compaction settled"} {
		assert.Contains(t, logs, want, "stderr")
	}

	var kinds []string
	for _, m := range cl.Messages() {
		if m.Kind == "compaction_update" {
			kinds = append(kinds, m.Status)
		}
	}
	assert.Equal(t, "in_progress,completed", strings.Join(kinds, ","), "compaction updates over stdio")
	v1 := schematest.For(t, 1)
	var transcript bytes.Buffer
	require.NoError(t, cl.WriteTranscript(&transcript), "cl.WriteTranscript")
	vs, err := conformance.CheckTranscript(&transcript, conformance.WithSchema(v1, nil), conformance.WithStrictReplay())
	require.NoError(t, err, "conformance.CheckTranscript")
	assert.Empty(t, vs, "conformance violations")
}

// buildAgent builds the command into a temporary directory.
func buildAgent(ctx context.Context, t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "scenario-agent")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	gobin, err := exec.LookPath("go")
	require.NoError(t, err, "building the agent needs the go command")
	out, err := exec.CommandContext(ctx, gobin, "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)
	return bin
}

// TestScenarioAgentAnswersPipedInput: requests written all at once, then
// the end of input, are still answered before the agent exits.
func TestScenarioAgentAnswersPipedInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a hang guard
	defer cancel()
	bin := buildAgent(ctx, t)
	cmd := exec.CommandContext(ctx, bin, "--log-level", "error")
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}
{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}
`)
	out, err := cmd.Output()
	require.NoError(t, err, "agent")
	ids := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &m), "stdout line %q", line)
		if m.Result != nil {
			ids[string(m.ID)] = true
		}
	}
	assert.True(t, ids["0"], "answered %v, want id 0:\n%s", ids, out)
	assert.True(t, ids["1"], "answered %v, want id 1:\n%s", ids, out)
}

func TestScenarioAgentFlagErrors(t *testing.T) {
	for _, args := range [][]string{{"--fallback", "smoke"}, {"--log-level", "loud"}, {"extra"}, {"--no-such-flag"}} {
		var stderr bytes.Buffer
		code := run(context.Background(), args, io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard}, &stderr)
		assert.Equal(t, 2, code, "%v: exit code (stderr %q)", args, stderr.String())
	}
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"-h"}, io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard}, &stderr)
	assert.Equal(t, 0, code, "-h: exit code")
	assert.Contains(t, stderr.String(), "-auto-compact-every", "-h: usage")
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// pipes joins the child's stdout and stdin into the client's connection.
type pipes struct {
	r io.Reader
	w io.WriteCloser
}

func (p pipes) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p pipes) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipes) Close() error                { return p.w.Close() }

// TestScenarioAgentCancelGraceFlag: --cancel-grace means what
// agentkit.WithCancelGrace means. /compact hang never reports again, so
// after session/cancel only the kit settles it: with 0 at once (the cancel
// grace, not the turn's end), with a positive grace no sooner than that
// after the cancel, with a negative one at the turn's end (the handler
// answers at once).
func TestScenarioAgentCancelGraceFlag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a hang guard
	defer cancel()
	bin := buildAgent(ctx, t)
	for _, tc := range []struct {
		flag    string
		atLeast time.Duration
		why     string
	}{
		{"0", 0, "the cancel grace period ended"},
		{"300ms", 300 * time.Millisecond, "the cancel grace period ended"},
		{"-1s", 0, "the agent answered session/prompt"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			cmd := exec.CommandContext(ctx, bin, "--cancel-grace", tc.flag, "--compaction-timeout", "0", "--heartbeat", "0")
			stdin, err := cmd.StdinPipe()
			require.NoError(t, err, "cmd.StdinPipe")
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err, "cmd.StdoutPipe")
			var stderr wiretest.Buffer
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start(), "cmd.Start")
			var raw wiretest.Buffer
			cl := client.New(context.Background(), pipes{r: io.TeeReader(stdout, &raw), w: stdin})
			_, err = cl.Initialize(ctx, 1, true)
			require.NoError(t, err, "initialize")
			sid, err := cl.NewSession(ctx, "/work")
			require.NoError(t, err, "cl.NewSession")
			turn, err := cl.StartPrompt(ctx, sid, "/compact hang")
			require.NoError(t, err, "cl.StartPrompt")
			_, err = cl.Wait(ctx, turn.From(), func(m client.Message) bool { return m.Kind == "compaction_update" && m.Status == "in_progress" })
			require.NoError(t, err, "waiting for the in_progress update")
			cancelledAt := time.Now()
			require.NoError(t, cl.Cancel(ctx, sid), "cl.Cancel")
			_, err = cl.Wait(ctx, turn.From(), func(m client.Message) bool { return m.Kind == "compaction_update" && m.Status == "cancelled" })
			require.NoError(t, err, "waiting for the cancelled update")
			assert.GreaterOrEqual(t, time.Since(cancelledAt), tc.atLeast, "time from the cancel to the settlement")
			o, err := turn.Wait(ctx)
			if assert.NoError(t, err, "prompt") {
				assert.Equal(t, "cancelled", o.StopReason, "prompt's stop reason in %+v", o)
			}
			_ = stdin.Close()
			<-cl.Done()
			assert.NoError(t, cmd.Wait(), "agent exit")
			assert.Contains(t, stderr.String(), `why="`+tc.why+`"`, "the compaction was not settled with why=%q", tc.why)
			var transcript bytes.Buffer
			require.NoError(t, cl.WriteTranscript(&transcript), "cl.WriteTranscript")
			vs, err := conformance.CheckTranscript(&transcript, conformance.WithSchema(schematest.For(t, 1), nil), conformance.WithStrictReplay())
			require.NoError(t, err, "conformance.CheckTranscript")
			assert.Empty(t, vs, "conformance violations")
		})
	}
}
