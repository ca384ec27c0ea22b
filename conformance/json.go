package conformance

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// object is a decoded JSON object whose members stay raw. Decoding into a
// map rather than a struct keeps key matching exact: encoding/json matches
// struct fields case-insensitively, and "Status" is not "status" on the wire.
type object map[string]json.RawMessage

func decodeObject(raw []byte) (object, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	var o object
	if json.Unmarshal(raw, &o) != nil || o == nil {
		return nil, false
	}
	return o, true
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// str returns a member that is a JSON string. Null is not a string, though
// json.Unmarshal would happily leave "" for it.
func (o object) str(key string) (string, bool) {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// obj returns a member that is a JSON object.
func (o object) obj(key string) (object, bool) {
	raw, ok := o[key]
	if !ok {
		return nil, false
	}
	return decodeObject(raw)
}

// integer returns a member that is a JSON integer (not null).
func (o object) integer(key string) (int64, bool) {
	raw, ok := o[key]
	if !ok || isNull(raw) {
		return 0, false
	}
	var n int64
	if json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	return n, true
}

// compact returns raw without insignificant whitespace, so values compare
// and print predictably.
func compact(raw []byte) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return bytes.Clone(raw)
	}
	return b.Bytes()
}

// idKey returns a key that is equal for two JSON-RPC ids exactly when they
// are the same JSON value: "init-é" and "init-\u00e9" are one string, 1 and
// 1.0 one number, but 1 and "1" differ. A request and its response may spell
// the id differently, since a peer re-encodes what it decoded.
func idKey(raw json.RawMessage) string {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return "?" + string(raw)
	}
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return "s" + v
	case json.Number:
		return "n" + numberKey(string(v))
	case bool:
		if v {
			return "true"
		}
		return "false"
	}
	// Objects and arrays are no JSON-RPC ids, but compare them as values
	// too: Marshal sorts object keys and re-encodes strings one way.
	b, err := json.Marshal(v)
	if err != nil {
		return "?" + string(raw)
	}
	return "j" + string(b)
}

// numberKey writes a JSON number literal in one canonical form, sign,
// significant digits and exponent ("-12e-1" for -1.20), without converting
// it to a float, which would merge large distinct integers.
func numberKey(lit string) string {
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mant, exp, _ := strings.Cut(strings.ToLower(lit), "e")
	e := 0
	if exp != "" {
		n, err := strconv.Atoi(exp)
		if err != nil || n > 1<<30 || n < -(1<<30) {
			return lit // out of any sane range: compare as written
		}
		e = n
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	e -= len(frac)
	if digits == "" {
		return "0"
	}
	trimmed := strings.TrimRight(digits, "0")
	e += len(digits) - len(trimmed)
	sign := ""
	if neg {
		sign = "-"
	}
	return sign + trimmed + "e" + strconv.Itoa(e)
}
