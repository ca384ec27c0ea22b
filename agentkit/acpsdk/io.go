package acpsdk

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/acpcompact/acpcompact/internal/lines"
)

// maxLine bounds one line of the client's input and one unfinished line of
// the SDK's output, in bytes, terminator included. It is coder/acp-go-sdk
// v0.13's own bound (connection.go: its bufio.Scanner's maxBufSize, 10
// MiB), past which the SDK fails the connection: the kit refuses nothing
// the SDK would read, and holds no more of a line than the SDK would.
const maxLine = 10 << 20

// reader hands the SDK its input one line at a time, each line shown to
// the wire engine first, so the engine's view of the connection is never
// behind the SDK's. Like any io.Reader it is meant for one reading
// goroutine.
//
// A line longer than maxLine ends the connection, as it would end the
// SDK's: the kit reads no more of it (it has held at most maxLine bytes of
// it), settles and writes what is open (the connection's close), and
// returns an error wrapping bufio.ErrTooLong from Read, on which the SDK
// ends its connection. Neither the engine nor the SDK sees any of the
// line.
type reader struct {
	c    *Conn
	log  *slog.Logger
	src  *lines.Reader
	next []byte // what the SDK has yet to receive of the current line
	err  error
}

func newReader(c *Conn, r io.Reader, log *slog.Logger) *reader {
	return &reader{c: c, log: log, src: lines.NewReader(r, maxLine)}
}

func (r *reader) Read(p []byte) (int, error) {
	for len(r.next) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		// line stays valid until the next call of Next, which comes only
		// once the SDK has received all of it.
		line, long, err := r.src.Next()
		if long || len(line) > maxLine {
			r.tooLong()
			continue
		}
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

// tooLong ends the input at a line longer than maxLine: the connection is
// closed the kit's way (settled, written), and the SDK's next Read fails.
func (r *reader) tooLong() {
	n := r.src.Lines()
	r.src = nil // let go of the line's head
	r.err = fmt.Errorf("agentkit: line %d of the client's input is longer than %d bytes, the SDK's bound; the connection is closed: %w", n, maxLine, bufio.ErrTooLong)
	r.log.Warn("agentkit: a line of the client's is longer than the SDK reads; closing the connection", "line", n, "limit", maxLine)
	r.c.close()
}

// writer receives the SDK's output. The SDK (v0.13) writes one whole line
// per Write, which goes to the engine from p as it is (the tap copies what
// it queues). A Write may still end in the middle of a line: that part is
// kept for the next Write, so a message is always shown to the engine
// whole, up to maxLine bytes; the rest of a longer unfinished line is
// dropped up to its newline, and those Writes fail, so the agent's
// output is bounded by what the agent itself holds.
type writer struct {
	c    *Conn
	log  *slog.Logger
	mu   sync.Mutex
	part []byte // the start of an unfinished line
	skip bool   // dropping the rest of a line that outgrew maxLine
}

func (w *writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var dropped error // a line outgrew maxLine: the others of p still go
	rest := p
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		line := rest[:i]
		rest = rest[i+1:]
		switch {
		case w.skip:
			w.skip = false
			dropped = errOutputTooLong
			continue
		case len(w.part) > 0:
			if len(w.part)+len(line) >= maxLine {
				w.part = nil
				dropped = w.tooLong()
				continue
			}
			line = append(w.part, line...)
			w.part = nil
		}
		if err := w.send(line); err != nil {
			return 0, err
		}
	}
	switch {
	case len(rest) == 0:
	case w.skip:
		dropped = errOutputTooLong
	case len(w.part)+len(rest) >= maxLine:
		w.part, w.skip = nil, true
		dropped = w.tooLong()
	default:
		w.part = append(w.part, rest...)
	}
	if dropped != nil {
		return 0, dropped
	}
	return len(p), nil
}

// send shows one line of the SDK's to the engine and queues it.
func (w *writer) send(line []byte) error {
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	w.c.claims.sent(line)
	return w.c.t.Send(line)
}

// tooLong logs a line of the agent's that outgrew maxLine, once, and
// returns the error of the Writes that bring it.
func (w *writer) tooLong() error {
	w.log.Error("agentkit: the agent wrote a line longer than the kit holds; it is dropped", "limit", maxLine)
	return errOutputTooLong
}

// errOutputTooLong: see writer.
var errOutputTooLong = fmt.Errorf("agentkit: an unfinished line of the agent's output outgrew %d bytes; the line is dropped: %w", maxLine, bufio.ErrTooLong)
