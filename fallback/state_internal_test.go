package fallback

import (
	"context"
	"reflect"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
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
			ev := emitter.Event{SessionID: "s", ChildSessionID: "c", ID: protocol.ID(rune('a' + i)), Status: protocol.InProgress}
			ev.Kind = emitter.EventChunk
			ev.Content = protocol.Text("x")
			if err := tc.r.Render(ctx, ev, discard()); err != nil {
				t.Fatalf("%T: render chunk: %v", tc.r, err)
			}
			ev.Kind, ev.Status = emitter.EventSettled, status
			if err := tc.r.Render(ctx, ev, discard()); err != nil {
				t.Fatalf("%T: render %s outcome: %v", tc.r, status, err)
			}
		}
		if n := tc.s.len(); n != 0 {
			t.Fatalf("%T: %d streams still held after every outcome, want 0", tc.r, n)
		}
	}
}

func TestStreamsKeepChildCompactionsApart(t *testing.T) {
	var s streams
	a := emitter.Event{SessionID: "p", ChildSessionID: "a", ID: "cmp_1"}
	b := emitter.Event{SessionID: "p", ChildSessionID: "b", ID: "cmp_1"}
	s.add(a, protocol.Text("from a"), false)
	s.add(b, protocol.Text("from b"), false)
	if got, want := s.take(a), []protocol.ContentBlock{protocol.Text("from a")}; !reflect.DeepEqual(got, want) {
		t.Fatalf("child a's stream: got %v, want %v", got, want)
	}
	if got, want := s.take(b), []protocol.ContentBlock{protocol.Text("from b")}; !reflect.DeepEqual(got, want) {
		t.Fatalf("child b's stream: got %v, want %v", got, want)
	}
}

func TestWithMetaNeverWritesTheEventsMap(t *testing.T) {
	base := protocol.Meta{"k": []byte(`1`)}
	out := withMeta(base, "mine", []byte(`2`))
	if len(base) != 1 {
		t.Fatalf("the event's map: got %d keys %s, want 1", len(base), base)
	}
	if len(out) != 2 {
		t.Fatalf("withMeta's map: got %d keys %s, want 2", len(out), out)
	}
	if got := copyMeta(nil); got != nil {
		t.Fatalf("copyMeta(nil): got %#v, want nil", got)
	}
	if got := copyMeta(protocol.Meta{}); got != nil {
		t.Fatalf("copyMeta(empty): got %#v, want nil", got)
	}
}
