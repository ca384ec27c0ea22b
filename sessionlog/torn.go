package sessionlog

import (
	"errors"
	"io"
	"os"
	"path/filepath"
)

// tornExt is the extension of the file beside a log that keeps the torn
// final lines Store.Append cut off it: <session ID>.jsonl.torn.
const tornExt = ".torn"

// tornAside names the file that keeps the torn lines cut off the log at
// path.
func tornAside(path string) string { return path + tornExt }

// keepTorn appends the bytes of f from off to size, a torn final line, to
// the log's aside file as one line of its own (a torn line holds no
// newline), and syncs it, whatever the fsync policy: the cut that follows
// must never lose them. It returns the aside file. A copy interrupted by
// a crash leaves a line without its newline, which the next copy ends
// first; the log is cut only after the copy, so the next Append keeps the
// bytes again.
func keepTorn(f *os.File, path string, off, size int64) (string, error) {
	aside := tornAside(path)
	af, err := os.OpenFile(aside, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return "", err
	}
	err = appendTorn(af, io.NewSectionReader(f, off, size-off))
	if serr := af.Sync(); err == nil {
		err = serr
	}
	if cerr := af.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// The aside file may be new: its directory entry too.
		err = syncDir(filepath.Dir(aside))
	}
	if err != nil {
		return "", err
	}
	return aside, nil
}

// appendTorn appends a torn line to the aside file af, after a newline if
// af ends without one.
func appendTorn(af *os.File, torn io.Reader) error {
	st, err := af.Stat()
	if err != nil {
		return err
	}
	if n := st.Size(); n > 0 {
		var last [1]byte
		if _, err := af.ReadAt(last[:], n-1); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if last[0] != '\n' {
			if _, err := af.Write([]byte{'\n'}); err != nil {
				return err
			}
		}
	}
	if _, err := io.Copy(af, torn); err != nil {
		return err
	}
	_, err = af.Write([]byte{'\n'})
	return err
}
