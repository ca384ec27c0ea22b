package emitter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acpcompact/acpcompact/protocol"
)

// recordVersion is the latest version of Record's JSON form (the "v"
// key): version 2 writes details.knownLoss as objects ({kind, value,
// where}), where version 1 wrote strings. MarshalJSON writes the oldest
// version that holds the record (see there).
const recordVersion = 2

// ErrRecordVersion: a Record's JSON has no version this package reads (a
// future major version, or no "v" at all); nothing was decoded. A store
// that meets it was written by a newer acpcompact: upgrade the reader,
// never rewrite the record.
var ErrRecordVersion = errors.New("emitter: unsupported record version")

// recordV1 is version 1 of Record's JSON form. The field names are ACP's
// where ACP has one (compactionId, status, summary, error, _meta), camelCase
// otherwise. Changing a name or a meaning is a new version; adding an
// optional field is not (readers ignore what they do not know). Its head
// and tail are apart because MarshalJSON writes the summary between them
// itself.
type recordV1 struct {
	recordHead
	Summary []protocol.ContentBlock `json:"summary,omitempty"`
	recordTail
}

type recordHead struct {
	V           int              `json:"v"`
	ID          protocol.ID      `json:"compactionId"`
	Status      protocol.Status  `json:"status"`
	Trigger     protocol.Trigger `json:"trigger,omitempty"`
	After       string           `json:"after,omitempty"`
	Displayable bool             `json:"userDisplayable,omitempty"`
}

type recordTail struct {
	Error   string        `json:"error,omitempty"`
	Meta    protocol.Meta `json:"_meta,omitempty"`
	Details *Details      `json:"details,omitempty"`
}

// checkRecord refuses a record without what a replay needs, written or
// read.
func checkRecord(id protocol.ID, status protocol.Status) error {
	if id == "" {
		return fmt.Errorf("emitter: record: %w", protocol.ErrInvalidID)
	}
	if status == "" {
		return errors.New("emitter: record: status must be a non-empty string")
	}
	return nil
}

// MarshalJSON writes the record's versioned JSON form, for stores:
//
//	{"v":1,"compactionId":"cmp_001","status":"completed","trigger":"auto",
//	 "after":"msg_41","userDisplayable":true,
//	 "summary":[{"type":"text","text":"## Retained context"}],
//	 "_meta":{...},"details":{...}}
//
// "v" is the form's version, always present: 2 when the record carries
// known losses (details.knownLoss, objects since version 2), else 1, so
// that a reader of version 1 reads every record it can. compactionId and
// status are
// required (a record without them cannot be replayed: MarshalJSON refuses
// it, wrapping protocol.ErrInvalidID for the ID). The others are left out
// when empty: trigger; after (Record.After); userDisplayable
// (Record.Displayable, when true); summary (ACP content blocks; absent
// means none, which Replay sends as summary: null); error (the text the
// client was shown); _meta (the compaction's ACP _meta); details (Details,
// as it travels under the record key of _meta). The session is not part
// of the form: a record belongs to the session it is stored under
// (OnFinalRecord's sessionID), and Session.Replay replays it into the
// session it is called on.
func (r Record) MarshalJSON() ([]byte, error) {
	if err := checkRecord(r.ID, r.Status); err != nil {
		return nil, err
	}
	version := 1
	if r.Details != nil && len(r.Details.KnownLoss) > 0 {
		version = recordVersion
	}
	head, err := json.Marshal(recordHead{V: version, ID: r.ID, Status: r.Status, Trigger: r.Trigger, After: r.After, Displayable: r.Displayable})
	if err != nil {
		return nil, err
	}
	tail, err := json.Marshal(recordTail{Error: r.Error, Meta: r.Meta, Details: r.Details})
	if err != nil {
		return nil, err
	}
	// recordV1's members, in its order: the head, the summary, the tail.
	// The summary, which may hold tens of thousands of streamed blocks, is
	// encoded by protocol without reflection and appended as it is (a
	// json.RawMessage would be rescanned byte by byte).
	out := make([]byte, 0, len(head)+len(tail)+summaryBytes(r.Summary)+16)
	out = append(out, head[:len(head)-1]...)
	if len(r.Summary) > 0 {
		out = append(out, `,"summary":`...)
		if out, err = protocol.AppendBlocks(out, r.Summary); err != nil {
			return nil, fmt.Errorf("emitter: record: %w", err)
		}
	}
	if len(tail) > 2 {
		out = append(out, ',')
		out = append(out, tail[1:len(tail)-1]...)
	}
	return append(out, '}'), nil
}

// summaryBytes estimates the encoded size of blocks, so that the buffer
// grows once.
func summaryBytes(blocks []protocol.ContentBlock) int {
	n := 2
	for _, b := range blocks {
		n += len(b.Text) + len(b.Type) + 24
	}
	return n
}

// UnmarshalJSON reads a record's JSON form: versions 1 and 2 (version 1's
// knownLoss strings read as notes, Loss's Kind "note"). Unknown fields are ignored, and not kept
// (re-encoding drops them), so a newer writer may add optional fields
// without a new version. A "v" this package does not read (a future
// version, or none) is refused with an error wrapping ErrRecordVersion;
// a record without compactionId, with an error wrapping
// protocol.ErrInvalidID. JSON null leaves the record unchanged, as
// encoding/json's convention is.
func (r *Record) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil
	}
	var head struct {
		V json.RawMessage `json:"v"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return fmt.Errorf("emitter: record: %w", err)
	}
	if head.V == nil {
		return fmt.Errorf("%w: the record has no \"v\"", ErrRecordVersion)
	}
	var version int
	if err := json.Unmarshal(head.V, &version); err != nil {
		return fmt.Errorf("%w: \"v\" is %s, not an integer", ErrRecordVersion, head.V)
	}
	switch version {
	case 1, 2:
		// Version 2 differs only in knownLoss, which Loss reads in
		// either form.
		return r.readV1(data)
	}
	return fmt.Errorf("%w: version %d (this acpcompact reads version %d)", ErrRecordVersion, version, recordVersion)
}

// readV1 decodes versions 1 and 2.
func (r *Record) readV1(data []byte) error {
	var v recordV1
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("emitter: record: %w", err)
	}
	if err := checkRecord(v.ID, v.Status); err != nil {
		return err
	}
	out := Record{ID: v.ID, Status: v.Status, Trigger: v.Trigger, After: v.After, Displayable: v.Displayable,
		Error: v.Error, Details: v.Details}
	// Empty and absent read the same, as Replay treats them the same.
	if len(v.Summary) > 0 {
		out.Summary = v.Summary
	}
	if len(v.Meta) > 0 {
		out.Meta = v.Meta
	}
	*r = out
	return nil
}
