package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLineBytes bounds one transcript line (without its line terminator).
// ACP messages that embed images or resources are large, so the bound is
// generous; it exists so a framing error cannot exhaust memory.
const MaxLineBytes = 64 << 20

// Direction says which peer sent a transcript line.
type Direction int

const (
	// FromClient marks a message the client sent to the agent.
	FromClient Direction = iota + 1
	// FromAgent marks a message the agent sent to the client.
	FromAgent
)

// String returns the transcript prefix of the direction.
func (d Direction) String() string {
	switch d {
	case FromClient:
		return "client"
	case FromAgent:
		return "agent"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// Line is one message of a transcript.
type Line struct {
	// N is the 1-based line number in the transcript, counting blank and
	// comment lines, so it matches what an editor shows.
	N int
	// Dir is the sender.
	Dir Direction
	// Raw is the JSON-RPC message, a JSON object, as written.
	Raw json.RawMessage
}

// String formats the line back into transcript form.
func (l Line) String() string { return l.Dir.String() + " " + string(l.Raw) }

// LineError reports a malformed transcript line. Reading continues after it.
type LineError struct {
	// N is the 1-based line number.
	N int
	// Err says what is wrong with the line.
	Err error
}

// Error names the line number and the problem.
func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.N, e.Err) }

// Unwrap returns the underlying problem.
func (e *LineError) Unwrap() error { return e.Err }

// ErrLineTooLong is the LineError cause of a line longer than MaxLineBytes.
var ErrLineTooLong = fmt.Errorf("line longer than %d bytes", MaxLineBytes)

// Scanner reads a transcript one message at a time, so a proxy or a large
// file never needs the whole transcript in memory.
type Scanner struct {
	r   *bufio.Reader
	n   int
	max int
	err error // sticky: a failed reader is not retried
}

// NewScanner returns a Scanner reading the transcript from r.
func NewScanner(r io.Reader) *Scanner {
	return &Scanner{r: bufio.NewReader(r), max: MaxLineBytes}
}

// Next returns the next message line. A malformed line yields a *LineError
// and the next call moves on to the following line; io.EOF ends the
// transcript; any other error comes from the reader and is returned again by
// every later call.
func (s *Scanner) Next() (Line, error) {
	for {
		if s.err != nil {
			return Line{}, s.err
		}
		raw, tooLong, err := s.readLine()
		if err != nil {
			s.err = err
			continue
		}
		s.n++
		if tooLong {
			return Line{}, &LineError{N: s.n, Err: ErrLineTooLong}
		}
		l, skip, perr := parseLine(s.n, raw)
		if perr != nil {
			return Line{}, &LineError{N: s.n, Err: perr}
		}
		if !skip {
			return l, nil
		}
	}
}

// Each reads the transcript to its end, calling line for every message
// and bad for every line it cannot read (then moving on), in the order of
// the transcript. It returns nil at the end of the input, or the reader's
// error, after which nothing more is read.
func (s *Scanner) Each(line func(Line), bad func(*LineError)) error {
	for {
		l, err := s.Next()
		var le *LineError
		switch {
		case err == nil:
			line(l)
		case errors.As(err, &le):
			bad(le)
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
	}
}

// readLine returns one line without its terminator. An over-long line is
// drained rather than buffered so the scanner can carry on after it.
func (s *Scanner) readLine() (line []byte, tooLong bool, err error) {
	var buf []byte
	sawData := false
	for {
		frag, err := s.r.ReadSlice('\n')
		if len(frag) > 0 {
			sawData = true
		}
		if !tooLong {
			// The terminator may be "\r\n", which is not part of the line.
			if len(buf)+len(frag) > s.max+2 {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, frag...)
			}
		}
		switch {
		case err == nil:
			return trimEOL(buf, tooLong, s.max)
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if !sawData {
				return nil, false, io.EOF
			}
			return trimEOL(buf, tooLong, s.max)
		default:
			return nil, false, err
		}
	}
}

func trimEOL(b []byte, tooLong bool, limit int) ([]byte, bool, error) {
	if tooLong {
		return nil, true, nil
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	return b, len(b) > limit, nil
}

// parseLine turns one line into a Line; skip is true for blank and comment
// lines.
func parseLine(n int, b []byte) (l Line, skip bool, err error) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] == '#' {
		return Line{}, true, nil
	}
	word, rest, _ := bytes.Cut(t, []byte(" "))
	if i := bytes.IndexByte(word, '\t'); i >= 0 {
		// A tab separates the prefix as well as a space does.
		word, rest = t[:i], t[i+1:]
	}
	var dir Direction
	switch string(word) {
	case "client":
		dir = FromClient
	case "agent":
		dir = FromAgent
	default:
		return Line{}, false, errors.New(`want "client <json>" or "agent <json>"`)
	}
	rest = bytes.TrimSpace(rest)
	if len(rest) == 0 {
		return Line{}, false, fmt.Errorf("no JSON after %q", word)
	}
	var probe json.RawMessage
	if err := json.Unmarshal(rest, &probe); err != nil {
		return Line{}, false, fmt.Errorf("invalid JSON: %v", err)
	}
	if rest[0] != '{' {
		return Line{}, false, errors.New("JSON-RPC message is not a JSON object")
	}
	return Line{N: n, Dir: dir, Raw: bytes.Clone(rest)}, false, nil
}

// ReadTranscript reads a whole transcript. It returns every well-formed line
// and one error per malformed line (a *LineError), followed by the reader's
// error, if any.
func ReadTranscript(r io.Reader) ([]Line, []error) {
	var (
		lines []Line
		errs  []error
	)
	err := NewScanner(r).Each(
		func(l Line) { lines = append(lines, l) },
		func(le *LineError) { errs = append(errs, le) })
	if err != nil {
		errs = append(errs, err)
	}
	return lines, errs
}
