package proxy

// What classify reads of a message: the members of each side's messages
// the proxy follows, picked in one pass over the message (skim.Picker).

import (
	"encoding/json"

	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/acpcompact/acpcompact/protocol"
)

// The members the proxy reads, in one pass over each line (skim.Picker):
// what the engine follows, and on the agent side what recognising a
// legacy signal and following a standard update read. Names match
// exactly: ACP's names are case-sensitive, and the proxy's peers are
// TypeScript and Rust programs that read them so.
var (
	clientSet = skim.Compile(
		[]string{"id"}, []string{"method"}, []string{"params"},
		[]string{"params", "sessionId"}, []string{"params", "requestId"}, []string{"params", "replayFrom"},
	)
	agentSet = skim.Compile(
		[]string{"id"}, []string{"method"}, []string{"result"}, []string{"error"},
		[]string{"params", "sessionId"}, []string{"params", "update"},
		[]string{"params", "update", "sessionUpdate"}, []string{"params", "update", "state"},
		[]string{"params", "update", "content"}, []string{"params", "update", "content", "type"},
		[]string{"params", "update", "content", "text"},
		[]string{"params", "update", "compactionId"}, []string{"params", "update", "status"},
		[]string{"params", "update", "toolCallId"}, []string{"params", "update", "title"},
		[]string{"params", "update", "_meta", "claudeCode", "toolName"},
		[]string{"params", "update", "_meta", opencodeMarkerKey},
	)
)

// Indexes of clientSet's values.
const (
	cID = iota
	cMethod
	cParams
	cSession
	cRequestID
	cReplayFrom
)

// Indexes of agentSet's values.
const (
	aID = iota
	aMethod
	aResult
	aError
	aSession
	aUpdate
	aKind
	aState
	aContent
	aContentType
	aContentText
	aCompactionID
	aStatus
	aToolCallID
	aTitle
	aToolName
	aMarker
)

// envelope is what the proxy read of one message. Its raw values are
// sub-slices of the line, valid until the pump's next read.
type envelope struct {
	v         [][]byte
	method    string
	hasMethod bool
	sessionID string // params.sessionId when it is a non-empty string
	kind      string // params.update.sessionUpdate
	// response: a message without a method that answers a request. For a
	// line read from its head only, that is one whose result or error
	// member begins in the head.
	response bool
	failed   bool // a response with a non-null error
	// head: read from the head of an over-long line; values the head cut
	// are nil.
	head bool
}

// read fills env from the values of one pick.
func (env *envelope) read(v [][]byte, methodAt, sessionAt int, sid *sidCache) {
	*env = envelope{v: v}
	env.method, env.hasMethod = skim.String(v[methodAt])
	env.sessionID = sid.get(v[sessionAt])
}

// readAgent fills env from an agent message's values; started is nil for
// a whole message (see skim.Prefix).
func (env *envelope) readAgent(v [][]byte, started []bool, sid *sidCache) {
	env.read(v, aMethod, aSession, sid)
	env.head = started != nil
	env.kind, _ = skim.String(v[aKind])
	switch {
	case env.hasMethod:
	case env.head:
		env.response = v[aID] != nil && (started[aResult] || started[aError])
		env.failed = started[aError] && !(v[aError] != nil && skim.IsNull(v[aError]))
	default:
		env.response = true
		env.failed = !skim.IsNull(v[aError])
	}
}

// agentMsg is what the engine reads of an agent message.
func (env *envelope) agentMsg(m *turn.Msg) {
	*m = turn.Msg{SessionID: env.sessionID}
	switch {
	case env.hasMethod:
		m.Method = env.method
		if env.kind == "state_update" {
			m.State, _ = skim.String(env.v[aState])
		}
	case env.response:
		m.ID = skim.IDKey(env.v[aID])
		m.Failed = env.failed
		m.Result = json.RawMessage(env.v[aResult])
	}
}

// clientMsg is what the engine reads of a client message; started is nil
// for a whole message.
func (env *envelope) clientMsg(m *turn.Msg, started []bool) {
	*m = turn.Msg{SessionID: env.sessionID}
	if !env.hasMethod {
		return // an answer to one of the agent's requests: nothing to follow
	}
	v := env.v
	m.Method = env.method
	m.ID = skim.IDKey(v[cID])
	if m.ID != "" {
		m.RawID = json.RawMessage(v[cID])
	}
	m.Params = json.RawMessage(v[cParams])
	m.RequestID = skim.IDKey(v[cRequestID])
	// A replay cursor that runs past the head is taken to be one (not
	// null).
	m.ReplayFrom = !skim.IsNull(v[cReplayFrom]) || (started != nil && started[cReplayFrom] && v[cReplayFrom] == nil)
}

// isCompaction reports a standard compaction update or summary chunk.
func (env *envelope) isCompaction() bool {
	return env.hasMethod && env.method == turn.MethodUpdate &&
		(env.kind == protocol.KindUpdate || env.kind == protocol.KindSummaryChunk)
}

// batchable reports whether an agent message may wait in an output buffer
// for the lines already read behind it. Only notifications of the
// ordinary, streaming kind may: a request or response, whose peer may be
// waiting on it, and an update that ends a compaction or a turn are
// written at once.
func (env *envelope) batchable() bool {
	return env.hasMethod && skim.IsNull(env.v[aID]) &&
		env.kind != protocol.KindUpdate && env.kind != "state_update"
}

// sidCache decodes session IDs, reusing the last one's string: nearly
// every line of a connection names the same session.
type sidCache struct{ raw, sid string }

// get decodes a raw session ID; "" for anything but a non-empty string.
func (c *sidCache) get(raw []byte) string {
	if raw == nil {
		return ""
	}
	if c.sid != "" && string(raw) == c.raw {
		return c.sid
	}
	sid, ok := skim.String(raw)
	if !ok {
		return ""
	}
	c.raw, c.sid = string(raw), sid
	return sid
}
