package skim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// MaxDepth is encoding/json's nesting limit, which a message is held to:
// 10000 nested arrays and objects are accepted, 10001 are not. The
// unbounded mode (Picker.Unbounded, PickPrefixUnbounded) has no limit.
const MaxDepth = 10000

// Errors, for errors.Is.
var (
	// ErrSyntax is wrapped by the error for any input that is not valid
	// JSON, as encoding/json.Valid judges it.
	ErrSyntax = errors.New("invalid JSON")
	// ErrTooDeep is wrapped, along with ErrSyntax, by the error for input
	// nested deeper than MaxDepth (never in the unbounded mode).
	ErrTooDeep = errors.New("JSON nested too deeply")
	// ErrNotObject is the error for valid JSON that is not an object.
	ErrNotObject = errors.New("JSON value is not an object")
)

// syntaxError is invalid input at byte off.
type syntaxError struct {
	off  int64
	msg  string
	deep bool // nested deeper than MaxDepth
}

func (e *syntaxError) Error() string { return fmt.Sprintf("invalid JSON at byte %d: %s", e.off, e.msg) }

func (e *syntaxError) Unwrap() []error {
	if e.deep {
		return []error{ErrSyntax, ErrTooDeep}
	}
	return []error{ErrSyntax}
}

// Paths is a set of member paths, such as {"params", "update",
// "sessionUpdate"}, compiled into a tree so that each member name of a
// message is compared once with each distinct name expected at its level,
// however many paths share it. A Paths is immutable and safe for
// concurrent use; compile it once.
type Paths struct {
	n    int
	fold bool
	root *pathNode
}

type pathNode struct {
	kids     []pathKid
	allPlain bool // every kid is plain
}

type pathKid struct {
	name   string
	folded string    // foldName(name), for a fold set
	plain  bool      // a raw name without escapes can be compared byte for byte
	leaves []int     // the paths that end at this member
	below  []int     // the paths that go on below it
	node   *pathNode // nil when none goes on
}

// Compile compiles paths whose member names match exactly (see the package
// documentation). Picking with the result yields one value per path, in
// the order given. A path descends only through objects; an empty path
// picks nothing.
func Compile(paths ...[]string) *Paths { return compile(false, paths) }

// CompileFold is Compile for names matched as encoding/json matches the
// field names of a struct: exactly when a member has the name, else ignoring
// case (see the package documentation).
func CompileFold(paths ...[]string) *Paths { return compile(true, paths) }

func compile(fold bool, paths [][]string) *Paths {
	set := &Paths{n: len(paths), fold: fold, root: &pathNode{}}
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
				n.kids = append(n.kids, pathKid{
					name: name, folded: string(foldName([]byte(name))),
					// A raw name holding invalid UTF-8 decodes to U+FFFD:
					// only a name with one needs the decoded comparison.
					plain: !bytes.ContainsRune([]byte(name), utf8.RuneError),
				})
				k = len(n.kids) - 1
			}
			n.allPlain = true
			for i := range n.kids {
				n.allPlain = n.allPlain && n.kids[i].plain
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

// Len is the number of paths, and so of the values a pick returns.
func (set *Paths) Len() int { return set.n }

// match returns the kid that a member with the raw (quoted) name key
// selects, or nil.
func (n *pathNode) match(key []byte, fold bool) *pathKid {
	if len(n.kids) == 0 {
		return nil
	}
	inner := key[1 : len(key)-1]
	if !fold {
		if bytes.IndexByte(inner, '\\') >= 0 {
			return n.matchDecoded(key, false)
		}
		for i := range n.kids {
			if k := &n.kids[i]; k.plain && string(inner) == k.name {
				return k
			}
		}
		if n.allPlain {
			return nil
		}
		return n.matchDecoded(key, false)
	}
	if !asciiPlain(inner) {
		return n.matchDecoded(key, true)
	}
	for i := range n.kids {
		if string(inner) == n.kids[i].name {
			return &n.kids[i]
		}
	}
	for i := range n.kids {
		if asciiFoldEqual(inner, n.kids[i].folded) {
			return &n.kids[i]
		}
	}
	return nil
}

// matchDecoded is match for a name that must be decoded first: the rare
// case, so the decoding is encoding/json's own.
func (n *pathNode) matchDecoded(key []byte, fold bool) *pathKid {
	name, ok := String(key)
	if !ok {
		return nil
	}
	for i := range n.kids {
		if name == n.kids[i].name {
			return &n.kids[i]
		}
	}
	if !fold {
		return nil
	}
	var buf [64]byte
	f := appendFoldedName(buf[:0], []byte(name))
	for i := range n.kids {
		if string(f) == n.kids[i].folded {
			return &n.kids[i]
		}
	}
	return nil
}

// asciiPlain reports b holds only ASCII and no backslash.
func asciiPlain(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf || c == '\\' {
			return false
		}
	}
	return true
}

// asciiFoldEqual compares an ASCII name with a folded one.
func asciiFoldEqual(b []byte, folded string) bool {
	if len(b) != len(folded) {
		return false
	}
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != folded[i] {
			return false
		}
	}
	return true
}

// foldName and appendFoldedName are encoding/json's (fold.go): two names
// match a struct field case-insensitively when their folded forms are
// equal.
func foldName(in []byte) []byte { return appendFoldedName(nil, in) }

func appendFoldedName(out, in []byte) []byte {
	for i := 0; i < len(in); {
		if c := in[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:])
		out = utf8.AppendRune(out, foldRune(r))
		i += n
	}
	return out
}

// foldRune returns the smallest rune of r's fold set.
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// Picker picks members out of messages with scratch memory it keeps for
// reuse, so that most picks allocate nothing. The zero Picker is ready to
// use, and holds messages to encoding/json's nesting limit. A Picker is not
// safe for concurrent use: give each goroutine that reads messages its own.
type Picker struct {
	// Unbounded: no nesting limit, as JavaScript's JSON.parse has none. A
	// host whose peers read messages with JSON.parse (the TypeScript SDK)
	// sets it, so that a message nested deeper than MaxDepth, which they
	// read, is read (validated and picked) here too rather than refused.
	// Pick then validates and picks exactly as without it, and never
	// returns ErrTooDeep; the values nested deeper than MaxDepth are read
	// without recursion, in memory of a bit or two per level past MaxDepth
	// (a 1,000,000-deep array, a 2 MB line, takes about 3 ms and 256 KB).
	Unbounded bool

	impl handPicker
}

// Pick validates msg as one JSON object (see the package documentation) and
// returns, in one pass, the raw value of each path of set, in the order the
// paths were compiled: a sub-slice of msg, not a copy, without surrounding
// whitespace, or nil when the message has no such member. The returned
// slice is p's and is valid until p's next Pick.
//
// An invalid message is an error wrapping ErrSyntax (and ErrTooDeep when it
// is nested too deeply, unless p is Unbounded); a valid one that is not an
// object is ErrNotObject.
func (p *Picker) Pick(msg []byte, set *Paths) ([][]byte, error) {
	p.impl.unbounded = p.Unbounded
	return p.impl.pick(msg, set)
}

// interned holds the strings a host decodes on nearly every line, keyed by
// their raw JSON form, so that decoding them allocates nothing. The wire
// kinds are spelt out rather than taken from package protocol
// (protocol.KindStateUpdate and the rest) because skim imports nothing of
// the module (internal/layering).
var interned = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{
		"2.0", "initialize", "session/new", "session/load", "session/resume", "session/prompt",
		"session/cancel", "session/close", "$/cancel_request", "session/update", "session/request_permission",
		"agent_message_chunk", "agent_thought_chunk", "user_message_chunk", "tool_call", "tool_call_update",
		"plan", "available_commands_update", "current_mode_update", "config_option_update",
		"session_info_update", "usage_update", "notice", "state_update", "compaction_update",
		"compaction_summary_chunk", "text", "in_progress", "completed", "failed", "cancelled",
	} {
		b, _ := json.Marshal(s)
		m[string(b)] = s
	}
	return m
}()

// maxInterned bounds the raw strings looked up in interned.
const maxInterned = 40

// String decodes a raw JSON string, such as a value Pick returned, exactly
// as encoding/json decodes it into a string (invalid UTF-8 and unpaired
// surrogates become U+FFFD); ok is false for anything that is not one
// JSON string. A string without escapes decodes without a second pass, and
// the method and update names of ACP without an allocation. It is safe for
// concurrent use.
func String(raw []byte) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	if len(raw) <= maxInterned {
		if s, ok := interned[string(raw)]; ok {
			return s, true
		}
	}
	inner := raw[1 : len(raw)-1]
	ascii := true
	for _, c := range inner {
		if c < 0x20 || c == '"' || c == '\\' {
			return decodeString(raw)
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if !ascii && !utf8.Valid(inner) {
		return decodeString(raw)
	}
	return string(inner), true
}

func decodeString(raw []byte) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// IsNull reports a raw JSON null, or nothing at all (an absent member).
// It is safe for concurrent use.
func IsNull(raw []byte) bool {
	raw = trimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// IDKey returns a comparable form of a raw JSON-RPC id, such as the id
// member Pick returned, that is equal for two ids exactly when the clients
// take them for the same id: the official TypeScript SDK, which decodes an
// id with JSON.parse and keeps ids in a Map (SameValueZero), and Go peers
// that decode it with encoding/json into a float64 or an any.
//
//   - "" for an absent id or null;
//   - a string: "s:" and its decoded UTF-8 value, so "init-é" and
//     "init-\u00e9" are the same id, and "a<b&c" is "a\u003cb\u0026c";
//   - a number: "n:" and the double it rounds to, spelled as JavaScript's
//     String(number) spells it ("n:1", "n:1e+21", "n:Infinity"), so that
//     numbers compare by value: 1, 1.0, 1e0 and 10e-1 are one id, and so
//     are 0, -0 and 0.0. A double holds integers exactly only up to 2^53:
//     beyond it two literals that round to the same double are one id, as
//     they are in JavaScript (9007199254740993 is 9007199254740992), and a
//     literal too large for a double is Infinity, as in JavaScript, equal
//     to any other such literal of its sign (1e400 is 2e400). A number is
//     never a string: 1 and "1" differ;
//   - anything else (an object, an array, a boolean, which JSON-RPC does not
//     allow): "x:" and its canonical form, encoding/json's encoding of its
//     decoded value (members sorted, the last of duplicates, strings
//     re-escaped; numbers inside it by their text);
//   - invalid JSON: "?:" and the raw text, equal to no valid id's key.
//
// It allocates the key and nothing else (but for an escaped string, or a
// number out of a double's range). It is safe for concurrent use.
func IDKey(raw []byte) string {
	raw = trimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	switch c := raw[0]; {
	case c == '"':
		if plainString(raw) {
			return "s:" + string(raw[1:len(raw)-1])
		}
		if s, ok := String(raw); ok {
			return "s:" + s
		}
	case c == '-' || '0' <= c && c <= '9':
		if k, ok := numberKey(raw); ok {
			return k
		}
	default:
		if k, ok := canonical(raw); ok {
			return "x:" + k
		}
	}
	return "?:" + string(raw)
}

// plainString reports that raw is a JSON string of printable ASCII without
// escapes, whose value is its text.
func plainString(raw []byte) bool {
	if len(raw) < 2 || raw[len(raw)-1] != '"' {
		return false
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// numberKey is IDKey of a JSON number literal: "n:" and the JavaScript
// spelling of the double it rounds to; ok is false when lit is no JSON
// number.
func numberKey(lit []byte) (key string, ok bool) {
	// An integer of at most 15 digits is a double exactly, and JavaScript
	// spells it as JSON does, but for -0.
	digits := lit
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if n := len(digits); n > 0 && n <= 15 && allDigits(digits) {
		switch {
		case digits[0] != '0':
			return "n:" + string(lit), true
		case n == 1:
			return "n:0", true
		}
		return "", false // a leading zero
	}
	if !isNumber(lit) {
		return "", false
	}
	// Correctly rounded, as JavaScript's Number parsing is; a literal out
	// of range is ±Inf (the error says only that).
	f, _ := strconv.ParseFloat(string(lit), 64)
	var buf [48]byte
	return string(appendJSNumber(append(buf[:0], "n:"...), f)), true
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// appendJSNumber appends f as JavaScript's Number::toString spells it
// (ECMA-262, 6.1.6.1.20): the shortest digits that round to f, in decimal
// notation from 1e-6 up to 1e21 and in exponent notation ("1e+21",
// "1.5e-7") outside; -0 is "0", the infinities "Infinity" and
// "-Infinity". f is no NaN.
func appendJSNumber(dst []byte, f float64) []byte {
	switch {
	case f == 0:
		return append(dst, '0')
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case f < 0:
		dst = append(dst, '-')
		f = -f
	}
	// strconv's shortest form, d[.ddd]e±xx, gives the digits and the
	// exponent: f is 0.digits × 10^n.
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	at := bytes.IndexByte(e, 'e')
	x := 0
	for _, c := range e[at+2:] {
		x = x*10 + int(c-'0')
	}
	if e[at+1] == '-' {
		x = -x
	}
	var db [24]byte
	digits := append(db[:0], e[0])
	if at > 1 {
		digits = append(digits, e[2:at]...) // after the point
	}
	k, n := len(digits), x+1
	switch {
	case k <= n && n <= 21: // an integer
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(append(append(dst, digits[:n]...), '.'), digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, "0."...)
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(append(dst, '.'), digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

// isNumber reports whether b is exactly one JSON number.
func isNumber(b []byte) bool {
	i := 0
	digits := func() int {
		n := 0
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}

// canonical is encoding/json's encoding of raw's decoded value, numbers
// kept as their literals.
func canonical(raw []byte) (string, bool) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil || d.InputOffset() != int64(len(raw)) {
		return "", false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// Head is what ReadHead reads of a message: its top-level method and id,
// as the kits' encoding/json envelope decoding sees them.
type Head struct {
	// Method is the method's decoded value; HasMethod reports the message
	// has a method member that is a string.
	Method    string
	HasMethod bool
	// HasID reports an id member that is not null.
	HasID bool
}

// headSet is what ReadHead picks; names match as the kits' envelope struct
// matches them.
var headSet = CompileFold([]string{"method"}, []string{"id"})

// ReadHead validates msg as Pick does and reads its top-level "method" and
// "id" members, matched as encoding/json matches the fields of a struct
// (case-insensitively; the last wins). Escapes are decoded, so it never
// misreports a message; the ACP method names decode without allocating.
// It is safe for concurrent use.
func ReadHead(msg []byte) (Head, error) { return readHeadHand(msg) }

// headOf is the Head of the values of headSet.
func headOf(out *[2][]byte) Head {
	var h Head
	if out[0] != nil {
		h.Method, h.HasMethod = String(out[0])
	}
	h.HasID = !IsNull(out[1])
	return h
}

// Elements yields the elements of arr, a valid JSON array (such as a value
// Pick returned), raw and trimmed, without decoding them.
func Elements(arr []byte) func(yield func([]byte) bool) {
	return func(yield func([]byte) bool) {
		depth, start, str := 0, -1, false
		for i := 0; i < len(arr); i++ {
			c := arr[i]
			switch {
			case str:
				if c == '\\' {
					i++
				} else if c == '"' {
					str = false
				}
				continue
			case c == '"':
				str = true
			case c == '[' || c == '{':
				depth++
				if depth == 1 {
					continue
				}
			case c == ']' || c == '}':
				depth--
			case c == ',' && depth == 1:
				if start >= 0 && !yield(bytes.TrimSpace(arr[start:i])) {
					return
				}
				start = -1
				continue
			}
			if depth == 0 {
				if start >= 0 {
					yield(bytes.TrimSpace(arr[start:i]))
				}
				return
			}
			if start < 0 && c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				start = i
			}
		}
	}
}
