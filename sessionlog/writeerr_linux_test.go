package sessionlog_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/sessionlog"
)

// The write errors of a real file system, in a child process (this test
// binary re-run): appends until the kernel refuses one, which must come
// back from AppendMessage with its errno reachable by errors.Is, leave
// the log ending at a line boundary, and lose none of the appends that
// returned nil.

const fillEnv = "SESSIONLOG_TEST_FILL"

// TestWriteErrorsReachTheCaller: a full file system (a 64 KiB tmpfs,
// mounted in a user namespace: `unshare -rm`; skipped where the kernel or
// the sandbox refuses one) gives ENOSPC, a file size limit
// (RLIMIT_FSIZE) gives EFBIG.
func TestWriteErrorsReachTheCaller(t *testing.T) {
	if mode := os.Getenv(fillEnv); mode != "" {
		fill(t, mode)
		return
	}
	run := func(t *testing.T, mode string, wrap ...string) {
		dir := t.TempDir()
		args := append(wrap, os.Args[0], "-test.run=^TestWriteErrorsReachTheCaller$", "-test.count=1", "-test.v")
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), fillEnv+"="+mode, "SESSIONLOG_TEST_FILL_DIR="+dir)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "the child:\n%s", out)
		assert.Contains(t, string(out), "--- PASS: TestWriteErrorsReachTheCaller")
		t.Logf("child:\n%s", out)
	}
	t.Run("ENOSPC", func(t *testing.T) {
		mnt := t.TempDir()
		probe := exec.Command("unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs "+mnt)
		if out, err := probe.CombinedOutput(); err != nil {
			t.Skipf("no tmpfs in a user namespace here (%v: %s); the EFBIG case stands in", err, bytes.TrimSpace(out))
		}
		run(t, "enospc", "unshare", "-rm", "sh", "-c", `mount -t tmpfs -o size=64k tmpfs "$SESSIONLOG_TEST_FILL_DIR" && exec "$@"`, "sh")
	})
	t.Run("EFBIG", func(t *testing.T) { run(t, "efbig") })
}

// fill is the child: it appends to a log in $SESSIONLOG_TEST_FILL_DIR
// until a write fails.
func fill(t *testing.T, mode string) {
	dir := os.Getenv("SESSIONLOG_TEST_FILL_DIR")
	want := syscall.ENOSPC
	if mode == "efbig" {
		want = syscall.EFBIG
		// Writes past 64 KiB fail with EFBIG (the Go runtime ignores
		// SIGXFSZ, which would otherwise end the process).
		require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 64 << 10, Max: 64 << 10}))
	}
	s, err := sessionlog.Open(filepath.Join(dir, "store"))
	require.NoError(t, err)
	l, err := s.Create("s", nil)
	require.NoError(t, err)
	text := strings.Repeat("x", 1000) // lines of about 1 KiB: the last one is cut mid-line by the kernel
	appended := 0
	for ; appended < 1000; appended++ {
		if err = l.AppendMessage("m", msg(text)); err != nil {
			break
		}
	}
	require.Error(t, err, "the file system never filled")
	t.Logf("append %d failed: %v", appended+1, err)
	assert.True(t, errors.Is(err, want), "errors.Is(%v, %v)", err, want)
	require.NoError(t, l.Close())

	path, err := s.Path("s")
	require.NoError(t, err)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.HasSuffix(data, []byte("\n")), "the failed append left a partial line")
	r, err := s.Read("s")
	require.NoError(t, err)
	defer r.Close()
	assert.Zero(t, r.TornBytes())
	n := 0
	for _, err := range r.Entries() {
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, appended, n, "every append that returned nil reads back")
}
