package fallback_test

import (
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/require"
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
	require.Equal(t, want, strip(ups[0]), "tool call")
	got := strip(ups[1])
	require.Equal(t, ups[0], got, "the same compaction ID always gives the same tool call ID:\nfirst  %v\nsecond %v", ups[0], got)
}

func TestToolCallAlwaysSettlesCompletedOrFailedWithTheReason(t *testing.T) {
	ups := renderEvents(t, fallback.ToolCall(),
		settled("cmp_1", protocol.Completed),
		failedWith("cmp_2", "provider overloaded"),
		settled("cmp_3", protocol.Cancelled),
		settled("cmp_4", protocol.Failed),
	)
	require.Equal(t, (map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "compact-cmp_1", "status": "completed"}), strip(ups[0]), "completion")
	want := []struct{ id, text string }{
		{"compact-cmp_2", "Compaction failed: provider overloaded"},
		{"compact-cmp_3", "Compaction cancelled"}, // no cancelled tool status in ACP: a cancel must still end
		{"compact-cmp_4", "Compaction failed"},
	}
	for i, w := range want {
		u := ups[i+1]
		require.Equal(t, "tool_call_update", u["sessionUpdate"], "%s: sessionUpdate", w.id)
		require.Equal(t, w.id, u["toolCallId"], "update %d: toolCallId", i+1)
		require.Equal(t, "failed", u["status"], "%s: status", w.id)
		require.Equal(t, []string{w.text}, contentTexts(u), "%s: content", w.id)
	}
}

func TestToolCallShowsNothingOfChunksByDefault(t *testing.T) {
	chunk := emitter.Event{Kind: emitter.EventChunk, ID: "cmp_1", Status: protocol.InProgress, Content: protocol.Text("secret")}
	done := settled("cmp_1", protocol.Completed)
	done.Summary = protocol.Set([]protocol.ContentBlock{protocol.Text("secret")})
	ups := renderEvents(t, fallback.ToolCall(), started("cmp_1", protocol.Auto), chunk, done)
	require.Len(t, ups, 2, "renderEvents")
	require.NotContains(t, string(mustJSON(t, ups)), "secret", "a chunk or summary reached the wire")
}

func TestToolCallSummaryContentIsOptIn(t *testing.T) {
	chunk := func(s string) emitter.Event {
		return emitter.Event{Kind: emitter.EventChunk, ID: "cmp_1", Status: protocol.InProgress, Content: protocol.Text(s)}
	}
	r := fallback.ToolCall(fallback.WithSummaryContent())
	t.Run("each chunk replaces the content with everything so far", func(t *testing.T) {
		ups := renderEvents(t, r, started("cmp_1", protocol.Auto), chunk("## Retained"), chunk(" context"), settled("cmp_1", protocol.Completed))
		require.Equal(t, []string{"## Retained"}, contentTexts(ups[1]), "after the first chunk: content")
		require.Equal(t, []string{"## Retained context"}, contentTexts(ups[2]), "after the second chunk: content")
		require.NotContains(t, ups[1], "status", "a content update leaves the status alone")
		require.NotContains(t, ups[3], "content", "an omitted summary keeps the streamed content")
	})
	t.Run("a final summary replaces it and null clears it", func(t *testing.T) {
		done := settled("cmp_1", protocol.Completed)
		done.Summary = protocol.Set([]protocol.ContentBlock{protocol.Text("final")})
		cleared := settled("cmp_2", protocol.Completed)
		cleared.Summary = protocol.Null[[]protocol.ContentBlock]()
		ups := renderEvents(t, r, done, cleared)
		require.Equal(t, []string{"final"}, contentTexts(ups[0]), "a final summary: content")
		require.Equal(t, []any{}, ups[1]["content"], "a null summary: content")
	})
	t.Run("a failure replaces partial content with the reason", func(t *testing.T) {
		ups := renderEvents(t, r, started("cmp_1", protocol.Auto), chunk("partial"), failedWith("cmp_1", "provider overloaded"))
		require.Equal(t, []string{"Compaction failed: provider overloaded"}, contentTexts(ups[2]), "content")
	})
}

func TestToolCallReplayIsOneToolCallAlreadyInItsTerminalStatus(t *testing.T) {
	failed := replayed("cmp_2", protocol.Failed)
	failed.Error = protocol.Set("context window still exceeded")
	ups := renderEvents(t, fallback.ToolCall(), replayed("cmp_1", protocol.Completed), failed, replayed("cmp_3", protocol.Cancelled))
	require.Equal(t, []string{"tool_call", "tool_call", "tool_call"}, kinds(ups), "kinds")
	want := map[string]any{
		"sessionUpdate": "tool_call", "toolCallId": "compact-cmp_1", "title": "Compact conversation",
		"kind": "think", "status": "completed",
	}
	require.Equal(t, want, strip(ups[0]), "replayed completion")
	for _, w := range []struct {
		i    int
		text string
	}{{1, "Compaction failed: context window still exceeded"}, {2, "Compaction cancelled"}} {
		require.Equal(t, "failed", ups[w.i]["status"], "replay %d: status", w.i)
		require.Equal(t, []string{w.text}, contentTexts(ups[w.i]), "replay %d: content", w.i)
	}
}

func TestToolCallHeartbeatIsANoOpInProgressUpdate(t *testing.T) {
	ups := renderEvents(t, fallback.ToolCall(), emitter.Event{Kind: emitter.EventHeartbeat, ID: "cmp_1", Status: protocol.InProgress})
	require.Equal(t, (map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "compact-cmp_1", "status": "in_progress"}), strip(ups[0]), "heartbeat")
}

func TestToolCallWordingIsConfigurableAndCarriesTheEventMeta(t *testing.T) {
	r := fallback.ToolCall(fallback.WithToolCallWording(fallback.ToolCallWording{Title: "Summarise history", Cancelled: "Stopped"}))
	start := started("cmp_1", protocol.Auto)
	start.Meta = protocol.Meta{"example.com/trace": jsonRaw(`"span"`)}
	end := settled("cmp_1", protocol.Cancelled)
	end.Meta = protocol.Meta{"example.com/usage": jsonRaw(`1`)}
	ups := renderEvents(t, r, start, end, failedWith("cmp_2", "boom"))
	require.Equal(t, "Summarise history", ups[0]["title"], "title")
	require.Equal(t, (map[string]any{"example.com/trace": "span"}), ups[0]["_meta"], "the start's _meta")
	require.Equal(t, []string{"Stopped"}, contentTexts(ups[1]), "cancel content")
	require.Equal(t, (map[string]any{"example.com/usage": float64(1)}), ups[1]["_meta"], "the outcome's _meta")
	require.Equal(t, []string{"Compaction failed: boom"}, contentTexts(ups[2]), "unset fields keep their default; failure content")
}
