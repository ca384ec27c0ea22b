package fallback_test

import (
	"context"
	"errors"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/stretchr/testify/require"
)

func TestTextSpeaksThePeersWordingAtStartAndAtEachOutcome(t *testing.T) {
	ups := renderEvents(t, fallback.Text(),
		started("cmp_1", emitter.Auto), settled("cmp_1", emitter.Completed),
		started("cmp_2", emitter.Auto), failedWith("cmp_2", "provider overloaded"),
		started("cmp_3", emitter.Manual), settled("cmp_3", emitter.Cancelled),
	)
	require.Equal(t, []string{
		"Compacting...", "\n\nCompacting completed.",
		"Compacting...", "\n\nCompacting failed: provider overloaded",
		"Compacting...", "\n\nCompacting cancelled.",
	}, texts(ups))
	for _, k := range kinds(ups) {
		require.Equal(t, "agent_message_chunk", k)
	}
}

func TestTextFailureShowsTheUserFacingErrorNeverTheCause(t *testing.T) {
	ups := renderEvents(t, fallback.Text(), failedWith("cmp_1", "context window still exceeded"))
	require.Equal(t, []string{"\n\nCompacting failed: context window still exceeded"}, texts(ups))
	require.NotContains(t, texts(ups)[0], "10.0.0.7", "Event.Err may hold detail unfit for the user")
}

func TestTextFailureWithoutUsefulTextDoesNotRepeatItself(t *testing.T) {
	noText := settled("cmp_1", emitter.Failed)
	for _, ev := range []emitter.Event{noText, failedWith("cmp_2", "Compaction failed"), failedWith("cmp_3", "  ")} {
		require.Equal(t, []string{"\n\nCompacting failed."}, texts(renderEvents(t, fallback.Text(), ev)), "error %v", ev.Error)
	}
}

func TestTextNeverEchoesStreamedChunks(t *testing.T) {
	for _, r := range []emitter.Renderer{fallback.Text(), fallback.Text(fallback.WithSummary())} {
		chunk := emitter.Event{Kind: emitter.EventChunk, ID: "cmp_1", Status: emitter.InProgress, Content: emitter.Text("## Retained")}
		ups := renderEvents(t, r, started("cmp_1", emitter.Auto), chunk, chunk)
		require.Equal(t, []string{"Compacting..."}, texts(ups))
	}
}

func TestTextLeavesTheSummaryOutOfTheConversationUnlessTheAgentOptsIn(t *testing.T) {
	done := settled("cmp_1", emitter.Completed)
	done.Summary = emitter.Set([]emitter.ContentBlock{emitter.Text("The user is updating the ACP schema.")})
	require.Equal(t, []string{"\n\nCompacting completed."}, texts(renderEvents(t, fallback.Text(), done)))

	ups := renderEvents(t, fallback.Text(fallback.WithSummary()), done)
	require.Equal(t, []string{"\n\nCompacting completed.\n\n", "The user is updating the ACP schema."}, texts(ups),
		"with the opt-in the final summary follows the completion message")
}

func TestTextOptInSummaryFollowsThePatchRules(t *testing.T) {
	chunk := func(s string) emitter.Event {
		return emitter.Event{Kind: emitter.EventChunk, ID: "cmp_1", Status: emitter.InProgress, Content: emitter.Text(s)}
	}
	r := fallback.Text(fallback.WithSummary())

	t.Run("an omitted summary keeps what was streamed", func(t *testing.T) {
		ups := renderEvents(t, r, started("cmp_1", emitter.Auto), chunk("## Retained\n\n"), chunk("context"), settled("cmp_1", emitter.Completed))
		require.Equal(t, []string{"Compacting...", "\n\nCompacting completed.\n\n", "## Retained\n\ncontext"}, texts(ups))
	})
	t.Run("a concrete summary replaces what was streamed", func(t *testing.T) {
		done := settled("cmp_1", emitter.Completed)
		done.Summary = emitter.Set([]emitter.ContentBlock{emitter.Text("authoritative")})
		ups := renderEvents(t, r, started("cmp_1", emitter.Auto), chunk("draft"), done)
		require.Equal(t, []string{"Compacting...", "\n\nCompacting completed.\n\n", "authoritative"}, texts(ups))
	})
	t.Run("a null summary clears what was streamed", func(t *testing.T) {
		done := settled("cmp_1", emitter.Completed)
		done.Summary = emitter.Null[[]emitter.ContentBlock]()
		ups := renderEvents(t, r, started("cmp_1", emitter.Auto), chunk("draft"), done)
		require.Equal(t, []string{"Compacting...", "\n\nCompacting completed."}, texts(ups))
	})
	t.Run("a failure after partial output shows no summary", func(t *testing.T) {
		ups := renderEvents(t, r, started("cmp_1", emitter.Auto), chunk("partial"), failedWith("cmp_1", "provider overloaded"))
		require.Equal(t, []string{"Compacting...", "\n\nCompacting failed: provider overloaded"}, texts(ups))
	})
	t.Run("non-text blocks pass as their own chunks", func(t *testing.T) {
		done := settled("cmp_1", emitter.Completed)
		done.Summary = emitter.Set([]emitter.ContentBlock{
			emitter.Text("a"), emitter.Text("b"),
			{Type: "resource_link", Extra: map[string]jsonRaw{"uri": jsonRaw(`"file:///tmp/notes.md"`), "name": jsonRaw(`"notes.md"`)}},
			emitter.Text("c"),
		})
		ups := renderEvents(t, r, done)
		require.Len(t, ups, 4)
		require.Equal(t, "ab", ups[1]["content"].(map[string]any)["text"], "adjacent text blocks are joined")
		require.Equal(t, "resource_link", ups[2]["content"].(map[string]any)["type"])
	})
}

func TestTextReplayGivesOneOutcomeMessageAndNoStartLine(t *testing.T) {
	failed := replayed("cmp_2", emitter.Failed)
	failed.Error = emitter.Set("context window still exceeded")
	ups := renderEvents(t, fallback.Text(), replayed("cmp_1", emitter.Completed), failed, replayed("cmp_3", emitter.Cancelled))
	require.Equal(t, []string{
		"\n\nCompacting completed.",
		"\n\nCompacting failed: context window still exceeded",
		"\n\nCompacting cancelled.",
	}, texts(ups))
}

func TestTextWordingIsConfigurableAndEmptyFieldsKeepTheirDefault(t *testing.T) {
	r := fallback.Text(fallback.WithWording(fallback.Wording{
		Started:   "Summarising the conversation…",
		Failed:    "Could not summarise ({error}).",
		Separator: "\n",
		Heartbeat: ".",
	}))
	ups := renderEvents(t, r,
		started("cmp_1", emitter.Auto),
		emitter.Event{Kind: emitter.EventHeartbeat, ID: "cmp_1", Status: emitter.InProgress},
		failedWith("cmp_1", "rate limited"),
		started("cmp_2", emitter.Auto), settled("cmp_2", emitter.Completed),
		started("cmp_3", emitter.Auto), settled("cmp_3", emitter.Failed),
	)
	require.Equal(t, []string{
		"Summarising the conversation…", ".", "\nCould not summarise (rate limited).",
		"Summarising the conversation…", "\nCompacting completed.",
		"Summarising the conversation…", "\nCompacting failed.",
	}, texts(ups))
}

func TestTextHeartbeatIsSilentByDefault(t *testing.T) {
	ups := renderEvents(t, fallback.Text(), emitter.Event{Kind: emitter.EventHeartbeat, ID: "cmp_1", Status: emitter.InProgress})
	require.Empty(t, ups, "prose cannot be invisible, so heartbeats show only when the agent words them")
}

func TestTextCarriesTheEventMetaOnItsMessages(t *testing.T) {
	ev := settled("cmp_1", emitter.Completed)
	ev.Meta = emitter.Meta{"example.com/usage": jsonRaw(`{"tokensAfter":42000}`)}
	ups := renderEvents(t, fallback.Text(), ev)
	require.Equal(t, map[string]any{"example.com/usage": map[string]any{"tokensAfter": float64(42000)}}, ups[0]["_meta"])
	require.Len(t, ev.Meta, 1, "the event's map is shared and must not be written")
}

func TestTextThroughTheEmitterEndsEveryCompactionOnce(t *testing.T) {
	em, rec := newFallbackEmitter(t, fallback.Text())
	ctx := context.Background()
	s := em.Session("sess_1")
	a, err := s.Start(ctx, emitter.WithID("cmp_a"))
	require.NoError(t, err)
	_, err = s.Start(ctx, emitter.WithID("cmp_b"))
	require.NoError(t, err)
	require.NoError(t, a.Fail(ctx, errors.New("provider overloaded")))
	_, err = s.SettleAll(ctx, emitter.ErrCancelled)
	require.NoError(t, err)
	require.ErrorIs(t, a.Complete(ctx), emitter.ErrSettled)
	require.Equal(t, []string{"Compacting...", "Compacting...", "\n\nCompacting failed: provider overloaded", "\n\nCompacting cancelled."}, texts(rec.Updates()))
}
