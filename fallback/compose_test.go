package fallback_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
)

func TestComposeRendersThroughEachInOrder(t *testing.T) {
	ups := renderEvents(t, fallback.Compose(fallback.Marker(), nil, fallback.Text()),
		started("cmp_1", protocol.Auto), settled("cmp_1", protocol.Completed))
	want := []string{"session_info_update", "agent_message_chunk", "session_info_update", "agent_message_chunk"}
	if got := kinds(ups); !slices.Equal(got, want) {
		t.Fatalf("kinds: got %q, want %q", got, want)
	}
}

func TestComposeTakesAnAgentsOwnRenderer(t *testing.T) {
	var seen []emitter.EventKind
	own := rendererFunc(func(_ context.Context, ev emitter.Event, _ emitter.Notifier) error {
		seen = append(seen, ev.Kind)
		return nil
	})
	ups := renderEvents(t, fallback.Compose(own, fallback.Text()), started("cmp_1", protocol.Auto), replayed("cmp_2", protocol.Completed))
	if want := []emitter.EventKind{emitter.EventStarted, emitter.EventReplayed}; !slices.Equal(seen, want) {
		t.Fatalf("events the agent's renderer saw: got %v, want %v", seen, want)
	}
	if len(ups) != 2 {
		t.Fatalf("got %d updates, want 2: %v", len(ups), ups)
	}
}

func TestComposeKeepsRenderingAfterAFailureSoEveryFormStillEnds(t *testing.T) {
	errBroken := errors.New("broken renderer")
	broken := rendererFunc(func(context.Context, emitter.Event, emitter.Notifier) error { return errBroken })
	rec := &wiretest.Recorder{}
	err := fallback.Compose(broken, fallback.Marker()).Render(context.Background(), sessionEvent(settled("cmp_1", protocol.Completed)), rec)
	if !errors.Is(err, errBroken) {
		t.Fatalf("Render: got error %v, want %v", err, errBroken)
	}
	if n := len(rec.Lines()); n != 1 {
		t.Fatalf("got %d lines, want 1: the marker still settled", n)
	}
}

func TestComposeOfNothingRendersNothing(t *testing.T) {
	if ups := renderEvents(t, fallback.Compose(), started("cmp_1", protocol.Auto)); len(ups) != 0 {
		t.Fatalf("got updates %v, want none", ups)
	}
}

func TestNoneRendersNothingAndIsTheEmittersNone(t *testing.T) {
	var r emitter.Renderer = fallback.None{}
	_, same := r.(emitter.None)
	if !same {
		t.Fatalf("fallback.None is a %T, want emitter.None", r)
	}
	if ups := renderEvents(t, r, started("cmp_1", protocol.Auto), settled("cmp_1", protocol.Completed), replayed("cmp_2", protocol.Failed)); len(ups) != 0 {
		t.Fatalf("got updates %v, want none", ups)
	}
}

// rendererFunc adapts a function to emitter.Renderer.
type rendererFunc func(ctx context.Context, ev emitter.Event, n emitter.Notifier) error

func (f rendererFunc) Render(ctx context.Context, ev emitter.Event, n emitter.Notifier) error {
	return f(ctx, ev, n)
}
