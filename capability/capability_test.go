package capability_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/stretchr/testify/assert"
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
			assert.Equal(t, capability.V1, n.Version)
			assert.Equal(t, tc.support, n.Compaction)
			if tc.diagPath == "" {
				assert.Empty(t, n.Diagnostics)
				return
			}
			if assert.NotEmpty(t, n.Diagnostics) {
				assert.Equal(t, tc.diagPath, n.Diagnostics[0].Path)
				assert.NotEmpty(t, n.Diagnostics[0].Message)
			}
		})
	}
}

func TestNegotiatedVersionIsTheAgentsAnswer(t *testing.T) {
	v2req := `{"protocolVersion":2,"info":{"name":"c","version":"1"},"capabilities":{}}`
	n := capability.Parse(json.RawMessage(v2req), json.RawMessage(`{"protocolVersion":2}`))
	assert.Equal(t, capability.V2, n.Version)
	assert.True(t, n.Compaction, "v2 needs no capability")

	n = capability.Parse(json.RawMessage(v2req), json.RawMessage(`{"protocolVersion":1}`))
	assert.Equal(t, 2, n.RequestedVersion)
	assert.Equal(t, capability.V1, n.Version, "the agent answered v1")
	assert.False(t, n.Compaction, "a v2-shaped request carries no v1 capability")

	n = capability.Parse(json.RawMessage(v2req), nil)
	assert.Equal(t, capability.V2, n.Version, "before the answer the requested version stands")

	n = capability.Parse(json.RawMessage(`{"protocolVersion":7}`), json.RawMessage(`{"protocolVersion":7}`))
	assert.Equal(t, capability.V1, n.Version)
	assert.NotEmpty(t, n.Diagnostics)

	n = capability.Parse(json.RawMessage(`{"protocolVersion":"one"}`), json.RawMessage(`"garbage"`))
	assert.Equal(t, capability.V1, n.Version)
	assert.Len(t, n.Diagnostics, 2)
}

func TestDefaultPolicy(t *testing.T) {
	with := capability.Negotiation{Version: 1, Compaction: true}
	without := capability.Negotiation{Version: 1}
	v2 := capability.Negotiation{Version: 2, Compaction: true}
	assert.Equal(t, capability.Standard, capability.DefaultPolicy(with, false))
	assert.Equal(t, capability.Standard, capability.DefaultPolicy(v2, true))
	assert.Equal(t, capability.Fallback, capability.DefaultPolicy(without, true))
	assert.Equal(t, capability.Off, capability.DefaultPolicy(without, false))
	assert.Equal(t, capability.Off, capability.DefaultPolicy(capability.Negotiation{}, false), "zero value is safe")
	assert.Equal(t, "standard", capability.Standard.String())
	assert.True(t, strings.HasPrefix(capability.Mode(9).String(), "mode("))
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}`), []byte(`{"protocolVersion":1}`))
	f.Fuzz(func(t *testing.T, req, res []byte) {
		n := capability.Parse(req, res)
		if n.Version != capability.V1 && n.Version != capability.V2 {
			t.Fatalf("version %d escaped normalisation", n.Version)
		}
		if n.Version == capability.V1 && n.Compaction {
			// Support must come from an object at the one right place.
			var p struct {
				ClientCapabilities struct {
					Session struct {
						Compaction json.RawMessage `json:"compaction"`
					} `json:"session"`
				} `json:"clientCapabilities"`
			}
			if err := json.Unmarshal(req, &p); err != nil {
				t.Fatalf("support claimed for unreadable params %q", req)
			}
			c := strings.TrimSpace(string(p.ClientCapabilities.Session.Compaction))
			if !strings.HasPrefix(c, "{") {
				t.Fatalf("support claimed for compaction=%q", c)
			}
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
	v1NoCap := `{"protocolVersion":1,"clientCapabilities":{}}`
	n := capability.Parse(json.RawMessage(v1NoCap), json.RawMessage(`{"protocolVersion":2}`))
	assert.Equal(t, capability.V1, n.Version, "the client asked for v1")
	assert.False(t, n.Compaction, "a v1 client without the capability is gated")
	if assert.NotEmpty(t, n.Diagnostics) {
		assert.Contains(t, n.Diagnostics[0].Message, "asked for 1")
	}

	v1Cap := `{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}`
	n = capability.Parse(json.RawMessage(v1Cap), json.RawMessage(`{"protocolVersion":2}`))
	assert.Equal(t, capability.V1, n.Version)
	assert.True(t, n.Compaction, "the v1 capability still counts")

	n = capability.Parse(json.RawMessage(`{"clientCapabilities":{}}`), json.RawMessage(`{"protocolVersion":2}`))
	assert.Equal(t, capability.V1, n.Version, "a client that names no version is taken to speak v1")
	assert.False(t, n.Compaction)
	assert.NotEmpty(t, n.Diagnostics)
}
