package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/acpcompact/acpcompact/audit"
	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/host"
	"github.com/acpcompact/acpcompact/internal/lines"
	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/acpcompact/acpcompact/proxy/agents"
)

// Side names for log positions.
const (
	sideClient = "client"
	sideAgent  = "agent"
	sideProxy  = "proxy"
)

// conn is one connection: its two line paths, and the state they share
// (the wire state is the host's: see doc.go).
//
// Two goroutines share it. The client pump only reads client lines, notes
// each with the engine and writes it to the agent; it never writes to the
// client. Everything that writes to the client (the agent pump, a
// cancel-grace timer, the final settlement) holds emu for a whole message,
// so the client's stream is never interleaved and the emitter, router and
// translator state (all guarded by emu) see one writer at a time. emu may
// be held while calling the engine, never the reverse (the engine calls
// back only from its timers, with no lock of its own held).
type conn struct {
	p   *Proxy
	log *slog.Logger
	h   *host.Host
	e   *turn.Engine // h's
	// follower rebuilds each session's history from the wire for the
	// audit of its summaries (WithAudit); nil without it.
	follower *audit.Follower

	emu  sync.Mutex
	out  clientStream
	cout *clientWriter // out's writer, which Run abandons when the client does not read
	// stopped: the connection has ended; set under emu (or, when Run
	// abandons a client that does not read, without it), read without it
	// so that the client pump never waits on a client write.
	stopped atomic.Bool
	// clientEnded: the client's input has ended, so the end of the
	// agent's output that follows is the connection closing, not the
	// agent crashing.
	clientEnded atomic.Bool
	// em is the host's emitter, and mode how the client takes compaction
	// (capability.DefaultPolicy's), both set by the initialize exchange.
	em     *emitter.Emitter
	mode   capability.Mode
	router *router
	trans  map[string]*transState
	// tl is the agent's translators, as its profile chose them.
	tl *agents.Set
	// awaiting is the agent line that waits for its confirmation, if any (await.go).
	awaiting *awaitLine
	ain      *agentInput

	check *checkState

	// Scratch memory of the pumps: apick, aenv, asid and scratch belong
	// to the agent pump (under emu), cpick, cenv and csid to the client
	// pump.
	apick, cpick  skim.Picker
	fpick, cfpick skim.Picker // for the readings of Go peers (foldAgent, foldClient)
	// depth and cdepth tell, for the checker's sake, a message nested
	// deeper than encoding/json reads (tooDeep).
	depth, cdepth skim.Picker
	aenv, cenv    envelope
	cfenv         envelope
	asid, csid    sidCache
	scratch       struct {
		decision decision
		turn     turnView
		state    sessionView
		update   agents.Update
	}
	alr *lines.Reader // the agent pump's reader
}

// ownAgentLine hands the memory of b, a part of the agent line being
// handled, over to the caller, when the reader can let it go (see
// lines.Reader.Detach). Only the agent pump calls it.
func (c *conn) ownAgentLine(b []byte) bool { return c.alr != nil && c.alr.Detach(b) }

func newConn(p *Proxy, clientOut io.Writer, agentIn io.Writer) *conn {
	cout := &clientWriter{w: clientOut}
	c := &conn{
		p:      p,
		log:    p.cfg.logger,
		cout:   cout,
		ain:    &agentInput{w: newLineWriter(agentIn), log: p.cfg.logger},
		trans:  map[string]*transState{},
		router: newRouter(),
	}
	c.apick, c.fpick, c.cpick, c.cfpick = newPicker(), newPicker(), newPicker(), newPicker()
	if p.cfg.audit {
		c.follower = audit.NewFollower()
	}
	c.out.lineWriter = newLineWriter(cout)
	c.out.follower = c.follower
	c.h = host.New(host.Config{
		Name: "proxy", Logger: p.cfg.logger, CancelGrace: p.cfg.cancelGrace,
		Notifier: c, Options: c.emitterOptions,
		// Nothing about compaction between turns: what the agent reports
		// then is held until the session's next turn.
		Outside:       emitter.HoldOutsideTurn,
		TurnEndReason: p.cfg.turnReason, CloseReason: p.cfg.turnReason,
		DeferBegin: true, Serialize: c.Serialize,
		Hooks: host.Hooks{Before: c.beforeSettle, After: c.afterSettle, Negotiated: c.negotiated},
	})
	c.e = c.h.Engine()
	if p.cfg.checker != nil {
		c.check = &checkState{ch: p.cfg.checker, which: p.cfg.checked, log: c.log}
		c.out.check = c.check
	}
	return c
}

// Serialize runs a timer's work (the host's cancel grace, the emitter's
// heartbeat: see emitter.Notifier) under emu, in the order of the agent
// pump's writes, and then lets what it wrote go.
func (c *conn) Serialize(f func()) {
	c.emu.Lock()
	defer c.emu.Unlock()
	if c.stopped.Load() {
		return
	}
	f()
	_ = c.out.flush() // a failure is sticky: the agent pump reports it
}

// ---- agent → client ----

// pumpAgent forwards agent lines to the client, correcting compaction
// reporting, and settles what is open when the agent's output ends.
func (c *conn) pumpAgent(ctx context.Context, r io.Reader) error {
	lr := lines.NewReader(r, c.p.cfg.maxLine)
	c.alr = lr
	for {
		raw, long, rerr := lr.Next()
		if len(raw) > 0 {
			huge := len(raw) >= collectAfter
			werr, err := c.handleAgent(ctx, lr, raw, long)
			raw = nil
			if lr.Release() && huge {
				c.releaseLine()
			}
			if werr != nil {
				// The client is gone: nothing the proxy settles reaches it.
				c.finish(ctx, emitter.ErrConnectionClosed)
				return werr
			}
			if err != nil {
				rerr = err
			}
		}
		if c.stopped.Load() {
			return nil // Run stopped on its context and settled already
		}
		if rerr != nil {
			reason := c.p.cfg.exitReason
			if ctx.Err() != nil || c.clientEnded.Load() || c.p.terminating.Load() {
				// Run closed agentOut to stop, or the agent's output
				// ended after the client's input did or after the host
				// began to end the connection: the connection closed,
				// and the agent did not crash.
				reason = emitter.ErrConnectionClosed
			}
			c.finish(ctx, reason)
			if errors.Is(rerr, io.EOF) {
				return nil
			}
			return fmt.Errorf("%w: line %d: %w", ErrAgentOutput, lr.Lines(), rerr)
		}
	}
}

// newPicker is a picker with no nesting limit: the peers read messages
// with JSON.parse, which has none, and what they read the proxy must read
// too.
func newPicker() skim.Picker { return skim.Picker{Unbounded: true} }

// noPaths picks nothing: a pick with it only validates.
var noPaths = skim.Compile()

// tooDeep reports, when a checker runs, whether msg is nested deeper than
// encoding/json reads, so that the checker, which reads with it, is shown
// a stand-in instead. p is a bounded picker of the calling pump's.
func (c *conn) tooDeep(p *skim.Picker, msg []byte) bool {
	if c.check == nil {
		return false
	}
	_, err := p.Pick(msg, noPaths)
	return errors.Is(err, skim.ErrTooDeep)
}

// collectAfter is the length from which a line, once handled, is let go
// of at once (releaseLine).
const collectAfter = 8 << 20

// releaseLine lets go of a huge agent line once it is handled: what the
// pump's scratch memory still holds of it (the members its pick handed
// out) is dropped, and the garbage collector runs. Without it the next
// huge line has to fit beside this one: the collector's goal was set while
// the line was read (its blocks and its copy, twice its length, live at
// once), and it would not run again before the heap had doubled that, so
// two 60 MiB lines in a row took the proxy to 4.2 times a line.
func (c *conn) releaseLine() {
	c.emu.Lock()
	c.apick, c.fpick = newPicker(), newPicker()
	c.aenv = envelope{}
	c.scratch.state, c.scratch.update, c.scratch.decision = sessionView{}, agents.Update{}, decision{}
	c.emu.Unlock()
	runtime.GC()
}

// finish closes the engine and settles everything still open once no
// agent line can follow: cancelled for a session whose running turn the
// client cancelled, otherwise failed with reason.
func (c *conn) finish(ctx context.Context, reason error) {
	c.emu.Lock()
	defer c.emu.Unlock()
	c.finishLocked(ctx, reason)
}

// stop is finish for Run stopping on its context: the write to the
// client in progress, if any, is waited for at most the stop timeout.
// Past it the client is taken not to read: its output is abandoned
// (clientWriter.abandon), nothing is settled, and stop reports false.
func (c *conn) stop(ctx context.Context, reason error) bool {
	if !lockWithin(&c.emu, c.p.cfg.stopTimeout) {
		c.cout.abandon()
		c.stopped.Store(true)
		_, endHandlers := c.e.Close(reason)
		endHandlers()
		c.log.Warn("the client did not read for the stop timeout; its output is abandoned, and the compactions still open are not settled",
			"timeout", c.p.cfg.stopTimeout)
		return false
	}
	defer c.emu.Unlock()
	c.finishLocked(ctx, reason)
	return true
}

// finishLocked is finish; callers hold emu.
func (c *conn) finishLocked(ctx context.Context, reason error) {
	// Nothing follows: what the agent pump kept back and the settlement
	// leave now.
	defer func() { _ = c.out.flush() }()
	c.releaseAwaiting() // a text awaiting its confirmation still reaches the client
	if c.stopped.Swap(true) {
		return
	}
	if c.em == nil || c.out.err != nil {
		// Nothing can be settled, or reach the client.
		_, endHandlers := c.e.Close(reason)
		endHandlers()
		return
	}
	const why = "the agent's output ended"
	for _, sid := range c.router.openSessions() {
		r := reason
		if c.e.Cancelled(sid) {
			r = emitter.ErrCancelled
		}
		c.beforeSettle(ctx, sid, r, why)
	}
	end, _ := c.h.Close(ctx, reason, why) // the proxy keeps no records
	end()
}

func (c *conn) closeChecker() { c.check.close() }
