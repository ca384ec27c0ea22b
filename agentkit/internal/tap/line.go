package tap

import (
	"encoding/json"

	"github.com/acpcompact/acpcompact/protocol"
)

// UpdateLine returns the session/update notification carrying update.
func UpdateLine(sessionID string, update any) ([]byte, error) {
	u, err := marshalUpdate(update)
	if err != nil {
		return nil, err
	}
	return appendUpdate(make([]byte, 0, len(updatePrefix)+len(sessionID)+len(u)+16), sessionID, u), nil
}

// appendUpdate appends the session/update notification of sessionID
// carrying the marshalled update u.
func appendUpdate(line []byte, sessionID string, u []byte) []byte {
	line = append(line, updatePrefix...)
	line = appendSessionID(line, sessionID)
	line = append(line, `,"update":`...)
	line = append(line, u...)
	return append(line, "}}"...)
}

const updatePrefix = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`

// marshalUpdate is json.Marshal(update). The emitter's own update types
// already marshal to json.Marshal's exact output, so their MarshalJSON is
// called directly, without json.Marshal's reflection and its final pass
// over the bytes.
func marshalUpdate(update any) ([]byte, error) {
	switch u := update.(type) {
	case *protocol.CompactionSummaryChunk:
		if u != nil {
			return u.MarshalJSON()
		}
	case *protocol.CompactionUpdate:
		if u != nil {
			return u.MarshalJSON()
		}
	case protocol.CompactionSummaryChunk:
		return u.MarshalJSON()
	case protocol.CompactionUpdate:
		return u.MarshalJSON()
	}
	return json.Marshal(update)
}

// appendSessionID appends id as json.Marshal writes a string: directly
// when it needs no escaping, as session IDs do.
func appendSessionID(buf []byte, id string) []byte {
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(id) // a string always marshals
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, id...)
	return append(buf, '"')
}
