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
