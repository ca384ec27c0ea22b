package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/stretchr/testify/require"
)

var floodN = flag.Int("flood.n", 20_000, "summary chunks per `/compact flood N`")

var (
	buildDir  string
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acpcompact-bench-")
	if err != nil {
		panic(err)
	}
	buildDir = dir
	// The scenario agent keeps its sessions in the user's state directory
	// unless told otherwise: for these tests, in the temporary one.
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// scenarioAgent returns the scenario agent's command line: the binary named
// by $BENCH_SCENARIO_AGENT, or one built from examples/scenario-agent.
func scenarioAgent(root string) ([]string, error) {
	if p := os.Getenv("BENCH_SCENARIO_AGENT"); p != "" {
		return []string{p}, nil
	}
	buildOnce.Do(func() {
		buildBin = filepath.Join(buildDir, "scenario-agent")
		cmd := exec.Command("go", "build", "-o", buildBin, "./examples/scenario-agent")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building the scenario agent: %v\n%s", err, out)
		}
	})
	return []string{buildBin, "--log-level", "error", "--heartbeat", "0", "--compaction-timeout", "0"}, buildErr
}

// tsAgent returns the TypeScript SDK agent's command line, or why it
// cannot run.
func tsAgent(root string) ([]string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node is not installed")
	}
	script := filepath.Join(root, "test", "bench", "tsagent", "agent.mjs")
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Errorf("%s is missing", script)
	}
	if _, err := os.Stat(filepath.Join(root, "test", "interop", "node_modules", "@agentclientprotocol", "sdk")); err != nil {
		return nil, fmt.Errorf("test/interop/node_modules has no @agentclientprotocol/sdk: run `make test-deps`")
	}
	return []string{node, script}, nil
}

// BenchmarkFlood times `/compact flood N` (default 20,000 chunks) from the
// prompt to its response, read by a bare pipe reader, in the scenario
// agent (Go, agentkit on agentkit.NewStream) and in the TypeScript SDK
// agent. Each op is one flood in a fresh session of the same process,
// after one untimed warm-up flood. It reports chunks/s; nothing is
// asserted about time.
func BenchmarkFlood(b *testing.B) {
	root, err := ModuleRoot()
	require.NoError(b, err, "finding the module root")
	n := *floodN
	for _, v := range []struct {
		name string
		argv func(string) ([]string, error)
		skip bool // a missing runtime skips (schematest.Node) instead of failing
	}{{"scenario", scenarioAgent, false}, {"tsagent", tsAgent, true}} {
		b.Run(v.name, func(b *testing.B) {
			argv, err := v.argv(root)
			if err != nil {
				if v.skip {
					if !schematest.Required() {
						fmt.Fprintf(os.Stderr, "\n*** BenchmarkFlood/%s SKIPPED: %v ***\n\n", v.name, err)
					}
					schematest.Node(b, err)
				}
				require.NoError(b, err, "the %s agent's command", v.name)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			a, err := StartAgent(ctx, v.name, argv, root)
			require.NoError(b, err, "starting the %s agent", v.name)
			defer a.Close()
			sid, err := a.NewSession()
			require.NoError(b, err, "session/new")
			_, _, err = a.Flood(sid, max(n/4, 1)) // warm-up
			require.NoError(b, err, "the warm-up flood")
			var elapsed time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				sid, err := a.NewSession()
				require.NoError(b, err, "session/new")
				b.StartTimer()
				chunks, d, err := a.Flood(sid, n)
				if err != nil || chunks != n { // require only on failure: its t.Helper would be timed
					require.NoError(b, err, "the flood")
					require.Equal(b, n, chunks, "chunks before the response")
				}
				elapsed += d
			}
			b.ReportMetric(float64(n)*float64(b.N)/elapsed.Seconds(), "chunks/s")
		})
	}
}
