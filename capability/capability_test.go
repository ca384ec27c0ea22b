package capability_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/capability"
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
			if n.Version != capability.V1 {
				t.Errorf("Version: got %d, want %d", n.Version, capability.V1)
			}
			if n.Compaction != tc.support {
				t.Errorf("Compaction: got %v, want %v", n.Compaction, tc.support)
			}
			if tc.diagPath == "" {
				if len(n.Diagnostics) != 0 {
					t.Errorf("Diagnostics: got %v, want none", n.Diagnostics)
				}
				return
			}
			if len(n.Diagnostics) == 0 {
				t.Errorf("Diagnostics: got none, want one at %s", tc.diagPath)
			} else {
				if got := n.Diagnostics[0].Path; got != tc.diagPath {
					t.Errorf("Diagnostics[0].Path: got %q, want %q", got, tc.diagPath)
				}
				if n.Diagnostics[0].Message == "" {
					t.Errorf("Diagnostics[0].Message is empty")
				}
			}
		})
	}
}

func TestNegotiatedVersionIsTheAgentsAnswer(t *testing.T) {
	v2req := `{"protocolVersion":2,"info":{"name":"c","version":"1"},"capabilities":{}}`
	n := capability.Parse(json.RawMessage(v2req), json.RawMessage(`{"protocolVersion":2}`))
	if n.Version != capability.V2 {
		t.Errorf("v2 answered v2: Version: got %d, want %d", n.Version, capability.V2)
	}
	if !n.Compaction {
		t.Errorf("v2 answered v2: Compaction is false; v2 needs no capability")
	}

	n = capability.Parse(json.RawMessage(v2req), json.RawMessage(`{"protocolVersion":1}`))
	if n.RequestedVersion != 2 {
		t.Errorf("v2 answered v1: RequestedVersion: got %d, want 2", n.RequestedVersion)
	}
	if n.Version != capability.V1 {
		t.Errorf("v2 answered v1: Version: got %d, want %d (the agent answered v1)", n.Version, capability.V1)
	}
	if n.Compaction {
		t.Errorf("v2 answered v1: Compaction is true; a v2-shaped request carries no v1 capability")
	}

	n = capability.Parse(json.RawMessage(v2req), nil)
	if n.Version != capability.V2 {
		t.Errorf("v2 unanswered: Version: got %d, want %d (before the answer the requested version stands)", n.Version, capability.V2)
	}

	n = capability.Parse(json.RawMessage(`{"protocolVersion":7}`), json.RawMessage(`{"protocolVersion":7}`))
	if n.Version != capability.V1 {
		t.Errorf("v7: Version: got %d, want %d", n.Version, capability.V1)
	}
	if len(n.Diagnostics) == 0 {
		t.Errorf("v7: no diagnostics")
	}

	n = capability.Parse(json.RawMessage(`{"protocolVersion":"one"}`), json.RawMessage(`"garbage"`))
	if n.Version != capability.V1 {
		t.Errorf("unreadable versions: Version: got %d, want %d", n.Version, capability.V1)
	}
	if len(n.Diagnostics) != 2 {
		t.Errorf("unreadable versions: got %d diagnostics %v, want 2", len(n.Diagnostics), n.Diagnostics)
	}
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
		if got := capability.DefaultPolicy(tc.n, tc.fallback); got != tc.want {
			t.Errorf("DefaultPolicy, %s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := capability.Standard.String(); got != "standard" {
		t.Errorf("Standard.String(): got %q, want %q", got, "standard")
	}
	if got := capability.Mode(9).String(); !strings.HasPrefix(got, "mode(") {
		t.Errorf("Mode(9).String(): got %q, want prefix %q", got, "mode(")
	}
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
		if n.Version != capability.V1 {
			t.Errorf("%s: Version: got %d, want %d (%s)", tc.name, n.Version, capability.V1, tc.why)
		}
		if n.Compaction != tc.compaction {
			t.Errorf("%s: Compaction: got %v, want %v (%s)", tc.name, n.Compaction, tc.compaction, tc.why)
		}
		if !tc.diagnosed {
			continue
		}
		if len(n.Diagnostics) == 0 {
			t.Errorf("%s: no diagnostics", tc.name)
		} else if msg := n.Diagnostics[0].Message; !strings.Contains(msg, tc.diagHas) {
			t.Errorf("%s: Diagnostics[0].Message %q does not contain %q", tc.name, msg, tc.diagHas)
		}
	}
}
