// Package protocol is ACP's compaction vocabulary: the wire shapes of
// compaction_update and compaction_summary_chunk (and the usage_update that
// follows a compaction), the tri-state Patch, and their encoders and
// decoder. It knows no lifecycle rule; emitter enforces those.
//
// A compaction_update creates the compaction entity on first sight and
// patches it afterwards; its optional fields are [Patch] values, which tell
// an omitted field (leave the stored value) from null (clear it) and from a
// value (replace it):
//
//	protocol.CompactionUpdate{CompactionID: "cmp_1", Status: protocol.Completed,
//		Summary: protocol.Set([]protocol.ContentBlock{protocol.Text(full)})}
//
// The encoders write exactly what encoding/json would, directly for the
// common shapes so the streaming path stays cheap; [UnmarshalUpdate] reads
// either update back, keeping unknown statuses, content blocks and fields
// verbatim.
package protocol
