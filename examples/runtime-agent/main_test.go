package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/history"
	"github.com/acpcompact/acpcompact/internal/scenario/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The process-level tests of the example: the real binary over pipes, on
// each kit, through a restart, a SIGKILL mid-compaction and a damaged
// history.

// glueLimit is what the issue allows an integration of a runtime of
// docker-agent's shape: kit creation, event mapping, cancel, persistence
// and replay.
const glueLimit = 50

// codeLines counts the lines of a Go file that are neither blank nor
// comments (package and import lines count).
func codeLines(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "//") {
			n++
		}
	}
	return n
}

func TestGlueStaysWithinFiftyLines(t *testing.T) {
	glue := codeLines(t, "glue.go")
	for _, kit := range []string{"kit_acpsdk.go", "kit_jsonrpc2.go"} {
		n := glue + codeLines(t, kit)
		t.Logf("glue.go + %s: %d lines of acpcompact-specific code (glue.go %d)", kit, n, glue)
		assert.LessOrEqual(t, n, glueLimit, "the acpcompact-specific code of the agent on %s", kit)
	}
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

func agentBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "runtime-agent-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "runtime-agent")
		if runtime.GOOS == "windows" {
			binPath += ".exe"
		}
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// proc is one agent process with a client on its stdio.
type proc struct {
	t      *testing.T
	ctx    context.Context
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	cl     *client.Client
	stderr *bytes.Buffer
	mu     *sync.Mutex
	waited chan error
}

type pipes struct {
	r io.ReadCloser
	w io.WriteCloser
}

func (p pipes) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p pipes) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipes) Close() error                { p.w.Close(); return p.r.Close() }

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func start(t *testing.T, kit, dir string, capable bool) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	cmd := exec.Command(agentBinary(t), "--state-dir", dir, "--kit", kit)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &proc{t: t, ctx: ctx, cmd: cmd, stdin: stdin, stderr: &bytes.Buffer{}, mu: &sync.Mutex{}, waited: make(chan error, 1)}
	cmd.Stderr = lockedWriter{p.mu, p.stderr}
	require.NoError(t, cmd.Start())
	go func() { p.waited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.waited
		if t.Failed() {
			p.mu.Lock()
			t.Logf("agent stderr:\n%s", p.stderr.String())
			p.mu.Unlock()
		}
	})
	p.cl = client.New(context.Background(), pipes{stdout, stdin})
	_, err = p.cl.Initialize(ctx, 1, capable)
	require.NoError(t, err, "initialize")
	return p
}

func (p *proc) prompt(sid, text string) {
	p.t.Helper()
	o, err := p.cl.Prompt(p.ctx, sid, text)
	require.NoError(p.t, err, "prompt %q", text)
	require.Nil(p.t, o.Err, "prompt %q answered with an error", text)
}

// stop closes the agent's stdin and waits for it to exit cleanly.
func (p *proc) stop() []client.Message {
	p.t.Helper()
	_ = p.stdin.Close()
	<-p.cl.Done()
	select {
	case err := <-p.waited:
		p.waited <- err
		assert.NoError(p.t, err, "the agent's exit")
	case <-p.ctx.Done():
		require.FailNow(p.t, "the agent did not exit after its stdin closed")
	}
	return p.cl.Messages()
}

// load loads sid and returns the messages of the replay, or the error.
func (p *proc) load(sid string) ([]client.Message, error) {
	from := p.cl.Len()
	err := p.cl.Load(p.ctx, sid, "/work")
	return p.cl.Messages()[from:], err
}

// view is the client's timeline of sid after msgs; a live v1 client shows
// its own prompts, as rows of their own.
func view(t *testing.T, msgs []client.Message, sid string) []string {
	t.Helper()
	red := conformance.NewReducer(1)
	for _, m := range msgs {
		switch {
		case m.Dir == conformance.FromClient && m.Method == "session/prompt":
			var env struct {
				Params struct {
					Prompt []json.RawMessage `json:"prompt"`
				} `json:"params"`
			}
			_ = json.Unmarshal(m.Raw, &env)
			for _, b := range env.Params.Prompt {
				u, _ := json.Marshal(map[string]any{"sessionUpdate": "user_message_chunk", "content": b, "messageId": m.Seq})
				require.NoError(t, red.Apply(sid, u))
			}
		case m.Dir == conformance.FromAgent && m.Method == "session/update":
			require.NoError(t, red.ApplyMessage(m.Raw))
		}
	}
	var b strings.Builder
	require.NoError(t, red.Render(&b, sid))
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

var kits = []string{"acpsdk", "jsonrpc2"}

// TestRestartReplaysWhatTheClientSawLive: one process serves a session
// (messages, a completed and a failed compaction, a compaction applied
// after its prompt was answered), exits; a new process loads the session
// and the client is left with what it held live, with and without the
// capability, on both kits. Then a third process replays the session to
// the other kind of client.
func TestRestartReplaysWhatTheClientSawLive(t *testing.T) {
	for _, kit := range kits {
		for _, capable := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/capable=%v", kit, capable), func(t *testing.T) {
				dir := t.TempDir()
				p := start(t, kit, dir, capable)
				sid, err := p.cl.NewSession(p.ctx, "/work")
				require.NoError(t, err)
				for _, text := range []string{"hello", "/compact", "between", "/compact fail", "/compact late"} {
					p.prompt(sid, text)
				}
				time.Sleep(300 * time.Millisecond) // the late compaction is applied after its prompt
				p.prompt(sid, "bye")
				live := view(t, p.stop(), sid)
				require.Contains(t, strings.Join(live, "\n"), "echo: bye", "the live session")

				p2 := start(t, kit, dir, capable)
				replay, err := p2.load(sid)
				require.NoError(t, err, "session/load in a new process")
				got := view(t, replay, sid)
				late := lateRow(t, got)
				assert.Equal(t, live, without(got, late), "the replay holds what the client saw live")
				assert.Contains(t, got[late], "completed", "the compaction applied after its prompt was answered is in the history")
				p2.prompt(sid, "after the restart")
				p2.stop()

				p3 := start(t, kit, dir, !capable)
				replay3, err := p3.load(sid)
				require.NoError(t, err)
				assert.Contains(t, strings.Join(view(t, replay3, sid), "\n"), "after the restart", "the session went on in the second process")
				p3.stop()
			})
		}
	}
}

// lateRow is the row of the compaction applied after its prompt: the one
// right after "Compacting in the background.".
func lateRow(t *testing.T, rows []string) int {
	t.Helper()
	for i, r := range rows {
		if strings.Contains(r, "Compacting in the background.") && i+1 < len(rows) {
			return i + 1
		}
	}
	require.FailNow(t, "no late compaction in the replay", "%q", rows)
	return -1
}

func without(rows []string, i int) []string {
	return append(append([]string{}, rows[:i]...), rows[i+1:]...)
}

// TestSIGKILLMidCompactionReplaysFailed: the process is killed while a
// compaction streams its summary; the next process replays it failed
// ("the agent stopped before the compaction finished"), at its place,
// never in_progress.
func TestSIGKILLMidCompactionReplaysFailed(t *testing.T) {
	for _, kit := range kits {
		t.Run(kit, func(t *testing.T) {
			dir := t.TempDir()
			p := start(t, kit, dir, true)
			sid, err := p.cl.NewSession(p.ctx, "/work")
			require.NoError(t, err)
			p.prompt(sid, "hello")
			turn, err := p.cl.StartPrompt(p.ctx, sid, "/compact slow")
			require.NoError(t, err)
			_, err = p.cl.Wait(p.ctx, turn.From(), func(m client.Message) bool { return m.Kind == "compaction_summary_chunk" })
			require.NoError(t, err, "the compaction streams")
			require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
			<-p.waited
			p.waited <- nil

			p2 := start(t, kit, dir, true)
			replay, err := p2.load(sid)
			require.NoError(t, err)
			rows := view(t, replay, sid)
			require.Len(t, rows, 4, "%q", rows)
			assert.Equal(t, []string{"[user] hello", "[agent] echo: hello", "[user] /compact slow"}, rows[:3])
			assert.Contains(t, rows[3], "failed  error: "+history.ErrInterrupted.Error(), "the interrupted compaction replays failed")
			p2.stop()
		})
	}
}

// TestDamagedHistoryIsReportedNeverAPanic: a session log damaged in the
// middle fails its session/load with an error naming the file and the
// line; the process goes on serving other sessions.
func TestDamagedHistoryIsReportedNeverAPanic(t *testing.T) {
	for _, kit := range kits {
		t.Run(kit, func(t *testing.T) {
			dir := t.TempDir()
			p := start(t, kit, dir, true)
			sid, err := p.cl.NewSession(p.ctx, "/work")
			require.NoError(t, err)
			p.prompt(sid, "hello")
			p.prompt(sid, "/compact")
			p.stop()

			path := filepath.Join(dir, "sessions", sid+".jsonl")
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			i := bytes.Index(b, []byte("echo: hello"))
			require.Positive(t, i)
			b[i] = 'E' // the checksum no longer holds
			require.NoError(t, os.WriteFile(path, b, 0o600))

			p2 := start(t, kit, dir, true)
			replay, err := p2.load(sid)
			require.Error(t, err, "the damaged history's load fails")
			for _, m := range replay {
				assert.NotEqual(t, "session/update", m.Method, "nothing of a damaged history is replayed: %s", m.Raw)
			}
			p2.mu.Lock()
			logged := p2.stderr.String()
			p2.mu.Unlock()
			assert.NotContains(t, logged, "panic")
			sid2, err := p2.cl.NewSession(p2.ctx, "/work")
			require.NoError(t, err, "the process serves other sessions")
			p2.prompt(sid2, "still here")
			p2.stop()
		})
	}
}

// TestCancelledCompactionReplaysCancelled: the user cancels a compaction
// the runtime is streaming; the glue writes nothing for it (the runtime's
// "completed" carries the context's error), the kit settles it cancelled
// when the prompt returns, and a new process replays it cancelled.
func TestCancelledCompactionReplaysCancelled(t *testing.T) {
	for _, kit := range kits {
		t.Run(kit, func(t *testing.T) {
			dir := t.TempDir()
			p := start(t, kit, dir, true)
			sid, err := p.cl.NewSession(p.ctx, "/work")
			require.NoError(t, err)
			turn, err := p.cl.StartPrompt(p.ctx, sid, "/compact slow")
			require.NoError(t, err)
			_, err = p.cl.Wait(p.ctx, turn.From(), func(m client.Message) bool { return m.Kind == "compaction_summary_chunk" })
			require.NoError(t, err)
			require.NoError(t, p.cl.Cancel(p.ctx, sid))
			o, err := turn.Wait(p.ctx)
			require.NoError(t, err)
			assert.Equal(t, "cancelled", o.StopReason)
			live := view(t, p.stop(), sid)
			assert.Contains(t, strings.Join(live, "\n"), "] cancelled", "the client saw it cancelled")

			p2 := start(t, kit, dir, true)
			replay, err := p2.load(sid)
			require.NoError(t, err)
			assert.Equal(t, live, view(t, replay, sid))
			p2.stop()
		})
	}
}
