package sessionlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Format and Version are what a log's header line says it is.
const (
	Format  = "acpcompact-sessionlog"
	Version = 1
)

// ext is the file name extension of a log: a session's log is
// <session ID>.jsonl in the store's directory.
const ext = ".jsonl"

// DefaultMaxLine bounds one line of a log (WithMaxLine).
const DefaultMaxLine = 64 << 20

// SyncPolicy says when a log is flushed to stable storage (see the package
// doc, "Durability").
type SyncPolicy int

const (
	// SyncNone leaves write-back to the kernel: a crash of the process
	// loses nothing, a crash of the machine may lose the last appends. The
	// default.
	SyncNone SyncPolicy = iota
	// SyncEach calls fsync after every append, and syncs a new log and its
	// directory entry before Create returns.
	SyncEach
)

// String names the policy.
func (p SyncPolicy) String() string {
	switch p {
	case SyncNone:
		return "none"
	case SyncEach:
		return "each"
	}
	return fmt.Sprintf("SyncPolicy(%d)", int(p))
}

// Option configures a Store.
type Option func(*config)

type config struct {
	sync    SyncPolicy
	maxLine int
	now     func() time.Time
	log     *slog.Logger
}

// WithSync sets the fsync policy (default SyncNone).
func WithSync(p SyncPolicy) Option { return func(c *config) { c.sync = p } }

// WithLogger sets where the store reports what it repairs or ignores: a
// torn final line, read past (Store.Read) or cut off and kept aside
// (Store.Append), at level WARN, with the file and the byte count. nil
// means slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithMaxLine bounds one line of a log, in bytes (default DefaultMaxLine):
// an append of a longer one is refused, and reading a longer one is
// ErrCorrupt. n <= 0 means the default.
func WithMaxLine(n int) Option {
	return func(c *config) {
		if n <= 0 {
			n = DefaultMaxLine
		}
		c.maxLine = n
	}
}

// Store is a directory of session logs, one file per session. It is safe
// for concurrent use; it keeps no state of its own beyond its options, so
// several Stores, in one process or several, may share a directory: a
// session's log has one writer at a time, which the writer's lock
// enforces (ErrLocked; see the package doc, "One writer a log").
type Store struct {
	dir string
	cfg config
}

// Open returns the store in dir, creating the directory (0o700) if need
// be.
func Open(dir string, opts ...Option) (*Store, error) {
	cfg := config{sync: SyncNone, maxLine: DefaultMaxLine, now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.log == nil {
		cfg.log = slog.Default()
	}
	if dir == "" {
		return nil, errors.New("sessionlog: no directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("sessionlog: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("sessionlog: %w", err)
	}
	return &Store{dir: abs, cfg: cfg}, nil
}

// Dir returns the store's directory, as an absolute path.
func (s *Store) Dir() string { return s.dir }

// Path returns the file of a session's log: <dir>/<sessionID>.jsonl. A
// session ID names a file only if it is 1 to 200 bytes of ASCII letters,
// digits, '_', '-' and '.', and does not begin with '.'; any other is
// refused with ErrSessionID (so a client's ID never reaches outside the
// directory).
func (s *Store) Path(sessionID string) (string, error) {
	if !validID(sessionID) {
		return "", fmt.Errorf("sessionlog: %q: %w", sessionID, ErrSessionID)
	}
	return filepath.Join(s.dir, sessionID+ext), nil
}

func validID(id string) bool {
	if id == "" || len(id) > 200 || id[0] == '.' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}

// Header is a log's first line.
type Header struct {
	// Session is the session's ID.
	Session string
	// Created is when Create wrote the log.
	Created time.Time
	// Info is what the runtime gave Create, as JSON (null for nil).
	Info json.RawMessage
}

// headerLine is the header's JSON form, after the checksum.
type headerLine struct {
	Format  string          `json:"format"`
	Version int             `json:"version"`
	Session string          `json:"session"`
	Created time.Time       `json:"created"`
	Info    json.RawMessage `json:"info,omitempty"`
}

// Create writes a new, empty log for sessionID, its header holding info
// (any value json.Marshal takes; nil for none), and returns it open for
// appending, its writer's lock held until Close. A log that exists
// already is refused with ErrExist: the file appears whole or not at all
// (it is written aside, then linked into place), so another process or a
// crash never sees half a header. A log is readable by its owner only
// (0o600: it holds what the user typed), as the directory Open creates is
// (0o700).
func (s *Store) Create(sessionID string, info any) (*Log, error) {
	path, err := s.Path(sessionID)
	if err != nil {
		return nil, err
	}
	var rawInfo json.RawMessage
	if info != nil {
		if rawInfo, err = json.Marshal(info); err != nil {
			return nil, fmt.Errorf("sessionlog: header info: %w", err)
		}
	}
	line, err := encodeLine(nil, headerLine{Format: Format, Version: Version, Session: sessionID,
		Created: s.cfg.now().UTC().Truncate(time.Millisecond), Info: rawInfo})
	if err != nil {
		return nil, fmt.Errorf("sessionlog: header: %w", err)
	}
	if len(line) > s.cfg.maxLine {
		return nil, fmt.Errorf("sessionlog: header of %d bytes exceeds the line limit of %d", len(line), s.cfg.maxLine)
	}
	tmp, err := os.CreateTemp(s.dir, "."+sessionID+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("sessionlog: %w", err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName) // once linked, the log has a name of its own
	if _, err = tmp.Write(line); err == nil && s.cfg.sync == SyncEach {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("sessionlog: %w", err)
	}
	if err := os.Link(tmpName, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("sessionlog: %s: %w", path, ErrExist)
		}
		return nil, fmt.Errorf("sessionlog: %w", err)
	}
	if s.cfg.sync == SyncEach {
		if err := syncDir(s.dir); err != nil {
			return nil, fmt.Errorf("sessionlog: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("sessionlog: %w", err)
	}
	// Another writer can have it already only if it opened this new log
	// between the link and here, by its session ID.
	if err := lock(f, path); err != nil {
		return nil, err
	}
	return &Log{f: f, path: path, size: int64(len(line)), cfg: &s.cfg}, nil
}

// lock takes the writer's lock of the log at path, open as f; it closes f
// when it cannot.
func lock(f *os.File, path string) error {
	err := lockFile(f)
	if err == nil {
		return nil
	}
	f.Close()
	if errors.Is(err, errHeld) {
		return fmt.Errorf("sessionlog: %s: %w", path, ErrLocked)
	}
	return fmt.Errorf("sessionlog: locking %s: %w", path, err)
}

// Append opens an existing log for appending, after a restart, and takes
// its writer's lock until Close (ErrLocked, at once, if another Log holds
// it). It checks the header (ErrForeign, ErrVersion, ErrCorrupt) and cuts
// off a torn final line, so that the next append starts a line of its
// own; the bytes it cuts are first kept aside, in the file Reader.TornAside
// names, and reported to the logger (see the package doc, "Torn final
// lines"). It does not read the lines in between; Read does.
func (s *Store) Append(sessionID string) (*Log, error) {
	path, err := s.Path(sessionID)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, notFound(sessionID, err)
	}
	// Locked first: the check and the cut are the writer's.
	if err := lock(f, path); err != nil {
		return nil, err
	}
	l := &Log{f: f, path: path, cfg: &s.cfg}
	if l.size, err = s.openEnd(f, path, sessionID); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// openEnd checks a log opened for appending and returns where its next
// line goes: past its last newline, a torn final line kept aside and cut
// off.
func (s *Store) openEnd(f *os.File, path, sessionID string) (int64, error) {
	if _, err := readHeader(newLineReader(f, 0, 1<<62, s.cfg.maxLine), path, sessionID); err != nil {
		return 0, err
	}
	end, size, err := lastNewline(f)
	if err != nil {
		return 0, fmt.Errorf("sessionlog: %w", err)
	}
	if end == size {
		return end, nil
	}
	aside, err := keepTorn(f, path, end, size)
	if err != nil {
		return 0, fmt.Errorf("sessionlog: keeping the torn final line of %s aside (the log is left as it was): %w", path, err)
	}
	if err := f.Truncate(end); err != nil {
		return 0, fmt.Errorf("sessionlog: cutting off the torn final line of %s: %w", path, err)
	}
	if s.cfg.sync == SyncEach {
		if err := f.Sync(); err != nil {
			return 0, fmt.Errorf("sessionlog: %w", err)
		}
	}
	s.cfg.log.Warn("sessionlog: a torn final line (a process died writing it) was cut off the log and kept aside",
		"file", path, "bytes", size-end, "offset", end, "aside", aside)
	return end, nil
}

// Remove deletes a session's log, and the torn lines kept aside from it
// (TornAside). A missing log is ErrNotFound.
func (s *Store) Remove(sessionID string) error {
	path, err := s.Path(sessionID)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		return notFound(sessionID, err)
	}
	if err := os.Remove(tornAside(path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sessionlog: %w", err)
	}
	return nil
}

func notFound(sessionID string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sessionlog: session %q: %w (%w)", sessionID, ErrNotFound, err)
	}
	return fmt.Errorf("sessionlog: %w", err)
}

// lastNewline returns the offset just past the file's last newline (0 if
// there is none) and the file's size.
func lastNewline(f *os.File) (end, size int64, err error) {
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size = st.Size()
	buf := make([]byte, 64<<10)
	for off := size; off > 0; {
		n := int64(len(buf))
		if n > off {
			n = off
		}
		off -= n
		if _, err := f.ReadAt(buf[:n], off); err != nil && !errors.Is(err, io.EOF) {
			return 0, 0, err
		}
		for i := n - 1; i >= 0; i-- {
			if buf[i] == '\n' {
				return off + i + 1, size, nil
			}
		}
	}
	return 0, size, nil
}
