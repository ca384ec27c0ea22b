package sessionlog

import "github.com/acpcompact/acpcompact/emitter"

// recordAfter is the record's position in the runtime's history, the ID of
// the message it follows. emitter.Record has no After yet (it comes with
// emitter.After, on the way): until then every record is placed by its
// first entry in the file.
func recordAfter(emitter.Record) string { return "" }

// isRecordVersion reports whether decoding a record failed for its version
// (emitter's ErrRecordVersion, with the versioned JSON form on the way),
// rather than its bytes.
func isRecordVersion(error) bool { return false }
