package sessionlog_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/sessionlog"
)

// tornLog writes session "s" with two messages, then torn (bytes of a
// line the process died writing), and returns the store, the log's path
// and its whole lines.
func tornLog(t *testing.T, torn string) (*sessionlog.Store, string, []byte) {
	t.Helper()
	s := open(t)
	l, err := s.Create("s", map[string]string{"cwd": "/work"})
	require.NoError(t, err)
	require.NoError(t, l.AppendMessage("m1", msg("a")))
	require.NoError(t, l.AppendMessage("m2", msg("b")))
	require.NoError(t, l.Close())
	path, err := s.Path("s")
	require.NoError(t, err)
	whole, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, append(bytes.Clone(whole), torn...), 0o600))
	return s, path, whole
}

// TestAppendKeepsTheTornTailAside: the bytes Append cuts off a torn
// final line are kept next to the log, in <log>.torn (one line each cut,
// in the order they were cut), before the log is cut: reading and
// reopening never destroy them. Read changes nothing.
func TestAppendKeepsTheTornTailAside(t *testing.T) {
	const torn1 = `{"crc":"01234567","kind":"message","id":"m3","da`
	const torn2 = `{"crc":"89abcdef","kind":"mess`
	s, path, whole := tornLog(t, torn1)
	aside := path + ".torn"

	r, err := s.Read("s")
	require.NoError(t, err)
	require.NoError(t, r.Close())
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(whole)+torn1, string(after), "Read changed the log")
	assert.NoFileExists(t, aside, "Read wrote the aside copy")

	l, err := s.Append("s")
	require.NoError(t, err)
	require.NoError(t, l.AppendMessage("m3", msg("c")))
	require.NoError(t, l.Close())
	kept, err := os.ReadFile(aside)
	require.NoError(t, err, "the torn bytes were not kept aside")
	assert.Equal(t, torn1+"\n", string(kept))
	info, err := os.Stat(aside)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the aside copy holds what the user typed")
	words, _ := read(t, s, "s")
	assert.Equal(t, []string{"m:m1:a", "m:m2:b", "m:m3:c"}, words)

	// The process dies again, mid-line: the second cut joins the first.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(torn2)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	l, err = s.Append("s")
	require.NoError(t, err)
	require.NoError(t, l.Close())
	kept, err = os.ReadFile(aside)
	require.NoError(t, err)
	assert.Equal(t, torn1+"\n"+torn2+"\n", string(kept))
	log, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.HasSuffix(log, []byte("\n")), "the log still ends torn")
	assert.NotContains(t, string(log), torn2)
}

// TestAppendDoesNotCutWhatItCannotKeep: when the torn bytes cannot be
// kept aside, Append fails and leaves the log as it found it.
func TestAppendDoesNotCutWhatItCannotKeep(t *testing.T) {
	const torn = `{"crc":"01234567","kind":"message","id":"m3","da`
	s, path, whole := tornLog(t, torn)
	require.NoError(t, os.Mkdir(path+".torn", 0o700)) // no file can be written there

	_, err := s.Append("s")
	require.Error(t, err, "Append cut bytes it could not keep")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(whole)+torn, string(after), "the torn bytes are gone")
}

func dirOf(path string) string { return filepath.Dir(path) }
