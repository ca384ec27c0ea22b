package fallback_test

import (
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/require"
)

func TestMarkerIsASessionInfoUpdateCarryingOneNamespacedRecord(t *testing.T) {
	ups := renderEvents(t, fallback.Marker(),
		started("cmp_1", protocol.Idle), settled("cmp_1", protocol.Completed),
		started("cmp_2", protocol.Auto), failedWith("cmp_2", "provider overloaded"),
		started("cmp_3", protocol.Manual), settled("cmp_3", protocol.Cancelled),
	)
	for _, u := range ups {
		require.Equal(t, "session_info_update", u["sessionUpdate"], "sessionUpdate")
		require.NotContains(t, u, "title", "the marker must not touch the session's title")
		meta, _ := u["_meta"].(map[string]any)
		require.Len(t, meta, 1, "_meta")
	}
	want := []map[string]any{
		{"status": "started", "compactionId": "cmp_1", "trigger": "idle"},
		{"status": "completed", "compactionId": "cmp_1", "trigger": "auto"},
		{"status": "started", "compactionId": "cmp_2", "trigger": "auto"},
		{"status": "failed", "compactionId": "cmp_2", "trigger": "auto", "error": "provider overloaded"},
		{"status": "started", "compactionId": "cmp_3", "trigger": "manual"},
		{"status": "cancelled", "compactionId": "cmp_3", "trigger": "auto"},
	}
	require.Equal(t, want, markers(ups, fallback.DefaultMarkerKey), "markers")
}

func TestMarkerErrorAppearsOnlyForAFailureOrCancelWithText(t *testing.T) {
	cancelled := settled("cmp_2", protocol.Cancelled)
	cancelled.Error = protocol.Set("stopped by the user")
	completed := settled("cmp_3", protocol.Completed)
	completed.Error = protocol.Set("stale text a completion must not show")
	ups := renderEvents(t, fallback.Marker(), settled("cmp_1", protocol.Failed), cancelled, completed)
	m := markers(ups, fallback.DefaultMarkerKey)
	require.NotContains(t, m[0], "error", "a failure without text has an error key (no text, no error key)")
	require.Equal(t, "stopped by the user", m[1]["error"], "cancel with text: error")
	require.NotContains(t, m[2], "error", "a completion has an error key")
}

func TestMarkerKeyIsConfigurable(t *testing.T) {
	ups := renderEvents(t, fallback.Marker(fallback.WithKey("example.com/compaction"), fallback.WithKey("")), started("cmp_1", protocol.Auto))
	require.Len(t, markers(ups, "example.com/compaction"), 1, "markers under example.com/compaction ; an empty key is ignored, the last non-empty one wins")
	require.Empty(t, markers(ups, fallback.DefaultMarkerKey), "markers under the default key")
}

func TestMarkerKeepsTheEventMetaAndNeverLosesItsOwnKey(t *testing.T) {
	ev := settled("cmp_1", protocol.Completed)
	ev.Meta = protocol.Meta{
		"example.com/usage":       jsonRaw(`{"tokensAfter":42000}`),
		fallback.DefaultMarkerKey: jsonRaw(`"an emitter record under the marker's own key"`),
	}
	for _, r := range []emitter.Renderer{fallback.Marker(), fallback.OpencodeMarker()} {
		ups := renderEvents(t, r, ev)
		meta := ups[0]["_meta"].(map[string]any)
		require.Equal(t, map[string]any{"tokensAfter": float64(42000)}, meta["example.com/usage"], "%T: _meta example.com/usage", r)
	}
	m := markers(renderEvents(t, fallback.Marker(), ev), fallback.DefaultMarkerKey)
	require.Len(t, m, 1, "markers ; the marker's key wins a collision")
	require.Equal(t, "completed", m[0]["status"], "marker status")
	require.Equal(t, jsonRaw(`"an emitter record under the marker's own key"`), ev.Meta[fallback.DefaultMarkerKey], "the event's map is not written: %s", fallback.DefaultMarkerKey)
}

func TestMarkerNeverSendsSummariesAndHeartbeatsRepeatTheStart(t *testing.T) {
	done := settled("cmp_1", protocol.Completed)
	done.Summary = protocol.Set([]protocol.ContentBlock{protocol.Text("secret summary")})
	for _, r := range []emitter.Renderer{fallback.Marker(), fallback.OpencodeMarker()} {
		ups := renderEvents(t, r,
			started("cmp_1", protocol.Auto),
			emitter.Event{Kind: emitter.EventChunk, ID: "cmp_1", Status: protocol.InProgress, Content: protocol.Text("secret chunk")},
			emitter.Event{Kind: emitter.EventHeartbeat, ID: "cmp_1", Trigger: protocol.Auto, Status: protocol.InProgress},
			done,
		)
		require.Len(t, ups, 3, "%T (chunks are not rendered)", r)
		require.Equal(t, ups[1], ups[0], "%T: a heartbeat repeats the start marker, harmless to a client keyed by ID:\nstart     %v\nheartbeat %v", r, ups[0], ups[1])
		require.NotContains(t, string(mustJSON(t, ups)), "secret", "%T: a summary or chunk reached the wire", r)
	}
}

func TestOpencodeMarkerReproducesOpencodesExactMarker(t *testing.T) {
	cancelled := settled("cmp_3", protocol.Cancelled)
	cancelled.Trigger = protocol.Manual
	idle := started("cmp_4", protocol.Idle)
	ups := renderEvents(t, fallback.OpencodeMarker(),
		started("msg_1", protocol.Manual), settled("msg_1", protocol.Completed),
		failedWith("msg_2", "provider overloaded"),
		settled("msg_5", protocol.Failed),
		cancelled, idle,
	)
	for _, u := range ups {
		meta, _ := u["_meta"].(map[string]any)
		require.Len(t, meta, 1, "_meta")
	}
	want := []map[string]any{
		{"status": "started", "messageId": "msg_1", "reason": "manual"},
		{"status": "completed", "messageId": "msg_1", "reason": "auto"},
		{"status": "failed", "messageId": "msg_2", "reason": "auto", "error": map[string]any{"type": "compaction.failed", "message": "provider overloaded"}},
		{"status": "failed", "messageId": "msg_5", "reason": "auto", "error": map[string]any{"type": "compaction.failed", "message": "Compaction failed"}},
		{"status": "failed", "messageId": "cmp_3", "reason": "manual", "error": map[string]any{"type": "aborted", "message": "Compaction cancelled"}},
		{"status": "started", "messageId": "cmp_4", "reason": "auto"},
	}
	require.Equal(t, want, markers(ups, fallback.OpencodeMarkerKey), "a cancel is failed/aborted, idle is auto; markers")
}

func TestOpencodeMarkerReplaysOneTerminalMarker(t *testing.T) {
	ups := renderEvents(t, fallback.OpencodeMarker(), replayed("msg_1", protocol.Completed), replayed("msg_2", protocol.Cancelled))
	m := markers(ups, fallback.OpencodeMarkerKey)
	require.Equal(t, "completed", m[0]["status"], "replayed completion: status")
	require.Equal(t, "failed", m[1]["status"], "replayed cancel: status")
	require.Equal(t, "aborted", m[1]["error"].(map[string]any)["type"], "replayed cancel: error type")
}
