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
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/internal/scenario/client"
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
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var raw lockedBuffer // every byte the agent wrote to stdout
	cl := client.New(context.Background(), pipes{r: io.TeeReader(stdout, &raw), w: stdin})

	if _, err := cl.Initialize(ctx, 1, true); err != nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", err, stderr.String())
	}
	sid, err := cl.NewSession(ctx, "/work")
	if err != nil {
		t.Fatal(err)
	}
	o, err := cl.Prompt(ctx, sid, "/compact")
	if err != nil || o.StopReason != "end_turn" {
		t.Fatalf("prompt: %+v, %v", o, err)
	}
	_ = stdin.Close() // end of input: the agent exits
	<-cl.Done()
	if err := cmd.Wait(); err != nil {
		t.Errorf("agent exit: %v\nstderr:\n%s", err, stderr.String())
	}

	sc := bufio.NewScanner(bytes.NewReader(raw.Bytes()))
	sc.Buffer(nil, 1<<20)
	lines := 0
	for sc.Scan() {
		lines++
		var m struct {
			JSONRPC string `json:"jsonrpc"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.JSONRPC != "2.0" {
			t.Errorf("stdout line %d is not a JSON-RPC message: %q", lines, sc.Text())
		}
	}
	if lines < 8 {
		t.Errorf("stdout carried %d lines, want the whole exchange:\n%s", lines, raw.Bytes())
	}
	logs := stderr.String()
	for _, want := range []string{"scenario-agent serving ACP", "compaction negotiated", "compaction settled"} {
		if !strings.Contains(logs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, logs)
		}
	}

	var kinds []string
	for _, m := range cl.Messages() {
		if m.Kind == "compaction_update" {
			kinds = append(kinds, m.Status)
		}
	}
	if strings.Join(kinds, ",") != "in_progress,completed" {
		t.Errorf("compaction updates over stdio: %v", kinds)
	}
	v1 := schematest.For(t, 1)
	var transcript bytes.Buffer
	if err := cl.WriteTranscript(&transcript); err != nil {
		t.Fatal(err)
	}
	vs, err := conformance.CheckTranscript(&transcript, conformance.WithSchema(v1, nil), conformance.WithStrictReplay())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Errorf("conformance: %v", v)
	}
}

// buildAgent builds the command into a temporary directory.
func buildAgent(ctx context.Context, t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "scenario-agent")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building the agent needs the go command: %v", err)
	}
	if out, err := exec.CommandContext(ctx, gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
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
	if err != nil {
		t.Fatalf("agent: %v", err)
	}
	ids := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("stdout line %q: %v", line, err)
		}
		if m.Result != nil {
			ids[string(m.ID)] = true
		}
	}
	if !ids["0"] || !ids["1"] {
		t.Errorf("answered %v, want ids 0 and 1:\n%s", ids, out)
	}
}

func TestScenarioAgentFlagErrors(t *testing.T) {
	for _, args := range [][]string{{"--fallback", "smoke"}, {"--log-level", "loud"}, {"extra"}, {"--no-such-flag"}} {
		var stderr bytes.Buffer
		if code := run(context.Background(), args, io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard}, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, stderr.String())
		}
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, io.NopCloser(strings.NewReader("")), nopWriteCloser{io.Discard}, &stderr); code != 0 ||
		!strings.Contains(stderr.String(), "-auto-compact-every") {
		t.Errorf("-h: exit %d, usage %q", code, stderr.String())
	}
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

// lockedBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

func (l *lockedBuffer) String() string { return string(l.Bytes()) }

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
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr lockedBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var raw lockedBuffer
			cl := client.New(context.Background(), pipes{r: io.TeeReader(stdout, &raw), w: stdin})
			if _, err := cl.Initialize(ctx, 1, true); err != nil {
				t.Fatal(err)
			}
			sid, err := cl.NewSession(ctx, "/work")
			if err != nil {
				t.Fatal(err)
			}
			turn, err := cl.StartPrompt(ctx, sid, "/compact hang")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cl.Wait(ctx, turn.From(), func(m client.Message) bool { return m.Kind == "compaction_update" && m.Status == "in_progress" }); err != nil {
				t.Fatal(err)
			}
			cancelledAt := time.Now()
			if err := cl.Cancel(ctx, sid); err != nil {
				t.Fatal(err)
			}
			if _, err := cl.Wait(ctx, turn.From(), func(m client.Message) bool { return m.Kind == "compaction_update" && m.Status == "cancelled" }); err != nil {
				t.Fatal(err)
			}
			if waited := time.Since(cancelledAt); waited < tc.atLeast {
				t.Errorf("settled %v after the cancel, want at least %v", waited, tc.atLeast)
			}
			o, err := turn.Wait(ctx)
			if err != nil || o.StopReason != "cancelled" {
				t.Errorf("prompt: %+v, %v", o, err)
			}
			_ = stdin.Close()
			<-cl.Done()
			if err := cmd.Wait(); err != nil {
				t.Errorf("agent exit: %v", err)
			}
			if logs := stderr.String(); !strings.Contains(logs, `why="`+tc.why+`"`) {
				t.Errorf("the compaction was not settled with why=%q:\n%s", tc.why, logs)
			}
			var transcript bytes.Buffer
			if err := cl.WriteTranscript(&transcript); err != nil {
				t.Fatal(err)
			}
			vs, err := conformance.CheckTranscript(&transcript, conformance.WithSchema(schematest.For(t, 1), nil), conformance.WithStrictReplay())
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vs {
				t.Errorf("conformance: %v", v)
			}
		})
	}
}
