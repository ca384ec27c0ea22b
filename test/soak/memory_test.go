package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// MiB bounds of the memory tests (see docs/agentkit.md and docs/proxy.md, "Memory bounds").
const (
	unknownGrowthMiB = 16  // 50,000 prompts for unknown sessions
	pipelinedPeakMiB = 256 // 100,000 pipelined prompts
)

// pipeline writes n requests made by params(i), at most window of them
// unanswered at once (window <= 0: no limit, all are written as fast as the
// agent reads them), and waits for every response; check sees each one, on
// the client's reading goroutine.
func pipeline(ctx context.Context, c *client, n, window int, method string, params func(i int) any, check func(*msg) error) error {
	var sem chan struct{}
	if window > 0 {
		sem = make(chan struct{}, window)
	}
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	fail := func(err error) { failed.CompareAndSwap(nil, &err) }
	for i := range n {
		if sem != nil {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if failed.Load() != nil || ctx.Err() != nil {
			break
		}
		wg.Add(1)
		_, err := c.startFunc(method, params(i), func(m *msg) {
			defer wg.Done()
			switch {
			case m == nil:
				fail(fmt.Errorf("%s: the agent's output ended before its response", method))
			case check != nil:
				if err := check(m); err != nil {
					fail(err)
				}
			}
			if sem != nil {
				<-sem
			}
		})
		if err != nil {
			return err
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if p := failed.Load(); p != nil {
		return *p
	}
	return nil
}

func unknownSession(m *msg) error {
	if m.Error == nil || m.Error.Code != -32002 {
		return fmt.Errorf("a prompt for an unknown session was answered %s", m.raw)
	}
	return nil
}

// TestUnknownSessionPromptsDoNotGrowMemory: prompts for sessions the agent
// does not know are answered with an error and leave nothing behind: the
// scenario agent's RSS after 50,000 of them (after a warm-up of 5,000) is
// within unknownGrowthMiB of what it was before.
func TestUnknownSessionPromptsDoNotGrowMemory(t *testing.T) {
	t.Parallel()
	n := count("ACPCOMPACT_SOAK_UNKNOWN", 50_000, 50_000)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := startProc(t, agentBinary(t), "--log-level", "error")
	c := newClient(p.stdout, p.stdin, nil)
	require.NoError(t, c.initialize(ctx, true), "c.initialize")
	round := 0
	play := func(k int) {
		t.Helper()
		base := round
		round += k
		err := pipeline(ctx, c, k, 256, "session/prompt", func(i int) any {
			return promptParams(fmt.Sprintf("sess_unknown_%d", base+i), "hello")
		}, unknownSession)
		require.NoError(t, err, "prompts for unknown sessions\nagent stderr:\n%s", p.stderr)
	}
	play(5_000)
	before := memOf(t, p.cmd.Process.Pid)
	play(n)
	after := memOf(t, p.cmd.Process.Pid)
	growth := after.RSS - before.RSS
	report(t, "%d prompts for unknown sessions: RSS %.1f -> %.1f MiB (growth %.1f MiB, %.0f B/prompt), peak %.1f MiB",
		n, before.RSS, after.RSS, growth, growth*(1<<20)/float64(n), after.Peak)
	assert.LessOrEqual(t, growth, float64(unknownGrowthMiB), "RSS growth in MiB over %d prompts for unknown sessions", n)
}

// TestPipelinedPromptsAreBounded: a client that writes 100,000 prompts
// without waiting for any answer, and reads nothing until it has written
// them all or the agent stops taking them, does not make the agent run a
// handler for each: the agent stops reading (its handlers are bounded,
// agentkit.AsyncHandler), the client's writes block, and the agent's peak
// RSS stays within pipelinedPeakMiB. Then the client reads, and every
// prompt is answered.
func TestPipelinedPromptsAreBounded(t *testing.T) {
	t.Parallel()
	n := count("ACPCOMPACT_SOAK_PIPELINED", 100_000, 100_000)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := startProc(t, agentBinary(t), "--log-level", "error")
	out := &pausable{r: p.stdout}
	c := newClient(out, p.stdin, nil)
	require.NoError(t, c.initialize(ctx, true), "c.initialize")
	sid, err := c.newSession(ctx)
	require.NoError(t, err, "c.newSession")
	out.pause()
	var written, answered, busy atomic.Int64
	// Resume reading once every prompt is written, or once the agent has
	// taken none for a while (it stopped reading: back-pressure).
	resumed := make(chan int64, 1)
	go func() {
		last, since := int64(-1), time.Now()
		for {
			time.Sleep(50 * time.Millisecond)
			w := written.Load()
			if w >= int64(n) || ctx.Err() != nil || (w == last && time.Since(since) > time.Second) {
				out.resume()
				resumed <- w
				return
			}
			if w != last {
				last, since = w, time.Now()
			}
		}
	}()
	params, err := json.Marshal(promptParams(sid, "hello"))
	require.NoError(t, err, "json.Marshal")
	start := time.Now()
	err = pipeline(ctx, c, n, 0, "session/prompt", func(int) any {
		written.Add(1)
		return json.RawMessage(params)
	}, func(m *msg) error {
		answered.Add(1)
		if m.Error != nil {
			busy.Add(1) // "a prompt is already running in this session"
			return nil
		}
		_, err := stopReason(m)
		return err
	})
	taken := <-resumed
	require.NoError(t, err, "pipelined prompts\nagent stderr:\n%s", p.stderr)
	after := memOf(t, p.cmd.Process.Pid)
	report(t, "%d pipelined prompts in %v: peak RSS %.1f MiB, RSS after %.1f MiB, %d threads; the client wrote %d before it read; %d answered, %d of them refused as busy",
		n, time.Since(start).Round(time.Millisecond), after.Peak, after.RSS, after.Threads, taken, answered.Load(), busy.Load())
	assert.LessOrEqual(t, after.Peak, float64(pipelinedPeakMiB), "peak RSS in MiB for %d pipelined prompts", n)
}
