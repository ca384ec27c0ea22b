package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// readBufSize is the bufio buffer of each side. Lines longer than it are
// accumulated in lineReader.acc, which is released after a big line so that
// one huge message does not pin its memory for the connection's life.
const (
	readBufSize = 64 << 10
	keepAccMax  = 1 << 20
)

// lineReader reads newline-delimited messages without ever holding more
// than one line (bounded by max) in memory.
type lineReader struct {
	r   *bufio.Reader
	max int
	acc []byte
	n   int // lines read so far, for log positions
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, readBufSize), max: max}
}

// next returns the next line with its terminator, valid until the following
// call. A final line without terminator is returned with io.EOF. When the
// line is longer than max, next returns its first part with long set; the
// caller forwards it and then the remainder with copyRest, uninspected.
func (l *lineReader) next() (line []byte, long bool, err error) {
	if cap(l.acc) > keepAccMax {
		l.acc = nil
	}
	l.acc = l.acc[:0]
	for {
		frag, err := l.r.ReadSlice('\n')
		if err == nil && len(l.acc) == 0 {
			// The common case: the whole line sits in the bufio buffer.
			l.n++
			if len(frag)-1 > l.max {
				return frag, true, nil
			}
			return frag, false, nil
		}
		l.acc = append(l.acc, frag...)
		switch {
		case err == nil:
			l.n++
			return l.acc, len(l.acc)-1 > l.max, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(l.acc) > l.max {
				l.n++
				return l.acc, true, nil
			}
		default:
			if len(l.acc) > 0 {
				l.n++
				if err == io.EOF && len(l.acc) > l.max {
					return l.acc, true, nil
				}
			}
			return l.acc, false, err
		}
	}
}

// copyRest streams the remainder of an overlong line to w, fragment by
// fragment, up to and including its terminator.
func (l *lineReader) copyRest(w func([]byte) error) error {
	for {
		frag, err := l.r.ReadSlice('\n')
		if len(frag) > 0 {
			if werr := w(frag); werr != nil {
				return werr
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return err
	}
}

// trimEOL returns the message without its line terminator.
func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// ready reports whether a whole line is already buffered, so that next
// will return without reading: only then is it worth holding back output
// to join it with the next line's.
func (l *lineReader) ready() bool {
	n := l.r.Buffered()
	if n == 0 {
		return false
	}
	b, _ := l.r.Peek(n)
	return bytes.IndexByte(b, '\n') >= 0
}

// writeBufSize bounds what a lineWriter holds back: a line that does not
// fit is written through, so a slow reader still slows its writer down.
const writeBufSize = 64 << 10

// lineWriter writes whole lines to one side. A write to a pipe costs a
// system call however small, so lines are collected in a bounded buffer
// and the owner decides when they must leave (flush): the wire order is
// the order of the calls either way. It remembers whether the last
// forwarded line lacked its terminator (an agent's final line), so that a
// line the proxy adds afterwards does not run into it.
type lineWriter struct {
	w       io.Writer
	bw      *bufio.Writer
	midLine bool
	err     error
}

func newLineWriter(w io.Writer) lineWriter {
	return lineWriter{w: w, bw: bufio.NewWriterSize(w, writeBufSize)}
}

// forward queues b as it was read, terminator or not.
func (w *lineWriter) forward(b []byte) error {
	if w.err != nil {
		return w.err
	}
	if len(b) == 0 {
		return nil
	}
	_, w.err = w.bw.Write(b)
	w.midLine = b[len(b)-1] != '\n'
	return w.err
}

// line queues msg, a message the proxy made, as one line.
func (w *lineWriter) line(msg []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.midLine {
		w.err = w.bw.WriteByte('\n')
	}
	if w.err == nil {
		_, w.err = w.bw.Write(msg)
	}
	if w.err == nil {
		w.err = w.bw.WriteByte('\n')
	}
	w.midLine = false
	return w.err
}

// flush writes what is queued.
func (w *lineWriter) flush() error {
	if w.err != nil {
		return w.err
	}
	w.err = w.bw.Flush()
	return w.err
}
