package proxy_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/proxy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The proxy reads every line at least as leniently as the clients it
// serves (clientread_test.go): what a client reads in a line, the proxy has
// read too, and a line it cannot read is taken at its worst.

// deep is a JSON value nested 10,001 deep: JSON.parse reads it,
// encoding/json (and a reader with its limit) does not.
var deep = strings.Repeat("[", 10001) + strings.Repeat("]", 10001)

// lenient frames a line as the TypeScript SDK still reads it: a BOM, a form
// feed or a line separator before it, a no-break space after it.
var lenient = []struct {
	name  string
	frame func(string) string
}{
	{"BOM", func(l string) string { return "\ufeff" + l }},
	{"form feed", func(l string) string { return "\f" + l }},
	{"NBSP suffix", func(l string) string { return l + "\u00a0" }},
	{"U+2028", func(l string) string { return "\u2028" + l }},
}

// untilAnswered reads what the client receives until a line some client
// reads as the answer to request id.
func untilAnswered(h *harness, id int) [][]byte {
	h.t.Helper()
	var got [][]byte
	for {
		l := h.next()
		got = append(got, l)
		for _, r := range readers {
			if r.read(bytes.TrimSuffix(l, []byte("\n"))).answers(float64(id)) {
				return got
			}
		}
	}
}

// noCompactionRead fails the test for each line a client reads as a
// compaction update, and validates every session/update a client reads
// against the official schema.
func noCompactionRead(t *testing.T, version int, lines [][]byte) {
	t.Helper()
	v := schematest.For(t, version)
	for _, l := range lines {
		for _, r := range readers {
			m := r.read(bytes.TrimSuffix(l, []byte("\n")))
			assert.False(t, m.isCompaction(), "a client without the capability received %s, which the %s client reads as a %s", clipQ(l), r.name, m.kind)
			if v != nil && m.ok && m.method == "session/update" && r.name == "typescript" {
				var n struct {
					Params json.RawMessage `json:"params"`
				}
				if json.Unmarshal([]byte(m.raw), &n) == nil && len(m.raw) < 1<<20 {
					assert.NoError(t, v.Notification(n.Params), "the client received a session/update that fails the v%d schema", version)
				}
			}
		}
	}
}

// A v1 client without the capability never receives a compaction update,
// however the line that carries it is framed or nested, as long as a client
// reads it: the proxy reads it too, and rewrites or drops it.
func TestReadGateHoldsForEveryLineAClientReads(t *testing.T) {
	inProgress := upd("s1", cmpUpdate("cmp_l", "in_progress"))
	cases := []struct{ name, line string }{
		{"_meta nested 10,001 deep", upd("s1", cmpUpdate("cmp_l", "in_progress", `"_meta":{"d":`+deep+`}`))},
		{"member name in another case (a Go client's reading)", strings.Replace(inProgress, `"sessionUpdate"`, `"SessionUpdate"`, 1)},
		{"escaped and in another case", strings.Replace(inProgress, `"sessionUpdate":"compaction_update"`, `"SESSIONUPDATE":"\u0063ompaction_update"`, 1)},
	}
	for _, f := range lenient {
		cases = append(cases, struct{ name, line string }{f.name, f.frame(inProgress)})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t)
			h.handshake(v1Plain, 1)
			id := h.prompt("s1")
			h.agentRaw(tc.line + "\n")
			h.agent(promptResponse(id, "end_turn"))
			noCompactionRead(t, 1, untilAnswered(h, id))
		})
	}
}

// A line the proxy cannot read, not even as the clients read, that may
// carry a compaction update never reaches a client without the capability
// (nor one whose capability is not known yet): it is dropped and logged. A
// capable client gets it as it came, and the checker sees it.
func TestReadUnreadableLineThatMayCarryACompactionUpdateIsDropped(t *testing.T) {
	for _, tc := range []struct{ name, line string }{
		{"a brace too many", upd("s1", cmpUpdate("cmp_u", "in_progress")) + "}"},
		{"cut short", strings.TrimSuffix(upd("s1", cmpUpdate("cmp_u", "in_progress")), "}}")},
		{"escaped", `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"\u0063ompaction_update",`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t)
			h.handshake(v1Plain, 1)
			h.prompt("s1")
			h.agentRaw(tc.line + "\n")
			h.relay(upd("s1", text("after")))
			assert.True(t, contains(h.logs.String(), "dropped an unreadable line that may carry a compaction update", "side=agent", "line=3"), "the drop is not logged:\n%s", h.logs.String())
		})
	}
	t.Run("capable client", func(t *testing.T) {
		h := start(t)
		h.handshake(v1Capable, 1)
		h.prompt("s1")
		line := upd("s1", cmpUpdate("cmp_u", "in_progress")) + "}"
		h.relay(line)
		h.relay(upd("s1", text("after")))
		h.checker.want = []conformance.Rule{conformance.RuleMalformed}
		h.end()
	})
	t.Run("before initialize", func(t *testing.T) {
		h := start(t)
		h.agentRaw(upd("s1", cmpUpdate("cmp_u", "in_progress")) + "}\n")
		h.relay(upd("s1", text("after")))
		h.checker.want = []conformance.Rule{conformance.RuleProtocol} // an update before initialize
	})
}

// Every turn end a client reads comes after the settlement of the
// compactions it saw start in that turn, however the line that ends the
// turn is framed or nested: the proxy reads the answer too.
func TestReadTurnEndInALenientLineComesAfterTheSettlement(t *testing.T) {
	type tc struct{ name, response string }
	var cases []tc
	for _, f := range lenient {
		cases = append(cases, tc{f.name, f.frame(promptResponse(3, "end_turn"))})
	}
	cases = append(cases,
		tc{"result nested 10,001 deep", `{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn","_meta":{"d":` + deep + `}}}`},
		tc{"member names in another case (a Go client's reading)", `{"jsonrpc":"2.0","ID":3,"Result":{"stopReason":"end_turn"}}`},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := start(t)
			h.handshake(v1Capable, 1)
			h.nextID = 2
			require.Equal(t, 3, h.prompt("s1"), "prompt id")
			h.relay(upd("s1", cmpUpdate("cmp_t", "in_progress")))
			h.agentRaw(c.response + "\n")
			h.emitted(upd("s1", cmpUpdate("cmp_t", "failed", `"error":"the turn ended before the compaction finished"`)))
			require.Equal(t, c.response+"\n", string(h.next()), "want the agent's answer as it came")
			// The settlement followed the turn the answer ended: a later
			// update of the compaction is dropped.
			h.agent(upd("s1", cmpUpdate("cmp_t", "completed")))
			h.relay(upd("s1", text("after")))
		})
	}
}

// observing records the messages a checker sees, in order, on top of the
// conformance checker.
type observing struct {
	*recordingChecker
	mu   sync.Mutex
	seen []string
}

func (o *observing) Observe(dir conformance.Direction, line int, raw json.RawMessage) []conformance.Violation {
	if dir == conformance.FromAgent {
		o.mu.Lock()
		o.seen = append(o.seen, string(raw))
		o.mu.Unlock()
	}
	return o.recordingChecker.Observe(dir, line, raw)
}

// The client-side checker (--check=client) sees every line the client
// receives, as the client reads it: lenient framing, deep nesting and
// unreadable lines included.
func TestReadClientCheckerSeesEveryLineTheClientReceives(t *testing.T) {
	obs := &observing{recordingChecker: newRecordingChecker(t)}
	h := startWith(t, harnessOpt{noChecker: true}, proxy.WithChecker(obs, proxy.CheckClient))
	h.handshake(v1Capable, 1)
	id := h.prompt("s1")
	lines := []string{
		"\ufeff" + upd("s1", cmpUpdate("cmp_c", "in_progress")),
		"\f" + upd("s1", text("form feed")),
		upd("s1", cmpUpdate("cmp_c", "completed", `"_meta":{"d":`+deep+`}`)) + "\u00a0",
		`{"jsonrpc":"2.0","method":"session/update","params":` + "\u2028",
	}
	for _, l := range lines {
		h.relay(l)
	}
	h.relay(promptResponse(id, "end_turn"))
	h.end()
	obs.want = []conformance.Rule{conformance.RuleMalformed} // the unreadable line
	obs.mu.Lock()
	defer obs.mu.Unlock()
	for _, l := range lines {
		m := tsRead([]byte(l))
		want := m.raw
		if !m.ok {
			want = strings.TrimSuffix(l, "\u2028")
		}
		found := false
		for _, s := range obs.seen {
			if s == want || (m.isCompaction() && sameCompaction(s, m)) {
				found = true
			}
		}
		assert.True(t, found, "the checker did not see %s", clipQ([]byte(l)))
	}
	obs.close()
}

// sameCompaction reports whether a message the checker saw stands for
// compaction update m (a stand-in for a line too deep for it to read).
func sameCompaction(seen string, m readMsg) bool {
	s := tsRead([]byte(seen))
	return s.isCompaction() && s.kind == m.kind && s.update["compactionId"] == m.update["compactionId"] && s.update["status"] == m.update["status"]
}

// A client's line is read as the agent reads it (agents are mostly the
// same TypeScript SDK; some are Go): a prompt framed with a BOM or a no-break
// space, nested 10,001 deep, or spelt in another case is followed, and its
// turn's compactions are settled before its answer.
func TestReadClientLineIsReadAsTheAgentReadsIt(t *testing.T) {
	prompt := `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"go"}]}}`
	for _, tc := range []struct{ name, line string }{
		{"BOM", "\ufeff" + prompt},
		{"NBSP suffix", prompt + "\u00a0"},
		{"U+2028", "\u2028" + prompt},
		{"_meta nested 10,001 deep", `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[],"_meta":{"d":` + deep + `}}}`},
		{"member names in another case (a Go agent's reading)", `{"jsonrpc":"2.0","ID":3,"Method":"session/prompt","Params":{"sessionId":"s1","prompt":[]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t)
			h.handshake(v1Capable, 1)
			h.clientRaw(tc.line + "\n")
			h.relay(upd("s1", cmpUpdate("cmp_p", "in_progress")))
			h.agent(promptResponse(3, "end_turn"))
			h.emitted(upd("s1", cmpUpdate("cmp_p", "failed", `"error":"the turn ended before the compaction finished"`)))
			h.forwarded(promptResponse(3, "end_turn"))
		})
	}
}
