package turn

import (
	"bytes"
	"encoding/json"

	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/acpcompact/acpcompact/observe"
	"github.com/acpcompact/acpcompact/protocol"
)

// ACP methods the engine follows.
const (
	MethodInitialize = "initialize"
	MethodPrompt     = "session/prompt"
	MethodCancel     = "session/cancel"
	MethodClose      = "session/close"
	MethodLoad       = "session/load"
	MethodResume     = "session/resume"
	MethodUpdate     = "session/update"
	MethodCancelReq  = "$/cancel_request"
)

// Msg is what the engine reads of one JSON-RPC message. A host fills it
// with Parse, or from its own reading of the message (the proxy reads more
// members of each line and fills a Msg from them).
type Msg struct {
	// ID is the request id by JSON value (skim.IDKey); "" for a
	// notification.
	ID string
	// RawID is the id as it came, for a host that must name the request
	// again on the wire.
	RawID json.RawMessage
	// Method is "" for a response.
	Method string
	// Failed says a response carries a non-null error.
	Failed bool
	// Params of an initialize request, read for the capability.
	Params json.RawMessage
	// Result of a response, read for the initialize answer.
	Result json.RawMessage
	// SessionID is params.sessionId when it is a string.
	SessionID string
	// State is the state of a v2 state_update notification, else "".
	State string
	// RequestID is params.requestId of a $/cancel_request, by JSON value.
	RequestID string
	// ReplayFrom says a session/resume carries a non-null
	// params.replayFrom (a v2 resume that replays history).
	ReplayFrom bool
	// Trace is the W3C trace context of a session/prompt's params._meta.
	Trace observe.TraceContext
	// Command is the slash command a session/prompt runs ("compact" for a
	// prompt whose first text block is "/compact …"), "" for none; a host
	// that does not read prompts leaves it empty.
	Command string
}

// IsResponse reports whether m answers a request.
func (m *Msg) IsResponse() bool { return m.Method == "" && m.ID != "" }

var stateUpdateMark = []byte(`"` + protocol.KindStateUpdate + `"`)

// Parse reads the members the engine follows from one JSON-RPC message (a
// single object; see Batch for arrays). It reports false for a message
// that is not a well-formed JSON object: such a message means nothing to
// the engine. An agent's ordinary notifications, most of its traffic, are
// recognised from their head and not decoded further.
func Parse(msg []byte) (Msg, bool) {
	var m Msg
	h, err := skim.ReadHead(msg)
	if err != nil {
		return m, false
	}
	if h.HasMethod && !h.HasID && !followed(h.Method, msg) {
		m.Method = h.Method
		return m, true
	}
	var p skim.Picker
	v, err := p.Pick(msg, msgPaths)
	if err != nil {
		return m, false
	}
	m.ID = skim.IDKey(v[0])
	if m.ID != "" {
		m.RawID = json.RawMessage(v[0])
	}
	m.Method, _ = skim.String(v[1])
	m.SessionID, _ = skim.String(v[5])
	if m.Method == "" {
		m.Failed = !skim.IsNull(v[4])
		m.Result = json.RawMessage(v[3])
		return m, true
	}
	m.Params = json.RawMessage(v[2])
	switch m.Method {
	case MethodUpdate:
		if kind, _ := skim.String(v[6]); kind == protocol.KindStateUpdate {
			m.State, _ = skim.String(v[7])
		}
	case MethodCancelReq:
		m.RequestID = skim.IDKey(v[8])
	case MethodResume:
		m.ReplayFrom = !skim.IsNull(v[9])
	case MethodPrompt:
		m.Trace = observe.TraceContext{}
		m.Trace.Traceparent, _ = skim.String(v[10])
		m.Trace.Tracestate, _ = skim.String(v[11])
		m.Trace.Baggage, _ = skim.String(v[12])
	}
	return m, true
}

// followed reports whether a notification must be decoded further than
// its head: a cancel (session/cancel, $/cancel_request), or one that
// MayCarryState.
func followed(method string, msg []byte) bool {
	switch method {
	case MethodCancel, MethodCancelReq:
		return true
	}
	return MayCarryState(method, msg)
}

// MayCarryState reports whether a notification of method, whose message
// (or params) is msg, may be a v2 state_update, which the engine follows
// (an idle one ends a turn): a session/update whose bytes hold
// "state_update". Every other session/update, most of an agent's traffic,
// matters to no turn, and a host may pass it without parsing it; the agent
// kit's connection skips its look at an outgoing notification so, and
// Parse stops at such a notification's head.
func MayCarryState(method string, msg []byte) bool {
	return method == MethodUpdate && bytes.Contains(msg, stateUpdateMark)
}

// msgPaths match member names as encoding/json does, case-insensitively,
// because the Go stacks the kits host decode messages that way: the engine
// must read a message as the stack that dispatches it does.
var msgPaths = skim.CompileFold(
	[]string{"id"}, []string{"method"}, []string{"params"}, []string{"result"}, []string{"error"},
	[]string{"params", "sessionId"},
	[]string{"params", "update", "sessionUpdate"}, []string{"params", "update", "state"},
	[]string{"params", "requestId"}, []string{"params", "replayFrom"},
	[]string{"params", "_meta", "traceparent"}, []string{"params", "_meta", "tracestate"}, []string{"params", "_meta", "baggage"},
)

// IsBatch reports whether msg is a JSON-RPC batch: a JSON array, after
// JSON's own leading whitespace. It does not check that the array is
// valid; Batch does.
func IsBatch(msg []byte) bool {
	for _, c := range msg {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '['
	}
	return false
}

// Batch calls f with each message of a JSON-RPC batch (a JSON array of
// messages), or with msg itself when it is not an array. It reports false
// when msg is an array that is not valid JSON.
func Batch(msg []byte, f func(elem []byte)) bool {
	t := bytes.TrimLeft(msg, " \t\r\n")
	if len(t) == 0 || t[0] != '[' {
		f(msg)
		return true
	}
	var elems []json.RawMessage
	if json.Unmarshal(t, &elems) != nil {
		return false
	}
	for _, e := range elems {
		f(e)
	}
	return true
}
