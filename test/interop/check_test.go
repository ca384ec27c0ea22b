package interop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/test/interop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// harnessSlots bounds how many harness runs (a node process and an agent
// each) run at once across the package. Runs spend much of their time
// waiting on their peer, so this is above the usual -parallel default of
// GOMAXPROCS.
var harnessSlots = make(chan struct{}, 3)

// future is a harness run started in the background, so that a test can
// start all its runs at once and check them in order.
type future struct {
	done   chan struct{}
	res    *interop.Result
	err    error
	stderr wiretest.Buffer
}

// launch starts a harness run.
func launch(o interop.Options) *future {
	if o.Timeout == 0 {
		o.Timeout = 45 * time.Second // a hang guard, not an assertion
	}
	f := &future{done: make(chan struct{})}
	o.Stderr = &f.stderr
	go func() {
		defer close(f.done)
		harnessSlots <- struct{}{}
		defer func() { <-harnessSlots }()
		f.res, f.err = interop.Run(context.Background(), o)
	}()
	return f
}

// get waits for the run and fails the test when the harness produced no
// result or reported a failure of its own. When the test fails, it logs the
// stderr and the wire.
func (f *future) get(t *testing.T) *interop.Result {
	t.Helper()
	<-f.done
	require.NoError(t, f.err, "harness\nstderr:\n%s", f.stderr.String())
	res := f.res
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent and harness stderr:\n%s", f.stderr.String())
			t.Logf("wire:\n%s", res.Transcript())
		}
	})
	require.Empty(t, res.Error, "harness failed")
	return res
}

// run runs the harness and waits for it (see future.get).
func run(t *testing.T, o interop.Options) *interop.Result {
	t.Helper()
	return launch(o).get(t)
}

func isCompactionKind(kind string) bool {
	return kind == "compaction_update" || kind == "compaction_summary_chunk"
}

func isTerminal(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// checkCommon asserts what holds for every run, whatever the scenario:
//   - the SDK rejected no update and logged nothing;
//   - every raw agent line is valid against the official schema of the
//     negotiated version, and the whole wire is clean under the
//     conformance checker;
//   - the SDK delivered the same timeline the raw wire describes (it did
//     not silently strip a field a reducer needs);
//   - every compaction first seen in a turn was settled before the turn
//     ended (v1: the prompt response; v2: the idle state_update), and no
//     compaction update arrived after it;
//   - a v1 client without the capability received no compaction update,
//     neither from the SDK nor on the raw wire.
//
// It returns the reducer of the delivered updates.
func checkCommon(t *testing.T, res *interop.Result, capable bool) *conformance.Reducer {
	t.Helper()
	version := res.Protocol
	assert.Zero(t, res.Rejected, "updates the SDK rejected: %q", res.ConsoleErrors)
	assert.Empty(t, res.ConsoleErrors, "what the SDK logged")
	assert.Zero(t, res.GateStalls, "responses that reached the SDK before the updates read ahead of them were handled")
	checkWireSchema(t, res)
	checkTranscript(t, res)

	delivered := conformance.NewReducer(version)
	for i, u := range res.Updates {
		assert.NoError(t, delivered.Apply(u.SessionID, u.Update), "delivered update %d %s", i, u.Update)
	}
	wire := conformance.NewReducer(version)
	// What the wire carried up to the last prompt response: the harness
	// stops once its prompts are answered, so the SDK may not get to
	// deliver what an agent sends after that (a late message of an agent
	// that carries on after its turn).
	turnsOnly := conformance.NewReducer(version)
	lines := res.AgentLines()
	last := -1
	for i, l := range lines {
		if strings.Contains(l, `"stopReason"`) && !strings.Contains(l, `"method"`) {
			last = i
		}
	}
	for i, l := range lines {
		assert.NoError(t, wire.ApplyMessage(json.RawMessage(l)), "wire line %s", l)
		if i <= last {
			_ = turnsOnly.ApplyMessage(json.RawMessage(l))
		}
	}
	got, want := render(delivered, res.SessionID), render(wire, res.SessionID)
	if last < 0 || got != render(turnsOnly, res.SessionID) {
		// The wire may go on past the last turn's end (what the SDK
		// delivered up to there is then the turns' timeline).
		assert.Equal(t, want, got, "the timeline the SDK delivered, against the wire's")
	}

	if version == 1 && !capable {
		for i, u := range res.Updates {
			assert.False(t, isCompactionKind(u.Kind()), "v1 client without the capability got update %d: %s", i, u.Update)
		}
		for _, l := range res.AgentLines() {
			assert.NotContains(t, l, `"compaction_update"`, "v1 client without the capability: the wire carries a standard update")
			assert.NotContains(t, l, `"compaction_summary_chunk"`, "v1 client without the capability: the wire carries a standard update")
		}
	}
	checkSettledBeforeTurnEnd(t, res)
	return delivered
}

// checkWireSchema validates every raw agent line against the official
// schema, and every session/update's params in particular.
func checkWireSchema(t *testing.T, res *interop.Result) {
	t.Helper()
	v := schematest.For(t, res.Protocol)
	if v == nil {
		return
	}
	for _, l := range res.AgentLines() {
		if !assert.NoError(t, v.Message([]byte(l)), "agent line fails the v%d schema", res.Protocol) {
			continue
		}
		var m struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Method == "session/update" {
			assert.NoError(t, v.Notification(m.Params), "session/update fails the v%d schema", res.Protocol)
		}
	}
}

// checkTranscript runs the conformance checker, with the official schemas,
// over the wire as the client saw it.
func checkTranscript(t *testing.T, res *interop.Result) {
	t.Helper()
	v1, v2 := schematest.For(t, 1), schematest.For(t, 2)
	vs, err := conformance.CheckTranscript(strings.NewReader(res.Transcript()), conformance.WithSchema(v1, v2), conformance.WithStrictReplay())
	require.NoError(t, err, "conformance.CheckTranscript")
	assert.Empty(t, vs, "conformance violations")
}

// turnEnd returns where a prompt step's turn ended in res.Updates: the
// number of updates delivered before the v1 response, or the index of the
// v2 idle state_update. ok is false for steps that are not prompts.
func turnEnd(res *interop.Result, s interop.StepResult) (int, bool) {
	p, ok := s.Prompt()
	if !ok {
		return 0, false
	}
	if res.Protocol == 2 {
		if s.IdleIndex == nil {
			return 0, false
		}
		return *s.IdleIndex, true
	}
	return p.UpdatesBefore, true
}

func checkSettledBeforeTurnEnd(t *testing.T, res *interop.Result) {
	t.Helper()
	for i, s := range res.Steps {
		end, ok := turnEnd(res, s)
		if !ok {
			_, isPrompt := s.Prompt()
			assert.False(t, isPrompt, "step %d %s: the turn never ended", i, s.Step)
			continue
		}
		status := map[string]string{}
		var order []string
		for _, u := range res.Updates[s.StartIndex:end] {
			var cu struct {
				Kind   string `json:"sessionUpdate"`
				ID     string `json:"compactionId"`
				Status string `json:"status"`
			}
			_ = json.Unmarshal(u.Update, &cu)
			if !isCompactionKind(cu.Kind) {
				continue
			}
			if _, seen := status[cu.ID]; !seen {
				status[cu.ID] = "in_progress"
				order = append(order, cu.ID)
			}
			if cu.Kind == "compaction_update" {
				status[cu.ID] = cu.Status
			}
		}
		for _, id := range order {
			assert.True(t, isTerminal(status[id]), "step %d %s: compaction %s is %q when the turn ends", i, s.Step, id, status[id])
		}
		// Nothing of compaction may follow the end of the turn, up to the
		// next step.
		next := len(res.Updates)
		if i+1 < len(res.Steps) {
			next = res.Steps[i+1].StartIndex
		}
		for j := end; j < next; j++ {
			assert.False(t, isCompactionKind(res.Updates[j].Kind()), "step %d %s: update %d after the end of the turn: %s", i, s.Step, j, res.Updates[j].Update)
		}
	}
}

func render(r *conformance.Reducer, sid string) string {
	var b strings.Builder
	_ = r.Render(&b, sid)
	return b.String()
}

// compactions returns the compaction items of a session's timeline.
func compactions(r *conformance.Reducer, sid string) []conformance.Item {
	var out []conformance.Item
	for _, it := range r.Timeline(sid) {
		if it.Kind == conformance.KindCompaction {
			out = append(out, it)
		}
	}
	return out
}

// summaryText concatenates the text blocks of a summary.
func summaryText(blocks []json.RawMessage) string {
	var b strings.Builder
	for _, raw := range blocks {
		var c struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(raw, &c)
		if c.Type == "text" {
			b.WriteString(c.Text)
		} else {
			fmt.Fprintf(&b, "[%s]", c.Type)
		}
	}
	return b.String()
}

// stopReason returns how the step's turn ended: the v1 prompt response's
// stopReason, or the v2 idle state_update's.
func stopReason(t *testing.T, res *interop.Result, s interop.StepResult) string {
	t.Helper()
	var out struct {
		StopReason string `json:"stopReason"`
	}
	if res.Protocol == 2 {
		if s.IdleIndex == nil {
			return ""
		}
		_ = json.Unmarshal(res.Updates[*s.IdleIndex].Update, &out)
		return out.StopReason
	}
	p, ok := s.Prompt()
	if !ok {
		return ""
	}
	if !assert.Nil(t, p.Error, "session/prompt failed") {
		return ""
	}
	_ = json.Unmarshal(p.Response, &out)
	return out.StopReason
}

// countKind counts delivered updates of a kind in [from, to).
func countKind(res *interop.Result, kind string, from, to int) int {
	n := 0
	for _, u := range res.Updates[from:to] {
		if u.Kind() == kind {
			n++
		}
	}
	return n
}
