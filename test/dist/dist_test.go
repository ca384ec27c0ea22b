//go:build unix

package dist_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
)

// bound is how long any one step may take (a build, an install, a
// process's exit): a hang guard, not a performance claim.
const bound = 60 * time.Second

// npmPlatform names the host as the npm packages do (process.platform,
// process.arch), or "" for a host they do not cover.
func npmPlatform() string {
	osName := map[string]string{"linux": "linux", "darwin": "darwin", "windows": "win32"}[runtime.GOOS]
	cpu := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	if osName == "" || cpu == "" {
		return ""
	}
	return osName + "-" + cpu
}

// installed is the npm packages of this host, built and installed once.
type installed struct {
	root     string // the module root
	version  string // the VERSION file's, vX.Y.Z
	prefix   string // the npm prefix they are installed in
	launcher string // prefix/node_modules/.bin/acpcompact
	agent    string // the scenario agent, built
}

// install builds the host's platform package and the launcher twice
// (checking that both builds give the same bytes), installs them offline
// with npm and builds the scenario agent.
func install(t *testing.T) *installed {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			schematest.Node(t, fmt.Errorf("%s is not on PATH, so the npm packages cannot be installed and run; install Node.js 18+ with npm", tool))
		}
	}
	plat := npmPlatform()
	if plat == "" {
		t.Skipf("SKIPPED: the npm packages ship no binary for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	v, err := os.ReadFile(filepath.Join(root, "VERSION"))
	require.NoError(t, err)
	in := &installed{root: root, version: strings.TrimSpace(string(v))}
	npmVersion := strings.TrimPrefix(in.version, "v")
	tmp := t.TempDir()

	// The builder once, then twice over: the same bytes both times.
	mkdist := filepath.Join(tmp, "mkdist")
	run(t, root, nil, "go", "build", "-o", mkdist, "./npm/mkdist")
	goPlatform := runtime.GOOS + "/" + runtime.GOARCH
	var sums [2]string
	for i := range sums {
		out := filepath.Join(tmp, "dist"+strconv.Itoa(i))
		run(t, root, nil, mkdist, "-platforms", goPlatform, "-o", out)
		b, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
		require.NoError(t, err)
		sums[i] = string(b)
	}
	require.Equal(t, sums[0], sums[1], "two dist builds of the same tree differ: the build is not reproducible")
	dist := filepath.Join(tmp, "dist0")
	launcherTgz := filepath.Join(dist, "acpcompact-"+npmVersion+".tgz")
	platformTgz := filepath.Join(dist, "acpcompact-"+plat+"-"+npmVersion+".tgz")
	for _, f := range []string{launcherTgz, platformTgz} {
		assert.Contains(t, sums[0], "  "+filepath.Base(f)+"\n", "SHA256SUMS lists every tarball")
	}

	// Offline, from an empty cache, and with a registry nobody listens
	// on: nothing can come from the network. The other platforms'
	// packages are optional dependencies npm cannot fetch here, so it
	// leaves them out; the host's is given, and satisfies the launcher's
	// dependency on it.
	in.prefix = filepath.Join(tmp, "prefix")
	require.NoError(t, os.MkdirAll(in.prefix, 0o755))
	run(t, in.prefix, nil, "npm", "install", "--offline", "--no-audit", "--no-fund", "--loglevel=error",
		"--cache", filepath.Join(tmp, "npm-cache"), "--registry", "http://127.0.0.1:9/",
		"--prefix", in.prefix, launcherTgz, platformTgz)
	in.launcher = filepath.Join(in.prefix, "node_modules", ".bin", "acpcompact")
	for _, other := range []string{"linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "win32-x64", "win32-arm64"} {
		_, err := os.Stat(filepath.Join(in.prefix, "node_modules", "@acpcompact", other))
		assert.Equal(t, other == plat, err == nil, "@acpcompact/%s installed: %v (only the host's should be)", other, err == nil)
	}

	in.agent = filepath.Join(tmp, "scenario-agent")
	run(t, root, nil, "go", "build", "-o", in.agent, "./examples/scenario-agent")
	return in
}

// run runs a command to completion in dir, failing the test with its
// output if it fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out.String())
	case <-time.After(bound):
		_ = cmd.Process.Kill()
		<-done
		require.FailNow(t, "timed out", "%s %s took more than %s:\n%s", name, strings.Join(args, " "), bound, out.String())
	}
	return out.String()
}

func TestInstalledLauncher(t *testing.T) {
	in := install(t)

	t.Run("VersionIsTheStampedRelease", func(t *testing.T) {
		p := start(t, in.launcher, "version")
		code := p.wait(t)
		assert.Equal(t, 0, code, "stderr: %s", p.stderr())
		assert.Equal(t, "acpcompact "+in.version+"\n", string(p.readAll(t)))
	})

	t.Run("ProxyProfilesListsTheAgents", func(t *testing.T) {
		p := start(t, in.launcher, "proxy", "--profiles")
		out := string(p.readAll(t))
		assert.Equal(t, 0, p.wait(t), "stderr: %s", p.stderr())
		for _, name := range []string{"claude-acp", "codex-acp", "qwen-code", "copilot-cli"} {
			assert.Contains(t, out, name)
		}
	})

	t.Run("ProxiedSessionReportsTheCompaction", func(t *testing.T) {
		p := start(t, in.launcher, "proxy", "--", in.agent, "--state-dir=")
		p.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`)
		init := p.response(t, 0)
		assert.Contains(t, string(init), `"name":"scenario-agent"`)
		p.send(t, `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
		var created struct {
			Result struct{ SessionID string } `json:"result"`
		}
		require.NoError(t, json.Unmarshal(p.response(t, 1), &created))
		require.NotEmpty(t, created.Result.SessionID)
		p.send(t, `{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"`+created.Result.SessionID+`","prompt":[{"type":"text","text":"/compact"}]}}`)
		var statuses []string
		ids := map[string]bool{}
		for {
			line := p.next(t)
			var m struct {
				ID     *int `json:"id"`
				Params struct {
					Update struct {
						Kind         string `json:"sessionUpdate"`
						CompactionID string `json:"compactionId"`
						Status       string `json:"status"`
					} `json:"update"`
				} `json:"params"`
				Result *struct {
					StopReason string `json:"stopReason"`
				} `json:"result"`
			}
			require.NoError(t, json.Unmarshal(line, &m), "%s", line)
			if m.ID != nil && *m.ID == 2 {
				require.NotNil(t, m.Result, "the prompt failed: %s", line)
				assert.Equal(t, "end_turn", m.Result.StopReason)
				break
			}
			if u := m.Params.Update; u.Kind == "compaction_update" {
				statuses = append(statuses, u.Status)
				ids[u.CompactionID] = true
			}
		}
		assert.Equal(t, []string{"in_progress", "completed"}, compact(statuses), "the client's compaction updates, in order")
		assert.Len(t, ids, 1, "one compaction entity")
		p.stdin.Close()
		assert.Equal(t, 0, p.wait(t), "the session ended at the end of input; stderr: %s", p.stderr())
	})

	t.Run("AgentExitStatusPassesThrough", func(t *testing.T) {
		p := start(t, in.launcher, "proxy", "--", "sh", "-c", "exit 3")
		assert.Equal(t, 3, p.wait(t), "stderr: %s", p.stderr())
	})

	t.Run("SIGTERMReachesTheProxyAndTheAgent", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "got-term")
		pids := filepath.Join(t.TempDir(), "pids")
		p := start(t, in.launcher, "proxy", "--", "sh", "-c", waitingAgent, "sh", pids, marker)
		_, proxyPID := p.agentPIDs(t, pids)
		require.NoError(t, syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM))
		code := p.wait(t)
		got, err := os.ReadFile(marker)
		require.NoError(t, err, "the agent never got SIGTERM; stderr: %s", p.stderr())
		assert.Equal(t, "TERM\n", string(got))
		assert.Equal(t, 42, code, "the agent's exit status, through the proxy and the launcher; stderr: %s", p.stderr())
		assert.False(t, alive(proxyPID), "the proxy outlived the launcher")
	})

	t.Run("ChildKilledBySignalKillsTheLauncherAlike", func(t *testing.T) {
		pids := filepath.Join(t.TempDir(), "pids")
		p := start(t, in.launcher, "proxy", "--", "sh", "-c", waitingAgent, "sh", pids, filepath.Join(t.TempDir(), "unused"))
		_, proxyPID := p.agentPIDs(t, pids)
		require.NoError(t, syscall.Kill(proxyPID, syscall.SIGKILL))
		p.wait(t)
		assert.True(t, p.status.Signaled(), "the launcher exited with status %d instead of dying of its child's signal", p.status.ExitStatus())
		assert.Equal(t, syscall.SIGKILL, p.status.Signal())
	})

	t.Run("MissingPlatformPackageIsExplained", func(t *testing.T) {
		scope := filepath.Join(in.prefix, "node_modules", "@acpcompact")
		hidden := scope + ".hidden"
		require.NoError(t, os.Rename(scope, hidden))
		t.Cleanup(func() { _ = os.Rename(hidden, scope) })
		p := start(t, in.launcher, "version")
		assert.Equal(t, 127, p.wait(t))
		assert.Contains(t, p.stderr(), "acpcompact: the platform package @acpcompact/"+npmPlatform()+"@"+strings.TrimPrefix(in.version, "v")+" is not installed")
	})
}

// waitingAgent is an "agent" that writes its own and its parent's (the
// proxy's) process IDs to $1, then waits; on SIGTERM it writes TERM to $2
// and exits 42.
const waitingAgent = `trap 'echo TERM > "$2"; exit 42' TERM; echo "$$ $PPID" > "$1.tmp" && mv "$1.tmp" "$1"; while :; do sleep 0.05; done`

// compact drops repeats: a heartbeat may re-send in_progress.
func compact(s []string) []string {
	var out []string
	for _, x := range s {
		if len(out) == 0 || out[len(out)-1] != x {
			out = append(out, x)
		}
	}
	return out
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// proc is one launcher process, with the test as its client: pipes for
// stdin and stdout, a file for stderr, in a process group of its own so
// that cleanup ends the proxy and the agent too.
type proc struct {
	cmd    *exec.Cmd
	stdin  *os.File
	lines  chan []byte
	errf   string
	exited chan struct{}
	status syscall.WaitStatus
}

func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	errf := filepath.Join(t.TempDir(), "stderr")
	ef, err := os.Create(errf)
	require.NoError(t, err)
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, ef
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	inR.Close()
	outW.Close()
	ef.Close()
	p := &proc{cmd: cmd, stdin: inW, lines: make(chan []byte, 1024), errf: errf, exited: make(chan struct{})}
	go func() {
		defer close(p.lines)
		br := bufio.NewReader(outR)
		for {
			l, err := br.ReadBytes('\n')
			if len(l) > 0 {
				p.lines <- l
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			p.status = ws
		}
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		inW.Close()
		outR.Close()
		if t.Failed() {
			t.Logf("stderr:\n%s", p.stderr())
		}
	})
	return p
}

func (p *proc) stderr() string {
	b, _ := os.ReadFile(p.errf)
	return string(b)
}

func (p *proc) send(t *testing.T, line string) {
	t.Helper()
	_, err := p.stdin.Write([]byte(line + "\n"))
	require.NoError(t, err, "write to the launcher")
}

// next returns the next line the launcher wrote.
func (p *proc) next(t *testing.T) []byte {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		require.True(t, ok, "the launcher's output ended; stderr: %s", p.stderr())
		return l
	case <-time.After(bound):
		require.FailNow(t, "no output", "within %s; stderr: %s", bound, p.stderr())
	}
	return nil
}

// response skips to the response of request id.
func (p *proc) response(t *testing.T, id int) []byte {
	t.Helper()
	for {
		l := p.next(t)
		var m struct {
			ID *int `json:"id"`
		}
		if json.Unmarshal(l, &m) == nil && m.ID != nil && *m.ID == id {
			return l
		}
	}
}

// readAll returns everything the launcher writes until its output ends.
func (p *proc) readAll(t *testing.T) []byte {
	t.Helper()
	var b []byte
	timeout := time.After(bound)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				return b
			}
			b = append(b, l...)
		case <-timeout:
			require.FailNow(t, "output not closed", "within %s", bound)
		}
	}
}

// wait waits for the launcher to exit and returns its exit code (-1 for a
// signal; see status).
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(bound):
		require.FailNow(t, "no exit", "the launcher did not exit within %s; stderr: %s", bound, p.stderr())
	}
	return 0
}

// agentPIDs waits for waitingAgent to write its process ID and its
// parent's.
func (p *proc) agentPIDs(t *testing.T, file string) (agent, proxy int) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		b, err := os.ReadFile(file)
		if err == nil {
			_, err = fmt.Sscan(string(b), &agent, &proxy)
			require.NoError(t, err, "pids file %q", b)
			return agent, proxy
		}
		require.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
		select {
		case <-p.exited:
			require.FailNow(t, "the launcher exited before the agent started", "stderr: %s", p.stderr())
		case <-time.After(20 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "the agent did not start within %s", bound)
	}
}
