package soak

import (
	"context"
	"io"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pausable is a reader that stops passing reads on once paused: the
// client stops reading, and the agent's stdout pipe fills.
type pausable struct {
	r      io.Reader
	mu     sync.Mutex
	paused chan struct{} // non-nil while paused; closed by resume
}

func (p *pausable) Read(b []byte) (int, error) {
	p.mu.Lock()
	ch := p.paused
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
	return p.r.Read(b)
}

func (p *pausable) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused == nil {
		p.paused = make(chan struct{})
	}
}

func (p *pausable) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused != nil {
		close(p.paused)
		p.paused = nil
	}
}

// TestNonReadingClientDoesNotHangTheAgent: a client that stops reading
// stdout cannot keep the agent alive. The client starts `/compact flood
// 100000` and reads nothing more, so the agent's stdout pipe and its
// output queue fill and the flood blocks; then the end of stdin, SIGTERM,
// SIGINT, or acpx's sequence (stdin closed, SIGTERM 100 ms later) each end
// the agent within exitBound (the README promises at most
// agentkit.CloseTimeout, 5 s, for a client that does not read, after the
// scenario agent's DrainTimeout for the end of input).
func TestNonReadingClientDoesNotHangTheAgent(t *testing.T) {
	t.Parallel()
	bin := agentBinary(t)
	for _, tc := range []struct {
		name string
		stop func(p *proc) error
	}{
		{"stdin EOF", func(p *proc) error { return p.stdin.Close() }},
		{"SIGTERM", func(p *proc) error { return p.signal(syscall.SIGTERM) }},
		{"SIGINT", func(p *proc) error { return p.signal(syscall.SIGINT) }},
		{"stdin EOF then SIGTERM", func(p *proc) error {
			if err := p.stdin.Close(); err != nil {
				return err
			}
			time.Sleep(100 * time.Millisecond)
			return p.signal(syscall.SIGTERM)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p := startProc(t, bin, "--log-level", "warn")
			out := &pausable{r: p.stdout}
			rec := newRecord()
			c := newClient(out, p.stdin, rec.add)
			require.NoError(t, c.initialize(ctx, true), "c.initialize")
			sid, err := c.newSession(ctx)
			require.NoError(t, err, "c.newSession")
			_, _, err = c.start("session/prompt", promptParams(sid, "/compact flood 100000"))
			require.NoError(t, err, "starting the flood prompt")
			select {
			case <-rec.open:
			case <-ctx.Done():
				require.FailNow(t, "the flood did not start", "stderr:\n%s", p.stderr)
			}
			out.pause()
			time.Sleep(300 * time.Millisecond) // the pipe and the queue fill; the flood blocks
			require.NoError(t, tc.stop(p), "tc.stop")
			took, ok := p.waitExit(exitBound)
			report(t, "flood 100000, client not reading, %s: exited=%v after %v", tc.name, ok, took.Round(time.Millisecond))
			require.True(t, ok, "the agent is still running %v after %s with a client that does not read\nstderr:\n%s", took, tc.name, p.stderr)
			assert.NoError(t, p.err, "exit status\nstderr:\n%s", p.stderr)
			out.resume()
		})
	}
}
