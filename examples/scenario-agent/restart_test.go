package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/internal/scenario/client"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/sourcegraph/jsonrpc2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The process-level tests of sessions that survive a restart: the real
// binary, real pipes, real signals, the state directory on disk.

var (
	tmpRoot  string // removed when the tests end
	binOnce  sync.Once
	binPath  string
	binError error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "scenario-agent-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tmpRoot = dir
	// The agent keeps its sessions in the user's state directory unless
	// told otherwise: for these tests, in a temporary one.
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// agentBinary builds the command once for the package.
func agentBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binPath = filepath.Join(tmpRoot, "scenario-agent")
		if runtime.GOOS == "windows" {
			binPath += ".exe"
		}
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binError = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binError, "building the scenario agent")
	return binPath
}

// agentProc is one scenario-agent process with a client on its stdio.
type agentProc struct {
	t      *testing.T
	ctx    context.Context
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	cl     *client.Client
	stderr *wiretest.Buffer
	waited chan error
}

// startAgent starts the agent on state directory dir with args, and
// initializes a client of the given protocol version and capability.
func startAgent(t *testing.T, dir string, version int, capable bool, args ...string) *agentProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a hang guard
	t.Cleanup(cancel)
	cmd := exec.Command(agentBinary(t), append([]string{"--state-dir", dir, "--heartbeat", "0", "--log-level", "debug"}, args...)...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err, "cmd.StdinPipe")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err, "cmd.StdoutPipe")
	p := &agentProc{t: t, ctx: ctx, cmd: cmd, stdin: stdin, stderr: &wiretest.Buffer{}, waited: make(chan error, 1)}
	cmd.Stderr = p.stderr
	require.NoError(t, cmd.Start(), "cmd.Start")
	go func() { p.waited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.waited
		if t.Failed() {
			t.Logf("agent %d stderr:\n%s", cmd.Process.Pid, p.stderr.String())
		}
	})
	p.cl = client.New(context.Background(), pipes{r: stdout, w: stdin})
	_, err = p.cl.Initialize(ctx, version, capable)
	require.NoError(t, err, "initialize\nstderr:\n%s", p.stderr.String())
	return p
}

// newSession creates a session and waits for the v1 commands update that
// follows.
func (p *agentProc) newSession() string {
	p.t.Helper()
	from := p.cl.Len()
	sid, err := p.cl.NewSession(p.ctx, "/work")
	require.NoError(p.t, err, "p.cl.NewSession")
	if p.cl.Version() == 1 {
		p.waitFor(from, func(m client.Message) bool { return m.Kind == "available_commands_update" })
	}
	return sid
}

func (p *agentProc) prompt(sid, text string) client.Outcome {
	p.t.Helper()
	o, err := p.cl.Prompt(p.ctx, sid, text)
	require.NoError(p.t, err, "prompt %q", text)
	return o
}

// promptAndCancel starts a prompt, waits for its compaction to show
// (the first summary chunk, or the fallback's start), cancels, and waits
// for the turn's end.
func (p *agentProc) promptAndCancel(sid, text string) client.Outcome {
	p.t.Helper()
	turn := p.startShown(sid, text)
	require.NoError(p.t, p.cl.Cancel(p.ctx, sid), "p.cl.Cancel")
	o, err := turn.Wait(p.ctx)
	require.NoError(p.t, err, "turn.Wait")
	return o
}

// startShown starts a prompt and waits until its compaction shows: a
// summary chunk, or the fallback's first form.
func (p *agentProc) startShown(sid, text string) *client.Turn {
	p.t.Helper()
	turn, err := p.cl.StartPrompt(p.ctx, sid, text)
	require.NoError(p.t, err, "p.cl.StartPrompt")
	p.waitFor(turn.From(), func(m client.Message) bool {
		return m.Kind == "compaction_summary_chunk" || m.Kind == "tool_call" ||
			(m.Kind == "compaction_update" && m.Status == "in_progress" && !strings.Contains(text, "slow"))
	})
	return turn
}

func (p *agentProc) waitFor(from int, pred func(client.Message) bool) {
	p.t.Helper()
	_, err := p.cl.Wait(p.ctx, from, func(m client.Message) bool { return m.Dir == conformance.FromAgent && pred(m) })
	require.NoError(p.t, err, "waiting for an agent message\nwire:\n%s", dumpMsgs(p.cl.Messages()))
}

// load loads sid and returns the replay (the messages from the request to
// its response).
func (p *agentProc) load(sid string) []client.Message {
	p.t.Helper()
	from := p.cl.Len()
	require.NoError(p.t, p.cl.Load(p.ctx, sid, "/work"), "session/load %s\nstderr:\n%s", sid, p.stderr.String())
	return p.cl.Messages()[from:]
}

// stop ends the agent the way a client does, closing its stdin, and
// checks that it exits cleanly.
func (p *agentProc) stop() []client.Message {
	p.t.Helper()
	_ = p.stdin.Close()
	<-p.cl.Done()
	select {
	case err := <-p.waited:
		p.waited <- err
		assert.NoError(p.t, err, "agent exit\nstderr:\n%s", p.stderr.String())
	case <-p.ctx.Done():
		require.FailNow(p.t, "the agent did not exit after its stdin closed")
	}
	return p.cl.Messages()
}

// signal sends sig and waits for the process to end.
func (p *agentProc) signal(sig os.Signal) error {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(sig), "p.cmd.Process.Signal")
	select {
	case err := <-p.waited:
		p.waited <- err
		<-p.cl.Done()
		return err
	case <-p.ctx.Done():
		require.FailNow(p.t, fmt.Sprintf("the agent did not end after %v", sig))
		return nil
	}
}

func (p *agentProc) pid() int { return p.cmd.Process.Pid }

// checkConformance runs the conformance checker with the official schemas
// and strict replay over a whole connection.
func checkConformance(t *testing.T, what string, msgs []client.Message) {
	t.Helper()
	var tr bytes.Buffer
	for _, m := range msgs {
		tr.WriteString(m.Line() + "\n")
	}
	vs, err := conformance.CheckTranscript(&tr, conformance.WithSchema(schematest.For(t, 1), schematest.For(t, 2)), conformance.WithStrictReplay())
	require.NoError(t, err, "conformance.CheckTranscript")
	assert.Empty(t, vs, "%s: conformance violations", what)
	if t.Failed() {
		t.Logf("%s:\n%s", what, dumpMsgs(msgs))
	}
}

func dumpMsgs(msgs []client.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "%3d %s\n", m.Seq, m.Line())
	}
	return b.String()
}

// view is the client's timeline of session sid, one string a row (see
// the scenario package's tests): messages by kind and text, compactions
// by ID, status, summary, error and _meta, fallback tool calls by ID,
// status, title and content. A live v1 client shows its own prompts;
// they are rows too.
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
				u, _ := json.Marshal(map[string]any{"sessionUpdate": "user_message_chunk", "messageId": m.Seq, "content": b})
				require.NoError(t, red.Apply(sid, u), "red.Apply")
			}
		case m.Dir == conformance.FromAgent:
			require.NoError(t, red.ApplyMessage(m.Raw), "reducer")
		}
	}
	var out []string
	for _, it := range red.Timeline(sid) {
		switch it.Kind {
		case conformance.KindUserMessage, conformance.KindAgentMessage:
			out = append(out, string(it.Kind)+": "+it.Text)
		case conformance.KindCompaction:
			j, _ := json.Marshal(struct {
				ID, Status string
				Summary    []json.RawMessage
				Error      *string
				Meta       map[string]json.RawMessage
			}{it.ID, it.Status, it.Summary, it.Error, it.Meta})
			out = append(out, "compaction: "+string(j))
		default:
			var u struct {
				Content []struct {
					Content struct{ Text string } `json:"content"`
				} `json:"content"`
			}
			_ = json.Unmarshal(it.Raw, &u)
			var content []string
			for _, c := range u.Content {
				content = append(content, c.Content.Text)
			}
			out = append(out, fmt.Sprintf("%s: %s %s %q %q", it.Kind, it.ID, it.Status, it.Text, content))
		}
	}
	return out
}

// statuses returns the compaction rows of a view as "ID status", with
// the fallback tool call's ID read as its compaction's, and an ID minted
// by a process that reopened the session (cmp_<mark>_N, a random mark a
// process) as cmp_N*.
func statuses(rows []string) []string {
	var out []string
	for _, r := range rows {
		switch {
		case strings.HasPrefix(r, "compaction: "):
			var c struct{ ID, Status string }
			_ = json.Unmarshal([]byte(strings.TrimPrefix(r, "compaction: ")), &c)
			out = append(out, reopenedID.ReplaceAllString(c.ID, "cmp_$1*")+" "+c.Status)
		case strings.HasPrefix(r, "tool_call: compact-"):
			f := strings.Fields(strings.TrimPrefix(r, "tool_call: compact-"))
			out = append(out, reopenedID.ReplaceAllString(f[0], "cmp_$1*")+" "+f[1])
		}
	}
	return out
}

var reopenedID = regexp.MustCompile(`^cmp_[0-9a-f]{8}_(\d+)$`)

func sameView(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return // no rows either way, whether the slices are nil or empty
	}
	assert.Equal(t, want, got, what)
}

// modes are the two v1 clients: with and without the capability.
var modes = []struct {
	name    string
	capable bool
}{{"capable", true}, {"fallback", false}}

// restartFlags make every outcome quick: the cancel grace and the watchdog.
var restartFlags = []string{"--cancel-grace", "200ms", "--compaction-timeout", "1s", "--auto-compact-every", "2"}

// TestRestartLoadReplaysWhatTheClientSawLive plays every compaction
// outcome the scenario agent has in one process, stops it, and loads the
// session in a new process: the client's view of the replay is the live
// one, row for row (status, summary, error, record), with and without the
// capability. The session then goes on in that process, and a third
// process replays all of it, to the other kind of client and to a v2
// client. The conformance checker, with strict replay, passes every
// connection.
func TestRestartLoadReplaysWhatTheClientSawLive(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			live := startAgent(t, dir, 1, m.capable, restartFlags...)
			sid := live.newSession()
			live.prompt(sid, "hello")                  // and again, below: the automatic compaction
			live.prompt(sid, "/compact")               // cmp_1 completed, summary streamed and final
			live.prompt(sid, "/compact nosummary")     // cmp_2 completed, no summary
			live.prompt(sid, "/compact fail")          // cmp_3 failed, partial summary cleared
			live.prompt(sid, "/compact failearly")     // cmp_4 failed before any start
			live.promptAndCancel(sid, "/compact slow") // cmp_5 cancelled by the runtime
			live.promptAndCancel(sid, "/compact hang") // cmp_6 cancelled by the kit at the grace
			live.prompt(sid, "/compact hang")          // cmp_7 failed by the watchdog
			o := live.prompt(sid, "/compact panic")    // cmp_8 failed, the agent crashed
			assert.NotNil(t, o.Err, "/compact panic answered %+v", o)
			live.prompt(sid, "/compact flood 5") // cmp_9 completed, keeping what it streamed
			live.prompt(sid, "/compact twice")   // cmp_10, cmp_11
			live.prompt(sid, "again")            // cmp_12, automatic
			liveMsgs := live.stop()
			checkConformance(t, "live", liveMsgs)
			liveView := view(t, liveMsgs, sid)
			want := []string{"cmp_1 completed", "cmp_2 completed", "cmp_3 failed", "cmp_4 failed", "cmp_5 cancelled", "cmp_6 cancelled",
				"cmp_7 failed", "cmp_8 failed", "cmp_9 completed", "cmp_10 completed", "cmp_11 completed", "cmp_12 completed"}
			if !m.capable {
				// The tool call shows a cancel as failed ("Compaction cancelled").
				want[4], want[5] = "cmp_5 failed", "cmp_6 failed"
			}
			sameView(t, "the live compactions", statuses(liveView), want)

			loaded := startAgent(t, dir, 1, m.capable, restartFlags...)
			require.NotEqual(t, live.pid(), loaded.pid(), "not a new process")
			replay := loaded.load(sid)
			for _, msg := range replay {
				assert.NotEqual(t, "in_progress", msg.Status, "the replay has an in_progress update: %s", msg.Raw)
			}
			sameView(t, "the replay in a new process, against the live view", view(t, replay, sid), liveView)
			loaded.prompt(sid, "/compact nosummary") // cmp_<mark>_13: the IDs go on
			loadedMsgs := loaded.stop()
			checkConformance(t, "session/load in a new process", loadedMsgs)

			// A third process, to the other kind of v1 client.
			other := startAgent(t, dir, 1, !m.capable)
			otherMsgs := other.load(sid)
			other.stop()
			checkConformance(t, "session/load by the other kind of client", other.cl.Messages())
			want = append(want, "cmp_13* completed")
			if m.capable {
				want[4], want[5] = "cmp_5 failed", "cmp_6 failed" // now seen as tool calls
			} else {
				want[4], want[5] = "cmp_5 cancelled", "cmp_6 cancelled"
			}
			sameView(t, "the other client's compactions", statuses(view(t, otherMsgs, sid)), want)
			for _, msg := range otherMsgs {
				if m.capable {
					assert.NotContains(t, []string{"compaction_update", "compaction_summary_chunk"}, msg.Kind, "a client without the capability got %s", msg.Raw)
				}
			}

			// And v2: session/resume replays from the start.
			v2 := startAgent(t, dir, 2, false)
			require.NoError(t, v2.cl.Resume(v2.ctx, sid, "/work", true), "session/resume")
			checkConformance(t, "session/resume in v2", v2.stop())
		})
	}
}

// TestSIGKILLDuringACompactionReplaysItFailed: the agent is killed
// (SIGKILL) while /compact slow streams its summary; a new process loads
// the session and replays that compaction as failed, "the agent stopped
// before the compaction finished", at its place: nothing in_progress. The
// session goes on. SIGTERM instead settles it before the process exits,
// and the replay is what the live client saw.
func TestSIGKILLDuringACompactionReplaysItFailed(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			live := startAgent(t, dir, 1, m.capable)
			sid := live.newSession()
			live.prompt(sid, "hello")
			live.prompt(sid, "/compact")
			live.startShown(sid, "/compact slow")
			time.Sleep(150 * time.Millisecond) // a chunk or two more
			err := live.signal(syscall.SIGKILL)
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "the agent ended with %v, want SIGKILL", err)
			require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "the signal that ended the agent")

			loaded := startAgent(t, dir, 1, m.capable)
			replay := loaded.load(sid)
			rows := view(t, replay, sid)
			failed := fmt.Sprintf(`compaction: {"ID":"cmp_2","Status":"failed","Summary":null,"Error":%q,"Meta":null}`, "the agent stopped before the compaction finished")
			if !m.capable {
				failed = `tool_call: compact-cmp_2 failed "Compact conversation" ["Compaction failed: the agent stopped before the compaction finished"]`
			}
			wantRows := []string{"user_message: hello", "agent_message: hello", "user_message: /compact", "", "agent_message: " + compactedText,
				"user_message: /compact slow", failed}
			if len(rows) == len(wantRows) {
				wantRows[3] = rows[3] // cmp_1, as it was
			}
			sameView(t, "the replay after SIGKILL", rows, wantRows)
			for _, msg := range replay {
				assert.NotEqual(t, "in_progress", msg.Status, "the replay has an in_progress update: %s", msg.Raw)
			}
			o := loaded.prompt(sid, "/compact") // cmp_<mark>_3
			assert.Equal(t, "end_turn", o.StopReason, "the session does not go on: %+v", o)
			checkConformance(t, "session/load after SIGKILL", loaded.stop())

			again := startAgent(t, dir, 1, m.capable)
			sameView(t, "the compactions a third process replays", statuses(view(t, again.load(sid), sid)),
				[]string{"cmp_1 completed", "cmp_2 failed", "cmp_3* completed"})
			checkConformance(t, "the third process", again.stop())
		})
	}
	t.Run("SIGTERM", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		live := startAgent(t, dir, 1, true)
		sid := live.newSession()
		live.prompt(sid, "hello")
		live.startShown(sid, "/compact slow")
		require.NoError(t, live.signal(syscall.SIGTERM), "the agent's exit after SIGTERM")
		liveView := view(t, live.cl.Messages(), sid)
		sameView(t, "what the live client saw", statuses(liveView), []string{"cmp_1 failed"})

		loaded := startAgent(t, dir, 1, true)
		sameView(t, "the replay after SIGTERM, against the live view", view(t, loaded.load(sid), sid), liveView)
		checkConformance(t, "session/load after SIGTERM", loaded.stop())
	})
}

// compactedText is the scenario agent's message after /compact.
const compactedText = "Context compacted: a summary now stands in for the earlier conversation. Carrying on from there."

// TestUnreadableStateFiles: a corrupt state file, a foreign one and the
// file of another session each fail their session/load with a JSON-RPC
// error naming the file (and the line); the same process then loads the
// other sessions, one with a torn final line, and serves them.
func TestUnreadableStateFiles(t *testing.T) {
	dir := t.TempDir()
	first := startAgent(t, dir, 1, true)
	sids := make([]string, 4)
	for i := range sids {
		sids[i] = first.newSession()
		first.prompt(sids[i], "hello")
		first.prompt(sids[i], "/compact")
	}
	first.stop()
	corrupt, foreign, torn, good := sids[0], sids[1], sids[2], sids[3]
	path := func(sid string) string { return filepath.Join(dir, sid+".jsonl") }

	data, err := os.ReadFile(path(corrupt))
	require.NoError(t, err, "os.ReadFile")
	lines := bytes.SplitAfter(data, []byte("\n"))
	lines[2] = bytes.Replace(lines[2], []byte("hello"), []byte("jello"), 1) // the agent's answer: line 3
	writeFile(t, path(corrupt), bytes.Join(lines, nil))
	writeFile(t, path(foreign), []byte("# notes\nThis is not a session file.\n"))
	f, err := os.OpenFile(path(torn), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err, "os.OpenFile")
	tornBytes := `{"crc":"0badf00d","kind":"message","id":"msg_user_5","data":{"role":"us`
	_, err = f.WriteString(tornBytes)
	require.NoError(t, err, "writing the torn line")
	f.Close()
	other := "sess_0123456789ab" // a copy of another session's file
	good2, err := os.ReadFile(path(good))
	require.NoError(t, err, "os.ReadFile")
	writeFile(t, path(other), good2)

	p := startAgent(t, dir, 1, true)
	for _, tc := range []struct {
		sid, what string
		line      int
	}{
		{corrupt, "corrupt session log: checksum mismatch", 3},
		{foreign, "not a session log", 1},
		{other, fmt.Sprintf("not a session log: the log of session %q", good), 1},
	} {
		err := p.cl.Load(p.ctx, tc.sid, "/work")
		var rpcErr *jsonrpc2.Error
		where := fmt.Sprintf("%s:%d: ", path(tc.sid), tc.line)
		if assert.ErrorAs(t, err, &rpcErr, "session/load %s: want an internal error", tc.sid) {
			assert.Equal(t, int64(jsonrpc2.CodeInternalError), rpcErr.Code, "session/load %s: error code", tc.sid)
			assert.Contains(t, rpcErr.Message, where+tc.what, "session/load %s: the error names the place", tc.sid)
		}
	}
	assert.ErrorContains(t, p.cl.Load(p.ctx, "sess_nothere0000", "/work"), "-32002", "session/load of a session without a file")
	assert.ErrorContains(t, p.cl.Load(p.ctx, "../../etc/passwd", "/work"), "-32002", "session/load of a path")
	for _, sid := range []string{torn, good} {
		replay := p.load(sid)
		assert.Equal(t, []string{"cmp_1 completed"}, statuses(view(t, replay, sid)), "session %s replays", sid)
		o := p.prompt(sid, "/compact nosummary")
		assert.Equal(t, "end_turn", o.StopReason, "session %s does not go on: %+v", sid, o)
	}
	msgs := p.stop()
	checkConformance(t, "the loads", msgs)
	assert.NotContains(t, p.stderr.String(), "panic", "the agent logged a panic")
	after, err := os.ReadFile(path(torn))
	require.NoError(t, err, "os.ReadFile")
	assert.NotContains(t, string(after), tornBytes, "the torn line was not cut off before the next append")
	assert.True(t, bytes.HasSuffix(after, []byte("\n")), "the file does not end with a whole line:\n%s", after)
	// The next process reads everything it wrote.
	again := startAgent(t, dir, 1, true)
	assert.Equal(t, []string{"cmp_1 completed", "cmp_2* completed"}, statuses(view(t, again.load(torn), torn)), "the replay after the torn line")
	again.stop()
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, data, 0o600), "os.WriteFile")
}
