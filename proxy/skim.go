package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// The proxy must look at every line, and lines run to 64 MiB. encoding/json
// validates a whole document and then decodes it, and does so again for
// each nested RawMessage, so finding one key deep in a big message costs
// several passes and copies. The skimmer validates a message in one pass
// (with encoding/json's grammar, nesting limit included) and hands out
// sub-slices of the members the proxy asked for; only those small values
// are then decoded.

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

var errSyntax = errors.New("invalid JSON")

type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("invalid JSON at byte %d: %s", e.off, e.msg) }
func (e *syntaxError) Unwrap() error { return errSyntax }

// strPlain marks the bytes that need no attention inside a string.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

type skimmer struct {
	b     []byte
	i     int
	depth int
}

func (s *skimmer) fail(msg string) error { return &syntaxError{s.i, msg} }

func (s *skimmer) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value checks and skips one value.
func (s *skimmer) value() error {
	s.ws()
	if s.i >= len(s.b) {
		return s.fail("unexpected end")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(nil)
	case c == '[':
		return s.array()
	case c == '"':
		return s.str()
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return s.fail("unexpected character")
}

func (s *skimmer) lit(w string) error {
	if len(s.b)-s.i < len(w) || string(s.b[s.i:s.i+len(w)]) != w {
		return s.fail("bad literal")
	}
	s.i += len(w)
	return nil
}

func (s *skimmer) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *skimmer) number() error {
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if s.digits() == 0 {
		return s.fail("bad number")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return s.fail("bad fraction")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.fail("bad exponent")
		}
	}
	return nil
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// str checks and skips a string; s.b[s.i] is its opening quote.
func (s *skimmer) str() error {
	s.i++
	b := s.b
	for i := s.i; i < len(b); {
		c := b[i]
		if strPlain[c] {
			i++
			continue
		}
		switch c {
		case '"':
			s.i = i + 1
			return nil
		case '\\':
			if i+1 >= len(b) {
				s.i = i
				return s.fail("unterminated escape")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+5 >= len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					s.i = i
					return s.fail("bad \\u escape")
				}
				i += 6
			default:
				s.i = i
				return s.fail("bad escape")
			}
		default:
			s.i = i
			return s.fail("control character in string")
		}
	}
	s.i = len(b)
	return s.fail("unterminated string")
}

func (s *skimmer) enter() error {
	s.depth++
	if s.depth > maxDepth {
		return s.fail("nested too deeply")
	}
	return nil
}

func (s *skimmer) array() error {
	if err := s.enter(); err != nil {
		return err
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if err := s.value(); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.fail("unterminated array")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return nil
		default:
			return s.fail("expected , or ]")
		}
	}
}

// object checks and skips an object, calling member (when not nil) with
// each member's raw key (quotes included) and raw value.
func (s *skimmer) object(member func(key, val []byte)) error {
	if err := s.enter(); err != nil {
		return err
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.depth--
		return nil
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.fail("expected a member name")
		}
		k0 := s.i
		if err := s.str(); err != nil {
			return err
		}
		key := s.b[k0:s.i]
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.fail("expected :")
		}
		s.i++
		s.ws()
		v0 := s.i
		if err := s.value(); err != nil {
			return err
		}
		if member != nil {
			member(key, s.b[v0:s.i])
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.fail("unterminated object")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return nil
		default:
			return s.fail("expected , or }")
		}
	}
}

// members validates b as one JSON object and returns the raw values (sub-
// slices of b, not copies) of the named members; a missing member is nil.
// A repeated member keeps its last value, as encoding/json does. Member
// names match exactly: ACP's names are case-sensitive.
func members(b []byte, names ...string) ([][]byte, error) {
	s := skimmer{b: b}
	s.ws()
	if s.i >= len(b) || b[s.i] != '{' {
		return nil, s.fail("not a JSON object")
	}
	out := make([][]byte, len(names))
	err := s.object(func(key, val []byte) {
		if s.depth != 1 {
			return
		}
		for i, n := range names {
			if keyIs(key, n) {
				out[i] = val
			}
		}
	})
	if err != nil {
		return nil, err
	}
	s.ws()
	if s.i != len(b) {
		return nil, s.fail("data after the value")
	}
	return out, nil
}

// pick validates b as one JSON object and returns, in one pass, the raw
// values (sub-slices of b) at the given member paths, such as
// {"params", "update", "sessionUpdate"}; a missing one is nil. A path
// descends only through objects. A repeated member keeps its last value.
func pick(b []byte, paths ...[]string) ([][]byte, error) {
	var p picker
	return p.pick(b, paths...)
}

// picker is pick with its scratch memory kept for reuse: the proxy picks
// from every line, and most lines should cost no allocation. A picker is
// not safe for concurrent use; each pump has its own.
type picker struct {
	out [][]byte
	// The last session ID decoded, by its raw form: nearly every line of
	// a connection names the same session.
	sidRaw, sid string
}

// session decodes a raw session ID, reusing the last one's string.
func (p *picker) session(raw []byte) string {
	if raw == nil {
		return ""
	}
	if p.sid != "" && string(raw) == p.sidRaw {
		return p.sid
	}
	sid, ok := stringValue(raw)
	if !ok {
		return ""
	}
	p.sidRaw, p.sid = string(raw), sid
	return sid
}

// pick is the function pick; the result is valid until the next call.
func (p *picker) pick(b []byte, paths ...[]string) ([][]byte, error) {
	return p.pickSet(b, compilePaths(paths...))
}

// pathSet is a set of member paths compiled into a tree, so that each
// member name is compared once with each distinct name expected at its
// level, however many paths share it. The proxy's sets are compiled once.
type pathSet struct {
	n    int
	root *pathNode
}

type pathNode struct {
	kids []pathKid
}

type pathKid struct {
	name   string
	leaves []int     // the paths that end at this member
	below  []int     // the paths that go on below it
	node   *pathNode // nil when none goes on
}

func compilePaths(paths ...[]string) *pathSet {
	set := &pathSet{n: len(paths), root: &pathNode{}}
	for q, path := range paths {
		n := set.root
		for level, name := range path {
			k := -1
			for i := range n.kids {
				if n.kids[i].name == name {
					k = i
					break
				}
			}
			if k < 0 {
				n.kids = append(n.kids, pathKid{name: name})
				k = len(n.kids) - 1
			}
			kid := &n.kids[k]
			if level == len(path)-1 {
				kid.leaves = append(kid.leaves, q)
				break
			}
			kid.below = append(kid.below, q)
			if kid.node == nil {
				kid.node = &pathNode{}
			}
			n = kid.node
		}
	}
	return set
}

// pickSet is pick for a compiled set of paths.
func (p *picker) pickSet(b []byte, set *pathSet) ([][]byte, error) {
	s := skimmer{b: b}
	s.ws()
	if s.i >= len(b) || b[s.i] != '{' {
		return nil, s.fail("not a JSON object")
	}
	if cap(p.out) < set.n {
		p.out = make([][]byte, set.n)
	}
	p.out = p.out[:set.n]
	clear(p.out)
	if err := s.pickObject(p.out, set.root); err != nil {
		return nil, err
	}
	s.ws()
	if s.i != len(b) {
		return nil, s.fail("data after the value")
	}
	return p.out, nil
}

// pickObject is object for pick: n holds the paths that led here.
func (s *skimmer) pickObject(out [][]byte, n *pathNode) error {
	if err := s.enter(); err != nil {
		return err
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.depth--
		return nil
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.fail("expected a member name")
		}
		k0 := s.i
		if err := s.str(); err != nil {
			return err
		}
		key := s.b[k0:s.i]
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.fail("expected :")
		}
		s.i++
		s.ws()
		v0 := s.i
		var kid *pathKid
		if len(n.kids) > 0 {
			// Escaped names are rare: knowing once that this one has
			// none makes every comparison a plain one.
			esc := bytes.IndexByte(key, '\\') >= 0
			for i := range n.kids {
				if keyMatch(key, esc, n.kids[i].name) {
					kid = &n.kids[i]
					break
				}
			}
		}
		var err error
		if kid != nil && kid.node != nil {
			// A repeated member replaces whatever an earlier one held
			// below it.
			for _, q := range kid.below {
				out[q] = nil
			}
			if s.i < len(s.b) && s.b[s.i] == '{' {
				err = s.pickObject(out, kid.node)
			} else {
				err = s.value()
			}
		} else {
			err = s.value()
		}
		if err != nil {
			return err
		}
		if kid != nil {
			for _, q := range kid.leaves {
				out[q] = s.b[v0:s.i]
			}
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.fail("unterminated object")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return nil
		default:
			return s.fail("expected , or }")
		}
	}
}

// keyMatch is keyIs for a raw name known to hold an escape (esc) or not.
func keyMatch(raw []byte, esc bool, name string) bool {
	if !esc {
		return len(raw) == len(name)+2 && string(raw[1:len(raw)-1]) == name
	}
	return keyIs(raw, name)
}

// keyIs compares a raw member name with name.
func keyIs(raw []byte, name string) bool {
	if len(raw) == len(name)+2 && string(raw[1:len(raw)-1]) == name {
		return true
	}
	// An escaped name ("\u0069d") is rare but legal.
	for _, c := range raw {
		if c == '\\' {
			var k string
			return json.Unmarshal(raw, &k) == nil && k == name
		}
	}
	return false
}

// field returns the raw value of one member of object b, or nil.
func field(b []byte, name string) []byte {
	v, err := members(b, name)
	if err != nil {
		return nil
	}
	return v[0]
}

// interned holds the strings the proxy decodes on nearly every line, keyed
// by their raw JSON form, so that decoding them allocates nothing.
var interned = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{
		"2.0", "initialize", "session/new", "session/load", "session/resume", "session/prompt",
		"session/cancel", "session/close", "$/cancel_request", "session/update", "session/request_permission",
		"agent_message_chunk", "agent_thought_chunk", "user_message_chunk", "tool_call", "tool_call_update",
		"plan", "available_commands_update", "current_mode_update", "config_option_update",
		"session_info_update", "usage_update", "notice", "state_update", "compaction_update",
		"compaction_summary_chunk", "text",
	} {
		b, _ := json.Marshal(s)
		m[string(b)] = s
	}
	return m
}()

// stringValue decodes a raw JSON string; ok is false for anything else.
func stringValue(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if s, ok := interned[string(raw)]; ok {
		return s, true
	}
	plain := true
	for _, c := range raw[1 : len(raw)-1] {
		if c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// isNull reports a raw JSON null (or nothing at all).
func isNull(raw []byte) bool { return len(raw) == 0 || string(raw) == "null" }
