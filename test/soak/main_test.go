// Package soak holds the process-level tests of the kit's and the scenario
// agent's lifecycle and memory: real binaries (built with go build), real
// pipes, real signals. What each test checks is a bound ("exits within
// 10 s", "grows at most 16 MiB"), never a performance claim; the numbers
// they measure are logged (go test -v) and, with ACPCOMPACT_SOAK_REPORT
// naming a file, appended to it as REPORT lines.
//
// `make test` runs the short versions. `make soak` (ACPCOMPACT_SOAK=1)
// runs the long ones: 1,000 signal runs, 10,000 soak sessions. See the
// docs/agentkit.md, "Shutting an agent down", and "Memory bounds".
package soak

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

// soakEnv selects the long versions of the tests.
const soakEnv = "ACPCOMPACT_SOAK"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acpcompact-soak-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = dir
	// The scenario agent keeps its sessions in the user's state directory
	// unless told otherwise: for these tests, in the temporary one.
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	code := 0
	func() {
		defer os.RemoveAll(dir)
		// goleak.VerifyTestMain exits; run the check by hand so that the
		// build directory is removed either way.
		code = m.Run()
		if code == 0 {
			if err := goleak.Find(); err != nil {
				fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
				code = 1
			}
		}
	}()
	os.Exit(code)
}

// long reports whether the long versions run.
func long() bool { return os.Getenv(soakEnv) == "1" }

// count returns the long count under ACPCOMPACT_SOAK=1, the short one
// otherwise; env, when set to a number, overrides both.
func count(env string, short, full int) int {
	if v := os.Getenv(env); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	if long() {
		return full
	}
	return short
}

// report logs a measurement and, when ACPCOMPACT_SOAK_REPORT names a
// file (make soak sets it), appends it there as a REPORT line.
func report(t testing.TB, format string, args ...any) {
	t.Helper()
	s := fmt.Sprintf(format, args...)
	t.Log(s)
	if path := os.Getenv("ACPCOMPACT_SOAK_REPORT"); path != "" {
		reportMu.Lock()
		defer reportMu.Unlock()
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if !assert.NoError(t, err, "report") {
			return
		}
		defer f.Close()
		fmt.Fprintf(f, "REPORT %s: %s\n", t.Name(), s)
	}
}

var reportMu sync.Mutex
