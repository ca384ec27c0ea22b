package matrix_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/test/matrix"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	agentOnce sync.Once
	agentPath string
	agentErr  error
	agentOut  []byte
	proxyOnce sync.Once
	proxyPath string
	proxyErr  error
	proxyOut  []byte
	binDir    string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "acpcompact-matrix-")
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

// scenarioAgent builds examples/scenario-agent once for the package.
func scenarioAgent(t *testing.T) string {
	t.Helper()
	agentOnce.Do(func() {
		wd, err := os.Getwd()
		if err != nil {
			agentErr = err
			return
		}
		root := filepath.Join(wd, "..", "..")
		agentPath = filepath.Join(binDir, "scenario-agent")
		cmd := exec.Command("go", "build", "-o", agentPath, "./examples/scenario-agent")
		cmd.Dir = root
		agentOut, agentErr = cmd.CombinedOutput()
	})
	require.NoError(t, agentErr, "go build ./examples/scenario-agent\n%s", agentOut)
	return agentPath
}

// proxyBinary builds cmd/acpcompact once for the package.
func proxyBinary(t *testing.T) string {
	t.Helper()
	proxyOnce.Do(func() {
		wd, err := os.Getwd()
		if err != nil {
			proxyErr = err
			return
		}
		root := filepath.Join(wd, "..", "..")
		proxyPath = filepath.Join(binDir, "acpcompact")
		cmd := exec.Command("go", "build", "-o", proxyPath, "./cmd/acpcompact")
		cmd.Dir = root
		proxyOut, proxyErr = cmd.CombinedOutput()
	})
	require.NoError(t, proxyErr, "go build ./cmd/acpcompact\n%s", proxyOut)
	return proxyPath
}

// targets returns the targets; the binaries are built on first use.
func targets(t *testing.T) []matrix.Target {
	return []matrix.Target{
		matrix.EmitterTarget{},
		matrix.KitTarget{},
		matrix.AcpsdkTarget{},
		matrix.AgentTarget{Path: scenarioAgent(t)},
		matrix.ProxyTarget{Proxy: proxyBinary(t), Agent: scenarioAgent(t)},
	}
}

// play runs every scenario of the bullet on every target and verifies
// each run. A scenario a target cannot express is skipped with the
// scenario's reason (Scenario.NoKit, Scenario.NoAgent).
func play(t *testing.T, b matrix.Bullet) {
	t.Helper()
	scs := matrix.By(b)
	require.NotEmpty(t, scs, "no scenario covers %q", b)
	for _, tg := range targets(t) {
		for _, sc := range scs {
			t.Run(sc.Name+"/"+tg.Name(), func(t *testing.T) {
				t.Parallel()
				run := playOne(t, tg, sc)
				if errs := matrix.Verify(sc, run, officialSchema(t)); len(errs) > 0 {
					for _, e := range errs {
						assert.NoError(t, e, "scenario %s on %s", sc.Name, tg.Name())
					}
					t.Logf("%s\ntranscript:\n%s", sc.Doc, run.Transcript())
				}
			})
		}
	}
}

// playOne plays sc on tg and returns the run; it skips the test when the
// target cannot express the scenario or the scenario is a known defect.
func playOne(t *testing.T, tg matrix.Target, sc matrix.Scenario) *matrix.Run {
	t.Helper()
	_, isAgent := tg.(matrix.AgentTarget)
	_, isProxy := tg.(matrix.ProxyTarget)
	if (isAgent || isProxy) && sc.Agent != nil && sc.Agent.KnownDefect != "" && os.Getenv("MATRIX_KNOWN_DEFECTS") == "" {
		t.Skip("KNOWN DEFECT (run with MATRIX_KNOWN_DEFECTS=1 to see it fail): " + sc.Agent.KnownDefect)
	}
	// A hang guard only: nothing asserts how long a run takes.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stderr wiretest.Buffer
	target := tg
	switch a := target.(type) {
	case matrix.AgentTarget:
		a.Stderr = &stderr
		target = a
	case matrix.ProxyTarget:
		a.Stderr = &stderr
		target = a
	}
	run, err := target.Play(ctx, sc)
	if errors.Is(err, matrix.ErrNotExpressible) {
		t.Skip(err)
	}
	if err != nil {
		if run != nil {
			t.Logf("transcript:\n%s", run.Transcript())
		}
		require.NoError(t, err, "%s\nstderr:\n%s", sc.Doc, stderr.String())
	}
	return run
}

// TestV1CapabilityEnforcementLiveAndReplay: "V1 capability enforcement for
// both live updates and replay, including Clients that omit the capability
// or send null."
func TestV1CapabilityEnforcementLiveAndReplay(t *testing.T) {
	play(t, matrix.BulletCapability)
}

// TestLifecycleTransitionsToCompletedFailedCancelled: "Lifecycle
// transitions to completed, failed, and cancelled, including runtimes that
// only expose completed compactions."
func TestLifecycleTransitionsToCompletedFailedCancelled(t *testing.T) {
	play(t, matrix.BulletLifecycle)
}

// TestSummaryChunkOrderingReplacementClearingAndPartialOutput: "Summary
// chunk ordering and first-seen ID initialization, authoritative
// replacement and clearing, completion with an omitted summary, chunks
// after terminal updates, and failure or cancellation after partial
// output."
func TestSummaryChunkOrderingReplacementClearingAndPartialOutput(t *testing.T) {
	play(t, matrix.BulletSummary)
}

// TestHistoryReplayWithoutDuplicatingSummaryContent: "History replay
// without duplicating accumulated summary content after reconnecting,
// including v1 message chunks without IDs on either side of a compaction
// boundary."
func TestHistoryReplayWithoutDuplicatingSummaryContent(t *testing.T) {
	play(t, matrix.BulletReplay)
}

// TestUnknownStatusesAndV2Updates: "Unknown statuses and v2 updates".
func TestUnknownStatusesAndV2Updates(t *testing.T) {
	play(t, matrix.BulletUnknownV2)
}

// TestSafeOmissionOfUnexposableSummaries: "safe omission of summaries that
// cannot be exposed to the user".
func TestSafeOmissionOfUnexposableSummaries(t *testing.T) {
	play(t, matrix.BulletSafeOmission)
}

// TestLiveStateEqualsReplayedState: "history replay uses the same update,
// chunk, and patch semantics as live delivery", so a client that reconnects
// must see what it saw live. For every scenario of the matrix and every
// target, the target replays the runtime's records after the scenario
// (a session/load on a new connection; on the agent binary's one
// connection, for it keeps its history in its process), and each
// compaction the client held at the end of the live transcript must be
// the one a fresh client holds after that replay alone: same status,
// summary and error (a fallback tool call: same status). This is what
// failed after /compact panic: the live client kept the partial summary,
// the replay sent summary: null.
func TestLiveStateEqualsReplayedState(t *testing.T) {
	targets := []matrix.Target{
		matrix.EmitterTarget{History: true},
		matrix.KitTarget{History: true},
		matrix.AcpsdkTarget{History: true},
		matrix.AgentTarget{Path: scenarioAgent(t), History: true},
		matrix.ProxyTarget{Proxy: proxyBinary(t), Agent: scenarioAgent(t), History: true},
	}
	for _, tg := range targets {
		for _, sc := range matrix.Scenarios() {
			t.Run(sc.Name+"/"+tg.Name(), func(t *testing.T) {
				t.Parallel()
				run := playOne(t, tg, sc)
				errs, skip := matrix.VerifyLiveReplay(sc, run, officialSchema(t))
				if skip != "" {
					t.Skip(skip)
				}
				for _, e := range errs {
					assert.NoError(t, e, "scenario %s on %s, live and replayed", sc.Name, tg.Name())
				}
				if len(errs) > 0 {
					t.Logf("%s\ntranscript:\n%s\n# history replay\n%s", sc.Doc, run.Transcript(), run.History.String())
				}
			})
		}
	}
}
