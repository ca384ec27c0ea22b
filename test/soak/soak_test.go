package soak

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/internal/scenario"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bounds of the soak: what the agent (and the proxy) may keep after the
// run compared with before it, once the sessions are closed.
const (
	soakRSSMiB     = 8 // a binary's VmRSS, or the in-process heap and RSS
	soakGoroutines = 3 // in process, with no connection open before or after
)

// sessions follows, per session, the last status of each compaction, and
// lets a player wait for a compaction to start.
type sessions struct {
	mu      sync.Mutex
	status  map[string]map[string]string // session -> compaction -> status
	waiting map[string]chan struct{}     // session+"\x00"+compaction -> closed at in_progress
}

func newSessions() *sessions {
	return &sessions{status: map[string]map[string]string{}, waiting: map[string]chan struct{}{}}
}

func (s *sessions) onMsg(m *msg) {
	u := m.Params.Update
	if m.Method != "session/update" || u.SessionUpdate != "compaction_update" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	byID := s.status[m.Params.SessionID]
	if byID == nil {
		byID = map[string]string{}
		s.status[m.Params.SessionID] = byID
	}
	byID[u.CompactionID] = u.Status
	if u.Status == "in_progress" {
		if ch := s.waitLocked(m.Params.SessionID, u.CompactionID); ch != nil {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	}
}

func (s *sessions) waitLocked(sid, cmp string) chan struct{} {
	k := sid + "\x00" + cmp
	ch := s.waiting[k]
	if ch == nil {
		ch = make(chan struct{})
		s.waiting[k] = ch
	}
	return ch
}

// started returns a channel closed once compaction cmp of sid has started.
func (s *sessions) started(sid, cmp string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waitLocked(sid, cmp)
}

// end checks that every compaction of sid was settled, and forgets sid.
func (s *sessions) end(sid string, want int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	byID := s.status[sid]
	delete(s.status, sid)
	for k := range s.waiting {
		if len(k) > len(sid) && k[:len(sid)] == sid && k[len(sid)] == 0 {
			delete(s.waiting, k)
		}
	}
	if len(byID) != want {
		return fmt.Errorf("session %s: %d compactions on the wire, want %d: %v", sid, len(byID), want, byID)
	}
	for id, st := range byID {
		if !terminalStatus(st) {
			return fmt.Errorf("session %s: compaction %s left %q", sid, id, st)
		}
	}
	return nil
}

// playSession is one soak session: a prompt, /compact, /compact fail, a
// /compact slow cancelled as soon as it starts, then session/close.
// Every compaction must end settled on the wire.
func playSession(ctx context.Context, c *client, ss *sessions) error {
	sid, err := c.newSession(ctx)
	if err != nil {
		return err
	}
	for _, p := range []struct{ text, stop string }{
		{"hello", "end_turn"},
		{"/compact", "end_turn"},
		{"/compact fail", "end_turn"},
	} {
		m, err := c.call(ctx, "session/prompt", promptParams(sid, p.text))
		if err != nil {
			return err
		}
		if stop, err := stopReason(m); err != nil || stop != p.stop {
			return fmt.Errorf("%q: stop reason %q, %v", p.text, stop, err)
		}
	}
	started := ss.started(sid, "cmp_3")
	_, ch, err := c.start("session/prompt", promptParams(sid, "/compact slow"))
	if err != nil {
		return err
	}
	select {
	case <-started:
	case <-ctx.Done():
		return fmt.Errorf("/compact slow did not start: %w", ctx.Err())
	}
	if err := c.notify("session/cancel", map[string]any{"sessionId": sid}); err != nil {
		return err
	}
	m, err := await(ctx, "session/prompt", ch)
	if err != nil {
		return err
	}
	if stop, err := stopReason(m); err != nil || stop != "cancelled" {
		return fmt.Errorf("/compact slow cancelled: stop reason %q, %v", stop, err)
	}
	m, err = c.call(ctx, "session/close", map[string]any{"sessionId": sid})
	if err != nil {
		return err
	}
	if m.Error != nil {
		return fmt.Errorf("session/close: %s", m.raw)
	}
	return ss.end(sid, 3)
}

// soakCounts are the sessions of the warm-up and of the measured run.
func soakCounts() (warm, run int) {
	run = count("ACPCOMPACT_SOAK_SESSIONS", 300, 10_000)
	return max(run/10, 50), run
}

// TestSoakKitAgentInProcess plays soak sessions against the scenario
// agent (agentkit) in this process, over in-memory pipes: 8 connections at
// a time, each serving 25 sessions one after the other, then closing. After
// the run, with no connection open, the goroutine count is back within
// soakGoroutines of what it was after the warm-up, and the live heap and
// the RSS (after runtime.GC and debug.FreeOSMemory; not under -race)
// within soakRSSMiB. It is the one test of the package that does not run
// in parallel: the others' goroutines would count.
func TestSoakKitAgentInProcess(t *testing.T) {
	warm, n := soakCounts()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	a, err := scenario.New(scenario.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err, "scenario.New")
	play := func(total int) {
		t.Helper()
		require.NoError(t, soakInProcess(ctx, a, total, 8, 25), "soakInProcess")
	}
	play(warm)
	before := settledStats(t)
	start := time.Now()
	play(n)
	took := time.Since(start)
	after := settledStats(t)
	runtime.KeepAlive(a) // what the agent keeps counts, so it must be live
	report(t, "%d sessions in %v: goroutines %d -> %d; heap in use %.1f -> %.1f MiB; RSS %.1f -> %.1f MiB (peak %.1f MiB)",
		n, took.Round(time.Millisecond), before.goroutines, after.goroutines, before.heap, after.heap, before.mem.RSS, after.mem.RSS, after.mem.Peak)
	assert.LessOrEqual(t, after.goroutines-before.goroutines, soakGoroutines, "goroutines more after the run than before (%d -> %d)", before.goroutines, after.goroutines)
	assert.LessOrEqual(t, after.heap-before.heap, float64(soakRSSMiB), "live heap growth in MiB over the run")
	// The race detector's own memory is not returned by FreeOSMemory:
	// under -race the RSS is reported, not checked.
	if !raceEnabled {
		assert.LessOrEqual(t, after.mem.RSS-before.mem.RSS, float64(soakRSSMiB), "RSS growth in MiB over the run")
	}
}

// soakInProcess plays total sessions on connections to a, conns at a time,
// perConn sessions on each.
func soakInProcess(ctx context.Context, a *scenario.Agent, total, conns, perConn int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, conns)
	for w := range conns {
		wg.Go(func() {
			for next.Load() < int64(total) && errs[w] == nil {
				errs[w] = soakConn(ctx, a, func() bool { return next.Add(1) <= int64(total) }, perConn)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// soakConn serves one connection of a, on which it plays up to perConn
// sessions while more() says so; then it closes the connection and waits
// for Serve to return.
func soakConn(ctx context.Context, a *scenario.Agent, more func() bool, perConn int) error {
	agentEnd, clientEnd := net.Pipe()
	served := make(chan error, 1)
	go func() { served <- a.Serve(context.WithoutCancel(ctx), agentEnd) }()
	ss := newSessions()
	c := newClient(clientEnd, clientEnd, ss.onMsg)
	err := c.initialize(ctx, true)
	for i := 0; err == nil && i < perConn && more(); i++ {
		err = playSession(ctx, c, ss)
	}
	_ = clientEnd.Close()
	<-c.done
	if serr := <-served; err == nil {
		err = serr
	}
	return err
}

type stats struct {
	goroutines int
	heap       float64 // MiB in use
	mem        mem
}

// settledStats measures this process after a GC that returns freed memory
// to the OS.
func settledStats(t *testing.T) stats {
	t.Helper()
	var s stats
	// Goroutines of connections just closed may still be on their way out.
	for range 50 {
		runtime.GC()
		debug.FreeOSMemory()
		g := runtime.NumGoroutine()
		if g == s.goroutines {
			break
		}
		s.goroutines = g
		time.Sleep(20 * time.Millisecond)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.heap = float64(ms.HeapInuse) / (1 << 20)
	s.mem = memOf(t, selfPID())
	return s
}

// TestSoakThroughProxy plays soak sessions through the proxy (`acpcompact
// proxy -- scenario-agent`, both binaries built with go build) on one
// connection, 16 sessions at a time. After the run, each process's RSS is
// within soakRSSMiB of what it was after the warm-up: with the sessions
// closed, neither keeps anything of them.
func TestSoakThroughProxy(t *testing.T) {
	t.Parallel()
	warm, n := soakCounts()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	p := startProc(t, proxyBinary(t), "proxy", "--log-level", "error", "--", agentBinary(t), "--log-level", "error")
	ss := newSessions()
	c := newClient(p.stdout, p.stdin, ss.onMsg)
	require.NoError(t, c.initialize(ctx, true), "initialize\nstderr:\n%s", p.stderr)
	kids := children(p.cmd.Process.Pid)
	require.Len(t, kids, 1, "the proxy's child processes")
	agentPID := kids[0]
	play := func(total int) {
		t.Helper()
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make([]error, 16)
		for w := range errs {
			wg.Go(func() {
				for next.Add(1) <= int64(total) && errs[w] == nil {
					errs[w] = playSession(ctx, c, ss)
				}
			})
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...), "sessions through the proxy\nstderr:\n%s", p.stderr)
	}
	play(warm)
	proxyBefore, agentBefore := memOf(t, p.cmd.Process.Pid), memOf(t, agentPID)
	start := time.Now()
	play(n)
	took := time.Since(start)
	proxyAfter, agentAfter := memOf(t, p.cmd.Process.Pid), memOf(t, agentPID)
	report(t, "%d sessions in %v: proxy RSS %.1f -> %.1f MiB (peak %.1f MiB, threads %d -> %d); scenario agent RSS %.1f -> %.1f MiB (peak %.1f MiB, threads %d -> %d)",
		n, took.Round(time.Millisecond), proxyBefore.RSS, proxyAfter.RSS, proxyAfter.Peak, proxyBefore.Threads, proxyAfter.Threads,
		agentBefore.RSS, agentAfter.RSS, agentAfter.Peak, agentBefore.Threads, agentAfter.Threads)
	assert.LessOrEqual(t, proxyAfter.RSS-proxyBefore.RSS, float64(soakRSSMiB), "the proxy's RSS growth in MiB over the run")
	assert.LessOrEqual(t, agentAfter.RSS-agentBefore.RSS, float64(soakRSSMiB), "the scenario agent's RSS growth in MiB over the run")
	// The end of input ends both, within the bound.
	_ = p.stdin.Close()
	if took, ok := p.waitExit(exitBound); assert.True(t, ok, "the proxy did not exit within %v of the end of its input", took) {
		assert.NoError(t, p.err, "exit status\nstderr:\n%s", p.stderr)
	}
}
