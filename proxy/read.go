package proxy

// Reading, the first stage of each side's line path (read -> classify ->
// act): a line is framed as the peers frame it, and handed on as the bytes
// that came (what is forwarded) and the message a peer reads in them (what
// is classified, and what the checker sees).

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"unicode/utf8"
	"unsafe"
)

// line is one line of one side, as read.
type line struct {
	// n is the side's line number (from 1), for log positions and the
	// checker.
	n int
	// raw is the line as it came, terminator included: what is forwarded.
	raw []byte
	// msg is the message a peer reads in raw (peerMessage). For a long
	// line it is the head, trimmed at its start.
	msg []byte
	// long: raw is only the head of a line longer than the inspection
	// limit; the rest follows (lineReader.copyRest).
	long bool
}

// readLine frames what next returned.
func readLine(n int, raw []byte, long bool) line {
	l := line{n: n, raw: raw, long: long}
	if long {
		l.msg = trimLeft(raw) // the head: its end is not the message's
	} else {
		l.msg = peerMessage(raw)
	}
	return l
}

// peerMessage is the message a peer reads in a line: the line without its
// terminator, trimmed as the official TypeScript SDK trims it, the most
// lenient framing among the peers' (the Go and Rust readers take only
// JSON's own whitespace around a message, which this trims too). The SDK
// splits lines at LF only, decodes each on its own with TextDecoder (which
// drops a UTF-8 BOM at its start) and trims it with JavaScript's
// String.prototype.trim, so a BOM, a form feed or a no-break space around
// a message does not keep a client from reading it. Invalid UTF-8, which
// the SDK decodes to U+FFFD, is not whitespace, and stays.
func peerMessage(raw []byte) []byte {
	b := raw
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	b = trimLeft(b)
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

// trimLeft is peerMessage's trim at the start of a line.
func trimLeft(b []byte) []byte {
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

// readBufSize is the bufio buffer of each side. A line longer than it is
// collected in lineReader.acc, which is kept for the next line while it is
// at most keepAccMax; a longer line is collected in blocks of bigBlock
// bytes and then copied once into a buffer of exactly its length, which is
// released after the line so that one huge message does not pin its
// memory for the connection's life.
const (
	readBufSize = 64 << 10
	keepAccMax  = 1 << 20
	bigBlock    = 1 << 20
)

// lineReader reads newline-delimited messages without ever holding more
// than one line (bounded by max) in memory.
//
// A line of unknown length is collected in fixed blocks rather than in one
// buffer that grows: growing copies the line over and over and leaves the
// buffers it outgrew behind (append's growth allocates about six times a
// 60 MiB line; doubling allocates up to four times a line just over a
// power of two, all of it touched). Blocks hold the line once, and the
// one copy into the line's own buffer makes two at the peak.
type lineReader struct {
	r      *bufio.Reader
	max    int
	acc    []byte   // the line, once it outgrew the read buffer
	blocks [][]byte // what follows acc's first keepAccMax bytes of a longer line
	size   int      // bytes in blocks
	// inAcc: the line next returned last is acc (not the read buffer's),
	// which detach may hand over.
	inAcc bool
	gone  []byte // the line detach handed over
	n     int    // lines read so far, for log positions
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, readBufSize), max: max}
}

// next returns the next line with its terminator, valid until the following
// call. A final line without terminator is returned with io.EOF. When a
// line is longer than max and more of it is still to be read, next returns
// its first part (its head) with long set; the caller forwards it and then
// the remainder with copyRest. A line longer than max that has been read
// whole anyway (it fit in the read buffer) is returned whole, long unset.
func (l *lineReader) next() (line []byte, long bool, err error) {
	l.release()
	l.acc, l.inAcc = l.acc[:0], false
	for {
		frag, err := l.r.ReadSlice('\n')
		if err == nil && len(l.acc) == 0 {
			// The common case: the whole line sits in the bufio buffer.
			l.n++
			return frag, false, nil
		}
		l.add(frag)
		switch {
		case err == nil:
			l.n++
			return l.whole(), false, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(l.acc)+l.size > l.max {
				l.n++
				return l.whole(), true, nil
			}
		default:
			if len(l.acc)+l.size > 0 {
				l.n++
			}
			return l.whole(), false, err
		}
	}
}

// add appends a fragment of the line: to acc while the line is at most
// keepAccMax (doubling acc, whose growth then costs little), then to the
// blocks.
func (l *lineReader) add(frag []byte) {
	if l.size == 0 && len(l.acc)+len(frag) <= keepAccMax {
		if len(l.acc)+len(frag) > cap(l.acc) {
			acc := make([]byte, len(l.acc), min(max(2*cap(l.acc), len(l.acc)+len(frag), 2*readBufSize), keepAccMax))
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

// release lets go of the line next returned last, once it is handled: a
// buffer that held a line longer than keepAccMax is not kept for the next
// line, so that one huge message does not pin its memory, and a line
// detach handed over is the holder's alone. It reports whether it let go
// of such a line.
func (l *lineReader) release() (big bool) {
	big = cap(l.acc) > keepAccMax || cap(l.gone) > keepAccMax
	if cap(l.acc) > keepAccMax {
		l.acc = nil
	}
	l.gone = nil
	return big
}

// whole returns the line collected so far as one slice: acc, or for a line
// that went on in blocks, a buffer of exactly its length that acc then
// holds until the next line.
func (l *lineReader) whole() []byte {
	l.inAcc = true
	if l.size == 0 {
		return l.acc
	}
	line := make([]byte, 0, len(l.acc)+l.size)
	line = append(line, l.acc...)
	for _, b := range l.blocks {
		line = append(line, b...)
	}
	l.acc, l.blocks, l.size = line, nil, 0
	return line
}

// detach hands over the memory of the line next returned last when b lies
// within it, and reports whether b's memory is handed over: the reader
// never writes to it again (the next line gets a buffer of its own), so
// strings may be made over it without a copy. A line still in the read
// buffer, which the next read overwrites, is not handed over.
func (l *lineReader) detach(b []byte) bool {
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

// isBlank reports a line without a message (peerMessage), which the peers
// skip.
func isBlank(msg []byte) bool { return len(msg) == 0 }

// clip shortens a line for a log message.
func clip(b []byte) string {
	const n = 120
	if len(b) > n {
		return string(bytes.ToValidUTF8(b[:n], nil)) + "…"
	}
	return string(bytes.ToValidUTF8(b, nil))
}
