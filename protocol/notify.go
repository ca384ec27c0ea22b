package protocol

import (
	"encoding/json"
	"slices"
)

// notificationPrefix opens every session/update notification
// AppendNotification writes, up to the session ID.
const notificationPrefix = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`

// MarshalUpdate returns json.Marshal(update), byte for byte. This
// package's own compaction updates already marshal to json.Marshal's exact
// output, so their MarshalJSON is called directly, without json.Marshal's
// reflection and its final pass over the bytes; any other update (a nil
// pointer included) goes through json.Marshal.
func MarshalUpdate(update any) ([]byte, error) {
	switch u := update.(type) {
	case *CompactionSummaryChunk:
		if u != nil {
			return u.MarshalJSON()
		}
	case *CompactionUpdate:
		if u != nil {
			return u.MarshalJSON()
		}
	case CompactionSummaryChunk:
		return u.MarshalJSON()
	case CompactionUpdate:
		return u.MarshalJSON()
	}
	return json.Marshal(update)
}

// AppendNotification appends to buf the JSON-RPC session/update
// notification of session sessionID that carries update, a session update
// as MarshalUpdate (or json.Marshal) encodes it, and returns the extended
// buffer. It writes exactly what json.Marshal writes for
//
//	{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":sessionID,"update":update}}
//
// (no trailing newline), encoded directly: update is copied as is, so it
// must be compact JSON, as json.Marshal's output is. buf grows at most
// once (for a session ID that needs no escaping, as session IDs do), so a
// nil buf costs one allocation.
func AppendNotification(buf []byte, sessionID string, update []byte) []byte {
	buf = slices.Grow(buf, len(notificationPrefix)+len(sessionID)+len(`"","update":}}`)+len(update))
	buf = append(buf, notificationPrefix...)
	buf = appendSessionID(buf, sessionID)
	buf = append(buf, `,"update":`...)
	buf = append(buf, update...)
	return append(buf, "}}"...)
}

// appendSessionID appends id as json.Marshal writes a string: directly
// when it needs no escaping, as session IDs do.
func appendSessionID(buf []byte, id string) []byte {
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return appendJSONString(buf, id)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, id...)
	return append(buf, '"')
}
