package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exitBound is how long an agent may take to exit once told to: by a
// signal, or by the end of its input, whether or not the client reads.
const exitBound = 10 * time.Second

// record collects what the agent wrote, on the client's reading goroutine.
type record struct {
	mu   sync.Mutex
	msgs []*msg
	// open is signalled with the first in-progress report of a compaction
	// (or of its fallback tool call).
	open     chan struct{}
	openOnce sync.Once
}

func newRecord() *record { return &record{open: make(chan struct{})} }

func (r *record) add(m *msg) {
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
	if k, st := kindStatus(m); k != "" && st == "in_progress" {
		r.openOnce.Do(func() { close(r.open) })
	}
}

// kindStatus returns what m says of a compaction: "compaction" for a
// standard compaction_update, "toolcall" for the fallback tool call, with
// its status; "" for anything else.
func kindStatus(m *msg) (string, string) {
	u := m.Params.Update
	switch {
	case m.Method != "session/update":
		return "", ""
	case u.SessionUpdate == "compaction_update":
		return "compaction", u.Status
	case (u.SessionUpdate == "tool_call" || u.SessionUpdate == "tool_call_update") && u.ToolCallID != "":
		return "toolcall", u.Status
	}
	return "", ""
}

// last returns the last status the agent reported for the compaction, and
// the lines it wrote (for a failure's message).
func (r *record) last() (string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	status := ""
	var b strings.Builder
	for _, m := range r.msgs {
		if _, st := kindStatus(m); st != "" {
			status = st
		}
		b.Write(m.raw)
	}
	return status, b.String()
}

// lastRecord returns the status in the _meta record of the compaction's
// last report that carries one.
func (r *record) lastRecord() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	status := ""
	for _, m := range r.msgs {
		if st := m.Params.Update.Meta.Record.Status; st != "" {
			status = st
		}
	}
	return status
}

func terminalStatus(s string) bool { return s == "completed" || s == "failed" || s == "cancelled" }

// TestSignalWritesTheTerminalUpdate: an agent that gets SIGINT or SIGTERM
// while a compaction is open writes that compaction's terminal update to
// stdout before it exits (Kit.Shutdown), within exitBound. Each run starts
// the scenario agent binary, opens a compaction (/compact hang, which
// never reports again, or /compact slow, which streams), signals it a
// random 0-5 ms after the client saw it start, reads stdout to its end and
// checks that the compaction's last report there is terminal. Runs
// alternate SIGINT and SIGTERM, the two scripts, and a client with the
// compaction capability (standard updates) and one without (the fallback
// tool call).
//
// 100 runs in `make test`; 1,000 under ACPCOMPACT_SOAK=1 (make soak), or
// ACPCOMPACT_SOAK_SIGNAL_RUNS=N.
func TestSignalWritesTheTerminalUpdate(t *testing.T) {
	t.Parallel()
	runs := count("ACPCOMPACT_SOAK_SIGNAL_RUNS", 100, 1000)
	bin := agentBinary(t)
	var lost, slow atomic.Int64
	var failures []string
	var mu sync.Mutex
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range runs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			sig := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM}[i%2]
			script := []string{"/compact hang", "/compact slow"}[(i/2)%2]
			capable := (i/4)%2 == 0
			if err := signalRun(t, bin, sig, script, capable); err != nil {
				if strings.Contains(err.Error(), "did not exit") {
					slow.Add(1)
				} else {
					lost.Add(1)
				}
				mu.Lock()
				failures = append(failures, fmt.Sprintf("run %d (%v, %q, capable=%v): %v", i, sig, script, capable, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	report(t, "%d runs in %v: %d lost the terminal update, %d did not exit within %v",
		runs, time.Since(start).Round(time.Millisecond), lost.Load(), slow.Load(), exitBound)
	for i, f := range failures {
		if i == 5 {
			assert.Fail(t, fmt.Sprintf("... and %d more runs failed", len(failures)-5))
			break
		}
		assert.Fail(t, "a run failed", f)
	}
}

// signalRun is one run of TestSignalWritesTheTerminalUpdate.
func signalRun(t *testing.T, bin string, sig syscall.Signal, script string, capable bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := startProc(t, bin, "--log-level", "warn")
	defer p.stop()
	rec := newRecord()
	c := newClient(p.stdout, p.stdin, rec.add)
	if err := c.initialize(ctx, capable); err != nil {
		return err
	}
	sid, err := c.newSession(ctx)
	if err != nil {
		return err
	}
	if _, _, err := c.start("session/prompt", promptParams(sid, script)); err != nil {
		return err
	}
	select {
	case <-rec.open:
	case <-ctx.Done():
		return fmt.Errorf("the compaction did not start: %v\nstderr:\n%s", ctx.Err(), p.stderr)
	}
	time.Sleep(time.Duration(rand.IntN(5000)) * time.Microsecond)
	if err := p.signal(sig); err != nil {
		return err
	}
	if took, ok := p.waitExit(exitBound); !ok {
		return fmt.Errorf("the agent did not exit within %v of %v", took, sig)
	}
	<-c.done // the client has read everything the agent wrote
	if status, wire := rec.last(); !terminalStatus(status) {
		return fmt.Errorf("the agent exited (%v) with the compaction still %q on the wire:\n%s\nstderr:\n%s", p.err, status, wire, p.stderr)
	}
	if p.err != nil {
		return fmt.Errorf("exit status after %v: %v\nstderr:\n%s", sig, p.err, p.stderr)
	}
	return nil
}

// acpxKill is how long acpx waits after its SIGTERM before it sends
// SIGKILL.
const acpxKill = 1500 * time.Millisecond

// TestAcpxStopSequence plays how acpx (0.19.1) stops a one-shot run that
// the user interrupts: session/cancel, 2.5 s, stdin closed, SIGTERM 100 ms
// later, SIGKILL 1.5 s after that. The compaction (/compact hang, which
// never reports again; the cancel grace is the default 5 s, longer than
// acpx waits) must be settled cancelled on the wire, and the agent gone,
// before the SIGKILL would come.
func TestAcpxStopSequence(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := startProc(t, agentBinary(t), "--log-level", "warn")
	rec := newRecord()
	c := newClient(p.stdout, p.stdin, rec.add)
	require.NoError(t, c.initialize(ctx, false), "initialize") // acpx has no compaction capability
	sid, err := c.newSession(ctx)
	require.NoError(t, err, "c.newSession")
	_, _, err = c.start("session/prompt", promptParams(sid, "/compact hang"))
	require.NoError(t, err, "starting the /compact hang prompt")
	select {
	case <-rec.open:
	case <-ctx.Done():
		require.FailNow(t, "the compaction did not start")
	}
	require.NoError(t, c.notify("session/cancel", map[string]any{"sessionId": sid}), "c.notify")
	time.Sleep(2500 * time.Millisecond)
	_ = p.stdin.Close()
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, p.signal(syscall.SIGTERM), "p.signal")
	took, ok := p.waitExit(acpxKill)
	report(t, "acpx's stop sequence: exited=%v %v after the SIGTERM", ok, took.Round(time.Millisecond))
	require.True(t, ok, "the agent was still running %v after the SIGTERM: acpx would SIGKILL it now\nstderr:\n%s", took, p.stderr)
	<-c.done
	// The fallback tool call ends `failed` ("Compaction cancelled"); its
	// record says what the compaction became.
	status, wire := rec.last()
	assert.True(t, terminalStatus(status), "the compaction ended %q, want a terminal update:\n%s\nstderr:\n%s", status, wire, p.stderr)
	assert.Equal(t, "cancelled", rec.lastRecord(), "what the compaction's record says it became:\n%s\nstderr:\n%s", wire, p.stderr)
}
