package fallback_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/protocol"
)

func TestMarkerIsASessionInfoUpdateCarryingOneNamespacedRecord(t *testing.T) {
	ups := renderEvents(t, fallback.Marker(),
		started("cmp_1", protocol.Idle), settled("cmp_1", protocol.Completed),
		started("cmp_2", protocol.Auto), failedWith("cmp_2", "provider overloaded"),
		started("cmp_3", protocol.Manual), settled("cmp_3", protocol.Cancelled),
	)
	for _, u := range ups {
		if got := u["sessionUpdate"]; got != "session_info_update" {
			t.Fatalf("sessionUpdate: got %v, want session_info_update", got)
		}
		if _, ok := u["title"]; ok {
			t.Fatalf("the marker must not touch the session's title: %v", u)
		}
		if meta, _ := u["_meta"].(map[string]any); len(meta) != 1 {
			t.Fatalf("_meta: got %v, want one key", u["_meta"])
		}
	}
	want := []map[string]any{
		{"status": "started", "compactionId": "cmp_1", "trigger": "idle"},
		{"status": "completed", "compactionId": "cmp_1", "trigger": "auto"},
		{"status": "started", "compactionId": "cmp_2", "trigger": "auto"},
		{"status": "failed", "compactionId": "cmp_2", "trigger": "auto", "error": "provider overloaded"},
		{"status": "started", "compactionId": "cmp_3", "trigger": "manual"},
		{"status": "cancelled", "compactionId": "cmp_3", "trigger": "auto"},
	}
	if got := markers(ups, fallback.DefaultMarkerKey); !reflect.DeepEqual(got, want) {
		t.Fatalf("markers:\ngot  %v\nwant %v", got, want)
	}
}

func TestMarkerErrorAppearsOnlyForAFailureOrCancelWithText(t *testing.T) {
	cancelled := settled("cmp_2", protocol.Cancelled)
	cancelled.Error = protocol.Set("stopped by the user")
	completed := settled("cmp_3", protocol.Completed)
	completed.Error = protocol.Set("stale text a completion must not show")
	ups := renderEvents(t, fallback.Marker(), settled("cmp_1", protocol.Failed), cancelled, completed)
	m := markers(ups, fallback.DefaultMarkerKey)
	if _, ok := m[0]["error"]; ok {
		t.Fatalf("a failure without text has an error key (no text, no error key): %v", m[0])
	}
	if got := m[1]["error"]; got != "stopped by the user" {
		t.Fatalf("cancel with text: error got %v, want %q", got, "stopped by the user")
	}
	if _, ok := m[2]["error"]; ok {
		t.Fatalf("a completion has an error key: %v", m[2])
	}
}

func TestMarkerNamesTheChildSessionOnlyForAChildsCompaction(t *testing.T) {
	ev := started("cmp_1", protocol.Auto)
	ev.ChildSessionID = "sub_1"
	done := settled("cmp_1", protocol.Completed)
	done.ChildSessionID = "sub_1"
	m := markers(renderEvents(t, fallback.Marker(), ev, done, started("cmp_2", protocol.Auto)), fallback.DefaultMarkerKey)
	for i := range 2 {
		if got := m[i]["childSessionId"]; got != "sub_1" {
			t.Fatalf("marker %d of the child's compaction: childSessionId got %v, want sub_1", i, got)
		}
	}
	if _, ok := m[2]["childSessionId"]; ok {
		t.Fatalf("the session's own compaction names a child: %v", m[2])
	}
}

func TestMarkerKeyIsConfigurable(t *testing.T) {
	ups := renderEvents(t, fallback.Marker(fallback.WithKey("example.com/compaction"), fallback.WithKey("")), started("cmp_1", protocol.Auto))
	if m := markers(ups, "example.com/compaction"); len(m) != 1 {
		t.Fatalf("markers under example.com/compaction: got %v, want one; an empty key is ignored, the last non-empty one wins", m)
	}
	if m := markers(ups, fallback.DefaultMarkerKey); len(m) != 0 {
		t.Fatalf("markers under the default key: got %v, want none", m)
	}
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
		if got, want := meta["example.com/usage"], map[string]any{"tokensAfter": float64(42000)}; !reflect.DeepEqual(got, want) {
			t.Fatalf("%T: _meta example.com/usage: got %v, want %v", r, got, want)
		}
	}
	m := markers(renderEvents(t, fallback.Marker(), ev), fallback.DefaultMarkerKey)
	if len(m) != 1 {
		t.Fatalf("markers: got %v, want one; the marker's key wins a collision", m)
	}
	if got := m[0]["status"]; got != "completed" {
		t.Fatalf("marker status: got %v, want completed", got)
	}
	if got, want := ev.Meta[fallback.DefaultMarkerKey], jsonRaw(`"an emitter record under the marker's own key"`); !reflect.DeepEqual(got, want) {
		t.Fatalf("the event's map is not written: %s got %s, want %s", fallback.DefaultMarkerKey, got, want)
	}
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
		if len(ups) != 3 {
			t.Fatalf("%T: got %d updates, want 3 (chunks are not rendered): %v", r, len(ups), ups)
		}
		if !reflect.DeepEqual(ups[0], ups[1]) {
			t.Fatalf("%T: a heartbeat repeats the start marker, harmless to a client keyed by ID:\nstart     %v\nheartbeat %v", r, ups[0], ups[1])
		}
		if wire := string(mustJSON(t, ups)); strings.Contains(wire, "secret") {
			t.Fatalf("%T: a summary or chunk reached the wire: %s", r, wire)
		}
	}
}

func TestOpencodeMarkerReproducesOpencodesExactMarker(t *testing.T) {
	cancelled := settled("cmp_3", protocol.Cancelled)
	cancelled.Trigger = protocol.Manual
	child := started("cmp_4", protocol.Idle)
	child.ChildSessionID = "sub_1"
	ups := renderEvents(t, fallback.OpencodeMarker(),
		started("msg_1", protocol.Manual), settled("msg_1", protocol.Completed),
		failedWith("msg_2", "provider overloaded"),
		settled("msg_5", protocol.Failed),
		cancelled, child,
	)
	for _, u := range ups {
		if meta, _ := u["_meta"].(map[string]any); len(meta) != 1 {
			t.Fatalf("_meta: got %v, want one key", u["_meta"])
		}
	}
	want := []map[string]any{
		{"status": "started", "messageId": "msg_1", "reason": "manual"},
		{"status": "completed", "messageId": "msg_1", "reason": "auto"},
		{"status": "failed", "messageId": "msg_2", "reason": "auto", "error": map[string]any{"type": "compaction.failed", "message": "provider overloaded"}},
		{"status": "failed", "messageId": "msg_5", "reason": "auto", "error": map[string]any{"type": "compaction.failed", "message": "Compaction failed"}},
		{"status": "failed", "messageId": "cmp_3", "reason": "manual", "error": map[string]any{"type": "aborted", "message": "Compaction cancelled"}},
		{"status": "started", "messageId": "cmp_4", "reason": "auto"},
	}
	if got := markers(ups, fallback.OpencodeMarkerKey); !reflect.DeepEqual(got, want) {
		t.Fatalf("a cancel is failed/aborted, idle is auto, children are not named; markers:\ngot  %v\nwant %v", got, want)
	}
}

func TestOpencodeMarkerReplaysOneTerminalMarker(t *testing.T) {
	ups := renderEvents(t, fallback.OpencodeMarker(), replayed("msg_1", protocol.Completed), replayed("msg_2", protocol.Cancelled))
	m := markers(ups, fallback.OpencodeMarkerKey)
	if got := m[0]["status"]; got != "completed" {
		t.Fatalf("replayed completion: status got %v, want completed", got)
	}
	if got := m[1]["status"]; got != "failed" {
		t.Fatalf("replayed cancel: status got %v, want failed", got)
	}
	if got := m[1]["error"].(map[string]any)["type"]; got != "aborted" {
		t.Fatalf("replayed cancel: error type got %v, want aborted", got)
	}
}
