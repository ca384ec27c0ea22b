package kittest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Crash tests run the agent in a child process (the test binary itself),
// because a panic that the kit lets go on ends the process, as it would in
// production. The child speaks ACP on file descriptors 3 (in) and 4 (out),
// so test-framework output on stdout cannot corrupt the wire.

// ChildStdio returns the ACP stream of a child started by StartChild.
func ChildStdio() (in io.ReadCloser, out io.WriteCloser) {
	return os.NewFile(3, "acp-in"), os.NewFile(4, "acp-out")
}

type fileRWC struct {
	r *os.File
	w *os.File
}

func (f fileRWC) Read(p []byte) (int, error)  { return f.r.Read(p) }
func (f fileRWC) Write(p []byte) (int, error) { return f.w.Write(p) }
func (f fileRWC) Close() error {
	werr := f.w.Close()
	rerr := f.r.Close()
	if werr != nil {
		return werr
	}
	return rerr
}

// Child is an agent process and the client connected to it.
type Child struct {
	Client *Client
	cmd    *exec.Cmd
	stderr bytes.Buffer
}

// StartChild re-runs the test binary with env set (for TestMain to run the
// agent instead of the tests) and connects a client to it.
func StartChild(t testing.TB, env string) *Child {
	t.Helper()
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	c := &Child{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	c.cmd.Env = append(os.Environ(), env)
	c.cmd.ExtraFiles = []*os.File{inR, outW}
	c.cmd.Stderr = &c.stderr
	require.NoError(t, c.cmd.Start())
	_ = inR.Close()
	_ = outW.Close()
	c.Client = NewClient(context.Background(), fileRWC{r: outR, w: inW})
	return c
}

// Signal sends sig to the child process.
func (c *Child) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// Wait waits for the client to see the end of the stream and the process
// to exit, and returns the child's stderr and its exit error.
func (c *Child) Wait() (string, error) {
	<-c.Client.Conn.DisconnectNotify()
	err := c.cmd.Wait()
	return c.stderr.String(), err
}

// startPrompted starts a child (see StartChild), initializes it as a v1
// client with the compaction capability, and sends a prompt for session
// without waiting for its answer: the crash and signal checks end the
// turn with the process.
func startPrompted(ctx context.Context, t testing.TB, env, session string) *Child {
	t.Helper()
	child := StartChild(t, env)
	_, err := child.Client.Initialize(ctx, 1, true)
	require.NoError(t, err)
	_, err = child.Client.Conn.DispatchCall(ctx, "session/prompt", PromptParams(session, nil))
	require.NoError(t, err)
	return child
}

// StartThenPanic is the runtime of CheckCrashSettles's child: it opens
// cmp_1, streams one chunk, then panics.
func StartThenPanic(ctx context.Context, s Starter) {
	c, err := s.Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable())
	if err != nil {
		panic(err)
	}
	_ = c.Chunk(ctx, protocol.Text("partial"))
	panic("boom in the runtime")
}

// CheckCrashSettles starts a child (see StartChild) whose prompt handler
// runs StartThenPanic, prompts it, and checks what both stacks promise:
// the panic goes on and ends the process, and before that the compaction
// was settled failed with emitter.ErrAgentCrashed, inside the turn, valid
// against the schema.
func CheckCrashSettles(t *testing.T, env, session string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	child := startPrompted(ctx, t, env, session)
	stderr, err := child.Wait()
	require.Error(t, err, "the agent did not crash with its panic\n%s", stderr)
	require.Contains(t, stderr, "panic: boom in the runtime", "the agent did not crash with its panic")
	evs := child.Client.Wire.Events()
	require.Equal(t, []string{"in_progress", "chunk", "failed"}, Statuses(evs, "cmp_1"), "statuses\n%s", Dump(evs))
	assert.Equal(t, fmt.Sprintf("%q", emitter.ErrAgentCrashed.Error()), string(Field(Compactions(evs)[2], "error")), "the failed update's error")
	assert.NoError(t, CheckTurns(evs, 1))
	Validate(t, evs, 1)
}

// OpenUntilEnd is the runtime of SignalAgent's prompt handler: it opens
// cmp_1 and waits for the prompt's context to end; it returns the context's
// cause, or Start's error.
func OpenUntilEnd(ctx context.Context, s Starter) error {
	if _, err := s.Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable()); err != nil {
		return err
	}
	<-ctx.Done()
	return context.Cause(ctx)
}

// SignalAgent is the agent process of CheckSignalSettles, which stops as
// the kits' documentation says an agent should. serve puts the kit's
// agent, whose prompt handler runs OpenUntilEnd, on the ACP stream in, out
// and returns a channel closed when that connection ends; on SIGINT or
// SIGTERM, or at that end, SignalAgent calls shutdown (the kit's Shutdown)
// bounded by closeTimeout (its CloseTimeout), and returns for the process
// to exit.
func SignalAgent(serve func(in io.ReadCloser, out io.WriteCloser) (done <-chan struct{}), shutdown func(context.Context) error, closeTimeout time.Duration) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := serve(ChildStdio())
	select {
	case <-ctx.Done():
	case <-done:
	}
	sctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = shutdown(sctx)
}

// SignalBound is how long a child may take to exit after a signal.
const SignalBound = 10 * time.Second

// CheckSignalSettles starts a child (see StartChild) that runs
// SignalAgent, prompts it, waits for cmp_1 to start, sends sig, and checks
// what both stacks promise: the child exits, cleanly and within
// SignalBound, and before that it wrote cmp_1's terminal update (failed
// with emitter.ErrConnectionClosed), valid against the schema.
func CheckSignalSettles(t *testing.T, env, session string, sig os.Signal) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	child := startPrompted(ctx, t, env, session)
	_, err := child.Client.Wire.Wait(ctx, func(e Event) bool { return e.CompactionID == "cmp_1" && e.Status == "in_progress" })
	require.NoError(t, err)
	require.NoError(t, child.Signal(sig))
	exited := make(chan struct{})
	var stderr string
	var exitErr error
	go func() {
		stderr, exitErr = child.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(SignalBound):
		_ = child.cmd.Process.Kill()
		<-exited
		require.Failf(t, "the agent did not exit in time", "not within %v of %v\n%s", SignalBound, sig, stderr)
	}
	assert.NoError(t, exitErr, "exit\n%s", stderr)
	evs := child.Client.Wire.Events()
	require.Equal(t, []string{"in_progress", "failed"}, Statuses(evs, "cmp_1"), "statuses\n%s", Dump(evs))
	assert.Equal(t, fmt.Sprintf("%q", emitter.ErrConnectionClosed.Error()), string(Field(Compactions(evs)[1], "error")), "the failed update's error")
	Validate(t, evs, 1)
}
