package soak

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The binaries under test: built once per test binary from this checkout,
// unless an environment variable names one (to measure another build, such
// as a checkout of an older commit, with the same tests).
const (
	agentEnv = "ACPCOMPACT_SOAK_AGENT" // a scenario-agent binary
	proxyEnv = "ACPCOMPACT_SOAK_PROXY" // an acpcompact binary
)

var (
	buildDir  string
	buildMu   sync.Mutex
	buildBins = map[string]string{}
)

// binary returns the path of the command built from pkg (a package path
// relative to the module root), or the one env names.
func binary(t testing.TB, env, pkg string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := buildBins[pkg]; ok {
		return p
	}
	root, err := moduleRoot()
	require.NoError(t, err, "moduleRoot")
	out := filepath.Join(buildDir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, "./"+pkg)
	cmd.Dir = root
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build ./%s\n%s", pkg, b)
	buildBins[pkg] = out
	return out
}

func agentBinary(t testing.TB) string {
	return binary(t, agentEnv, "examples/scenario-agent")
}

func proxyBinary(t testing.TB) string { return binary(t, proxyEnv, "cmd/acpcompact") }

// moduleRoot is the directory of go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// proc is an agent process on real pipes. The test holds both ends: it
// writes to stdin and reads (or does not read) stdout.
type proc struct {
	cmd    *exec.Cmd
	stdin  *os.File // the write end of the agent's stdin
	stdout *os.File // the read end of the agent's stdout
	stderr *tailBuffer
	exited chan struct{}
	err    error // the exit status, once exited is closed
	once   sync.Once
}

// startProc starts argv with its stdin and stdout on pipes.
func startProc(t testing.TB, argv ...string) *proc {
	t.Helper()
	inR, inW, err := os.Pipe()
	require.NoError(t, err, "os.Pipe")
	outR, outW, err := os.Pipe()
	require.NoError(t, err, "os.Pipe")
	p := &proc{cmd: exec.Command(argv[0], argv[1:]...), stdin: inW, stdout: outR, stderr: &tailBuffer{max: 16 << 10}, exited: make(chan struct{})}
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = inR, outW, p.stderr
	require.NoError(t, p.cmd.Start(), "p.cmd.Start")
	_ = inR.Close()
	_ = outW.Close()
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.stop)
	return p
}

// stop kills the process if it still runs and closes the test's ends of
// its pipes.
func (p *proc) stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		_ = p.stdin.Close()
		_ = p.stdout.Close()
	})
}

// signal sends sig to the process.
func (p *proc) signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// waitExit waits at most d for the process to exit.
func (p *proc) waitExit(d time.Duration) (time.Duration, bool) {
	start := time.Now()
	select {
	case <-p.exited:
		return time.Since(start), true
	case <-time.After(d):
		return time.Since(start), false
	}
}

// status reads fields of /proc/PID/status, in kB (or as counted, for
// Threads).
func status(pid int) (map[string]int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "VmRSS", "VmHWM", "Threads":
			f := strings.Fields(v)
			if len(f) > 0 {
				n, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					out[k] = n
				}
			}
		}
	}
	return out, nil
}

// mem is a process's resident memory, in MiB.
type mem struct {
	RSS, Peak float64 // VmRSS and VmHWM
	Threads   int64
}

func (m mem) String() string {
	return fmt.Sprintf("RSS %.1f MiB (peak %.1f MiB, %d threads)", m.RSS, m.Peak, m.Threads)
}

func memOf(t testing.TB, pid int) mem {
	t.Helper()
	s, err := status(pid)
	require.NoError(t, err, "reading /proc/%d/status", pid)
	return mem{RSS: float64(s["VmRSS"]) / 1024, Peak: float64(s["VmHWM"]) / 1024, Threads: s["Threads"]}
}

// children returns the pids of pid's child processes.
func children(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(bytes.Clone(b.buf))
}

var _ io.Writer = (*tailBuffer)(nil)

func selfPID() int { return os.Getpid() }
