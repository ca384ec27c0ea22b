// Package lines frames ACP's newline-delimited JSON-RPC streams: one
// message a line, read with a bound on what is held in memory. It is the
// one line reader of the proxy (both sides), the session store
// (sessionlog) and the coder/acp-go-sdk kit's input; the conformance
// checker keeps a reader of its own on purpose (it is the oracle, and must
// not share the framer's bugs).
//
// Message says what message a peer reads in a line: the line trimmed as
// the official TypeScript SDK trims it, the most lenient framing among
// the peers'.
package lines

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"unicode/utf8"
	"unsafe"
)

// The Reader's buffers. A line longer than ReadBuffer is collected in acc,
// which is kept for the next line while it is at most keepAccMax; a longer
// line is collected in blocks of bigBlock bytes and then copied once into
// a buffer of exactly its length, which is released after the line so
// that one huge message does not pin its memory for the stream's life.
const (
	// ReadBuffer is the size of the Reader's read buffer: a line that
	// fits in it is returned without a copy.
	ReadBuffer = 64 << 10
	keepAccMax = 1 << 20
	bigBlock   = 1 << 20
)

// Reader reads newline-delimited lines without ever holding more than
// one line (bounded by the limit given to NewReader) in memory. It is
// meant for one reading goroutine.
//
// A line of unknown length is collected in fixed blocks rather than in one
// buffer that grows: growing copies the line over and over and leaves the
// buffers it outgrew behind (append's growth allocates about six times a
// 60 MiB line; doubling allocates up to four times a line just over a
// power of two, all of it touched). Blocks hold the line once, and the
// one copy into the line's own buffer makes two at the peak.
type Reader struct {
	r      *bufio.Reader
	max    int
	acc    []byte   // the line, once it outgrew the read buffer
	blocks [][]byte // what follows acc's first keepAccMax bytes of a longer line
	size   int      // bytes in blocks
	// inAcc: the line Next returned last is acc (not the read buffer's),
	// which Detach may hand over.
	inAcc bool
	gone  []byte // the line Detach handed over
	n     int    // lines read so far
	off   int64  // bytes read so far (what Next and CopyRest returned)
}

// NewReader returns a Reader of r that reads lines of up to max bytes
// whole (see Next).
func NewReader(r io.Reader, max int) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, ReadBuffer), max: max}
}

// Lines reports how many lines Next has returned (a final line without
// its terminator included), for log positions.
func (l *Reader) Lines() int { return l.n }

// Offset reports how many bytes of the stream Next and CopyRest have
// returned: the offset of the next line once a line was read whole.
func (l *Reader) Offset() int64 { return l.off }

// Next returns the next line with its terminator, valid until the
// following call. A final line without terminator is returned with io.EOF.
// When a line is longer than max and more of it is still to be read, Next
// returns its first part (its head) with long set; the caller handles it
// and then the remainder with CopyRest (or fails the stream). A line
// longer than max that has been read whole anyway (it fit in the read
// buffer) is returned whole, long unset: a caller that must refuse long
// lines checks the length itself.
func (l *Reader) Next() (line []byte, long bool, err error) {
	l.Release()
	l.acc, l.inAcc = l.acc[:0], false
	for {
		frag, err := l.r.ReadSlice('\n')
		if err == nil && len(l.acc) == 0 {
			// The common case: the whole line sits in the bufio buffer.
			l.n++
			l.off += int64(len(frag))
			return frag, false, nil
		}
		l.add(frag)
		switch {
		case err == nil:
			return l.whole(), false, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(l.acc)+l.size > l.max {
				return l.whole(), true, nil
			}
		default:
			line := l.whole()
			if len(line) == 0 {
				l.n-- // nothing followed the last terminator
			}
			return line, false, err
		}
	}
}

// add appends a fragment of the line: to acc while the line is at most
// keepAccMax (doubling acc, whose growth then costs little), then to the
// blocks.
func (l *Reader) add(frag []byte) {
	if l.size == 0 && len(l.acc)+len(frag) <= keepAccMax {
		if len(l.acc)+len(frag) > cap(l.acc) {
			acc := make([]byte, len(l.acc), min(max(2*cap(l.acc), len(l.acc)+len(frag), 2*ReadBuffer), keepAccMax))
			copy(acc, l.acc)
			l.acc = acc
		}
		l.acc = append(l.acc, frag...)
		return
	}
	for len(frag) > 0 {
		if len(l.blocks) == 0 || len(l.blocks[len(l.blocks)-1]) == bigBlock {
			l.blocks = append(l.blocks, make([]byte, 0, bigBlock))
		}
		b := &l.blocks[len(l.blocks)-1]
		k := min(len(frag), bigBlock-len(*b))
		*b = append(*b, frag[:k]...)
		frag = frag[k:]
		l.size += k
	}
}

// Release lets go of the line Next returned last, once it is handled: a
// buffer that held a line longer than keepAccMax is not kept for the next
// line, so that one huge message does not pin its memory, and a line
// Detach handed over is the holder's alone. It reports whether it let go
// of such a line (the caller may then want the garbage collector to run).
// Next calls it first.
func (l *Reader) Release() (big bool) {
	big = cap(l.acc) > keepAccMax || cap(l.gone) > keepAccMax
	if cap(l.acc) > keepAccMax {
		l.acc = nil
	}
	l.gone = nil
	return big
}

// whole returns the line collected so far as one slice, and counts it:
// acc, or for a line that went on in blocks, a buffer of exactly its
// length that acc then holds until the next line.
func (l *Reader) whole() []byte {
	l.n++
	l.inAcc = true
	line := l.acc
	if l.size > 0 {
		line = make([]byte, 0, len(l.acc)+l.size)
		line = append(line, l.acc...)
		for _, b := range l.blocks {
			line = append(line, b...)
		}
		l.acc, l.blocks, l.size = line, nil, 0
	}
	l.off += int64(len(line))
	return line
}

// Detach hands over the memory of the line Next returned last when b lies
// within it, and reports whether b's memory is handed over: the Reader
// never writes to it again (the next line gets a buffer of its own), so
// strings may be made over it without a copy. A line still in the read
// buffer, which the next read overwrites, is not handed over.
func (l *Reader) Detach(b []byte) bool {
	if l.inAcc && within(b, l.acc) {
		l.gone, l.acc, l.inAcc = l.acc, nil, false
	}
	return within(b, l.gone)
}

// within reports whether b lies within buf's bytes.
func within(b, buf []byte) bool {
	if len(b) == 0 || len(buf) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= lo && p+uintptr(len(b)) <= lo+uintptr(len(buf))
}

// CopyRest streams the remainder of a long line to w, fragment by
// fragment, up to and including its terminator.
func (l *Reader) CopyRest(w func([]byte) error) error {
	for {
		frag, err := l.r.ReadSlice('\n')
		l.off += int64(len(frag))
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

// Ready reports whether a whole line is already buffered, so that Next
// will return without reading: only then is it worth holding back output
// to join it with the next line's.
func (l *Reader) Ready() bool {
	n := l.r.Buffered()
	if n == 0 {
		return false
	}
	b, _ := l.r.Peek(n)
	return bytes.IndexByte(b, '\n') >= 0
}

// Message is the message a peer reads in a line: the line without its
// terminator, trimmed as the official TypeScript SDK trims it, the most
// lenient framing among the peers' (the Go and Rust readers take only
// JSON's own whitespace around a message, which this trims too). The SDK
// splits lines at LF only, decodes each on its own with TextDecoder (which
// drops a UTF-8 BOM at its start) and trims it with JavaScript's
// String.prototype.trim, so a BOM, a form feed or a no-break space around
// a message does not keep a client from reading it. Invalid UTF-8, which
// the SDK decodes to U+FFFD, is not whitespace, and stays. An empty
// result is a blank line, which the peers skip.
func Message(raw []byte) []byte {
	b := raw
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	b = TrimLeft(b)
	for len(b) > 0 {
		if c := b[len(b)-1]; c < utf8.RuneSelf {
			if !jsSpace(rune(c)) {
				break
			}
			b = b[:len(b)-1]
			continue
		}
		r, size := utf8.DecodeLastRune(b)
		if !jsSpace(r) {
			break
		}
		b = b[:len(b)-size]
	}
	return b
}

// TrimLeft is Message's trim at the start of a line (for the head of a
// long line, whose end is not the message's).
func TrimLeft(b []byte) []byte {
	for len(b) > 0 {
		if c := b[0]; c < utf8.RuneSelf {
			if !jsSpace(rune(c)) {
				break
			}
			b = b[1:]
			continue
		}
		r, size := utf8.DecodeRune(b)
		if !jsSpace(r) {
			break
		}
		b = b[size:]
	}
	return b
}

// jsSpace reports what String.prototype.trim removes: WhiteSpace (TAB, VT,
// FF, SP, NBSP, ZWNBSP, which is the BOM, and the Zs category) and
// LineTerminator (LF, CR, LS, PS). Unlike unicode.IsSpace it holds U+FEFF
// and not U+0085.
func jsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', '\u00a0', '\u1680', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff':
		return true
	}
	return r >= '\u2000' && r <= '\u200a'
}
