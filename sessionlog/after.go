package sessionlog

import (
	"errors"

	"github.com/acpcompact/acpcompact/emitter"
)

// recordAfter is the record's position in the runtime's history: the ID of
// the message it follows (emitter.After at Start).
func recordAfter(rec emitter.Record) string { return rec.After }

// isRecordVersion reports whether decoding a record failed for its version
// (emitter.ErrRecordVersion) rather than its bytes.
func isRecordVersion(err error) bool { return errors.Is(err, emitter.ErrRecordVersion) }
