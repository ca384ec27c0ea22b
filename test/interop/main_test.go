package interop_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/test/interop"
	"github.com/stretchr/testify/require"
)

// binDir holds the binaries the tests run, each built once for the whole
// package on first use.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acpcompact-interop-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	// The scenario agent keeps its sessions in the user's state directory
	// unless told otherwise: for these tests, in the temporary one.
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type binary struct {
	pkg  string
	once sync.Once
	path string
	out  []byte
	err  error
}

var (
	scenarioAgent = &binary{pkg: "./examples/scenario-agent"}
	acpcompactCmd = &binary{pkg: "./cmd/acpcompact"}
	fakeAgent     = &binary{pkg: "./proxy/internal/fakeagent"}
)

// build returns the binary's path, building it on first use; a failure
// fails every test that needs it, with the compiler's output.
func (b *binary) build(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(binDir, filepath.Base(b.pkg))
		cmd := exec.Command("go", "build", "-o", b.path, b.pkg)
		cmd.Dir = root
		b.out, b.err = cmd.CombinedOutput()
	})
	require.NoError(t, b.err, "go build %s\n%s", b.pkg, b.out)
	return b.path
}

func moduleRoot() (string, error) {
	dir, err := interop.Dir()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
	}
}

// needNode skips, loudly, when node or the pinned npm packages are
// missing; under ACPCOMPACT_REQUIRE_SCHEMA=1 (make test, CI) it fails
// instead, so that CI cannot pass without the interop tests.
func needNode(t *testing.T) {
	t.Helper()
	switch err := interop.Check(); {
	case errors.Is(err, interop.ErrNoNode):
		schematest.Node(t, fmt.Errorf("%w, so the official TypeScript SDK interop tests cannot run; install Node.js 20+ and run `make test-deps`", err))
	case errors.Is(err, interop.ErrNoDeps):
		schematest.Node(t, fmt.Errorf("%w, so the official TypeScript SDK interop tests cannot run", err))
	case err != nil:
		require.NoError(t, err, "finding Node.js and the npm packages")
	}
}
