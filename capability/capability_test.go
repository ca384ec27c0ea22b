package capability_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestV1CapabilityCountsOnlyAnObject(t *testing.T) {
	cases := []struct {
		name     string
		params   string
		support  bool
		diagPath string
	}{
		{"empty object is support", `{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}`, true, ""},
		{"object with unknown fields is support", `{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{"future":true}}}}`, true, ""},
		{"session omitted", `{"protocolVersion":1,"clientCapabilities":{}}`, false, ""},
		{"session null", `{"protocolVersion":1,"clientCapabilities":{"session":null}}`, false, ""},
		{"compaction omitted", `{"protocolVersion":1,"clientCapabilities":{"session":{}}}`, false, ""},
		{"compaction null", `{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":null}}}`, false, ""},
		{"false is not support (opencode's bug)", `{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":false}}}`, false, "clientCapabilities.session.compaction"},
		{"true is not support (codex's bug)", `{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":true}}}`, false, "clientCapabilities.session.compaction"},
		{"empty string", `{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":""}}}`, false, "clientCapabilities.session.compaction"},
		{"array", `{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":[]}}}`, false, "clientCapabilities.session.compaction"},
		{"zero", `{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":0}}}`, false, "clientCapabilities.session.compaction"},
		{"session not an object", `{"protocolVersion":1,"clientCapabilities":{"session":"yes"}}`, false, "clientCapabilities.session"},
		{"clientCapabilities null", `{"protocolVersion":1,"clientCapabilities":null}`, false, ""},
		{"clientCapabilities omitted", `{"protocolVersion":1}`, false, ""},
		{"misplaced at clientCapabilities.compaction", `{"protocolVersion":1,"clientCapabilities":{"compaction":{}}}`, false, "clientCapabilities.compaction"},
		{"misplaced under _meta", `{"protocolVersion":1,"clientCapabilities":{"_meta":{"session.compaction":{}}}}`, false, "clientCapabilities._meta.session.compaction"},
		{"misplaced under root _meta", `{"protocolVersion":1,"_meta":{"compaction":{}}}`, false, "_meta.compaction"},
		{"params not an object", `[1,2]`, false, "params"},
		{"params empty", ``, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := capability.Parse(json.RawMessage(tc.params), json.RawMessage(`{"protocolVersion":1}`))
			assert.Equal(t, capability.V1, n.Version, "Version")
			assert.Equal(t, tc.support, n.Compaction, "Compaction")
			if tc.diagPath == "" {
				assert.Empty(t, n.Diagnostics, "Diagnostics")
				return
			}
			if assert.NotEmpty(t, n.Diagnostics, "Diagnostics: want one at %s", tc.diagPath) {
				assert.Equal(t, tc.diagPath, n.Diagnostics[0].Path, "Diagnostics[0].Path")
				assert.NotEmpty(t, n.Diagnostics[0].Message, "Diagnostics[0].Message")
			}
		})
	}
}

func TestNegotiatedVersionIsTheAgentsAnswer(t *testing.T) {
	v2req := `{"protocolVersion":2,"info":{"name":"c","version":"1"},"capabilities":{}}`
	n := capability.Parse(json.RawMessage(v2req), json.RawMessage(`{"protocolVersion":2}`))
	assert.Equal(t, capability.V2, n.Version, "v2 answered v2: Version")
	assert.True(t, n.Compaction, "v2 answered v2: Compaction is false; v2 needs no capability")

	n = capability.Parse(json.RawMessage(v2req), json.RawMessage(`{"protocolVersion":1}`))
	assert.Equal(t, 2, n.RequestedVersion, "v2 answered v1: RequestedVersion")
	assert.Equal(t, capability.V1, n.Version, "v2 answered v1: Version (the agent answered v1)")
	assert.False(t, n.Compaction, "v2 answered v1: Compaction is true; a v2-shaped request carries no v1 capability")

	n = capability.Parse(json.RawMessage(v2req), nil)
	assert.Equal(t, capability.V2, n.Version, "v2 unanswered: Version (before the answer the requested version stands)")

	n = capability.Parse(json.RawMessage(`{"protocolVersion":7}`), json.RawMessage(`{"protocolVersion":7}`))
	assert.Equal(t, capability.V1, n.Version, "v7: Version")
	assert.NotEmpty(t, n.Diagnostics, "v7: no diagnostics")

	n = capability.Parse(json.RawMessage(`{"protocolVersion":"one"}`), json.RawMessage(`"garbage"`))
	assert.Equal(t, capability.V1, n.Version, "unreadable versions: Version")
	assert.Len(t, n.Diagnostics, 2, "unreadable versions")
}

func TestDefaultPolicy(t *testing.T) {
	with := capability.Negotiation{Version: 1, Compaction: true}
	without := capability.Negotiation{Version: 1}
	v2 := capability.Negotiation{Version: 2, Compaction: true}
	for _, tc := range []struct {
		name     string
		n        capability.Negotiation
		fallback bool
		want     capability.Mode
	}{
		{"v1 with the capability, no fallback", with, false, capability.Standard},
		{"v2, fallback", v2, true, capability.Standard},
		{"v1 without the capability, fallback", without, true, capability.Fallback},
		{"v1 without the capability, no fallback", without, false, capability.Off},
		{"zero value is safe", capability.Negotiation{}, false, capability.Off},
	} {
		assert.Equal(t, tc.want, capability.DefaultPolicy(tc.n, tc.fallback), "DefaultPolicy, %s", tc.name)
	}
	assert.Equal(t, "standard", capability.Standard.String(), "Standard.String()")
	got := capability.Mode(9).String()
	assert.True(t, strings.HasPrefix(got, "mode("), "Mode(9).String(): got %q, want prefix %q", got, "mode(")
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}`), []byte(`{"protocolVersion":1}`))
	f.Fuzz(func(t *testing.T, req, res []byte) {
		n := capability.Parse(req, res)
		require.Contains(t, []int{capability.V1, capability.V2}, n.Version, "version escaped normalisation")
		if n.Version == capability.V1 && n.Compaction {
			// Support must come from an object at the one right place.
			var p struct {
				ClientCapabilities struct {
					Session struct {
						Compaction json.RawMessage `json:"compaction"`
					} `json:"session"`
				} `json:"clientCapabilities"`
			}
			require.NoError(t, json.Unmarshal(req, &p), "support claimed for unreadable params %q", req)
			c := strings.TrimSpace(string(p.ClientCapabilities.Session.Compaction))
			require.True(t, strings.HasPrefix(c, "{"), "support claimed for compaction=%q", c)
		}
	})
}

func ExampleParse() {
	req := json.RawMessage(`{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":false}}}`)
	res := json.RawMessage(`{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}`)
	n := capability.Parse(req, res)
	fmt.Println(n.Version, n.Compaction, capability.DefaultPolicy(n, true))
	for _, d := range n.Diagnostics {
		fmt.Println(d)
	}
	// Output:
	// 1 false fallback
	// clientCapabilities.session.compaction: false is not an object; only an object (such as {}) advertises support
}

// The client's request decides what the client speaks: an agent that answers
// a newer version than the client asked for does not make a v1 client read
// standard updates it never advertised.
func TestTheClientsVersionDecidesTheGateNotTheAgentsAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, req  string
		compaction bool
		why        string // why Version and Compaction are what they are
		diagnosed  bool   // a diagnostic is expected
		diagHas    string // what the first diagnostic says, when not ""
	}{
		{name: "v1 without the capability", req: `{"protocolVersion":1,"clientCapabilities":{}}`,
			why: "the client asked for v1; a v1 client without the capability is gated", diagnosed: true, diagHas: "asked for 1"},
		{name: "v1 with the capability", req: `{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}`,
			compaction: true, why: "the v1 capability still counts"},
		{name: "no version", req: `{"clientCapabilities":{}}`,
			why: "a client that names no version is taken to speak v1", diagnosed: true},
	} {
		n := capability.Parse(json.RawMessage(tc.req), json.RawMessage(`{"protocolVersion":2}`))
		assert.Equal(t, capability.V1, n.Version, "%s: Version (%s)", tc.name, tc.why)
		assert.Equal(t, tc.compaction, n.Compaction, "%s: Compaction (%s)", tc.name, tc.why)
		if !tc.diagnosed {
			continue
		}
		if assert.NotEmpty(t, n.Diagnostics, "%s: diagnostics", tc.name) {
			assert.Contains(t, n.Diagnostics[0].Message, tc.diagHas, "%s: Diagnostics[0].Message", tc.name)
		}
	}
}
