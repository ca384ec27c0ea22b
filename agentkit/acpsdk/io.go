package acpsdk

import (
	"bufio"
	"bytes"
	"io"
	"sync"
)

// reader hands the SDK its input one line at a time, each line shown to
// the wire engine first, so the engine's view of the connection is never
// behind the SDK's. Like any io.Reader it is meant for one reading
// goroutine.
type reader struct {
	c    *Conn
	src  *bufio.Reader
	next []byte // what the SDK has yet to receive of the current line
	err  error
}

func newReader(c *Conn, r io.Reader) *reader {
	return &reader{c: c, src: bufio.NewReader(r)}
}

func (r *reader) Read(p []byte) (int, error) {
	for len(r.next) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		line, err := r.src.ReadBytes('\n')
		if len(line) > 0 {
			in := r.c.t.Receive(line)
			if in.Prompt != "" {
				// The SDK starts the prompt's handler on a goroutine of its
				// own: the one before it must have reached its handler
				// first, so that each handler is tied to its request.
				r.c.claims.hand(in.Prompt)
			}
			r.next = line
		}
		if err != nil {
			// Settle before the SDK learns the input ended, while the
			// output may still carry the terminal updates.
			r.c.close()
			r.err = err
		}
	}
	n := copy(p, r.next)
	r.next = r.next[n:]
	return n, nil
}

// writer receives the SDK's output. The SDK writes one whole line per
// Write; the writer still splits on newlines, so a message is always
// shown to the engine whole.
type writer struct {
	c   *Conn
	mu  sync.Mutex
	buf []byte
}

func (w *writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := w.buf[:i]
		rest := w.buf[i+1:]
		var err error
		if len(bytes.TrimSpace(line)) > 0 {
			w.c.claims.sent(line)
			err = w.c.t.Send(line)
		}
		w.buf = append(w.buf[:0], rest...)
		if err != nil {
			return 0, err
		}
	}
}
