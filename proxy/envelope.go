package proxy

// What classify reads of a message: the members of each side's messages
// the proxy follows, picked in one pass over the message (skim.Picker).

import (
	"bytes"
	"encoding/json"
	"unicode"
	"unicode/utf8"

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
		[]string{"params", "prompt"},
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
		[]string{"params", "update", "_meta", "opencode/compaction"},
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
	cPrompt
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
}

// read fills env from the values of one pick.
func (env *envelope) read(v [][]byte, methodAt, sessionAt int, sid *sidCache) {
	*env = envelope{v: v}
	env.method, env.hasMethod = skim.String(v[methodAt])
	env.sessionID = sid.get(v[sessionAt])
}

// readAgent fills env from an agent message's values; started is nil for
// a whole message, and set for the head of an over-long line, whose
// values the head cut are nil (see skim.Prefix).
func (env *envelope) readAgent(v [][]byte, started []bool, sid *sidCache) {
	env.read(v, aMethod, aSession, sid)
	env.kind, _ = skim.String(v[aKind])
	switch {
	case env.hasMethod:
	case started != nil:
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
		if env.kind == protocol.KindStateUpdate {
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
	if m.Method == turn.MethodPrompt {
		m.Command = slashCommand(v[cPrompt])
	}
}

// slashCommand is the slash command a session/prompt's prompt runs: the
// name after the "/" that begins its first text block ("compact" for
// "/compact" or "/compact keep the tests"), "" for none. Agents that
// answer a command with text (Kimi Code, Copilot CLI) send no marker on
// it, so a profile reads their texts only in a turn that runs the
// command: the same text from the model in any other turn stays prose.
//
// However large the prompt (editors attach selections and files to it),
// only what leads to the name is decoded: the blocks are walked without
// being decoded, and of the first text block's text, only its first
// characters. prompt is valid JSON: the line's pick validated it.
func slashCommand(prompt []byte) string {
	if len(prompt) < 2 || prompt[0] != '[' {
		return ""
	}
	p := skim.Picker{Unbounded: true}
	for elem := range skim.Elements(prompt) {
		vals, err := p.Pick(elem, blockSet)
		if err != nil {
			return ""
		}
		if typ, _ := skim.String(vals[0]); typ == "text" {
			return commandIn(vals[1])
		}
	}
	return ""
}

var blockSet = skim.Compile([]string{"type"}, []string{"text"})

// maxCommandName bounds a command's name: a longer word is not one.
const maxCommandName = 256

// commandIn reads the command a text runs, from the text's raw JSON
// string: after white space, a "/", then (after white space) the name, up
// to the next white space. It decodes no more of the string than that.
func commandIn(raw []byte) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	var name []byte
	slash := false
	for i := 1; i < len(raw); {
		r, n := skim.Rune(raw[i:])
		if n == 0 {
			break // the string's end
		}
		i += n
		switch {
		case unicode.IsSpace(r) && len(name) > 0:
			return string(name)
		case unicode.IsSpace(r):
		case !slash && r == '/':
			slash = true
		case !slash:
			return ""
		case len(name) >= maxCommandName:
			return ""
		default:
			name = utf8.AppendRune(name, r)
		}
	}
	return string(name)
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
		env.kind != protocol.KindUpdate && env.kind != protocol.KindStateUpdate
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

// The same members as Go peers read them. A peer written in Go decodes a
// message into structs, whose member names encoding/json matches ignoring
// case (skim.CompileFold): to it a member spelt "ID" or "SessionUpdate" is
// "id" or "sessionUpdate", and of two that match, the later wins. Where
// that may change what a line means (a compaction update, the answer or
// the state that ends a turn, a client's request), the proxy reads the
// line so too (foldAgent, foldClient).
var (
	agentFoldSet = skim.CompileFold(
		[]string{"id"}, []string{"method"}, []string{"result"}, []string{"error"},
		[]string{"params", "sessionId"}, []string{"params", "update", "sessionUpdate"}, []string{"params", "update", "state"},
	)
	clientFoldSet = skim.CompileFold(
		[]string{"id"}, []string{"method"}, []string{"params"},
		[]string{"params", "sessionId"}, []string{"params", "requestId"}, []string{"params", "replayFrom"},
		[]string{"params", "prompt"},
	)
)

// Indexes of agentFoldSet's values.
const (
	fID = iota
	fMethod
	fResult
	fError
	fSession
	fKind
	fState
)

// foldAgent is what a Go peer reads of an agent message (values of
// agentFoldSet): what the engine reads of it, and whether it is a
// compaction update.
func foldAgent(v [][]byte) (m turn.Msg, compaction bool) {
	method, hasMethod := skim.String(v[fMethod])
	kind, _ := skim.String(v[fKind])
	m.SessionID, _ = skim.String(v[fSession])
	switch {
	case hasMethod:
		m.Method = method
		if kind == protocol.KindStateUpdate {
			m.State, _ = skim.String(v[fState])
		}
	default:
		m.ID = skim.IDKey(v[fID])
		m.Failed = !skim.IsNull(v[fError])
		m.Result = json.RawMessage(v[fResult])
	}
	compaction = hasMethod && method == turn.MethodUpdate && (kind == protocol.KindUpdate || kind == protocol.KindSummaryChunk)
	return m, compaction
}

// endsTurnDifferently reports whether fold, a Go peer's reading of a
// message, may end a turn that exact, the exact reading, does not: a
// response to another request, or another state.
func endsTurnDifferently(fold, exact *turn.Msg) bool {
	switch {
	case fold.Method == "" && fold.ID != "":
		return exact.Method != "" || exact.ID != fold.ID || exact.Failed != fold.Failed
	case fold.Method == turn.MethodUpdate && fold.State != "":
		return exact.Method != fold.Method || exact.State != fold.State || exact.SessionID != fold.SessionID
	}
	return false
}

// maySpell reports whether a message may hold, in some spelling, a string
// that reads as one of the kinds whose reading decides the gate and the
// turns: "compaction_update", "compaction_summary_chunk", "state_update".
// Spelt as is, each holds an underscore right after "compaction" or
// "state"; spelt otherwise, one of its letters or its underscore is a \u
// escape (\u005f to \u007a). A message with neither never holds one. The
// underscore and the backslash are what it looks for, since the letters
// of the names fill every line.
func maySpell(msg []byte) bool { return spells(msg, true) }

// mayCarryCompaction reports whether a message may hold, in some
// spelling, the kind of a compaction update or summary chunk (see
// maySpell): the worst case of a line the proxy cannot read is that a more
// lenient reader reads it as one.
func mayCarryCompaction(msg []byte) bool { return spells(msg, false) }

func spells(msg []byte, state bool) bool {
	for i := 0; i < len(msg); {
		k := bytes.IndexByte(msg[i:], '_')
		if k < 0 {
			break
		}
		i += k
		if i > 0 && (msg[i-1] == 'n' && bytes.HasSuffix(msg[:i], compactionWord) || state && msg[i-1] == 'e' && bytes.HasSuffix(msg[:i], stateWord)) {
			return true
		}
		i++
	}
	for i := 0; i < len(msg); {
		k := bytes.IndexByte(msg[i:], '\\')
		if k < 0 {
			return false
		}
		i += k
		if i+4 < len(msg) && msg[i+1] == 'u' && msg[i+2] == '0' && msg[i+3] == '0' && msg[i+4] >= '5' && msg[i+4] <= '7' {
			return true
		}
		i += 2 // an escape is two bytes at least; a backslash never ends one
	}
	return false
}

var (
	compactionWord = []byte("compaction")
	stateWord      = []byte("state")
)
