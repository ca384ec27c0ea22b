package proxy

import (
	"bufio"
	"io"
	"strconv"

	"github.com/acpcompact/acpcompact/audit"
	"github.com/acpcompact/acpcompact/conformance"
)

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

// clientStream is the client's side of the agent's line path: what act
// writes there, in order, and what the checker sees of it (with
// CheckClient, every message the client receives, numbered as the log
// numbers it).
type clientStream struct {
	lineWriter
	check *checkState
	// at is the agent line the stream has reached: a line the proxy makes
	// is numbered by the agent line it was made for (or, from a timer,
	// the last one handled).
	at int
	// made: a line of the proxy's own waits in the buffer. It is a
	// compaction update, which never waits for the next agent line.
	made bool
	// follower is the audit (WithAudit; nil without), fed what the client
	// receives: a summary is audited against the history the client held,
	// not agent lines kept back or replaced; audited: seen by auditAhead.
	follower *audit.Follower
	audited  bool
}

// observe shows the audit a message the client receives.
func (s *clientStream) observe(n int, msg []byte) {
	if s.follower != nil && msg != nil && !s.audited {
		s.auditAhead(n, msg)
	}
	s.audited = false
}

// auditAhead shows the audit agent line n before it is written (what it
// finds joins the line); the write that follows does not show it again.
func (s *clientStream) auditAhead(n int, msg []byte) []audit.Report {
	s.audited = true
	return s.follower.Observe(audit.FromAgent, "agent line "+strconv.Itoa(n), msg)
}

// forwardLine queues an agent line as it came; msg is the message the
// client reads in it, which the checker sees once written (nil: none).
func (s *clientStream) forwardLine(n int, raw, msg []byte) error {
	err := s.forward(raw)
	s.observe(n, msg)
	if err == nil && msg != nil && s.check.clientSide() {
		s.check.observe(conformance.FromAgent, sideAgent, n, msg)
	}
	return err
}

// make queues a message the proxy made.
func (s *clientStream) make(msg []byte) error {
	s.made = true
	if err := s.line(msg); err != nil {
		return err
	}
	s.observe(s.at, msg)
	if s.check.clientSide() {
		s.check.observe(conformance.FromAgent, sideProxy, s.at, msg)
	}
	return nil
}

// flush writes what is queued.
func (s *clientStream) flush() error {
	s.made = false
	return s.lineWriter.flush()
}
