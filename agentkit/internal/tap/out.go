package tap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/acpcompact/acpcompact/internal/condwait"
	"github.com/acpcompact/acpcompact/protocol"
)

// Output buffering. Every message the connection writes goes through one
// queue, in the order the writes reach it, so the wire order is the order
// of the calls, as with a lock around each write. What the queue changes is
// who performs the transport's write, and when:
//
//   - A notification is appended and the call returns; a flusher writes
//     what is pending as soon as it can: it starts at once when none is
//     running, and a running one takes everything appended meanwhile in its
//     next round. On a byte transport (NewWriter) a round is one write, so a
//     burst of notifications leaves in a few large writes instead of one
//     write each; on a message transport (New, NewObjects) the producer
//     still never waits on the write unless the client falls behind. Nothing
//     is held back waiting for more: when the producer goes idle, the
//     flusher writes what it has and stops.
//   - Any other message (a response, a request of the agent's, anything
//     not understood) is synchronous: it is appended behind what is
//     pending, and the call returns only once it, and so everything before
//     it, has been written, with the write's error. A response therefore
//     always follows every update sent before it and is never delayed
//     behind later ones.
//   - The buffer is bounded (maxPending bytes, maxPendingItems messages on
//     a message transport): a producer that runs ahead of a slow client
//     waits for the flusher, as it would wait on the write.
//   - A failed write is sticky: later writes return it at once, and what
//     was pending is dropped (the transport is broken).
//   - Closing is bounded (abandon): a client that does not read cannot hold
//     the connection's end. When the close's deadline passes, the queue
//     gives up: what is pending is dropped, every waiting and later write
//     returns errAbandoned at once, and only the transport write already in
//     progress, which cannot be interrupted, is left to return when it can.
//
// The transport's write is only ever called by one goroutine at a time.

// maxPending bounds the bytes waiting to be written; a producer appending
// beyond it waits for the flusher.
const maxPending = 64 << 10

// maxPendingItems bounds the messages waiting on a message transport, whose
// queued objects have no size until they are written.
const maxPendingItems = 256

// flushTimeout bounds how long Flush waits for a client that does not read.
const flushTimeout = 5 * time.Second

// CloseTimeout bounds a connection's close (Tap.Shutdown): how long the
// settlement and the flush of what is queued may wait for a client that
// does not read. It runs from the close, or from the start of the write in
// progress when that began earlier: a client that has taken nothing for
// CloseTimeout already is not waited for again.
const CloseTimeout = 5 * time.Second

type outQueue struct {
	// Exactly one is set: lines writes a round of newline-terminated
	// messages (byte transport), object writes one message (message
	// transport): a json.RawMessage, or an object the transport marshals.
	lines  func([]byte) error
	object func(any) error

	mu       sync.Mutex
	cond     sync.Cond // broadcast when a round is written
	buf      []byte    // byte transport: pending lines
	items    []any     // message transport: pending messages
	size     int       // message transport: bytes of the pending raw messages
	spare    []byte    // the last written round's buffer, for reuse
	spareIt  []any
	queued   uint64 // messages appended so far
	written  uint64 // messages written (or dropped on error) so far
	flushing bool   // a flusher (goroutine or synchronous writer) is writing
	// writing is when the transport write in progress began (zero: none),
	// so that a close knows how long the client has taken nothing.
	writing time.Time
	err     error
}

func newLineQueue(w io.Writer) *outQueue {
	q := &outQueue{lines: func(b []byte) error {
		_, err := w.Write(b)
		return err
	}}
	q.cond.L = &q.mu
	return q
}

func newObjectQueue(write func(any) error) *outQueue {
	q := &outQueue{object: write}
	q.cond.L = &q.mu
	return q
}

// write queues msg (one JSON value without newlines). When sync is true it
// returns once msg has been written, with the write's error. msg is copied.
func (q *outQueue) write(msg []byte, sync bool) error {
	q.mu.Lock()
	if err := q.waitRoomLocked(); err != nil {
		q.mu.Unlock()
		return err
	}
	if q.lines != nil {
		q.buf = append(q.buf, msg...)
		q.buf = append(q.buf, '\n')
	} else {
		q.items = append(q.items, json.RawMessage(append([]byte(nil), msg...)))
		q.size += len(msg)
	}
	return q.queuedLocked(sync)
}

// writeObject queues v, which the transport marshals itself when it writes
// it, as a notification (it returns before the write). v must not change
// once queued. On a byte transport it is marshalled here.
func (q *outQueue) writeObject(v any) error {
	if q.lines != nil {
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return q.write(raw, false)
	}
	q.mu.Lock()
	if err := q.waitRoomLocked(); err != nil {
		q.mu.Unlock()
		return err
	}
	q.items = append(q.items, v)
	return q.queuedLocked(false)
}

// writeUpdate queues the session/update notification of sessionID that
// carries update (marshalled), encoded straight into the queue's buffer
// on a byte transport.
func (q *outQueue) writeUpdate(sessionID string, update []byte) error {
	var line []byte
	if q.object != nil {
		line = protocol.AppendNotification(nil, sessionID, update)
	}
	q.mu.Lock()
	if err := q.waitRoomLocked(); err != nil {
		q.mu.Unlock()
		return err
	}
	if q.object != nil {
		q.items = append(q.items, json.RawMessage(line))
		q.size += len(line)
	} else {
		q.buf = protocol.AppendNotification(q.buf, sessionID, update)
		q.buf = append(q.buf, '\n')
	}
	return q.queuedLocked(false)
}

// waitRoomLocked waits while the buffer is full, and returns the sticky
// write error, if any.
func (q *outQueue) waitRoomLocked() error {
	for q.err == nil && (len(q.buf) >= maxPending || q.size >= maxPending || len(q.items) >= maxPendingItems) {
		q.cond.Wait()
	}
	return q.err
}

// queuedLocked counts the message just appended, starts a flusher or, for
// a synchronous message, writes it, and unlocks q.mu.
func (q *outQueue) queuedLocked(sync bool) error {
	q.queued++
	mine := q.queued
	if !sync {
		if !q.flushing {
			q.flushing = true
			go q.flushAll()
		}
		q.mu.Unlock()
		return nil
	}
	if !q.flushing {
		// Nobody is writing: write it here, with whatever precedes it.
		q.flushing = true
		q.flushLocked(mine)
		if q.pendingLocked() && q.err == nil {
			go q.flushAll() // appended by others meanwhile
		} else {
			q.flushing = false
		}
	}
	for q.written < mine {
		q.cond.Wait()
	}
	err := q.err
	q.mu.Unlock()
	return err
}

func (q *outQueue) pendingLocked() bool { return len(q.buf) > 0 || len(q.items) > 0 }

// flushAll is the flusher goroutine: it writes rounds until nothing is
// pending, then stops.
func (q *outQueue) flushAll() {
	q.mu.Lock()
	q.flushLocked(0)
	q.flushing = false
	q.cond.Broadcast()
	q.mu.Unlock()
}

// flushLocked writes rounds until message until has been written (0: until
// nothing is pending) or a write fails. q.mu is held, and released during
// each write.
func (q *outQueue) flushLocked(until uint64) {
	for q.pendingLocked() && q.err == nil && (until == 0 || q.written < until) {
		n := q.queued
		var err error
		q.writing = time.Now()
		if q.lines != nil {
			round := q.buf
			q.buf, q.spare = q.spare[:0], nil
			q.mu.Unlock()
			err = q.lines(round)
			q.mu.Lock()
			if cap(round) <= 4*maxPending {
				q.spare = round[:0]
			}
		} else {
			round := q.items
			q.items, q.spareIt, q.size = q.spareIt[:0], nil, 0
			q.mu.Unlock()
			for _, v := range round {
				if err = q.object(v); err != nil {
					break
				}
			}
			clear(round)
			q.mu.Lock()
			q.spareIt = round[:0]
		}
		q.writing = time.Time{}
		// An abandoned queue counts everything as written already.
		q.written = max(q.written, n)
		if err != nil && q.err == nil {
			q.err = err
			// The transport is broken: drop what is pending.
			q.dropLocked()
		}
		q.cond.Broadcast()
	}
}

// dropLocked drops what is pending, counting it as written, so that every
// waiter returns (with q.err).
func (q *outQueue) dropLocked() {
	q.buf, q.items, q.size = nil, nil, 0
	q.written = q.queued
}

// errAbandoned: a close gave up on a client that did not take the output
// in time (CloseTimeout, or the close's context).
var errAbandoned = errors.New("output abandoned on close: the client did not read it in time")

// abandon gives up on the output (see the top of this file): what is
// pending is dropped and every write from now on returns the error, which
// wraps errAbandoned and cause. It does nothing once the queue has failed.
func (q *outQueue) abandon(cause error) {
	err := errAbandoned
	if cause != nil {
		err = fmt.Errorf("%w: %w", errAbandoned, cause)
	}
	q.fail(err)
}

// fail makes err the queue's sticky error, unless it has one: what is
// pending is dropped, and every waiting and later write returns it.
func (q *outQueue) fail(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return
	}
	q.err = err
	q.dropLocked()
	q.cond.Broadcast()
}

// abandonAt arms abandonment for a close beginning now: when ctx ends, or
// at the close's deadline (CloseTimeout from now, or from the start of the
// write in progress if that is earlier), whichever comes first. stop
// disarms both.
func (q *outQueue) abandonAt(ctx context.Context, timeout time.Duration) (stop func()) {
	q.mu.Lock()
	deadline := time.Now().Add(timeout)
	if !q.writing.IsZero() {
		if d := q.writing.Add(timeout); d.Before(deadline) {
			deadline = d
		}
	}
	q.mu.Unlock()
	timer := time.AfterFunc(time.Until(deadline), func() {
		q.abandon(fmt.Errorf("nothing more written within %v", timeout))
	})
	stopCtx := context.AfterFunc(ctx, func() { q.abandon(context.Cause(ctx)) })
	return func() {
		timer.Stop()
		stopCtx()
	}
}

// drain waits until everything queued so far has been written, or dropped
// by a failure or abandonment, and returns the queue's error. Unlike flush
// it has no deadline of its own: the caller has armed abandonAt.
func (q *outQueue) drain() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	target := q.queued
	for q.written < target {
		q.cond.Wait()
	}
	return q.err
}

// errFlushTimeout: Flush gave up on a client that does not read.
var errFlushTimeout = errors.New("output not flushed: the client is not reading")

// flush waits until everything queued so far has been written, for at most
// flushTimeout, and returns the sticky write error, if any.
func (q *outQueue) flush() error {
	q.mu.Lock()
	target := q.queued
	if q.written >= target {
		err := q.err
		q.mu.Unlock()
		return err
	}
	condwait.Until(&q.cond, flushTimeout, func() bool { return q.written >= target })
	err := q.err
	if q.written < target {
		err = errFlushTimeout
	}
	q.mu.Unlock()
	return err
}
