package sessionlog_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/sessionlog"
)

// TestOneWriterALog: while a Log is open (Create or Append), a second
// Append of that session's log fails at once with ErrLocked naming the
// file, and writes nothing; readers read it meanwhile. Once the Log is
// closed, the next writer gets it.
func TestOneWriterALog(t *testing.T) {
	s := open(t)
	path, err := s.Path("s")
	require.NoError(t, err)
	first, err := s.Create("s", nil)
	require.NoError(t, err)
	require.NoError(t, first.AppendMessage("m1", msg("a")))

	// A second Store on the directory is no way around it.
	other, err := sessionlog.Open(s.Dir())
	require.NoError(t, err)
	for _, st := range []*sessionlog.Store{s, other} {
		_, err := st.Append("s")
		require.ErrorIs(t, err, sessionlog.ErrLocked)
		assert.Contains(t, err.Error(), path, "the error names the file")
		var fe *sessionlog.Error
		assert.False(t, errors.As(err, &fe), "a locked log is no problem with its content: %v", err)
	}
	_, err = s.Create("s", nil)
	assert.ErrorIs(t, err, sessionlog.ErrExist)

	words, _ := read(t, other, "s")
	assert.Equal(t, []string{"m:m1:a"}, words, "a reader reads the log being written")
	require.NoError(t, first.AppendMessage("m2", msg("b")))

	require.NoError(t, first.Close())
	second, err := other.Append("s")
	require.NoError(t, err, "the log is free once its writer closed it")
	_, err = s.Append("s")
	require.ErrorIs(t, err, sessionlog.ErrLocked)
	require.NoError(t, second.AppendMessage("m3", msg("c")))
	require.NoError(t, second.Close())
	words, _ = read(t, s, "s")
	assert.Equal(t, []string{"m:m1:a", "m:m2:b", "m:m3:c"}, words)
}

// TestOneWriterALogAcrossProcesses: another process holding a session's
// log (this test binary, re-run as holdLog) makes this one's Append fail
// with ErrLocked; when that process ends, its lock goes with it.
func TestOneWriterALogAcrossProcesses(t *testing.T) {
	if os.Getenv(holdEnv) != "" {
		holdLog(t)
		return
	}
	s := open(t)
	l, err := s.Create("s", nil)
	require.NoError(t, err)
	require.NoError(t, l.Close())

	cmd := exec.Command(os.Args[0], "-test.run=^TestOneWriterALogAcrossProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), holdEnv+"="+s.Dir())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "the holding process did not start")
	require.Equal(t, "holding\n", line)

	_, err = s.Append("s")
	require.ErrorIs(t, err, sessionlog.ErrLocked, "a second process appends to a log another process writes")

	require.NoError(t, stdin.Close()) // the holder appends, closes and exits
	require.NoError(t, cmd.Wait())
	l, err = s.Append("s")
	require.NoError(t, err)
	require.NoError(t, l.AppendMessage("m2", msg("b")))
	require.NoError(t, l.Close())
	words, _ := read(t, s, "s")
	assert.Equal(t, []string{"m:m1:held", "m:m2:b"}, words)
}

const holdEnv = "SESSIONLOG_TEST_HOLD_DIR"

// holdLog is the other process: it appends to session "s" of the store in
// $SESSIONLOG_TEST_HOLD_DIR, says so, holds the log until its stdin ends,
// then appends and exits.
func holdLog(t *testing.T) {
	s, err := sessionlog.Open(os.Getenv(holdEnv))
	require.NoError(t, err)
	l, err := s.Append("s")
	require.NoError(t, err)
	fmt.Println("holding")
	_, _ = io.Copy(io.Discard, os.Stdin)
	require.NoError(t, l.AppendMessage("m1", msg("held")))
	require.NoError(t, l.Close())
}
