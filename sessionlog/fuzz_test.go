package sessionlog_test

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"testing"

	"github.com/acpcompact/acpcompact/sessionlog"
	"github.com/stretchr/testify/require"
)

// FuzzCheckHeader judges arbitrary first lines (seeds in
// testdata/fuzz/FuzzCheckHeader): it never panics; a line it accepts is a
// checksummed header of session "s"; a line it refuses gets an *Error of
// exactly one kind, at line 1 (0 for an empty file).
func FuzzCheckHeader(f *testing.F) {
	f.Add(line(headerMembers), true)
	f.Add(line(`"format":"acpcompact-sessionlog","version":2,"session":{"id":"s"}`), true)
	f.Add([]byte(`{"role":"user"}`), true)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, ln []byte, complete bool) {
		if bytes.IndexByte(ln, '\n') >= 0 {
			return // a first line holds no newline
		}
		h, err := sessionlog.CheckHeader("s.jsonl", "s", ln, complete)
		if err == nil {
			require.Equal(t, "s", h.Session, "accepted %q (complete %v) as %+v", ln, complete, h)
			require.True(t, complete, "accepted %q (complete %v) as %+v", ln, complete, h)
			require.True(t, bytes.HasPrefix(ln, []byte(`{"crc":"`)), "accepted %q (complete %v) as %+v", ln, complete, h)
			return
		}
		var fe *sessionlog.Error
		require.ErrorAs(t, err, &fe, "%q: %v is no *Error at line 1", ln, err)
		require.LessOrEqual(t, fe.Line, 1, "%q: %v is no *Error at line 1", ln, err)
		require.Equal(t, len(ln) == 0 && !complete, fe.Line == 0, "%q: %v is no *Error at line 1", ln, err)
		n := 0
		for _, k := range []error{sessionlog.ErrForeign, sessionlog.ErrVersion, sessionlog.ErrCorrupt} {
			if errors.Is(err, k) {
				n++
			}
		}
		require.Equal(t, 1, n, "%q: %v is of %d kinds", ln, err, n)
	})
}

// FuzzRead reads arbitrary lines after a good header (seeds in
// testdata/fuzz/FuzzRead): Read and Entries never panic, every error is
// one of the package's, and what Read accepts, Entries yields without
// error.
func FuzzRead(f *testing.F) {
	f.Add(bytes.Join([][]byte{
		sessionlog.RawLine(`"kind":"message","id":"m1","data":{"text":"a"}`),
		sessionlog.RawLine(`"kind":"start","id":"c1","after":"m1","record":{"v":1,"compactionId":"c1","status":"in_progress"}`),
		sessionlog.RawLine(`"kind":"record","id":"c1","record":{"v":1,"compactionId":"c1","status":"completed"}`),
		[]byte(`{"crc":"0123`),
	}, nil))
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		s, err := sessionlog.Open(dir, sessionlog.WithLogger(slog.New(slog.DiscardHandler)))
		require.NoError(t, err, "sessionlog.Open")
		path, _ := s.Path("s")
		require.NoError(t, os.WriteFile(path, append(sessionlog.RawLine(headerMembers), body...), 0o600), "writing the log")

		r, err := s.Read("s")
		if err != nil {
			var fe *sessionlog.Error
			require.ErrorAs(t, err, &fe, "Read: %v is no *Error after the header", err)
			require.GreaterOrEqual(t, fe.Line, 2, "Read: %v is no *Error after the header", err)
			return
		}
		defer r.Close()
		for _, err := range r.Entries() {
			require.NoError(t, err, "Entries of a log Read accepted")
		}
	})
}
