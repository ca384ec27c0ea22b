package proxy

// Reading, the first stage of each side's line path (read -> classify ->
// act): a line is framed as the peers frame it, and handed on as the bytes
// that came (what is forwarded) and the message a peer reads in them (what
// is classified, and what the checker sees).

import (
	"bytes"

	"github.com/acpcompact/acpcompact/internal/lines"
)

// line is one line of one side, as read.
type line struct {
	// n is the side's line number (from 1), for log positions and the
	// checker.
	n int
	// raw is the line as it came, terminator included: what is forwarded.
	raw []byte
	// msg is the message a peer reads in raw (lines.Message). For a long
	// line it is the head, trimmed at its start.
	msg []byte
	// long: raw is only the head of a line longer than the inspection
	// limit; the rest follows (lines.Reader.CopyRest).
	long bool
}

// readLine frames what lines.Reader.Next returned.
func readLine(n int, raw []byte, long bool) line {
	l := line{n: n, raw: raw, long: long}
	if long {
		l.msg = lines.TrimLeft(raw) // the head: its end is not the message's
	} else {
		l.msg = lines.Message(raw)
	}
	return l
}

// isBlank reports a line without a message (lines.Message), which the peers
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
