package sessionlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/lines"
	"github.com/acpcompact/acpcompact/protocol"
)

// Kind is what an Entry holds.
type Kind int

const (
	// KindMessage is one of the runtime's own messages (AppendMessage).
	KindMessage Kind = iota + 1
	// KindCompaction is a compaction's record (AppendRecord).
	KindCompaction
	// KindUpdate is a session update a kit recorded as the client saw it
	// (history.Update, through Store.History): Data holds it.
	KindUpdate
	// KindData is the runtime's own data a kit recorded (history.Data,
	// through Store.History): Data holds it.
	KindData
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case KindMessage:
		return "message"
	case KindCompaction:
		return "compaction"
	case KindUpdate:
		return "update"
	case KindData:
		return "data"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Entry is one item of a session's history, as Reader.Entries yields it.
type Entry struct {
	Kind Kind
	// Line is the line of the log the entry was read from: a message's
	// own, a compaction's final record's, or, Interrupted, its start's.
	Line int
	// MessageID and Data are a message's ID and data (KindMessage); Data
	// is also the update of KindUpdate and the data of KindData.
	MessageID string
	Data      json.RawMessage
	// Record is a compaction's final record (KindCompaction): settled, to
	// replay with emitter.Session.Replay. Never in_progress.
	Record emitter.Record
	// Interrupted says the compaction started and never settled: its
	// process died in between. Record is then its start's record, with
	// status failed and ErrInterrupted's text as its error.
	Interrupted bool
}

// Reader reads one session's log, checked whole when Store.Read returned
// it. Safe for concurrent use; Entries may be ranged over more than once.
// Close it when done.
type Reader struct {
	f       *os.File
	path    string
	header  Header
	start   int64  // offset of the first line after the header
	end     int64  // offset past the last complete line
	torn    int64  // bytes of a torn final line, ignored
	aside   string // the file of torn lines cut off earlier, if any
	maxLine int
	comps   []*comp          // in the order of their first entries
	byID    map[string]*comp // every compaction, by ID
	afters  map[string][]*comp
}

// comp is what the first pass learns of one compaction: where its entries
// are and where it goes.
type comp struct {
	idx   int
	id    string
	after string
	first int64 // offset of its first entry
	// anchorLater: the message it follows (after) appears in the log
	// after its first entry, so it waits for that message.
	anchorLater  bool
	start, final span
	// void: a void line cancels the start (history.Void): without a
	// final record the compaction is not yielded.
	void bool
}

// span is one line: offset, length without the newline, 1-based number.
type span struct {
	off  int64
	n    int
	line int
}

func (s span) ok() bool { return s.line > 0 }

// Read opens a session's log and checks all of it: the header, then every
// line's checksum and form, and every record's version. Any problem is an
// *Error naming the file and the line (ErrForeign, ErrVersion,
// ErrCorrupt); a torn final line is no error: it is left out, reported to
// the logger and by TornBytes. A missing log is ErrNotFound. Entries then
// yields the history.
//
// Read takes no lock and changes nothing: it reads the complete lines the
// log has when it checks it, while a writer (in this process or another)
// may append. Bytes after the last newline are then either a torn line
// or a line being written; a reader cannot tell them apart, and leaves
// them out either way. A runtime that goes on with the session takes the
// writer's lock first (Store.Append, which keeps a torn line aside and
// cuts it off), and reads after.
func (s *Store) Read(sessionID string) (*Reader, error) {
	path, err := s.Path(sessionID)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, notFound(sessionID, err)
	}
	r := &Reader{f: f, path: path, maxLine: s.cfg.maxLine, byID: map[string]*comp{}, afters: map[string][]*comp{}}
	if err := r.index(sessionID); err != nil {
		f.Close()
		return nil, err
	}
	if st, err := os.Stat(tornAside(path)); err == nil && st.Mode().IsRegular() {
		r.aside = tornAside(path)
	}
	if r.torn > 0 {
		s.cfg.log.Warn("sessionlog: bytes after the log's last newline left out: a torn final line, or one being written",
			"file", path, "bytes", r.torn, "offset", r.end)
	}
	return r, nil
}

// Header returns the log's header.
func (r *Reader) Header() Header { return r.header }

// Path returns the log's file.
func (r *Reader) Path() string { return r.path }

// TornBytes returns the length of the torn final line that reading left
// out (0 when the log ended with a newline when Read checked it). Store.Append
// keeps it aside, then cuts it off.
func (r *Reader) TornBytes() int64 { return r.torn }

// TornAside returns the file beside the log, <session ID>.jsonl.torn, that
// keeps the torn final lines Store.Append cut off the log before it
// appended, one a line, in the order they were cut; "" when none was ever
// cut. The log itself reads as if they had never been written: they are
// the ends of appends their process did not live to finish.
func (r *Reader) TornAside() string { return r.aside }

// Close closes the log's file.
func (r *Reader) Close() error { return r.f.Close() }

// readHeader reads and checks a log's first line from lr, a reader at the
// file's start; lr then stands at the next line.
func readHeader(lr *lineReader, path, sessionID string) (Header, error) {
	line, complete, err := lr.next()
	if err != nil && !errors.Is(err, io.EOF) {
		var tl errTooLong
		if errors.As(err, &tl) {
			return Header{}, fileError(path, 1, ErrForeign, nil, "no session log header in the first %d bytes", tl.max)
		}
		return Header{}, fmt.Errorf("sessionlog: %s: %w", path, err)
	}
	return checkHeader(path, sessionID, line, complete)
}

// checkHeader judges a log's first line (without its newline; complete:
// it had one) as the log of sessionID, in this order:
//
//  1. Version: the line checks out (its checksum prefix and checksum),
//     says it is this format, and names another integer version:
//     ErrVersion, whatever the shape of its other members, which a later
//     version may have changed.
//  2. Corruption: something on the line says it is this format's log (its
//     format member, read or found as written) or, when it is damaged, the
//     log of this session (the checksum prefix and this session's ID), and
//     the line is not a whole header of this version: ErrCorrupt.
//  3. Foreign: nothing says it is this format's log, or it is a whole
//     header of this version for another session: ErrForeign.
//
// So one damaged byte in a session's own header reads as corruption,
// wherever it is (the checksum catches it, and either the format member
// or the prefix and the session ID survive it), and a log of a later
// version is never taken for a damaged one.
func checkHeader(path, sessionID string, line []byte, complete bool) (Header, error) {
	if len(line) == 0 && !complete {
		return Header{}, fileError(path, 0, ErrForeign, nil, "empty file, no session log header")
	}
	ok, prefixed := checkLine(line)
	var members map[string]json.RawMessage
	_ = json.Unmarshal(line, &members) // a damaged line may not decode
	var format string
	_ = json.Unmarshal(members["format"], &format)
	var version int64
	rawVersion := bytes.TrimSpace(members["version"])
	hasVersion := len(rawVersion) > 0 && rawVersion[0] != 'n' && json.Unmarshal(rawVersion, &version) == nil // null is no version

	if ok && format == Format && hasVersion && version != Version {
		return Header{}, fileError(path, 1, ErrVersion, nil, "version %d; this package reads version %d", version, Version)
	}
	ours := format == Format || bytes.Contains(line, []byte(`"format":"`+Format+`"`))
	if !ok && prefixed && bytes.Contains(line, []byte(`"session":"`+sessionID+`"`)) {
		ours = true // damaged, and this session's (an ID is plain ASCII: Path)
	}
	if !ours {
		return Header{}, fileError(path, 1, ErrForeign, nil, "the first line is not an %s header", Format)
	}
	var h headerLine
	switch {
	case !complete:
		return Header{}, fileError(path, 1, ErrCorrupt, nil, "the header line is incomplete")
	case !ok:
		return Header{}, fileError(path, 1, ErrCorrupt, nil, "header checksum mismatch")
	case !hasVersion:
		return Header{}, fileError(path, 1, ErrCorrupt, nil, "a header without an integer version")
	}
	if err := json.Unmarshal(line, &h); err != nil {
		return Header{}, fileError(path, 1, ErrCorrupt, err, "header")
	}
	if h.Session != sessionID {
		return Header{}, fileError(path, 1, ErrForeign, nil, "the log of session %q, not %q", h.Session, sessionID)
	}
	return Header{Session: h.Session, Created: h.Created, Info: h.Info}, nil
}

// index is the first pass: it checks every line and learns where each
// compaction's entries are.
func (r *Reader) index(sessionID string) error {
	lr := newLineReader(r.f, 0, 1<<62, r.maxLine)
	h, err := readHeader(lr, r.path, sessionID)
	if err != nil {
		return err
	}
	r.header = h
	r.start = lr.off()
	r.end = lr.off()
	for n := 2; ; n++ {
		off := lr.off()
		line, _, err := lr.next()
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				r.torn = int64(len(line)) // no newline: a torn write
			}
			return nil
		}
		if err != nil {
			var tl errTooLong
			if errors.As(err, &tl) {
				return fileError(r.path, n, ErrCorrupt, nil, "a line longer than the limit of %d bytes", tl.max)
			}
			return fmt.Errorf("sessionlog: %s: %w", r.path, err)
		}
		if err := r.indexLine(line, span{off: off, n: len(line), line: n}); err != nil {
			return err
		}
		r.end = lr.off()
	}
}

func (r *Reader) indexLine(line []byte, sp span) error {
	ok, prefixed := checkLine(line)
	switch {
	case !prefixed:
		return fileError(r.path, sp.line, ErrCorrupt, nil, "not a checksummed line")
	case !ok:
		return fileError(r.path, sp.line, ErrCorrupt, nil, "checksum mismatch")
	}
	f, err := parseEntry(line)
	if err != nil {
		return fileError(r.path, sp.line, ErrCorrupt, err, "entry")
	}
	switch kind := string(f.kind); kind {
	case kindMessage:
		for _, c := range r.afters[string(f.id)] {
			c.anchorLater = true
		}
	case kindUpdate, kindData:
		if len(f.payload) == 0 {
			return fileError(r.path, sp.line, ErrCorrupt, nil, "a %s entry without its data", kind)
		}
	case kindVoid:
		id := string(f.id)
		if id == "" {
			return fileError(r.path, sp.line, ErrCorrupt, nil, "a void entry without an ID")
		}
		c := r.byID[id]
		if c == nil {
			c = &comp{idx: len(r.comps), id: id, first: sp.off}
			r.comps = append(r.comps, c)
			r.byID[id] = c
		}
		c.void = true
	case kindStart, kindRecord:
		id := string(f.id)
		if id == "" {
			return fileError(r.path, sp.line, ErrCorrupt, nil, "a %s entry without an ID", kind)
		}
		rec, err := r.decodeRecord(f.payload, sp.line)
		if err != nil {
			return err
		}
		if string(rec.ID) != id {
			return fileError(r.path, sp.line, ErrCorrupt, nil, "the entry of %q holds the record of %q", id, rec.ID)
		}
		if terminal := rec.Status.Terminal(); terminal != (kind == kindRecord) {
			return fileError(r.path, sp.line, ErrCorrupt, nil, "a %s entry with status %q", kind, rec.Status)
		}
		c := r.byID[id]
		if c == nil {
			c = &comp{idx: len(r.comps), id: id, first: sp.off}
			r.comps = append(r.comps, c)
			r.byID[id] = c
		}
		if c.after == "" && len(f.after) > 0 {
			c.after = string(f.after)
			r.afters[c.after] = append(r.afters[c.after], c)
		}
		if kind == kindStart && !c.start.ok() {
			c.start = sp
		}
		if kind == kindRecord && !c.final.ok() {
			c.final = sp
		}
	}
	// Other kinds: a later writer's; skipped.
	return nil
}

// decodeRecord decodes a record, telling a version emitter does not read
// from a damaged record.
func (r *Reader) decodeRecord(raw json.RawMessage, line int) (emitter.Record, error) {
	var rec emitter.Record
	if len(raw) == 0 {
		return rec, fileError(r.path, line, ErrCorrupt, nil, "an entry without its record")
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		kind := ErrCorrupt
		if errors.Is(err, emitter.ErrRecordVersion) {
			kind = ErrVersion
		}
		return rec, fileError(r.path, line, kind, err, "record")
	}
	if rec.ID == "" {
		return rec, fileError(r.path, line, ErrCorrupt, protocol.ErrInvalidID, "record")
	}
	return rec, nil
}

// Entries yields the session's history: each message, update and data
// entry in the order it was appended, and each compaction once, as its
// final record, right after the message its Record.After names (or where
// its first entry is; see the package doc). A compaction that started and
// never settled is yielded failed, Interrupted; one whose start a void
// line cancelled (it opened nothing) is not yielded. It stops at the end the log had when Read checked
// it: lines appended since are not read. An error (the file changed
// under it, an I/O error) is yielded once, last.
func (r *Reader) Entries() iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		yielded := make([]bool, len(r.comps))
		emit := func(c *comp) bool {
			yielded[c.idx] = true
			if !c.final.ok() && (c.void || !c.start.ok()) {
				return true // a void start: it opened nothing
			}
			e, err := r.compaction(c)
			return yield(e, err) && err == nil
		}
		lr := newLineReader(r.f, r.start, r.end-r.start, r.maxLine)
		for n := 2; ; n++ {
			off := lr.off()
			line, _, err := lr.next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(Entry{}, fmt.Errorf("sessionlog: %s: %w", r.path, err))
				return
			}
			if ok, _ := checkLine(line); !ok {
				yield(Entry{}, fileError(r.path, n, ErrCorrupt, nil, "checksum mismatch (the file changed while it was read)"))
				return
			}
			f, err := parseEntry(line)
			if err != nil {
				yield(Entry{}, fileError(r.path, n, ErrCorrupt, err, "entry"))
				return
			}
			switch string(f.kind) {
			case kindMessage:
				id := string(f.id)
				data := json.RawMessage(bytes.Clone(f.payload))
				if !yield(Entry{Kind: KindMessage, Line: n, MessageID: id, Data: data}, nil) {
					return
				}
				for _, c := range r.afters[id] {
					if !yielded[c.idx] && !emit(c) {
						return
					}
				}
			case kindUpdate, kindData:
				kind := KindUpdate
				if string(f.kind) == kindData {
					kind = KindData
				}
				if !yield(Entry{Kind: kind, Line: n, Data: json.RawMessage(bytes.Clone(f.payload))}, nil) {
					return
				}
			case kindStart, kindRecord, kindVoid:
				c := r.byID[string(f.id)]
				if c == nil || c.first != off || yielded[c.idx] {
					continue // not its first entry, or placed already
				}
				if c.after != "" && c.anchorLater {
					continue // it follows a message further on
				}
				if !emit(c) {
					return
				}
			}
		}
	}
}

// compaction reads a compaction's final record, or makes its start's the
// failure of an interrupted one.
func (r *Reader) compaction(c *comp) (Entry, error) {
	sp, interrupted := c.final, false
	if !sp.ok() {
		sp, interrupted = c.start, true
	}
	line := make([]byte, sp.n)
	if _, err := r.f.ReadAt(line, sp.off); err != nil {
		return Entry{}, fmt.Errorf("sessionlog: %s: %w", r.path, err)
	}
	if ok, _ := checkLine(line); !ok {
		return Entry{}, fileError(r.path, sp.line, ErrCorrupt, nil, "checksum mismatch (the file changed while it was read)")
	}
	f, err := parseEntry(line)
	if err != nil {
		return Entry{}, fileError(r.path, sp.line, ErrCorrupt, err, "entry")
	}
	rec, err := r.decodeRecord(f.payload, sp.line)
	if err != nil {
		return Entry{}, err
	}
	if interrupted {
		rec.Status = protocol.Failed
		rec.Error = ErrInterrupted.Error()
		rec.Summary = nil
	}
	return Entry{Kind: KindCompaction, Line: sp.line, Record: rec, Interrupted: interrupted}, nil
}

// lineReader reads a log's lines of at most max bytes (newline
// excluded) with the shared framer; base is the file offset its stream
// begins at.
type lineReader struct {
	lr   *lines.Reader
	base int64
	max  int
}

// errTooLong is a line longer than the limit.
type errTooLong struct{ max int }

func (e errTooLong) Error() string { return fmt.Sprintf("a line longer than %d bytes", e.max) }

// newLineReader reads the file f from offset base.
func newLineReader(f io.ReaderAt, base, size int64, max int) *lineReader {
	return &lineReader{lr: lines.NewReader(io.NewSectionReader(f, base, size), max+1), base: base, max: max}
}

// off is the file offset of the next line.
func (r *lineReader) off() int64 { return r.base + r.lr.Offset() }

// next returns the next line without its newline and whether it had one.
// At the end it returns io.EOF with what follows the last newline (a torn
// line, or nothing). The line is valid until the next call.
func (r *lineReader) next() (line []byte, complete bool, err error) {
	raw, long, err := r.lr.Next()
	switch {
	case long || len(raw) > r.max+1:
		return nil, false, errTooLong{r.max}
	case errors.Is(err, io.EOF):
		return raw, false, io.EOF
	case err != nil:
		return nil, false, err
	}
	return raw[:len(raw)-1], true, nil
}
