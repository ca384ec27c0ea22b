// Package fallback shows context compaction to ACP v1 clients that did not
// advertise clientCapabilities.session.compaction, which must never receive
// compaction_update or compaction_summary_chunk.
//
// Each renderer here implements emitter.Renderer and is installed with
// emitter.WithFallback. The
// emitter keeps the lifecycle rules; a renderer only decides what a started,
// settled or replayed compaction looks like in updates every v1 client
// already accepts:
//
//   - Text: agent_message_chunk prose, in the style of existing agents
//     ("Compacting...", "Compacting completed.").
//   - Marker: a session_info_update whose _meta carries one namespaced
//     record; OpencodeMarker reproduces opencode's exact marker.
//   - ToolCall: a "Compact conversation" tool call that always settles.
//   - None: nothing at all.
//   - Compose: several of the above (or an agent's own renderer) in order.
//
// Every renderer gives each started compaction exactly one terminal form,
// live and on replay, and a replayed compaction has no start form. The forms
// are ACP v1 session updates, valid against the official v1 schema; v2 has
// no capability gate and always gets the standard updates. ByName builds the
// renderers from a CLI flag value.
package fallback
