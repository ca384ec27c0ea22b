package sessionlog

import (
	"errors"
	"fmt"

	"github.com/acpcompact/acpcompact/history"
)

// Sentinel errors, for errors.Is. The errors about a file's content are
// *Error values that wrap one of ErrForeign, ErrVersion or ErrCorrupt and
// name the file and the line.
var (
	// ErrForeign: the file is not a session log (another format), or it is
	// the log of another session.
	ErrForeign = errors.New("not a session log")
	// ErrVersion: the file is a session log of a version this package does
	// not read, or holds a record of a version package emitter does not
	// read (the *Error then also wraps emitter's own error).
	ErrVersion = errors.New("unsupported session log version")
	// ErrCorrupt: the file is a session log damaged in the middle: a line
	// whose checksum does not match, or that is not what its kind says.
	ErrCorrupt = errors.New("corrupt session log")

	// ErrNotFound: the session has no log in the store. It wraps
	// fs.ErrNotExist's meaning; errors.Is(err, fs.ErrNotExist) holds too,
	// and so does errors.Is(err, history.ErrNotFound).
	ErrNotFound error = &also{"no log for this session", history.ErrNotFound}
	// ErrExist: Create found a log for the session already (it wraps
	// history.ErrExist).
	ErrExist error = &also{"the session has a log already", history.ErrExist}
	// ErrSessionID: the session ID cannot name a file (see Store.Path).
	ErrSessionID = errors.New("session ID not usable as a file name")
	// ErrLocked: another Log holds the session's log open for writing, in
	// this process or another (see the package doc, "One writer a log").
	// Append and Create return it at once, never waiting; the error names
	// the file. It wraps history.ErrLocked.
	ErrLocked error = &also{"session log in use by another writer", history.ErrLocked}
	// ErrClosed: the Log was closed, or failed earlier in a way that leaves
	// its end unknown (a write that could not be undone).
	ErrClosed = errors.New("session log closed")
	// ErrInterrupted is the error of a compaction whose process died
	// before it settled: reading its log yields it as failed with this
	// text (see the package doc, "Crash safety"). It is
	// history.ErrInterrupted.
	ErrInterrupted = history.ErrInterrupted
)

// also is a sentinel of this package that is also one of package
// history's: its own text, and errors.Is finds either.
type also struct {
	msg string
	is  error
}

func (e *also) Error() string { return e.msg }
func (e *also) Unwrap() error { return e.is }

// Error is a problem with a log file's content: what (one of ErrForeign,
// ErrVersion, ErrCorrupt), where (the file and the 1-based line; 0 for the
// file as a whole) and why.
type Error struct {
	// Path is the log file.
	Path string
	// Line is the 1-based line, or 0 when the problem is the whole file.
	Line int
	// Kind is ErrForeign, ErrVersion or ErrCorrupt.
	Kind error
	// Detail says what is wrong, for a person.
	Detail string
	// Err is the underlying error, if any (a JSON error, emitter's
	// ErrRecordVersion).
	Err error
}

// Error reads "PATH:LINE: KIND: DETAIL".
func (e *Error) Error() string {
	where := e.Path
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d", e.Path, e.Line)
	}
	msg := fmt.Sprintf("%s: %v", where, e.Kind)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns Kind and Err, so errors.Is finds either.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// errHeld is what lockFile returns for a lock another holds.
var errHeld = errors.New("lock held")

func fileError(path string, line int, kind error, err error, format string, args ...any) *Error {
	return &Error{Path: path, Line: line, Kind: kind, Detail: fmt.Sprintf(format, args...), Err: err}
}
