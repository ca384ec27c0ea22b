package interop_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/test/interop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// client is one kind of client the scenarios run with.
type client struct {
	name       string
	protocol   int
	capability string
	capable    bool // may receive standard compaction updates
}

var (
	v1Capable = client{"v1-capability", 1, interop.CapObject, true}
	v1Plain   = client{"v1-no-capability", 1, interop.CapAbsent, false}
	v2Client  = client{"v2", 2, "", true}
	// The other ways a v1 client says it does not support compaction.
	v1SessionNull = client{"v1-session-null", 1, interop.CapSessionNull, false}
	v1Null        = client{"v1-compaction-null", 1, interop.CapNull, false}
	v1False       = client{"v1-compaction-false", 1, interop.CapFalse, false}
)

// scenario is one scenario of the harness with what the delivered updates
// must show once it has run.
type scenario struct {
	name string
	// want checks the final timeline of a client that may receive standard
	// updates; clients that may not must hold no compaction at all.
	want func(t *testing.T, res *interop.Result, r *conformance.Reducer)
	// stop is the stopReason the (last) prompt turn ends with.
	stop string
	// noV2, when set, is why the scenario cannot run on v2.
	noV2 string
}

var scenarios = []scenario{
	{name: "compact", stop: "end_turn", want: wantCompact},
	{name: "nosummary", stop: "end_turn", want: wantOne("completed", "", false)},
	{name: "fail", stop: "end_turn", want: wantOne("failed", "summary request failed", true)},
	{name: "failearly", stop: "end_turn", want: wantOne("failed", "", true)},
	{name: "cancel-slow", stop: "cancelled", want: wantOne("cancelled", "", false)},
	{name: "twice", stop: "end_turn", want: wantTwice},
	{name: "load", stop: "end_turn", want: wantReplay},
}

// TestScenarioAgentWithTypeScriptSDK runs every scenario of the scenario
// agent (examples/scenario-agent) with the official TypeScript SDK as the
// client, on v1 with and without the capability and on v2.
func TestScenarioAgentWithTypeScriptSDK(t *testing.T) {
	t.Parallel()
	needNode(t)
	agent := scenarioAgent.build(t)
	type job struct {
		sc scenario
		c  client
		f  *future
	}
	var jobs []job
	for _, sc := range scenarios {
		for _, c := range []client{v1Capable, v1Plain, v2Client} {
			if c.protocol == 2 && sc.noV2 != "" {
				continue
			}
			jobs = append(jobs, job{sc, c, launch(interop.Options{Protocol: c.protocol, Capability: c.capability, Scenario: sc.name, Agent: []string{agent}})})
		}
	}
	for _, j := range jobs {
		t.Run(j.sc.name+"/"+j.c.name, func(t *testing.T) {
			checkScenario(t, j.f.get(t), j.sc, j.c)
		})
	}
}

// TestScenarioAgentCapabilityGate covers the v1 clients that do not
// advertise the capability in the other ways the RFD lists (session null,
// compaction null) and opencode's defect (false): no standard update,
// live or in a session/load replay.
func TestScenarioAgentCapabilityGate(t *testing.T) {
	t.Parallel()
	needNode(t)
	agent := scenarioAgent.build(t)
	load := scenarios[slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == "load" })]
	clients := []client{v1SessionNull, v1Null, v1False}
	fs := make([]*future, len(clients))
	for i, c := range clients {
		fs[i] = launch(interop.Options{Protocol: 1, Capability: c.capability, Scenario: "load", Agent: []string{agent}})
	}
	for i, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			checkScenario(t, fs[i].get(t), load, c)
		})
	}
}

func checkScenario(t *testing.T, res *interop.Result, sc scenario, c client) {
	t.Helper()
	require.Equal(t, c.protocol, res.Protocol, "the protocol the harness ran")
	r := checkCommon(t, res, c.capable)
	last := res.Steps[len(res.Steps)-1]
	for i := len(res.Steps) - 1; i >= 0; i-- {
		if _, ok := res.Steps[i].Prompt(); ok {
			last = res.Steps[i]
			break
		}
	}
	assert.Equal(t, sc.stop, stopReason(t, res, last), "stopReason")
	if !c.capable {
		assert.Empty(t, compactions(r, res.SessionID), "a client without the capability holds compactions")
		return
	}
	sc.want(t, res, r)
}

// one returns the only compaction of the timeline.
func one(t *testing.T, res *interop.Result, r *conformance.Reducer) conformance.Item {
	t.Helper()
	cs := compactions(r, res.SessionID)
	require.Equal(t, 1, len(cs), "want one compaction, timeline:\n%s", render(r, res.SessionID))
	return cs[0]
}

func wantOne(status, errText string, wantErr bool) func(*testing.T, *interop.Result, *conformance.Reducer) {
	return func(t *testing.T, res *interop.Result, r *conformance.Reducer) {
		t.Helper()
		c := one(t, res, r)
		assert.Equal(t, status, c.Status, "status")
		switch {
		case !wantErr:
			assert.Nil(t, c.Error, "error: want none")
		case assert.NotNil(t, c.Error, "error: want one") && errText != "":
			assert.Equal(t, errText, *c.Error, "error")
		}
		if status == "completed" {
			assert.Nil(t, c.Summary, "summary %q: want none", summaryText(c.Summary))
		}
	}
}

// wantCompact: in_progress, at least 3 chunks, completed with a summary,
// then an agent message after the compaction.
func wantCompact(t *testing.T, res *interop.Result, r *conformance.Reducer) {
	t.Helper()
	c := one(t, res, r)
	assert.Equal(t, "completed", c.Status, "compaction status")
	assert.Nil(t, c.Error, "compaction error: want none")
	assert.NotEmpty(t, summaryText(c.Summary), "summary")
	assert.GreaterOrEqual(t, countKind(res, "compaction_summary_chunk", 0, len(res.Updates)), 3, "summary chunks")
	tl := r.Timeline(res.SessionID)
	at := slices.IndexFunc(tl, func(it conformance.Item) bool { return it.Kind == conformance.KindCompaction })
	assert.True(t, slices.ContainsFunc(tl[at+1:], func(it conformance.Item) bool { return it.Kind == conformance.KindAgentMessage }),
		"no agent message after the compaction:\n%s", render(r, res.SessionID))
}

func wantTwice(t *testing.T, res *interop.Result, r *conformance.Reducer) {
	t.Helper()
	cs := compactions(r, res.SessionID)
	require.Equal(t, 2, len(cs), "want two compactions, timeline:\n%s", render(r, res.SessionID))
	assert.NotEqual(t, cs[0].ID, cs[1].ID, "both compactions have one ID")
	for _, c := range cs {
		assert.Equal(t, "completed", c.Status, "compaction %s: status", c.ID)
	}
}

// wantReplay: after a /compact turn the client reloads the session. The
// replay carries the compaction once, terminal-first (the checker enforces
// the form), and leaves the entity the client already holds exactly as it
// was: the summary is replaced, not appended to. A client that rebuilds its
// view from the replay alone ends with the same entity.
func wantReplay(t *testing.T, res *interop.Result, r *conformance.Reducer) {
	t.Helper()
	load := res.Steps[len(res.Steps)-1]
	require.Len(t, load.Requests, 1, "load step: %+v", load.Requests)
	require.Nil(t, load.Requests[0].Error, "load step: %+v", load.Requests)
	end := load.Requests[0].UpdatesBefore
	before := conformance.NewReducer(res.Protocol)
	for _, u := range res.Updates[:load.StartIndex] {
		_ = before.Apply(u.SessionID, u.Update)
	}
	live := one(t, res, before)
	after := one(t, res, r)
	assert.Equal(t, live.ID, after.ID, "replay changed the ID of the entity the client held")
	assert.Equal(t, live.Status, after.Status, "replay changed the status of the entity the client held")
	assert.Equal(t, summaryText(live.Summary), summaryText(after.Summary), "replay changed the summary of the entity the client held")
	assert.Equal(t, "completed", live.Status, "live compaction status")
	assert.NotEmpty(t, summaryText(live.Summary), "live compaction summary")
	fresh := conformance.NewReducer(res.Protocol)
	n := 0
	for _, u := range res.Updates[load.StartIndex:end] {
		_ = fresh.Apply(u.SessionID, u.Update)
		if isCompactionKind(u.Kind()) {
			n++
		}
	}
	assert.Equal(t, 1, n, "compaction updates the replay carried")
	rebuilt := one(t, res, fresh)
	assert.Equal(t, live.Status, rebuilt.Status, "the status a client rebuilding from the replay sees")
	assert.Equal(t, summaryText(live.Summary), summaryText(rebuilt.Summary), "the summary a client rebuilding from the replay sees")
}

// TestScenarioAgentFallbacksWithTypeScriptSDK runs a v1 client without the
// capability against each fallback renderer of the scenario agent, one
// session through /compact, /compact fail, a cancelled /compact slow and a
// session/load: each fallback form is there, valid, accepted by the SDK and
// settled (the checker's fallback rule), and no standard update leaks.
func TestScenarioAgentFallbacksWithTypeScriptSDK(t *testing.T) {
	t.Parallel()
	needNode(t)
	agent := scenarioAgent.build(t)
	steps := []interop.Step{{Prompt: "/compact"}, {Prompt: "/compact fail"}, {Prompt: "/compact slow", Cancel: "first-update"}, {Load: true}}
	fallbacks := []string{"text", "marker", "opencode-marker", "toolcall", "none"}
	fs := make([]*future, len(fallbacks))
	for i, fb := range fallbacks {
		fs[i] = launch(interop.Options{Protocol: 1, Capability: interop.CapAbsent, Steps: steps, Agent: []string{agent, "--fallback", fb}})
	}
	for i, fb := range fallbacks {
		t.Run(fb, func(t *testing.T) {
			res := fs[i].get(t)
			r := checkCommon(t, res, false)
			assert.Empty(t, compactions(r, res.SessionID), "fallback client holds compactions")
			for _, status := range []string{"completed", "failed", "cancelled"} {
				checkFallbackForm(t, res, fb, status)
			}
			assert.Equal(t, "cancelled", stopReason(t, res, res.Steps[4]), "the stop reason of the cancelled /compact slow")
		})
	}
}

// checkFallbackForm asserts the renderer's terminal form reached the
// client (the checker already asserts it is settled in time).
func checkFallbackForm(t *testing.T, res *interop.Result, fb, status string) {
	t.Helper()
	joined := strings.Join(res.AgentLines(), "\n")
	var want []string
	switch fb {
	case "text":
		want = []string{map[string]string{"completed": "Compacting completed.", "failed": "Compacting failed", "cancelled": "Compacting cancelled."}[status]}
	case "marker":
		want = []string{`"acpcompact/compaction":{"status":"` + status + `"`}
	case "opencode-marker":
		oc := status
		if oc == "cancelled" {
			oc = "failed"
		}
		want = []string{`"opencode/compaction":{"status":"` + oc + `"`}
	case "toolcall":
		ts := status
		if ts == "cancelled" {
			ts = "failed"
		}
		want = []string{`"title":"Compact conversation"`, fmt.Sprintf(`"status":%q`, ts)}
	case "none":
		for _, bad := range []string{"Compacting", "acpcompact/compaction", "opencode/compaction", "Compact conversation"} {
			assert.NotContains(t, joined, bad, "fallback none: the client got a fallback form")
		}
		return
	}
	for _, w := range want {
		assert.Contains(t, joined, w, "fallback %s: no update contains it", fb)
	}
}
