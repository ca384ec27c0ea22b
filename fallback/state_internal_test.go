package fallback

import (
	"context"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/require"
)

func discard() emitter.Notifier {
	return emitter.NotifierFunc(func(context.Context, string, any) error { return nil })
}

// Renderers that show a summary must keep what was streamed; they must also
// let go of it when the compaction ends, or a long-lived agent leaks.
func TestStreamedContentIsReleasedAtTheOutcome(t *testing.T) {
	text := Text(WithSummary()).(*textRenderer)
	tool := ToolCall(WithSummaryContent()).(*toolCallRenderer)
	plain := Text().(*textRenderer)
	ctx := context.Background()
	for _, tc := range []struct {
		r emitter.Renderer
		s *streams
	}{{text, &text.streamed}, {tool, &tool.streamed}, {plain, &plain.streamed}} {
		for i, status := range []protocol.Status{protocol.Completed, protocol.Failed, protocol.Cancelled} {
			ev := emitter.Event{SessionID: "s", ID: protocol.ID(rune('a' + i)), Status: protocol.InProgress}
			ev.Kind = emitter.EventChunk
			ev.Content = protocol.Text("x")
			require.NoError(t, tc.r.Render(ctx, ev, discard()), "%T: render chunk", tc.r)
			ev.Kind, ev.Status = emitter.EventSettled, status
			require.NoError(t, tc.r.Render(ctx, ev, discard()), "%T: render %s outcome", tc.r, status)
		}
		n := tc.s.len()
		require.Equal(t, 0, n, "%T: %d streams still held after every outcome", tc.r, n)
	}
}

func TestWithMetaNeverWritesTheEventsMap(t *testing.T) {
	base := protocol.Meta{"k": []byte(`1`)}
	out := withMeta(base, "mine", []byte(`2`))
	require.Len(t, base, 1, "the event's map")
	require.Len(t, out, 2, "withMeta's map")
	require.Nil(t, copyMeta(nil), "copyMeta(nil)")
	require.Nil(t, copyMeta(protocol.Meta{}), "copyMeta(empty)")
}
