package fallback_test

import (
	"context"
	"errors"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/require"
)

func TestComposeRendersThroughEachInOrder(t *testing.T) {
	ups := renderEvents(t, fallback.Compose(fallback.Marker(), nil, fallback.Text()),
		started("cmp_1", protocol.Auto), settled("cmp_1", protocol.Completed))
	want := []string{"session_info_update", "agent_message_chunk", "session_info_update", "agent_message_chunk"}
	require.Equal(t, want, kinds(ups), "kinds")
}

func TestComposeTakesAnAgentsOwnRenderer(t *testing.T) {
	var seen []emitter.EventKind
	own := rendererFunc(func(_ context.Context, ev emitter.Event, _ emitter.Notifier) error {
		seen = append(seen, ev.Kind)
		return nil
	})
	ups := renderEvents(t, fallback.Compose(own, fallback.Text()), started("cmp_1", protocol.Auto), replayed("cmp_2", protocol.Completed))
	require.Equal(t, []emitter.EventKind{emitter.EventStarted, emitter.EventReplayed}, seen, "events the agent's renderer saw")
	require.Len(t, ups, 2, "ups")
}

func TestComposeKeepsRenderingAfterAFailureSoEveryFormStillEnds(t *testing.T) {
	errBroken := errors.New("broken renderer")
	broken := rendererFunc(func(context.Context, emitter.Event, emitter.Notifier) error { return errBroken })
	rec := &wiretest.Recorder{}
	err := fallback.Compose(broken, fallback.Marker()).Render(context.Background(), sessionEvent(settled("cmp_1", protocol.Completed)), rec)
	require.ErrorIs(t, err, errBroken, "Render")
	require.Equal(t, 1, len(rec.Lines()), "len")
}

func TestComposeOfNothingRendersNothing(t *testing.T) {
	require.Empty(t, renderEvents(t, fallback.Compose(), started("cmp_1", protocol.Auto)), "renderEvents")
}

func TestNoneRendersNothing(t *testing.T) {
	var r emitter.Renderer = fallback.None{}
	require.Empty(t, renderEvents(t, r, started("cmp_1", protocol.Auto), settled("cmp_1", protocol.Completed), replayed("cmp_2", protocol.Failed)), "renderEvents")
}

// rendererFunc adapts a function to emitter.Renderer.
type rendererFunc func(ctx context.Context, ev emitter.Event, n emitter.Notifier) error

func (f rendererFunc) Render(ctx context.Context, ev emitter.Event, n emitter.Notifier) error {
	return f(ctx, ev, n)
}
