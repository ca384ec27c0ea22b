package proxy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
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
	s := textDecode(line)
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
// duplicate members replacing earlier ones, and strings as JavaScript
// keeps them: an unpaired surrogate escape stays a code unit of its own,
// so two strings that differ only in theirs stay two. encoding/json's
// Decoder reads tokens without a nesting limit (only its value decoding
// has one), so it is read a token at a time; it decodes an unpaired
// surrogate to U+FFFD, so each is first spelt as a character of its own
// (keepLoneSurrogates).
func parseUnbounded(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(keepLoneSurrogates(s)))
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

// textDecode is TextDecoder's UTF-8 decoding (the WHATWG decoder, which the
// SDK's line reader uses): each maximal subpart of an invalid sequence
// becomes one U+FFFD, where Go's decoding replaces each invalid byte.
func textDecode(b []byte) string {
	var out strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r != utf8.RuneError || n > 1 {
			out.WriteRune(r)
			b = b[n:]
			continue
		}
		out.WriteRune(utf8.RuneError)
		b = b[maximalSubpart(b):]
	}
	return out.String()
}

// maximalSubpart is the length of the invalid sequence at b's start that
// the WHATWG decoder replaces with one U+FFFD: a lead byte and the
// continuation bytes that may follow it, up to the first that may not.
func maximalSubpart(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xbf)
	switch {
	case c >= 0xc2 && c <= 0xdf:
		need = 1
	case c >= 0xe0 && c <= 0xef:
		need = 2
		if c == 0xe0 {
			lo = 0xa0
		} else if c == 0xed {
			hi = 0x9f
		}
	case c >= 0xf0 && c <= 0xf4:
		need = 3
		if c == 0xf0 {
			lo = 0x90
		} else if c == 0xf4 {
			hi = 0x8f
		}
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(b); n++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		lo, hi = 0x80, 0xbf
	}
	return n
}

// keepLoneSurrogates spells each unpaired surrogate escape of s (\ud800
// with no trail after it, a trail with no lead before it) as an escaped
// character of plane 15 that stands for it alone, so that encoding/json
// decodes two strings JavaScript keeps apart into two Go strings.
func keepLoneSurrogates(s string) string {
	if !strings.Contains(s, `\u`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			out.WriteByte(s[i])
			continue
		}
		if s[i+1] != 'u' || i+6 > len(s) {
			out.WriteString(s[i : i+2])
			i++
			continue
		}
		u, err := strconv.ParseUint(s[i+2:i+6], 16, 16)
		r := rune(u)
		switch {
		case err != nil || !utf16.IsSurrogate(r):
			out.WriteString(s[i : i+6])
		case r < 0xdc00 && i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' && isTrail(s[i+8:i+12]):
			out.WriteString(s[i : i+12]) // a pair
			i += 6
		default:
			a, b := utf16.EncodeRune(0xf0000 + r - 0xd800)
			fmt.Fprintf(&out, `\u%04x\u%04x`, a, b)
		}
		i += 5
	}
	return out.String()
}

func isTrail(hex string) bool {
	u, err := strconv.ParseUint(hex, 16, 16)
	return err == nil && u >= 0xdc00 && u <= 0xdfff
}
