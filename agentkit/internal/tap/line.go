package tap

import "github.com/acpcompact/acpcompact/protocol"

// UpdateLine returns the session/update notification carrying update:
// protocol.MarshalUpdate's encoding of update in protocol.AppendNotification's
// envelope.
func UpdateLine(sessionID string, update any) ([]byte, error) {
	u, err := protocol.MarshalUpdate(update)
	if err != nil {
		return nil, err
	}
	return protocol.AppendNotification(nil, sessionID, u), nil
}
