package proxy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// fakeDir holds the fake agent binary, built once for the whole package
// (building it per test would dominate the run time) and removed after the
// leak check.
var (
	fakeDir  string
	fakeOnce sync.Once
	fakeBin  string
	fakeErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acpcompact-fakeagent-")
	if err != nil {
		panic(err)
	}
	fakeDir = dir
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// fakeAgent returns the path of the fake agent, building it on first use.
func fakeAgent(t testing.TB) string {
	t.Helper()
	fakeOnce.Do(func() {
		fakeBin = filepath.Join(fakeDir, "fakeagent")
		cmd := exec.Command("go", "build", "-o", fakeBin, "./internal/fakeagent")
		out, err := cmd.CombinedOutput()
		if err != nil {
			fakeErr = err
			t.Logf("%s", out)
		}
	})
	require.NoError(t, fakeErr, "building the fake agent")
	return fakeBin
}
