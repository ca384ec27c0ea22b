package tap

import (
	"context"
	"fmt"

	"github.com/acpcompact/acpcompact/emitter"
)

// OnClose registers f to run once the tap closes. It reports false, and
// does not register f, when the tap is already closed.
func (t *Tap) OnClose(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.onClose = append(t.onClose, f)
	return true
}

// Closed reports whether the tap's close has begun.
func (t *Tap) Closed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// Close is Shutdown without a context of its own: bounded by CloseTimeout
// only.
func (t *Tap) Close(reason error) {
	if err := t.Shutdown(context.Background(), reason); err != nil {
		t.log.Debug(t.cfg.Name+": output not flushed on a closing connection", "error", err)
	}
}

// Shutdown ends the connection: the engine refuses starts from now on,
// every open compaction is settled (as cancelled in a session whose turn
// the client cancelled, else for reason), then the prompt handlers'
// contexts end with reason, so a runtime woken by its context finds its
// compactions already settled. It runs the OnClose hooks once, and returns
// once what was queued, the settlements last, has been written.
//
// It is bounded: when ctx ends, or CloseTimeout after the close began (or
// after the write in progress began, if earlier), the output is abandoned
// (see out.go): what the client has not taken is dropped, and every write
// still waiting returns at once, so nothing of the close waits longer. A
// second call, while or after the first runs, waits for the first to
// finish (bounded by its own ctx too) and returns the first one's result:
// nil when everything queued was written, else the output's error
// (errAbandoned, or the transport's).
func (t *Tap) Shutdown(ctx context.Context, reason error) error {
	stop := t.out.abandonAt(ctx, CloseTimeout)
	defer stop()
	t.mu.Lock()
	if t.closing != nil {
		done := t.closing
		t.mu.Unlock()
		<-done // bounded: abandonment releases whatever the close waits on
		return t.closeErr
	}
	t.closed = true
	t.closing = make(chan struct{})
	defer close(t.closing)
	hooks := t.onClose
	t.onClose = nil
	t.mu.Unlock()

	// The final-record sinks of what the close settles are waited for
	// within the same bound as the output (ctx and CloseTimeout): a sink
	// that hangs holds neither the terminal updates, which go out before
	// any sink runs, nor the close.
	bound, cancel := context.WithTimeout(ctx, CloseTimeout)
	defer cancel()
	endHandlers, sinkErr := t.h.Close(bound, reason, "the connection closed")
	endHandlers()
	for _, f := range hooks {
		f()
	}
	// The settlements, and anything queued before them, are on the wire
	// when Shutdown returns, or the client stopped reading and they were
	// abandoned.
	t.closeErr = t.out.drain()
	if t.closeErr == nil && sinkErr != nil {
		t.closeErr = fmt.Errorf("%s: a final-record sink was still running when the close's bound passed: %w", t.cfg.Name, sinkErr)
	}
	return t.closeErr
}

// Detach ends the output once the transport is closed: every write from
// now on, and every one still waiting for room, returns err at once.
func (t *Tap) Detach(err error) { t.out.fail(err) }

// Crash settles every open compaction as failed because the agent
// panicked; the caller lets the panic go on.
func (t *Tap) Crash() {
	em := t.h.Emitter()
	if em == nil {
		_ = t.out.flush()
		return
	}
	n, err := em.SettleAll(context.Background(), emitter.ErrAgentCrashed)
	// The process is about to end: what is queued must be on the wire
	// before the panic goes on.
	if ferr := t.out.flush(); err == nil {
		err = ferr
	}
	t.log.Error(t.cfg.Name+": handler panicked; open compactions settled as failed", "count", n, "deliveryError", err)
}

// Flush waits until every message queued so far has been written, for at
// most a few seconds when the client does not read, and returns the
// connection's write error, if any.
func (t *Tap) Flush() error { return t.out.flush() }
