//go:build unix

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/acpschema"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const proxyWait = 20 * time.Second

// proxyFakeAgent builds the proxy package's fake agent into the test's
// temporary directory.
func proxyFakeAgent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fakeagent")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/acpcompact/acpcompact/proxy/internal/fakeagent").CombinedOutput()
	require.NoError(t, err, "building the fake agent:\n%s", out)
	return bin
}

// proxyRun is one "acpcompact proxy" invocation with the test as editor.
type proxyRun struct {
	t      *testing.T
	stdin  *io.PipeWriter
	lines  chan []byte
	stderr *wiretest.Buffer
	code   chan int
	cancel context.CancelFunc
}

func startProxyCmd(t *testing.T, args ...string) *proxyRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	r := &proxyRun{t: t, stdin: inW, lines: make(chan []byte, 256), stderr: &wiretest.Buffer{}, code: make(chan int, 1), cancel: cancel}
	go func() {
		code := runProxy(ctx, args, inR, outW, r.stderr)
		outW.Close()
		r.code <- code
	}()
	go func() {
		defer close(r.lines)
		br := bufio.NewReader(outR)
		for {
			l, err := br.ReadBytes('\n')
			if len(l) > 0 {
				r.lines <- l
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		for range r.lines {
		}
		if t.Failed() {
			t.Logf("stderr:\n%s", r.stderr.String())
		}
	})
	return r
}

func (r *proxyRun) send(line string) {
	r.t.Helper()
	_, err := r.stdin.Write([]byte(line + "\n"))
	require.NoError(r.t, err, "write to the proxy")
}

func (r *proxyRun) next() []byte {
	r.t.Helper()
	select {
	case l, ok := <-r.lines:
		require.True(r.t, ok, "the proxy's output ended")
		return l
	case <-time.After(proxyWait):
		require.FailNow(r.t, fmt.Sprintf("no output within %s", proxyWait))
	}
	return nil
}

func (r *proxyRun) expect(want string) {
	r.t.Helper()
	got := r.next()
	require.JSONEq(r.t, want, string(got), "what the editor got")
}

func (r *proxyRun) exit() int {
	r.t.Helper()
	select {
	case c := <-r.code:
		return c
	case <-time.After(proxyWait):
		require.FailNow(r.t, fmt.Sprintf("the proxy did not exit within %s", proxyWait))
	}
	return -1
}

func (r *proxyRun) handshake(params string) {
	r.t.Helper()
	r.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + params + `}`)
	r.expect(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}`)
	r.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	r.expect(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
}

func (r *proxyRun) prompt() {
	r.t.Helper()
	r.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"go"}]}}`)
}

const (
	capableClient = `{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}`
	plainClient   = `{"protocolVersion":1,"clientCapabilities":{}}`
)

func sessionUpdate(u string) string {
	return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":` + u + `}}`
}

func TestProxyPassesExitCodeAndStderrThrough(t *testing.T) {
	bin := proxyFakeAgent(t)
	r := startProxyCmd(t, "--", bin, "-behavior", "plain", "-exit", "7", "-stderr", "hello from the agent")
	r.handshake(capableClient)
	r.prompt()
	r.expect(sessionUpdate(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hello."}}`))
	r.expect(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)
	r.stdin.Close()
	assert.Equal(t, 7, r.exit(), "exit code: want the agent's")
	errText := r.stderr.String()
	assert.Contains(t, errText, "hello from the agent\n", "the agent's stderr did not pass through")
	assert.Contains(t, errText, "initialize negotiated", "the proxy's log is missing")
}

func TestProxySettlesWhenTheAgentCrashesMidCompaction(t *testing.T) {
	bin := proxyFakeAgent(t)
	r := startProxyCmd(t, "--", bin, "-behavior", "crash")
	r.handshake(capableClient)
	r.prompt()
	r.expect(sessionUpdate(`{"sessionUpdate":"compaction_update","compactionId":"cmp_c1","status":"in_progress"}`))
	r.expect(sessionUpdate(`{"sessionUpdate":"compaction_update","compactionId":"cmp_c1","status":"failed","error":"the agent crashed during compaction"}`))
	// The editor still has its end of stdin open: the agent's exit alone
	// ends the proxy.
	assert.Equal(t, 3, r.exit(), "exit code: want the agent's")
	assert.Contains(t, r.stderr.String(), "fakeagent: panic: provider connection reset", "stderr: the agent's panic")
}

func TestProxyForwardsSIGTERMToTheAgent(t *testing.T) {
	bin := proxyFakeAgent(t)
	r := startProxyCmd(t, "--", bin, "-behavior", "sigterm")
	r.handshake(capableClient)
	// The proxy catches the signal (the test process survives it) and
	// passes it to the agent, whose handler exits with 42.
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM), "syscall.Kill")
	assert.Equal(t, 42, r.exit(), "exit code: want the agent's")
	assert.Contains(t, r.stderr.String(), "fakeagent: got terminated", "stderr: the agent got the signal")
}

func TestProxyReportsAgentKilledBySignal(t *testing.T) {
	bin := proxyFakeAgent(t)
	r := startProxyCmd(t, "--", bin, "-behavior", "plain")
	r.handshake(capableClient)
	// Without a signal to forward, the end of the context terminates the
	// agent; the default SIGTERM action kills it: 128+15.
	r.cancel()
	assert.Equal(t, 128+int(syscall.SIGTERM), r.exit(), "exit code: want SIGTERM's")
}

func TestProxyUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "missing the agent command"},
		{[]string{"--translate=claude-text,bogus", "--", "x"}, 2, "unknown translator"},
		{[]string{"--no-translate=bogus", "--", "x"}, 2, "unknown translator"},
		{[]string{"--fallback=bogus", "--", "x"}, 2, "unknown renderer"},
		{[]string{"--check=maybe", "--", "x"}, 2, "want agent or client"},
		{[]string{"--log-level=loud", "--", "x"}, 2, "--log-level"},
		{[]string{"-h"}, 0, "usage: acpcompact proxy"},
		{[]string{"--", "/nonexistent/agent-binary"}, 127, "cannot start the agent"},
	} {
		var stderr wiretest.Buffer
		code := runProxy(context.Background(), tc.args, strings.NewReader(""), io.Discard, &stderr)
		assert.Equal(t, tc.code, code, "proxy %q: exit code", tc.args)
		assert.Contains(t, stderr.String(), tc.msg, "proxy %q: stderr", tc.args)
	}
}

func TestProxyCheckFlagReportsTheAgentsViolations(t *testing.T) {
	bin := proxyFakeAgent(t)
	r := startProxyCmd(t, "--check", "--", bin, "-behavior", "ignore-gate")
	r.handshake(plainClient)
	r.prompt()
	// The client never sees the gated updates: they are a tool call now.
	r.expect(sessionUpdate(`{"sessionUpdate":"tool_call","toolCallId":"compact-cmp_g1","title":"Compact conversation","kind":"think","status":"in_progress"}`))
	r.expect(sessionUpdate(`{"sessionUpdate":"tool_call_update","toolCallId":"compact-cmp_g1","status":"completed"}`))
	r.expect(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)
	r.stdin.Close()
	assert.Equal(t, 0, r.exit(), "exit code")
	errText := r.stderr.String()
	assert.Contains(t, errText, "rule=capability", "--check did not log the agent's capability violations")
	assert.Contains(t, errText, "--check=agent: 3 violations (capability 3)", "--check did not sum up the agent's capability violations")
}

// TestProxyCancelGraceFlagDefaultsToTheKits: --cancel-grace has the kits'
// default and meaning, and --help says so.
func TestProxyCancelGraceFlagDefaultsToTheKits(t *testing.T) {
	var stderr wiretest.Buffer
	require.Equal(t, 0, runProxy(context.Background(), []string{"-h"}, strings.NewReader(""), io.Discard, &stderr), "-h: exit code")
	help := stderr.String()
	for _, want := range []string{"-cancel-grace duration", "0: at once; negative: at the end of the turn", "(default 5s)"} {
		assert.Contains(t, help, want, "--help")
	}
	assert.Equal(t, turn.DefaultCancelGrace, proxy.DefaultCancelGrace, "proxy.DefaultCancelGrace against the kits'")
}

// TestProxyCheckNumbersLinesAsTheLogDoes: a violation's line and the lines
// its message names are the agent's own line numbers, as the log's line=N
// is, not a count of both sides' messages.
func TestProxyCheckNumbersLinesAsTheLogDoes(t *testing.T) {
	bin := proxyFakeAgent(t)
	r := startProxyCmd(t, "--check", "--", bin, "-behavior", "open-standard")
	r.handshake(capableClient)
	r.prompt()
	// The agent's lines: 1 and 2 answer initialize and session/new, 3
	// opens cmp_o1, 4 streams into it, 5 answers the prompt with cmp_o1
	// still open, 6 and 7 come after the turn.
	r.expect(sessionUpdate(`{"sessionUpdate":"compaction_update","compactionId":"cmp_o1","status":"in_progress"}`))
	r.expect(sessionUpdate(`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_o1","content":{"type":"text","text":"## Partial"}}`))
	r.expect(sessionUpdate(`{"sessionUpdate":"compaction_update","compactionId":"cmp_o1","status":"failed","error":"the turn ended before the compaction finished"}`))
	r.expect(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)
	r.expect(sessionUpdate(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"After."}}`))
	r.stdin.Close()
	assert.Equal(t, 0, r.exit(), "exit code")
	errText := r.stderr.String()
	for _, want := range [][]string{
		{"rule=settlement", "(first seen at line 3)", "side=agent line=5"},
		{"rule=after-turn", "(the turn ended at line 5)", "side=agent line=6"},
		{"rule=after-turn", "(the turn ended at line 5)", "side=agent line=7"},
	} {
		found := false
		for _, l := range strings.Split(errText, "\n") {
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(l, w)
			}
			found = found || ok
		}
		assert.True(t, found, "no violation logged with %q:\n%s", want, errText)
	}
}

// Without the schema, --check says at the default log level that schema
// validation is off and how to turn it on, and checks the rest.
func TestProxyCheckWithoutTheSchemaWarns(t *testing.T) {
	missing := &acpschema.MissingError{Looked: []acpschema.Location{{Source: "user cache", Dir: "/nowhere", Problem: "no v1/schema.json"}}}
	loadSchema = func() (conformance.Option, error) { return nil, missing }
	t.Cleanup(func() { loadSchema = schemaOption })
	bin := proxyFakeAgent(t)
	r := startProxyCmd(t, "--check", "--", bin, "-behavior", "ignore-gate")
	r.handshake(plainClient)
	r.prompt()
	r.expect(sessionUpdate(`{"sessionUpdate":"tool_call","toolCallId":"compact-cmp_g1","title":"Compact conversation","kind":"think","status":"in_progress"}`))
	r.expect(sessionUpdate(`{"sessionUpdate":"tool_call_update","toolCallId":"compact-cmp_g1","status":"completed"}`))
	r.expect(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)
	r.stdin.Close()
	assert.Equal(t, 0, r.exit(), "exit code")
	errText := r.stderr.String()
	for _, want := range []string{
		`level=WARN msg="--check: schema validation off, checking the lifecycle rules only"`,
		`reason="official ACP schema not installed (looked in user cache /nowhere: no v1/schema.json)"`,
		"install it with: " + acpschema.InstallCommand(),
		"--check=agent: 3 violations (capability 3)",
	} {
		assert.Contains(t, errText, want, "stderr")
	}
}

func TestProxyFallbackAndTranslateFlags(t *testing.T) {
	bin := proxyFakeAgent(t)
	t.Run("fallback", func(t *testing.T) {
		// The fake agent names itself in no agentInfo: no profile reads
		// its tool call unless it is named.
		r := startProxyCmd(t, "--fallback=opencode-marker", "--translate=toolcall", "--", bin, "-behavior", "toolcall")
		r.handshake(plainClient)
		r.prompt()
		r.expect(sessionUpdate(`{"sessionUpdate":"session_info_update","_meta":{"opencode/compaction":{"status":"started","messageId":"toolu_1","reason":"manual"}}}`))
		r.expect(sessionUpdate(`{"sessionUpdate":"session_info_update","_meta":{"opencode/compaction":{"status":"completed","messageId":"toolu_1","reason":"manual"}}}`))
		r.expect(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)
	})
	t.Run("no-translate", func(t *testing.T) {
		r := startProxyCmd(t, "--translate=all", "--no-translate=toolcall", "--", bin, "-behavior", "toolcall")
		r.handshake(capableClient)
		r.prompt()
		r.expect(sessionUpdate(`{"sessionUpdate":"tool_call","toolCallId":"toolu_1","title":"Compact conversation","kind":"think","status":"in_progress","_meta":{"claudeCode":{"toolName":"compact"}}}`))
		r.expect(sessionUpdate(`{"sessionUpdate":"tool_call_update","toolCallId":"toolu_1","status":"completed"}`))
	})
	t.Run("translate subset", func(t *testing.T) {
		r := startProxyCmd(t, "--translate=codex-text", "--", bin, "-behavior", "toolcall")
		r.handshake(capableClient)
		r.prompt()
		r.expect(sessionUpdate(`{"sessionUpdate":"tool_call","toolCallId":"toolu_1","title":"Compact conversation","kind":"think","status":"in_progress","_meta":{"claudeCode":{"toolName":"compact"}}}`))
	})
}
