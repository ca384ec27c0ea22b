package matrix_test

import (
	"context"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/test/matrix"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// officialSchema is the schema Verify checks against: the official one, or
// none when it is not installed (see schematest).
func officialSchema(t *testing.T) matrix.Schema {
	t.Helper()
	return matrix.Schema{V1: schematest.For(t, 1), V2: schematest.For(t, 2)}
}

// TestEveryBulletHasScenariosOnEveryTarget guards the matrix itself: each
// bullet of the Preview validation list has scenarios, every scenario has
// a unique name and a doc, and each target expresses at least one
// scenario of every bullet.
func TestEveryBulletHasScenariosOnEveryTarget(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range matrix.Bullets() {
		scs := matrix.By(b)
		assert.NotEmpty(t, scs, "bullet %q has no scenario", b)
		kit, agent := 0, 0
		for _, sc := range scs {
			key := string(b) + "/" + sc.Name
			assert.False(t, seen[key], "duplicate scenario %s", key)
			seen[key] = true
			assert.NotEmpty(t, sc.Doc, "scenario %s has no Doc", key)
			if sc.Agent == nil {
				assert.NotEmpty(t, sc.NoAgent, "scenario %s has neither an AgentScript nor a NoAgent reason", key)
			}
			if sc.NoKit == "" {
				kit++
			}
			if sc.Agent != nil {
				agent++
			}
		}
		assert.NotZero(t, kit, "bullet %q: scenarios for agentkit", b)
		assert.NotZero(t, agent, "bullet %q: scenarios for the agent binary", b)
	}
}

// TestVerifyRejectsBrokenRuns makes sure the judge can fail: each broken
// transcript breaks one obligation the matrix exists to check.
func TestVerifyRejectsBrokenRuns(t *testing.T) {
	const (
		initCap   = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`
		initPlain = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`
		initRes   = `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`
		prompt    = `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[]}}`
		endTurn   = `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`
		load      = `{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"sess_1","cwd":"/tmp","mcpServers":[]}}`
		loaded    = `{"jsonrpc":"2.0","id":2,"result":{}}`
	)
	upd := func(u string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":` + u + `}}`
	}
	started := upd(`{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"in_progress"}`)
	chunk := upd(`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_1","content":{"type":"text","text":"abc"}}`)
	done := upd(`{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"completed"}`)
	cases := []struct {
		name   string
		client matrix.Client
		want   []string
		lines  []string // "c " or "a " prefixed
		expect string   // a fragment of one of the errors
	}{
		{
			name: "standard update to a client without the capability", client: matrix.V1NoCaps,
			lines:  []string{"c " + initPlain, "a " + initRes, "c " + prompt, "a " + started, "a " + done, "a " + endTurn},
			expect: "without the capability",
		},
		{
			name: "compaction open at the prompt response", client: matrix.V1Capable,
			lines:  []string{"c " + initCap, "a " + initRes, "c " + prompt, "a " + started, "a " + endTurn, "a " + done},
			expect: "settlement",
		},
		{
			name: "summary that is not a content block array", client: matrix.V1Capable,
			lines: []string{"c " + initCap, "a " + initRes, "c " + prompt, "a " + started,
				"a " + upd(`{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"completed","summary":"abc"}`), "a " + endTurn},
			expect: "schema",
		},
		{
			// Conformant to the checker, but a client that kept its
			// timeline still holds the streamed summary while the replay
			// says there is none.
			name: "replay that omits the summary patch", client: matrix.V1Capable,
			lines: []string{"c " + initCap, "a " + initRes, "c " + prompt, "a " + started, "a " + chunk, "a " + done, "a " + endTurn,
				"c " + load, "a " + done, "a " + loaded},
			expect: "the client that kept its timeline holds",
		},
		{
			name: "another timeline than the scenario's", client: matrix.V1Capable,
			want:   []string{"[compaction cmp_1] completed  summary: xyz"},
			lines:  []string{"c " + initCap, "a " + initRes, "c " + prompt, "a " + started, "a " + chunk, "a " + done, "a " + endTurn},
			expect: "final timeline",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &matrix.Conn{}
			for _, l := range tc.lines {
				dir := conformance.FromAgent
				if strings.HasPrefix(l, "c ") {
					dir = conformance.FromClient
				}
				c.Add(dir, []byte(l[2:]))
			}
			schema := officialSchema(t)
			if tc.expect == "schema" {
				schema = matrix.Schema{V1: schematest.Require(t, 1), V2: schematest.Require(t, 2)}
			}
			errs := matrix.Verify(matrix.Scenario{Name: tc.name, Client: tc.client, Want: tc.want}, &matrix.Run{Conns: []*matrix.Conn{c}}, schema)
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
			}
			assert.Contains(t, strings.Join(all, "\n"), tc.expect, "what Verify reported")
		})
	}
}

// TestVerifyLiveReplayRejectsALiveStateTheReplayDoesNotReproduce: the
// live client keeps a partial summary after the failure while the history
// replay says there is none (the /compact panic defect), and a replay that
// leaves out a reported compaction: both are reported.
func TestVerifyLiveReplayRejectsALiveStateTheReplayDoesNotReproduce(t *testing.T) {
	const (
		initCap = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`
		initRes = `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`
		prompt  = `{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"sess_1","prompt":[]}}`
		endTurn = `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`
		load    = `{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"sess_1","cwd":"/tmp","mcpServers":[]}}`
		loaded  = `{"jsonrpc":"2.0","id":1,"result":{}}`
	)
	upd := func(u string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":` + u + `}}`
	}
	conn := func(lines ...string) *matrix.Conn {
		c := &matrix.Conn{}
		for _, l := range lines {
			dir := conformance.FromAgent
			if strings.HasPrefix(l, "c ") {
				dir = conformance.FromClient
			}
			c.Add(dir, []byte(l[2:]))
		}
		return c
	}
	live := conn("c "+initCap, "a "+initRes, "c "+prompt,
		"a "+upd(`{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"in_progress"}`),
		"a "+upd(`{"sessionUpdate":"compaction_summary_chunk","compactionId":"cmp_1","content":{"type":"text","text":"partial"}}`),
		"a "+upd(`{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"failed","error":"boom"}`),
		"a "+upd(`{"sessionUpdate":"compaction_update","compactionId":"cmp_2","status":"in_progress"}`),
		"a "+upd(`{"sessionUpdate":"compaction_update","compactionId":"cmp_2","status":"completed"}`),
		"a "+endTurn)
	history := conn("c "+initCap, "a "+initRes, "c "+load,
		"a "+upd(`{"sessionUpdate":"compaction_update","compactionId":"cmp_1","status":"failed","summary":null,"error":"boom"}`),
		"a "+loaded)
	sc := matrix.Scenario{Name: "broken", Client: matrix.V1Capable}
	errs, skip := matrix.VerifyLiveReplay(sc, &matrix.Run{Conns: []*matrix.Conn{live}, History: history, Reported: []string{"cmp_1", "cmp_2"}}, officialSchema(t))
	require.Empty(t, skip, "VerifyLiveReplay skipped")
	var all []string
	for _, e := range errs {
		all = append(all, e.Error())
	}
	for _, want := range []string{
		`compaction cmp_1: the live client holds "failed" summary ["partial"] error "boom", a client that only sees the replay holds "failed" summary none error "boom"`,
		`compaction cmp_2: the client held it live`,
	} {
		assert.Contains(t, strings.Join(all, "\n"), want, "what VerifyLiveReplay reported")
	}
}

// TestMatrixCatchesAMisconfiguredEmitter plays a capability scenario on an
// emitter whose policy ignores the capability (standard updates for every
// client): the matrix must fail it.
func TestMatrixCatchesAMisconfiguredEmitter(t *testing.T) {
	always := capability.Policy(func(capability.Negotiation, bool) capability.Mode { return capability.Standard })
	var sc matrix.Scenario
	for _, s := range matrix.By(matrix.BulletCapability) {
		if s.Name == "compaction-null" {
			sc = s
		}
	}
	require.NotEmpty(t, sc.Name, "no compaction-null scenario")
	run, err := matrix.EmitterTarget{Options: []emitter.Option{emitter.WithPolicy(always)}}.Play(context.Background(), sc)
	require.NoError(t, err, "playing the scenario on the misconfigured emitter")
	assert.NotEmpty(t, matrix.Verify(sc, run, officialSchema(t)), "a standard update to a client that sent compaction: null went unnoticed:\n%s", run.Transcript())
}
