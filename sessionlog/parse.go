package sessionlog

import (
	"bytes"
	"encoding/json"
)

// fields are the members of an entry line.
type fields struct {
	kind, id, after []byte // they alias the line
	// payload is the value of "data" or "record"; it aliases the line.
	payload []byte
}

// parseEntry reads an entry line whose checksum is correct. A line in the
// layout this package writes (the checksum, "kind", optional "id" and
// "after" without escapes, then "data" or "record" last) is read without
// a JSON scan: its checksum vouches for the bytes the writer made. Any
// other is read as JSON.
func parseEntry(line []byte) (fields, error) {
	if f, ok := parseLayout(line[prefixLen:]); ok {
		return f, nil
	}
	var env struct {
		Kind   string          `json:"kind"`
		ID     string          `json:"id"`
		After  string          `json:"after"`
		Data   json.RawMessage `json:"data"`
		Record json.RawMessage `json:"record"`
	}
	if err := json.Unmarshal(line, &env); err != nil {
		return fields{}, err
	}
	f := fields{kind: []byte(env.Kind), id: []byte(env.ID), after: []byte(env.After), payload: env.Data}
	switch env.Kind {
	case kindMessage, kindUpdate, kindData:
	default:
		f.payload = env.Record
	}
	return f, nil
}

// parseLayout reads the members of an entry line as this package writes
// them; ok is false for any other layout.
func parseLayout(b []byte) (f fields, ok bool) {
	var kind []byte
	if kind, b, ok = member(b, `"kind":"`); !ok {
		return f, false
	}
	f.kind = kind
	if v, rest, found := member(b, `,"id":"`); found {
		f.id, b = v, rest
	}
	if v, rest, found := member(b, `,"after":"`); found {
		f.after, b = v, rest
	}
	for _, key := range []string{`,"data":`, `,"record":`} {
		if rest, found := bytes.CutPrefix(b, []byte(key)); found && len(rest) > 1 && rest[len(rest)-1] == '}' {
			f.payload = rest[:len(rest)-1]
			return f, true
		}
	}
	return f, string(b) == "}"
}

// member reads a string member opened by key (which ends with the opening
// quote), if b begins with it and the string has no escapes.
func member(b []byte, key string) (v, rest []byte, ok bool) {
	b, ok = bytes.CutPrefix(b, []byte(key))
	if !ok {
		return nil, nil, false
	}
	end := bytes.IndexByte(b, '"')
	if end < 0 {
		return nil, nil, false
	}
	v = b[:end]
	for _, c := range v {
		if c == '\\' || c < 0x20 {
			return nil, nil, false
		}
	}
	return v, b[end+1:], true
}
