package proxy

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultStopTimeout is how long Run, stopping on its context, waits for a
// write to the client in progress unless WithStopTimeout says otherwise:
// the agent kits wait as long for a client that does not read when their
// connection closes.
const DefaultStopTimeout = 5 * time.Second

// errAbandoned is the write error once Run has abandoned the client.
var errAbandoned = errors.New("proxy: the client did not read; its output was abandoned")

// WithStopTimeout sets how long Run, once its context is done, waits for
// a write to the client that is in progress (a client that does not read
// blocks it) before it abandons the client's output and returns without
// writing the settlement. d <= 0 does not wait. The default is
// DefaultStopTimeout.
func WithStopTimeout(d time.Duration) Option {
	return func(c *config) { c.stopTimeout = max(d, 0) }
}

// Terminating tells the Run in progress (or, if none is, the next one)
// that its host is ending the connection: it was told to terminate, and
// has passed the signal on to the agent. From then on the end of the
// agent's output is the connection closing, not the agent crashing: the
// compactions still open are settled with emitter.ErrConnectionClosed
// rather than the exit reason (WithExitReason). Run goes on carrying the
// connection, so that what the agent still says reaches the client, until
// the agent's output ends or Run's context is done.
func (p *Proxy) Terminating() { p.terminating.Store(true) }

// clientWriter is the proxy's writer to the client. Once abandoned it fails
// every further write, so that a write which was stuck when Run returned
// is the last one: nothing follows it when it completes.
type clientWriter struct {
	w         io.Writer
	abandoned atomic.Bool
}

func (o *clientWriter) Write(p []byte) (int, error) {
	if o.abandoned.Load() {
		return 0, errAbandoned
	}
	return o.w.Write(p)
}

// abandon fails the writes to come and, where the writer has deadlines
// (a pipe made by os.Pipe, a network connection), the one in progress.
func (o *clientWriter) abandon() {
	o.abandoned.Store(true)
	if d, ok := o.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		_ = d.SetWriteDeadline(time.Now())
	}
}

// lockWithin takes mu unless it stays held for d: a write to a peer that
// does not read holds it for as long as the peer does not. It reports
// whether it took mu.
func lockWithin(mu *sync.Mutex, d time.Duration) bool {
	if mu.TryLock() {
		return true
	}
	deadline := time.Now().Add(d)
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
		if mu.TryLock() {
			return true
		}
	}
}
