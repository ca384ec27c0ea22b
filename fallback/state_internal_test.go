package fallback

import (
	"context"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
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
		for i, status := range []emitter.Status{emitter.Completed, emitter.Failed, emitter.Cancelled} {
			ev := emitter.Event{SessionID: "s", ChildSessionID: "c", ID: emitter.ID(rune('a' + i)), Status: emitter.InProgress}
			ev.Kind = emitter.EventChunk
			ev.Content = emitter.Text("x")
			require.NoError(t, tc.r.Render(ctx, ev, discard()))
			ev.Kind, ev.Status = emitter.EventSettled, status
			require.NoError(t, tc.r.Render(ctx, ev, discard()))
		}
		require.Zero(t, tc.s.len())
	}
}

func TestStreamsKeepChildCompactionsApart(t *testing.T) {
	var s streams
	a := emitter.Event{SessionID: "p", ChildSessionID: "a", ID: "cmp_1"}
	b := emitter.Event{SessionID: "p", ChildSessionID: "b", ID: "cmp_1"}
	s.add(a, emitter.Text("from a"), false)
	s.add(b, emitter.Text("from b"), false)
	require.Equal(t, []emitter.ContentBlock{emitter.Text("from a")}, s.take(a))
	require.Equal(t, []emitter.ContentBlock{emitter.Text("from b")}, s.take(b))
}

func TestWithMetaNeverWritesTheEventsMap(t *testing.T) {
	base := emitter.Meta{"k": []byte(`1`)}
	out := withMeta(base, "mine", []byte(`2`))
	require.Len(t, base, 1)
	require.Len(t, out, 2)
	require.Nil(t, copyMeta(nil))
	require.Nil(t, copyMeta(emitter.Meta{}))
}
