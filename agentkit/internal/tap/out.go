package tap

import (
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"
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
	err      error
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
// carries update (marshalled): what UpdateLine returns, encoded straight
// into the queue's buffer on a byte transport.
func (q *outQueue) writeUpdate(sessionID string, update []byte) error {
	var line []byte
	if q.object != nil {
		line = appendUpdate(make([]byte, 0, len(updatePrefix)+len(sessionID)+len(update)+16), sessionID, update)
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
		q.buf = appendUpdate(q.buf, sessionID, update)
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
		q.written = n
		if err != nil {
			q.err = err
			// The transport is broken: drop what is pending.
			q.buf, q.items, q.size = nil, nil, 0
			q.written = q.queued
		}
		q.cond.Broadcast()
	}
}

// errFlushTimeout: Flush gave up on a client that does not read.
var errFlushTimeout = errors.New("agentkit: output not flushed: the client is not reading")

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
	timedOut := false
	timer := time.AfterFunc(flushTimeout, func() {
		q.mu.Lock()
		timedOut = true
		q.cond.Broadcast()
		q.mu.Unlock()
	})
	defer timer.Stop()
	for q.written < target && !timedOut {
		q.cond.Wait()
	}
	err := q.err
	if q.written < target {
		err = errFlushTimeout
	}
	q.mu.Unlock()
	return err
}
