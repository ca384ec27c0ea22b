package sessionlog

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sync"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// Line kinds after the header. update, data and void are the kit's
// (history.Store, Store.History); a reader of an earlier version skips
// them.
const (
	kindMessage = "message"
	kindStart   = "start"
	kindRecord  = "record"
	kindUpdate  = "update"
	kindData    = "data"
	kindVoid    = "void"
)

// crcPrefix opens every line; the checksum's eight hex digits follow, then
// crcSep.
const (
	crcPrefix = `{"crc":"`
	crcSep    = `",`
	prefixLen = len(crcPrefix) + 8 + len(crcSep) // the checksum covers what follows
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Log is one session's log, open for appending, and its writer's lock
// (ErrLocked for any other writer until Close). Safe for concurrent use:
// appends are serialized, each one line written with one system call
// (pwrite(2) at the log's end).
type Log struct {
	path string
	cfg  *config

	mu   sync.Mutex
	f    *os.File
	size int64 // the log's length: where the next line goes
	err  error // sticky: ErrClosed, or a write that could not be undone
}

// Path returns the log's file.
func (l *Log) Path() string { return l.path }

// AppendMessage appends one of the runtime's own messages: id is the
// message's ID (what a compaction's Record.After names; "" for none),
// data anything json.Marshal takes (a json.RawMessage is written as is,
// compacted). Reading yields data back as JSON, in Entry.Data.
func (l *Log) AppendMessage(id string, data any) error {
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("sessionlog: message %q: %w", id, err)
	}
	line := newLine(len(id) + len(raw) + 32)
	line = append(line, `"kind":"message"`...)
	if id != "" {
		line = append(line, `,"id":`...)
		line = protocol.AppendJSONString(line, id)
	}
	line = append(line, `,"data":`...)
	line = append(line, raw...)
	return l.write(finishLine(line))
}

// appendPayload appends a line of kind (kindUpdate, kindData) whose
// payload, raw JSON, goes under "data", on one line.
func (l *Log) appendPayload(kind string, raw []byte) error {
	if len(raw) == 0 {
		return fmt.Errorf("sessionlog: a %s entry without data", kind)
	}
	raw, err := oneLine(raw)
	if err != nil {
		return fmt.Errorf("sessionlog: %s entry: %w", kind, err)
	}
	line := newLine(len(raw) + 32)
	line = append(line, `"kind":"`...)
	line = append(line, kind...)
	line = append(line, `","data":`...)
	line = append(line, raw...)
	return l.write(finishLine(line))
}

// appendVoid appends a void line: the start of compaction id opened
// nothing (see history.Void).
func (l *Log) appendVoid(id string) error {
	if id == "" {
		return errors.New("sessionlog: a void entry without an ID")
	}
	line := newLine(len(id) + 32)
	line = append(line, `"kind":"void","id":`...)
	line = protocol.AppendJSONString(line, id)
	return l.write(finishLine(line))
}

// AppendRecord appends a compaction's record in its versioned JSON form
// (emitter.Record's). A record whose status is terminal is the
// compaction's final record; one that is not (in_progress: the
// Compaction.Record of a compaction just started) marks its start, so that
// reading the log after a crash yields the compaction as failed instead of
// losing it (see the package doc, "Crash safety"). Only the first final
// record of an ID counts.
func (l *Log) AppendRecord(rec emitter.Record) error {
	if rec.ID == "" {
		return errors.New("sessionlog: a record without an ID")
	}
	kind := kindStart
	if rec.Status.Terminal() {
		kind = kindRecord
	}
	size := 512 + 2*(len(rec.ID)+len(rec.After)) + len(rec.Error)
	for _, b := range rec.Summary {
		size += len(b.Text) + len(b.Text)/8 + 32
	}
	line := newLine(size)
	line = append(line, `"kind":"`...)
	line = append(line, kind...)
	line = append(line, `","id":`...)
	line = protocol.AppendJSONString(line, string(rec.ID))
	if rec.After != "" {
		line = append(line, `,"after":`...)
		line = protocol.AppendJSONString(line, rec.After)
	}
	line = append(line, `,"record":`...)
	line, err := appendRecord(line, rec)
	if err != nil {
		return fmt.Errorf("sessionlog: record %s: %w", rec.ID, err)
	}
	return l.write(finishLine(line))
}

// appendRecord appends the record's JSON form (emitter.Record's
// MarshalJSON, which encodes a long summary without reflection), on one
// line.
func appendRecord(dst []byte, rec emitter.Record) ([]byte, error) {
	raw, err := rec.MarshalJSON()
	if err != nil {
		return nil, err
	}
	if raw, err = oneLine(raw); err != nil {
		return nil, err
	}
	return append(dst, raw...), nil
}

// oneLine compacts JSON that holds a newline (whitespace in a verbatim
// value); json.Marshal's own output never does.
func oneLine(raw []byte) ([]byte, error) {
	if bytes.IndexByte(raw, '\n') < 0 && bytes.IndexByte(raw, '\r') < 0 {
		return raw, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Sync flushes the log to stable storage now, whatever the policy.
func (l *Log) Sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	return l.f.Sync()
}

// Close closes the log and releases its writer's lock; later appends
// return ErrClosed. With SyncEach it has nothing left to flush.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.Is(l.err, ErrClosed) && l.f == nil {
		return nil
	}
	err := unlockFile(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	l.err = ErrClosed
	return err
}

// newLine returns a line with room for its checksum prefix, to be filled
// with members and closed by finishLine, and for about size bytes more.
func newLine(size int) []byte {
	b := make([]byte, prefixLen, prefixLen+max(size, 240)+16)
	copy(b, crcPrefix)
	copy(b[prefixLen-len(crcSep):], crcSep)
	return b
}

// write appends one finished line.
func (l *Log) write(line []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return fmt.Errorf("sessionlog: %s: %w", l.path, l.err)
	}
	if len(line) > l.cfg.maxLine {
		return fmt.Errorf("sessionlog: %s: a line of %d bytes exceeds the limit of %d", l.path, len(line), l.cfg.maxLine)
	}
	// At the log's end as this Log knows it: the writer's lock keeps every
	// other writer out (the file is not opened O_APPEND, which would keep
	// Truncate from working on Windows).
	n, err := l.f.WriteAt(line, l.size)
	if err != nil {
		// Undo a partial line, so the next one does not continue it.
		// WriteAt does not count what a failed pwrite(2) wrote before it
		// failed (a full disk takes part of a line), so the cut is
		// unconditional.
		if terr := l.f.Truncate(l.size); terr != nil {
			l.err = fmt.Errorf("%w: a partial line could not be cut off (%v)", ErrClosed, terr)
		}
		return fmt.Errorf("sessionlog: %w", err)
	}
	l.size += int64(n)
	if l.cfg.sync == SyncEach {
		if err := l.f.Sync(); err != nil {
			return fmt.Errorf("sessionlog: %w", err)
		}
	}
	return nil
}

// finishLine closes a line begun by newLine and filled with members, and
// writes its checksum.
func finishLine(line []byte) []byte {
	line = append(line, '}')
	sum := crc32.Checksum(line[prefixLen:], castagnoli)
	var b [4]byte
	b[0], b[1], b[2], b[3] = byte(sum>>24), byte(sum>>16), byte(sum>>8), byte(sum)
	hex.Encode(line[len(crcPrefix):], b[:])
	return append(line, '\n')
}

// encodeLine writes v (a struct, encoded as a JSON object) as a line.
func encodeLine(dst []byte, v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(raw) < 3 || raw[0] != '{' {
		return nil, fmt.Errorf("sessionlog: %T is not a JSON object with members", v)
	}
	dst = append(dst[:0], crcPrefix...)
	dst = append(dst, "00000000"...)
	dst = append(dst, crcSep...)
	dst = append(dst, raw[1:len(raw)-1]...)
	return finishLine(dst), nil
}

// checkLine verifies a line's checksum; line excludes the newline.
func checkLine(line []byte) (ok, prefixed bool) {
	if len(line) < prefixLen+1 || string(line[:len(crcPrefix)]) != crcPrefix || string(line[prefixLen-len(crcSep):prefixLen]) != crcSep {
		return false, false
	}
	digits := line[len(crcPrefix) : prefixLen-len(crcSep)]
	for _, c := range digits {
		if ('0' > c || c > '9') && ('a' > c || c > 'f') {
			return false, true // the format's digits are lowercase: 'A' for 'a' is damage
		}
	}
	var b [4]byte
	if _, err := hex.Decode(b[:], digits); err != nil {
		return false, true
	}
	want := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	return crc32.Checksum(line[prefixLen:], castagnoli) == want, true
}
