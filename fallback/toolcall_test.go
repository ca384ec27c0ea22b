package fallback_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/protocol"
)

// contentTexts returns the text of each tool call content item.
func contentTexts(u map[string]any) []string {
	items, _ := u["content"].([]any)
	out := []string{}
	for _, it := range items {
		m := it.(map[string]any)
		if m["type"] != "content" {
			continue
		}
		c := m["content"].(map[string]any)
		out = append(out, c["text"].(string))
	}
	return out
}

func strip(u map[string]any) map[string]any {
	delete(u, "·session")
	return u
}

func TestToolCallOpensAThinkToolCallWithADeterministicID(t *testing.T) {
	ups := renderEvents(t, fallback.ToolCall(), started("cmp_1", protocol.Auto), started("cmp_1", protocol.Auto))
	want := map[string]any{
		"sessionUpdate": "tool_call", "toolCallId": "compact-cmp_1", "title": "Compact conversation",
		"kind": "think", "status": "in_progress",
	}
	if got := strip(ups[0]); !reflect.DeepEqual(got, want) {
		t.Fatalf("tool call:\ngot  %v\nwant %v", got, want)
	}
	if got := strip(ups[1]); !reflect.DeepEqual(got, ups[0]) {
		t.Fatalf("the same compaction ID always gives the same tool call ID:\nfirst  %v\nsecond %v", ups[0], got)
	}
}

func TestToolCallAlwaysSettlesCompletedOrFailedWithTheReason(t *testing.T) {
	ups := renderEvents(t, fallback.ToolCall(),
		settled("cmp_1", protocol.Completed),
		failedWith("cmp_2", "provider overloaded"),
		settled("cmp_3", protocol.Cancelled),
		settled("cmp_4", protocol.Failed),
	)
	if got, want := strip(ups[0]), (map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "compact-cmp_1", "status": "completed"}); !reflect.DeepEqual(got, want) {
		t.Fatalf("completion:\ngot  %v\nwant %v", got, want)
	}
	want := []struct{ id, text string }{
		{"compact-cmp_2", "Compaction failed: provider overloaded"},
		{"compact-cmp_3", "Compaction cancelled"}, // no cancelled tool status in ACP: a cancel must still end
		{"compact-cmp_4", "Compaction failed"},
	}
	for i, w := range want {
		u := ups[i+1]
		if got := u["sessionUpdate"]; got != "tool_call_update" {
			t.Fatalf("%s: sessionUpdate got %v, want tool_call_update", w.id, got)
		}
		if got := u["toolCallId"]; got != w.id {
			t.Fatalf("update %d: toolCallId got %v, want %s", i+1, got, w.id)
		}
		if got := u["status"]; got != "failed" {
			t.Fatalf("%s: status got %v, want failed", w.id, got)
		}
		if got := contentTexts(u); !slices.Equal(got, []string{w.text}) {
			t.Fatalf("%s: content got %q, want %q", w.id, got, []string{w.text})
		}
	}
}

func TestToolCallShowsNothingOfChunksByDefault(t *testing.T) {
	chunk := emitter.Event{Kind: emitter.EventChunk, ID: "cmp_1", Status: protocol.InProgress, Content: protocol.Text("secret")}
	done := settled("cmp_1", protocol.Completed)
	done.Summary = protocol.Set([]protocol.ContentBlock{protocol.Text("secret")})
	ups := renderEvents(t, fallback.ToolCall(), started("cmp_1", protocol.Auto), chunk, done)
	if len(ups) != 2 {
		t.Fatalf("got %d updates, want 2: %v", len(ups), ups)
	}
	if wire := string(mustJSON(t, ups)); strings.Contains(wire, "secret") {
		t.Fatalf("a chunk or summary reached the wire: %s", wire)
	}
}

func TestToolCallSummaryContentIsOptIn(t *testing.T) {
	chunk := func(s string) emitter.Event {
		return emitter.Event{Kind: emitter.EventChunk, ID: "cmp_1", Status: protocol.InProgress, Content: protocol.Text(s)}
	}
	r := fallback.ToolCall(fallback.WithSummaryContent())
	t.Run("each chunk replaces the content with everything so far", func(t *testing.T) {
		ups := renderEvents(t, r, started("cmp_1", protocol.Auto), chunk("## Retained"), chunk(" context"), settled("cmp_1", protocol.Completed))
		if got, want := contentTexts(ups[1]), []string{"## Retained"}; !slices.Equal(got, want) {
			t.Fatalf("after the first chunk: content got %q, want %q", got, want)
		}
		if got, want := contentTexts(ups[2]), []string{"## Retained context"}; !slices.Equal(got, want) {
			t.Fatalf("after the second chunk: content got %q, want %q", got, want)
		}
		if _, ok := ups[1]["status"]; ok {
			t.Fatalf("a content update leaves the status alone: %v", ups[1])
		}
		if _, ok := ups[3]["content"]; ok {
			t.Fatalf("an omitted summary keeps the streamed content: %v", ups[3])
		}
	})
	t.Run("a final summary replaces it and null clears it", func(t *testing.T) {
		done := settled("cmp_1", protocol.Completed)
		done.Summary = protocol.Set([]protocol.ContentBlock{protocol.Text("final")})
		cleared := settled("cmp_2", protocol.Completed)
		cleared.Summary = protocol.Null[[]protocol.ContentBlock]()
		ups := renderEvents(t, r, done, cleared)
		if got, want := contentTexts(ups[0]), []string{"final"}; !slices.Equal(got, want) {
			t.Fatalf("a final summary: content got %q, want %q", got, want)
		}
		if got := ups[1]["content"]; !reflect.DeepEqual(got, []any{}) {
			t.Fatalf("a null summary: content got %#v, want []", got)
		}
	})
	t.Run("a failure replaces partial content with the reason", func(t *testing.T) {
		ups := renderEvents(t, r, started("cmp_1", protocol.Auto), chunk("partial"), failedWith("cmp_1", "provider overloaded"))
		if got, want := contentTexts(ups[2]), []string{"Compaction failed: provider overloaded"}; !slices.Equal(got, want) {
			t.Fatalf("content got %q, want %q", got, want)
		}
	})
}

func TestToolCallReplayIsOneToolCallAlreadyInItsTerminalStatus(t *testing.T) {
	failed := replayed("cmp_2", protocol.Failed)
	failed.Error = protocol.Set("context window still exceeded")
	ups := renderEvents(t, fallback.ToolCall(), replayed("cmp_1", protocol.Completed), failed, replayed("cmp_3", protocol.Cancelled))
	if got, want := kinds(ups), []string{"tool_call", "tool_call", "tool_call"}; !slices.Equal(got, want) {
		t.Fatalf("kinds: got %q, want %q", got, want)
	}
	want := map[string]any{
		"sessionUpdate": "tool_call", "toolCallId": "compact-cmp_1", "title": "Compact conversation",
		"kind": "think", "status": "completed",
	}
	if got := strip(ups[0]); !reflect.DeepEqual(got, want) {
		t.Fatalf("replayed completion:\ngot  %v\nwant %v", got, want)
	}
	for _, w := range []struct {
		i    int
		text string
	}{{1, "Compaction failed: context window still exceeded"}, {2, "Compaction cancelled"}} {
		if got := ups[w.i]["status"]; got != "failed" {
			t.Fatalf("replay %d: status got %v, want failed", w.i, got)
		}
		if got := contentTexts(ups[w.i]); !slices.Equal(got, []string{w.text}) {
			t.Fatalf("replay %d: content got %q, want %q", w.i, got, []string{w.text})
		}
	}
}

func TestToolCallHeartbeatIsANoOpInProgressUpdate(t *testing.T) {
	ups := renderEvents(t, fallback.ToolCall(), emitter.Event{Kind: emitter.EventHeartbeat, ID: "cmp_1", Status: protocol.InProgress})
	if got, want := strip(ups[0]), (map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "compact-cmp_1", "status": "in_progress"}); !reflect.DeepEqual(got, want) {
		t.Fatalf("heartbeat:\ngot  %v\nwant %v", got, want)
	}
}

func TestToolCallOfAChildSessionCannotCollideWithAnotherChilds(t *testing.T) {
	a, b := started("cmp_1", protocol.Auto), started("cmp_1", protocol.Auto)
	a.ChildSessionID, b.ChildSessionID = "sub_a", "sub_b"
	ups := renderEvents(t, fallback.ToolCall(), a, b)
	if got := ups[0]["toolCallId"]; got != "compact-sub_a:cmp_1" {
		t.Fatalf("sub_a's toolCallId: got %v, want compact-sub_a:cmp_1", got)
	}
	if got := ups[1]["toolCallId"]; got != "compact-sub_b:cmp_1" {
		t.Fatalf("sub_b's toolCallId: got %v, want compact-sub_b:cmp_1", got)
	}
}

func TestToolCallWordingIsConfigurableAndCarriesTheEventMeta(t *testing.T) {
	r := fallback.ToolCall(fallback.WithToolCallWording(fallback.ToolCallWording{Title: "Summarise history", Cancelled: "Stopped"}))
	start := started("cmp_1", protocol.Auto)
	start.Meta = protocol.Meta{"example.com/trace": jsonRaw(`"span"`)}
	end := settled("cmp_1", protocol.Cancelled)
	end.Meta = protocol.Meta{"example.com/usage": jsonRaw(`1`)}
	ups := renderEvents(t, r, start, end, failedWith("cmp_2", "boom"))
	if got := ups[0]["title"]; got != "Summarise history" {
		t.Fatalf("title: got %v, want %q", got, "Summarise history")
	}
	if got, want := ups[0]["_meta"], (map[string]any{"example.com/trace": "span"}); !reflect.DeepEqual(got, want) {
		t.Fatalf("the start's _meta: got %v, want %v", got, want)
	}
	if got, want := contentTexts(ups[1]), []string{"Stopped"}; !slices.Equal(got, want) {
		t.Fatalf("cancel content: got %q, want %q", got, want)
	}
	if got, want := ups[1]["_meta"], (map[string]any{"example.com/usage": float64(1)}); !reflect.DeepEqual(got, want) {
		t.Fatalf("the outcome's _meta: got %v, want %v", got, want)
	}
	if got, want := contentTexts(ups[2]), []string{"Compaction failed: boom"}; !slices.Equal(got, want) {
		t.Fatalf("unset fields keep their default; failure content: got %q, want %q", got, want)
	}
}
