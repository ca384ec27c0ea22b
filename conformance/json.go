package conformance

import (
	"bytes"
	"encoding/json"
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
