// Package jsonedit edits one member of a JSON-RPC session/update message
// in place of re-encoding it: only the objects on the way to the update
// are decoded, and every other member keeps its bytes as they came. The
// proxy and its agent recognisers use it to take a member out of an
// agent's line, or to put one in.
package jsonedit

import (
	"bytes"
	"encoding/json"
)

// Update returns msg, a session/update, with its params.update as edit
// leaves it; nil when msg cannot be read so, or when edit reports that
// nothing is left to send.
func Update(msg []byte, edit func(upd map[string]json.RawMessage) bool) []byte {
	var top, params, upd map[string]json.RawMessage
	if json.Unmarshal(msg, &top) != nil || json.Unmarshal(top["params"], &params) != nil ||
		json.Unmarshal(params["update"], &upd) != nil || !edit(upd) {
		return nil
	}
	params["update"] = Marshal(upd)
	top["params"] = Marshal(params)
	return Marshal(top)
}

// Set sets the member at path in obj (each name but the last an object
// member, made where absent or null) to v, keeping every other member's
// bytes. It reports false, and leaves obj as it was, when a member on the
// way is something other than an object: what is not ours to read stays
// as it came.
func Set(obj map[string]json.RawMessage, v json.RawMessage, path ...string) bool {
	if len(path) == 1 {
		obj[path[0]] = v
		return true
	}
	var inner map[string]json.RawMessage
	if raw, ok := obj[path[0]]; ok && json.Unmarshal(raw, &inner) != nil {
		return false
	}
	if inner == nil {
		inner = map[string]json.RawMessage{}
	}
	if !Set(inner, v, path[1:]...) {
		return false
	}
	obj[path[0]] = Marshal(inner)
	return true
}

// Marshal encodes a JSON object of raw members without HTML escaping, so
// that what the proxy rewrites keeps the agent's text as close to the
// original as a re-encoding can, and never grows by escaping what the
// agent did not escape.
func Marshal(m map[string]json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(m) // raw values came from json.Unmarshal, so they are valid
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// Unescape undoes, in b, a compact JSON value, the escapes encoding/json
// adds that the agent did not need: \u003c, \u003e, \u0026 (its HTML
// escaping) and \u2028, \u2029 (its JSONP escaping), written as the
// characters they stand for, which every JSON reader reads the same. A
// summary of them would otherwise grow sixfold on its way through the
// proxy. It rewrites b in place and returns it; b without such an escape
// is returned as is.
func Unescape(b []byte) []byte {
	i := bytes.Index(b, []byte(`\u`))
	if i < 0 {
		return b
	}
	out := b[:0]
	for j := 0; j < len(b); {
		c := b[j]
		if c != '\\' || j+1 >= len(b) {
			out = append(out, c)
			j++
			continue
		}
		if b[j+1] != 'u' || j+6 > len(b) {
			out = append(out, c, b[j+1]) // a two-byte escape, kept
			j += 2
			continue
		}
		switch string(b[j+2 : j+6]) {
		case "003c":
			out = append(out, '<')
		case "003e":
			out = append(out, '>')
		case "0026":
			out = append(out, '&')
		case "2028":
			out = append(out, "\u2028"...)
		case "2029":
			out = append(out, "\u2029"...)
		default:
			out = append(out, b[j:j+6]...)
		}
		j += 6
	}
	return out
}
