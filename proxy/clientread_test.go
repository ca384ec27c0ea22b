package proxy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// The reference readers: a line as the clients the proxy serves read it,
// written here independently of the proxy's own reading, as the oracle of
// the read tests and of FuzzClientsReadNoMoreThanTheProxy.

// readMsg is what a client reads in one line.
type readMsg struct {
	// ok: the client reads one message (a JSON object) in the line and
	// dispatches it.
	ok        bool
	method    string
	hasMethod bool
	id        any // JSON.parse's value of the id member (nil: absent or null)
	hasResult bool
	hasError  bool
	sessionID string
	kind      string // params.update.sessionUpdate
	state     string // params.update.state
	update    map[string]any
	raw       string // the message as the client parsed it
}

// isCompaction reports a standard compaction update or summary chunk.
func (m readMsg) isCompaction() bool {
	return m.ok && m.method == "session/update" &&
		(m.kind == "compaction_update" || m.kind == "compaction_summary_chunk")
}

// answers reports whether the message is the response to request id
// (compared as JSON.parse's values compare: 2 and 2.0 are one number).
func (m readMsg) answers(id float64) bool {
	n, ok := m.id.(float64)
	return m.ok && !m.hasMethod && ok && n == id && (m.hasResult || m.hasError)
}

// splitLines splits a stream as the SDK's LineBuffer does: on LF only, a
// final line without one included.
func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return append(out, b)
		}
		out = append(out, b[:i])
		b = b[i+1:]
	}
	return out
}

// jsWhitespace is what JavaScript's String.prototype.trim removes:
// WhiteSpace (TAB, VT, FF, SP, NBSP, ZWNBSP and the Zs category) and
// LineTerminator (LF, CR, LS, PS).
var jsWhitespace = map[rune]bool{
	'\t': true, '\v': true, '\f': true, ' ': true, '\u00a0': true, '\ufeff': true,
	'\u1680': true, '\u2000': true, '\u2001': true, '\u2002': true, '\u2003': true, '\u2004': true,
	'\u2005': true, '\u2006': true, '\u2007': true, '\u2008': true, '\u2009': true, '\u200a': true,
	'\u202f': true, '\u205f': true, '\u3000': true,
	'\n': true, '\r': true, '\u2028': true, '\u2029': true,
}

// tsRead reads a line (without its LF) as the official TypeScript SDK
// client does (@agentclientprotocol/sdk 2.4.0, dist/core/stream.js): the
// line decoded on its own (TextDecoder: invalid UTF-8 becomes U+FFFD, a
// leading BOM is dropped), trimmed (String.prototype.trim), skipped when
// empty, then JSON.parse (no nesting limit); an array (a batch) or a value
// that is not an object is answered with an error, not dispatched.
func tsRead(line []byte) readMsg {
	s := strings.ToValidUTF8(string(line), "\uFFFD")
	s = strings.TrimPrefix(s, "\ufeff")
	s = strings.TrimFunc(s, func(r rune) bool { return jsWhitespace[r] })
	if s == "" {
		return readMsg{}
	}
	v, err := parseUnbounded(s)
	if err != nil {
		return readMsg{}
	}
	top, ok := v.(map[string]any)
	if !ok {
		return readMsg{}
	}
	m := readMsg{ok: true, raw: s, id: top["id"]}
	m.method, m.hasMethod = top["method"].(string)
	_, m.hasResult = top["result"]
	_, m.hasError = top["error"]
	if params, ok := top["params"].(map[string]any); ok {
		m.sessionID, _ = params["sessionId"].(string)
		if u, ok := params["update"].(map[string]any); ok {
			m.update = u
			m.kind, _ = u["sessionUpdate"].(string)
			m.state, _ = u["state"].(string)
		}
	}
	return m
}

// keepDepth is how deep parseUnbounded keeps objects and arrays: deeper
// values are read (and validated) but not kept.
const keepDepth = 6

// parseUnbounded is JSON.parse: one JSON value, any nesting depth,
// duplicate members replacing earlier ones. encoding/json's Decoder reads
// tokens without a nesting limit (only its value decoding has one), so it
// is read a token at a time.
func parseUnbounded(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	v, err := tokenValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the value")
	}
	return v, nil
}

func tokenValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch d {
	case '{':
		m := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, ok := kt.(string)
			if !ok {
				return nil, errors.New("member name is not a string")
			}
			v, err := tokenValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if depth < keepDepth {
				m[key] = v
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return m, nil
	case '[':
		a := []any{}
		for dec.More() {
			v, err := tokenValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			if depth < keepDepth {
				a = append(a, v)
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return a, nil
	}
	return nil, errors.New("unexpected delimiter")
}

// goRead reads a line (without its LF) as a Go client does that decodes
// messages with encoding/json into structs (coder/acp-go-sdk's envelope,
// this project's protocol package): member names match case-insensitively,
// a later member replaces an earlier one it matches, nesting is limited to
// 10000, and nothing but JSON whitespace surrounds the message.
func goRead(line []byte) readMsg {
	var env struct {
		ID     *json.RawMessage `json:"id"`
		Method *string          `json:"method"`
		Params json.RawMessage  `json:"params"`
		Result json.RawMessage  `json:"result"`
		Error  json.RawMessage  `json:"error"`
	}
	if json.Unmarshal(line, &env) != nil {
		return readMsg{}
	}
	m := readMsg{ok: true, raw: string(line)}
	if env.Method != nil {
		m.method, m.hasMethod = *env.Method, true
	}
	if env.ID != nil {
		var id any
		_ = json.Unmarshal(*env.ID, &id)
		m.id = id
	}
	m.hasResult, m.hasError = env.Result != nil, env.Error != nil
	var params struct {
		SessionID string          `json:"sessionId"`
		Update    json.RawMessage `json:"update"`
	}
	if json.Unmarshal(env.Params, &params) == nil {
		m.sessionID = params.SessionID
		var u struct {
			SessionUpdate string `json:"sessionUpdate"`
			State         string `json:"state"`
		}
		if json.Unmarshal(params.Update, &u) == nil {
			m.kind, m.state = u.SessionUpdate, u.State
			_ = json.Unmarshal(params.Update, &m.update)
		}
	}
	return m
}

// readers are the clients the proxy serves, by the way they read a line.
var readers = []struct {
	name string
	read func([]byte) readMsg
}{
	{"typescript", tsRead},
	{"go", goRead},
}
