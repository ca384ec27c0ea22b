// Package capability decides, once per connection, how an agent may report
// context compaction to the client on the other end: with the standard ACP
// compaction updates, with a fallback rendering, or not at all.
//
// It reads the raw `initialize` request and the agent's answer, so it sees
// exactly what went over the wire (typed SDK structs routinely drop fields
// they do not know, such as `clientCapabilities.session`). It never fails an
// initialize: a malformed value is a documented lenient default plus a
// Diagnostic the agent can log.
//
// The package knows nothing of transports or of the lifecycle; agentkit feeds
// it bytes and the emitter consumes its decision.
package capability

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Protocol versions this package understands.
const (
	V1 = 1
	V2 = 2
)

// Mode is how a connection reports compaction.
type Mode int

const (
	// Off sends nothing about compaction. It is the zero value so that an
	// unconfigured connection can never leak standard updates to a client
	// that did not ask for them.
	Off Mode = iota
	// Standard sends compaction_update and compaction_summary_chunk.
	Standard
	// Fallback renders compaction in a form any v1 client accepts (agent
	// text, a _meta marker, a tool call); the emitter's fallback renderer
	// decides which.
	Fallback
)

// String returns "off", "standard" or "fallback".
func (m Mode) String() string {
	switch m {
	case Off:
		return "off"
	case Standard:
		return "standard"
	case Fallback:
		return "fallback"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// Diagnostic is something worth logging about the client's initialize that
// did not change the outcome, such as a capability in the wrong place.
type Diagnostic struct {
	// Path is the JSON path of the offending value, e.g.
	// "clientCapabilities.session.compaction".
	Path string
	// Message explains what was found and how it was treated.
	Message string
}

// String renders the diagnostic as "path: message", ready for a log line.
func (d Diagnostic) String() string { return d.Path + ": " + d.Message }

// Negotiation is what one connection's initialize exchange established.
// The zero value describes a v1 client without the capability.
type Negotiation struct {
	// RequestedVersion is the protocolVersion the client asked for (0 when
	// absent or unreadable).
	RequestedVersion int
	// Version is the protocol version the client speaks on this
	// connection: the one the agent answered when that is the client's or
	// an older one, the requested one while no answer was seen. An answer
	// newer than the client's request does not change what the client
	// speaks (a diagnostic says so), and a client that named no version is
	// taken to speak v1. Unknown or unreadable versions count as V1, the
	// conservative reading: the v1 capability gate applies.
	Version int
	// Compaction reports that the client advertised
	// clientCapabilities.session.compaction as a JSON object (v1). It is
	// always true for v2, which has no capability.
	Compaction bool
	// Diagnostics lists oddities found while reading the exchange.
	Diagnostics []Diagnostic
}

// Parse reads the raw params of an initialize request and, when available,
// the raw result of the agent's answer (nil while not yet sent). It never
// fails: unreadable input yields the zero-support default plus diagnostics.
func Parse(request, response json.RawMessage) Negotiation {
	var n Negotiation
	req, ok := object(request)
	if !ok {
		if len(bytes.TrimSpace(request)) > 0 {
			n.diag("params", "initialize params are not a JSON object; assuming a v1 client without the compaction capability")
		}
	}
	n.RequestedVersion = n.version(req["protocolVersion"], "protocolVersion")
	n.Version = n.RequestedVersion
	if res, ok := object(response); ok {
		v := n.version(res["protocolVersion"], "result.protocolVersion")
		switch {
		case v == 0:
		case n.RequestedVersion == 0 && v > V1:
			// Which version the client speaks is unknown: the conservative
			// reading (v1, with its capability gate) holds, whatever the
			// agent claims.
			n.diag("result.protocolVersion", fmt.Sprintf("the agent answered protocolVersion %d to a client that named no version; treating the client as v1", v))
			n.Version = V1
		case n.RequestedVersion != 0 && v > n.RequestedVersion:
			// An agent may only answer the client's version or an older
			// one. The client speaks what it asked for, so the gate
			// follows the client, not the agent's claim.
			n.diag("result.protocolVersion", fmt.Sprintf("the agent answered protocolVersion %d to a client that asked for %d; the client speaks %d", v, n.RequestedVersion, n.RequestedVersion))
		default:
			n.Version = v
		}
	} else if len(bytes.TrimSpace(response)) > 0 && !isNull(response) {
		n.diag("result", "initialize result is not a JSON object; keeping the requested version")
	}
	if n.Version != V2 {
		if n.Version != V1 && n.Version != 0 {
			n.diag("protocolVersion", fmt.Sprintf("unknown protocol version %d; treating the connection as v1", n.Version))
		}
		n.Version = V1
		n.Compaction = n.v1Compaction(req)
	} else {
		n.Compaction = true
	}
	return n
}

// v1Compaction applies the RFD's rule: only an object at
// clientCapabilities.session.compaction is support.
func (n *Negotiation) v1Compaction(req map[string]json.RawMessage) bool {
	n.metaCompaction(req, "")
	caps, ok := n.member(req, "", "clientCapabilities", "not a JSON object; the client advertises no capabilities")
	if !ok {
		return false
	}
	if _, misplaced := caps["compaction"]; misplaced {
		n.diag("clientCapabilities.compaction", "compaction belongs at clientCapabilities.session.compaction; not treated as support")
	}
	n.metaCompaction(caps, "clientCapabilities.")
	sess, ok := n.member(caps, "clientCapabilities.", "session", "not a JSON object; no session capabilities")
	if !ok {
		return false
	}
	cRaw, present := sess["compaction"]
	if !present || isNull(cRaw) {
		return false
	}
	if _, ok := object(cRaw); !ok {
		n.diag("clientCapabilities.session.compaction",
			fmt.Sprintf("%s is not an object; only an object (such as {}) advertises support", clip(cRaw)))
		return false
	}
	return true
}

// member returns obj's member key as an object, path being obj's own
// ("" for the params, else ending in a dot). An absent or null member is
// none; any other that is not an object is none too, and diagnosed with
// notObject.
func (n *Negotiation) member(obj map[string]json.RawMessage, path, key, notObject string) (map[string]json.RawMessage, bool) {
	raw, present := obj[key]
	if !present || isNull(raw) {
		return nil, false
	}
	m, ok := object(raw)
	if !ok {
		n.diag(path+key, notObject)
	}
	return m, ok
}

// metaCompaction diagnoses each key of obj's _meta that names compaction
// (path as for member): a compaction capability there is not the ACP one.
func (n *Negotiation) metaCompaction(obj map[string]json.RawMessage, path string) {
	meta, _ := object(obj["_meta"]) // absent or no object: no keys
	for k := range meta {
		if strings.Contains(k, "compaction") {
			n.diag(path+"_meta."+k, "a compaction capability under _meta is not the ACP capability; not treated as support")
		}
	}
}

func (n *Negotiation) version(raw json.RawMessage, path string) int {
	if len(raw) == 0 || isNull(raw) {
		return 0
	}
	var v int
	if err := json.Unmarshal(raw, &v); err != nil || v < 0 {
		n.diag(path, fmt.Sprintf("%s is not a protocol version number", clip(raw)))
		return 0
	}
	return v
}

func (n *Negotiation) diag(path, msg string) {
	n.Diagnostics = append(n.Diagnostics, Diagnostic{Path: path, Message: msg})
}

// Policy picks a connection's mode from its negotiation. hasFallback tells
// whether the agent configured a fallback renderer.
type Policy func(n Negotiation, hasFallback bool) Mode

// DefaultPolicy is the RFD's rule: standard updates for v2 and for v1 clients
// that advertised the capability; otherwise the fallback when one is
// configured, else nothing.
func DefaultPolicy(n Negotiation, hasFallback bool) Mode {
	if n.Version == V2 || n.Compaction {
		return Standard
	}
	if hasFallback {
		return Fallback
	}
	return Off
}

func object(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, false
	}
	return m, true
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func clip(raw json.RawMessage) string {
	s := string(bytes.TrimSpace(raw))
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
