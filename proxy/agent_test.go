package proxy_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// live runs a fake agent process behind a proxy and plays the client.
type live struct {
	t        *testing.T
	version  int
	cmd      *exec.Cmd
	record   string
	cw       *io.PipeWriter
	coW      *io.PipeWriter
	toClient chan []byte
	done     chan error
	sent     *sentLog // what the client sent, to compare with what the agent read
	stderr   *wiretest.Buffer
	logs     *wiretest.Buffer
	checker  *recordingChecker
	nextID   int
	finished bool
}

// sentLog hashes what the client sent; a 64 MiB prompt need not be kept.
type sentLog struct {
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
	n int64
}

func newSentLog() *sentLog { return &sentLog{h: sha256.New()} }

func (s *sentLog) add(b []byte) { s.h.Write(b); s.n += int64(len(b)) }

// runFake starts the fake agent with -behavior behavior behind a proxy.
func runFake(t *testing.T, behavior string, agentArgs []string, opts ...proxy.Option) *live {
	t.Helper()
	return runFakeChecked(t, true, behavior, agentArgs, opts...)
}

// runFakeChecked is runFake with the client-stream checker optional: the
// checker decodes every message several times, which would make a 64 MiB
// line test measure the checker.
func runFakeChecked(t *testing.T, check bool, behavior string, agentArgs []string, opts ...proxy.Option) *live {
	t.Helper()
	bin := fakeAgent(t)
	l := &live{
		t:        t,
		record:   filepath.Join(t.TempDir(), "agent-stdin"),
		toClient: make(chan []byte, 1024),
		done:     make(chan error, 1),
		sent:     newSentLog(),
		stderr:   &wiretest.Buffer{},
		logs:     &wiretest.Buffer{},
		checker:  newRecordingChecker(t),
		nextID:   10,
	}
	args := append([]string{"-behavior", behavior, "-record", l.record}, agentArgs...)
	l.cmd = exec.Command(bin, args...)
	l.cmd.Stderr = l.stderr
	agentIn, err := l.cmd.StdinPipe()
	require.NoError(t, err, "l.cmd.StdinPipe")
	agentOut, err := l.cmd.StdoutPipe()
	require.NoError(t, err, "l.cmd.StdoutPipe")
	require.NoError(t, l.cmd.Start(), "l.cmd.Start")
	logger := slog.New(slog.NewTextHandler(l.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// The fake agent sends no agentInfo: every translator is named.
	all := []proxy.Option{proxy.WithLogger(logger), proxy.WithTranslators(proxy.Translators()...)}
	if check {
		all = append(all, proxy.WithChecker(l.checker, proxy.CheckClient))
	} else {
		l.checker = nil
	}
	all = append(all, opts...)
	p, err := proxy.New(all...)
	require.NoError(t, err, "proxy.New")
	cr, cw := io.Pipe()
	coR, coW := io.Pipe()
	l.cw, l.coW = cw, coW
	go readLines(coR, l.toClient)
	go func() { l.done <- p.Run(context.Background(), cr, coW, agentIn, agentOut) }()
	t.Cleanup(func() {
		if !l.finished {
			l.finish()
		}
		if t.Failed() {
			t.Logf("proxy log:\n%s\nagent stderr:\n%s", l.logs.String(), l.stderr.String())
		}
	})
	return l
}

func (l *live) send(line string) {
	l.t.Helper()
	raw := []byte(line + "\n")
	l.sent.add(raw)
	_, err := l.cw.Write(raw)
	require.NoError(l.t, err, "client write")
}

func (l *live) sendRaw(raw []byte) {
	l.t.Helper()
	l.sent.add(raw)
	_, err := l.cw.Write(raw)
	require.NoError(l.t, err, "client write")
}

func (l *live) next() []byte {
	l.t.Helper()
	return l.nextWithin(waitFor)
}

func (l *live) nextWithin(d time.Duration) []byte {
	l.t.Helper()
	select {
	case b, ok := <-l.toClient:
		require.True(l.t, ok, "the client stream ended")
		return b
	case <-time.After(d):
		require.FailNow(l.t, fmt.Sprintf("the client received nothing within %s", d))
	}
	return nil
}

// forwarded expects the agent's line, unchanged.
func (l *live) forwarded(want string) {
	l.t.Helper()
	// Not require.Equal: a line may be 64 MiB, and the message clips it.
	got := l.next()
	require.True(l.t, string(got) == want+"\n", "client got\n%s\nwant the agent's line\n%s", clipQ(got), want)
}

// emitted expects a proxy-made line equal to want as JSON, valid against
// the official schema.
func (l *live) emitted(want string) {
	l.t.Helper()
	got := l.next()
	require.JSONEq(l.t, want, string(got), "what the client got")
	assert.NoError(l.t, schematest.For(l.t, l.version).Message(bytes.TrimSpace(got)), "proxy-made line fails the v%d schema", l.version)
}

func (l *live) handshake(clientParams string, version int) {
	l.t.Helper()
	l.version = version
	l.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + clientParams + `}`)
	if version == 2 {
		l.forwarded(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":2,"info":{"name":"fakeagent","version":"1.0.0"},"capabilities":{}}}`)
	} else {
		l.forwarded(fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":%d,"agentCapabilities":{"loadSession":true}}}`, version))
	}
	l.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	l.forwarded(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}`)
}

func (l *live) prompt() int {
	l.t.Helper()
	l.nextID++
	l.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"go on"}]}}`, l.nextID))
	return l.nextID
}

// finish ends the client's input, waits for the agent and the proxy, and
// checks that the agent read exactly what the client sent.
func (l *live) finish() (rest [][]byte, runErr error) {
	l.t.Helper()
	l.finished = true
	l.cw.Close()
	select {
	case runErr = <-l.done:
	case <-time.After(waitFor):
		require.FailNow(l.t, "Run did not return after the agent exited")
	}
	l.coW.Close()
	for b := range l.toClient {
		rest = append(rest, b)
	}
	_ = l.cmd.Wait()
	if l.checker != nil {
		l.checker.close()
	}
	f, err := os.Open(l.record)
	require.NoError(l.t, err, "os.Open")
	defer f.Close()
	h := sha256.New()
	n, _ := io.Copy(h, f)
	assert.Equal(l.t, l.sent.n, n, "the bytes the agent read, against those the client sent")
	assert.Equal(l.t, l.sent.h.Sum(nil), h.Sum(nil), "the SHA-256 of what the agent read, against that of what the client sent")
	return rest, runErr
}

func exitCodeOf(cmd *exec.Cmd) int {
	if cmd.ProcessState == nil {
		return -1
	}
	return cmd.ProcessState.ExitCode()
}

// --- one fake agent per legacy signal ---

func TestProxyAgentClaudeText(t *testing.T) {
	l := runFake(t, "claude-text", nil)
	l.handshake(v1Capable, 1)
	id := l.prompt()
	cmp := mintedID("s1", proxy.ClaudeText, 1)
	l.emitted(upd("s1", cmpUpdate(cmp, "in_progress")))
	l.emitted(upd("s1", cmpUpdate(cmp, "completed")))
	l.forwarded(upd("s1", text("Done.")))
	l.forwarded(promptResponse(id, "end_turn"))
}

func TestProxyAgentClaudeTextFailed(t *testing.T) {
	l := runFake(t, "claude-text-failed", nil)
	l.handshake(v1Capable, 1)
	id := l.prompt()
	cmp := mintedID("s1", proxy.ClaudeText, 1)
	l.emitted(upd("s1", cmpUpdate(cmp, "in_progress")))
	l.emitted(upd("s1", cmpUpdate(cmp, "failed", `"error":"provider overloaded"`)))
	l.forwarded(promptResponse(id, "end_turn"))
}

func TestProxyAgentToolCall(t *testing.T) {
	l := runFake(t, "toolcall", nil)
	l.handshake(v1Capable, 1)
	id := l.prompt()
	l.emitted(upd("s1", cmpUpdate("toolu_1", "in_progress")))
	l.emitted(upd("s1", cmpUpdate("toolu_1", "completed")))
	l.forwarded(promptResponse(id, "end_turn"))
}

func TestProxyAgentToolCallLeftOpenOnCancelWithoutCapability(t *testing.T) {
	l := runFake(t, "toolcall-cancel", nil)
	l.handshake(v1Plain, 1)
	id := l.prompt()
	l.forwarded(upd("s1", `{"sessionUpdate":"tool_call","toolCallId":"toolu_3","title":"Compact conversation","kind":"think","status":"in_progress","_meta":{"claudeCode":{"toolName":"compact"}}}`))
	l.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`)
	l.emitted(upd("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"toolu_3","status":"failed","content":[{"type":"content","content":{"type":"text","text":"Compaction cancelled"}}]}`))
	l.forwarded(promptResponse(id, "cancelled"))
}

func TestProxyAgentOpencodeMarker(t *testing.T) {
	l := runFake(t, "opencode-marker", nil)
	l.handshake(v1Capable, 1)
	id := l.prompt()
	l.emitted(upd("s1", cmpUpdate("msg_c1", "in_progress")))
	l.emitted(upd("s1", cmpUpdate("msg_c1", "completed")))
	l.forwarded(promptResponse(id, "end_turn"))
}

func TestProxyAgentOpencodeAbortAfterCancel(t *testing.T) {
	l := runFake(t, "opencode-abort", nil)
	l.handshake(v1Capable, 1)
	id := l.prompt()
	l.emitted(upd("s1", cmpUpdate("msg_c2", "in_progress")))
	l.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`)
	l.emitted(upd("s1", cmpUpdate("msg_c2", "cancelled")))
	l.forwarded(promptResponse(id, "cancelled"))
}

func TestProxyAgentCodexText(t *testing.T) {
	l := runFake(t, "codex-text", nil)
	l.handshake(v1Capable, 1)
	id := l.prompt()
	cmp := mintedID("s1", proxy.CodexText, 1)
	l.emitted(upd("s1", cmpUpdate(cmp, "in_progress")))
	l.emitted(upd("s1", cmpUpdate(cmp, "completed")))
	l.forwarded(upd("s1", text(codexHeadsUp)))
	l.forwarded(upd("s1", text("Continuing.")))
	l.forwarded(promptResponse(id, "end_turn"))
}

func TestProxyAgentCodexNotice(t *testing.T) {
	l := runFake(t, "codex-notice", nil)
	l.handshake(v1Capable, 1)
	id := l.prompt()
	for n := 1; n <= 2; n++ {
		cmp := mintedID("s1", proxy.CodexNotice, n)
		l.emitted(upd("s1", cmpUpdate(cmp, "in_progress")))
		l.emitted(upd("s1", cmpUpdate(cmp, "completed")))
	}
	l.forwarded(promptResponse(id, "end_turn"))
}

// --- faulty agents ---

func TestProxyAgentIgnoringTheCapabilityGate(t *testing.T) {
	l := runFake(t, "ignore-gate", nil)
	l.handshake(v1Plain, 1)
	id := l.prompt()
	l.emitted(upd("s1", `{"sessionUpdate":"tool_call","toolCallId":"compact-cmp_g1","title":"Compact conversation","kind":"think","status":"in_progress"}`))
	l.emitted(upd("s1", `{"sessionUpdate":"tool_call_update","toolCallId":"compact-cmp_g1","status":"completed"}`))
	l.forwarded(promptResponse(id, "end_turn"))
}

func TestProxyAgentCrashingMidCompaction(t *testing.T) {
	l := runFake(t, "crash", nil)
	l.handshake(v1Capable, 1)
	l.prompt()
	l.forwarded(upd("s1", cmpUpdate("cmp_c1", "in_progress")))
	l.emitted(upd("s1", cmpUpdate("cmp_c1", "failed", `"error":"the agent crashed during compaction"`)))
	rest, err := l.finish()
	assert.NoError(t, err, "Run")
	assert.Zero(t, len(rest), "lines the client got after the settlement: %q", rest)
	assert.Equal(t, 3, exitCodeOf(l.cmd), "agent exit code")
	assert.Contains(t, l.stderr.String(), "fakeagent: panic: provider connection reset", "agent stderr lost")
}

func TestProxyAgentLeavingStandardCompactionOpen(t *testing.T) {
	l := runFake(t, "open-standard", nil)
	l.handshake(v1Capable, 1)
	id := l.prompt()
	l.forwarded(upd("s1", cmpUpdate("cmp_o1", "in_progress")))
	l.forwarded(upd("s1", `{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_o1","content":{"type":"text","text":"## Partial"}}`))
	l.emitted(upd("s1", cmpUpdate("cmp_o1", "failed", `"error":"the turn ended before the compaction finished"`)))
	l.forwarded(promptResponse(id, "end_turn"))
	// The agent's late chunk and completion are dropped.
	l.forwarded(upd("s1", text("After.")))
	// That text arrives after the turn; a client reads it as agent
	// chatter, which is the agent's business, not a compaction's.
}

func TestProxyAgentV2LeavingCompactionOpenAtIdle(t *testing.T) {
	l := runFake(t, "v2-open", nil)
	l.handshake(v2Init, 2)
	id := l.prompt()
	l.forwarded(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`, id))
	l.forwarded(upd("s1", `{"sessionUpdate":"state_update","state":"running"}`))
	l.forwarded(upd("s1", cmpUpdate("cmp_v1", "in_progress")))
	l.emitted(upd("s1", cmpUpdate("cmp_v1", "failed", `"error":"the turn ended before the compaction finished"`)))
	l.forwarded(upd("s1", `{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}`))
}

func TestProxyAgentMalformedLinesBothWays(t *testing.T) {
	l := runFake(t, "malformed", nil)
	l.handshake(v1Capable, 1)
	l.send(`{"jsonrpc":"2.0","method":"session/cancel",`)
	id := l.prompt()
	l.forwarded(`this is not JSON {`)
	l.forwarded(`{"jsonrpc":"2.0","method":"session/update","params":`)
	l.forwarded(upd("s1", text("after the malformed lines")))
	l.forwarded(promptResponse(id, "end_turn"))
	// The client received two lines it cannot read: the checker says so.
	l.checker.want = []conformance.Rule{conformance.RuleMalformed, conformance.RuleMalformed}
	l.finish()
	logs := l.logs.String()
	for _, want := range []string{"side=client line=3", "side=agent line=3", "side=agent line=4"} {
		assert.True(t, contains(logs, "malformed line", want), "log lacks a malformed-line entry with %q:\n%s", want, logs)
	}
	assert.Contains(t, l.stderr.String(), "fakeagent: malformed line", "the agent did not receive the client's malformed line")
}

// TestAgent64MiBLines sends a 64 MiB line each way through the proxy.
func TestProxyAgent64MiBLines(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB lines in -short mode")
	}
	const size = proxy.DefaultMaxLineBytes
	l := runFakeChecked(t, false, "big", []string{"-big-size", fmt.Sprint(size)})
	l.handshake(v1Capable, 1)

	// Client → agent: a prompt line of exactly 64 MiB; finish checks the
	// agent read it byte for byte.
	l.nextID++
	head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"`, l.nextID)
	tail := `"}]}}` + "\n"
	big := append(append([]byte(head), bytes.Repeat([]byte("p"), size-len(head)-len(tail)+1)...), tail...)
	require.Equal(t, size+1, len(big), "the bytes of the big prompt line")
	l.sendRaw(big)
	big = nil

	// Agent → client: its 64 MiB agent_message_chunk arrives intact.
	got := l.nextWithin(2 * time.Minute)
	require.Equal(t, size+1, len(got), "the bytes of the line the client got: want %d plus the newline", size)
	require.Equal(t, byte('\n'), got[size], "the line the client got does not end with a newline")
	wantHead := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`
	require.True(t, bytes.HasPrefix(got, []byte(wantHead)), "the big line arrived with a different head: %s", clipQ(got))
	require.True(t, bytes.HasSuffix(got, []byte(`"}}}}`+"\n")), "the big line arrived with a different tail: %s", clipQ(got))
	txt := got[len(wantHead) : size-len(`"}}}}`)]
	changed := -1 // one assertion, not one per byte of 64 MiB
	for i := 0; i < len(txt); i++ {
		if txt[i] != 'a'+byte(i%26) {
			changed = i
			break
		}
	}
	require.Equal(t, -1, changed, "the first byte of the text that changed")
	got = nil
	l.forwarded(upd("s1", text("after the big line")))
	l.forwarded(promptResponse(l.nextID, "end_turn"))
}

// TestAgentStderrAndExitCode: the library leaves the process to its
// caller; this checks the fake agent's plumbing that the command's tests
// rely on.
func TestProxyAgentStderrAndExitCode(t *testing.T) {
	l := runFake(t, "plain", []string{"-exit", "7", "-stderr", "hello from the agent"})
	l.handshake(v1Capable, 1)
	l.finish()
	assert.Equal(t, 7, exitCodeOf(l.cmd), "exit code")
	assert.Contains(t, l.stderr.String(), "hello from the agent", "the agent's stderr")
}
