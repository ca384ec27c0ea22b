package fallback_test

import (
	"context"
	"errors"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/require"
)

func TestTextSpeaksThePeersWordingAtStartAndAtEachOutcome(t *testing.T) {
	ups := renderEvents(t, fallback.Text(),
		started("cmp_1", protocol.Auto), settled("cmp_1", protocol.Completed),
		started("cmp_2", protocol.Auto), failedWith("cmp_2", "provider overloaded"),
		started("cmp_3", protocol.Manual), settled("cmp_3", protocol.Cancelled),
	)
	want := []string{
		"Compacting...", "\n\nCompacting completed.\n\n",
		"Compacting...", "\n\nCompacting failed: provider overloaded\n\n",
		"Compacting...", "\n\nCompacting cancelled.\n\n",
	}
	require.Equal(t, want, texts(ups), "texts")
	for _, k := range kinds(ups) {
		require.Equal(t, "agent_message_chunk", k, "kind")
	}
}

func TestTextFailureShowsTheUserFacingErrorNeverTheCause(t *testing.T) {
	ups := renderEvents(t, fallback.Text(), failedWith("cmp_1", "context window still exceeded"))
	require.Equal(t, []string{"\n\nCompacting failed: context window still exceeded\n\n"}, texts(ups), "texts")
	got := texts(ups)[0]
	require.NotContains(t, got, "10.0.0.7", "the text %q shows Event.Err, which may hold detail unfit for the user", got)
}

func TestTextFailureWithoutUsefulTextDoesNotRepeatItself(t *testing.T) {
	noText := settled("cmp_1", protocol.Failed)
	for _, ev := range []emitter.Event{noText, failedWith("cmp_2", "Compaction failed"), failedWith("cmp_3", "  ")} {
		require.Equal(t, []string{"\n\nCompacting failed.\n\n"}, texts(renderEvents(t, fallback.Text(), ev)), "error %v: texts", ev.Error)
	}
}

func TestTextNeverEchoesStreamedChunks(t *testing.T) {
	for _, r := range []emitter.Renderer{fallback.Text(), fallback.Text(fallback.WithSummary())} {
		chunk := emitter.Event{Kind: emitter.EventChunk, ID: "cmp_1", Status: protocol.InProgress, Content: protocol.Text("## Retained")}
		ups := renderEvents(t, r, started("cmp_1", protocol.Auto), chunk, chunk)
		require.Equal(t, []string{"Compacting..."}, texts(ups), "texts")
	}
}

func TestTextLeavesTheSummaryOutOfTheConversationUnlessTheAgentOptsIn(t *testing.T) {
	done := settled("cmp_1", protocol.Completed)
	done.Summary = protocol.Set([]protocol.ContentBlock{protocol.Text("The user is updating the ACP schema.")})
	require.Equal(t, []string{"\n\nCompacting completed.\n\n"}, texts(renderEvents(t, fallback.Text(), done)), "texts")

	ups := renderEvents(t, fallback.Text(fallback.WithSummary()), done)
	require.Equal(t, []string{"\n\nCompacting completed.\n\n", "The user is updating the ACP schema.", "\n\n"}, texts(ups), "with the opt-in the final summary follows the completion message; texts")
}

func TestTextOptInSummaryFollowsThePatchRules(t *testing.T) {
	chunk := func(s string) emitter.Event {
		return emitter.Event{Kind: emitter.EventChunk, ID: "cmp_1", Status: protocol.InProgress, Content: protocol.Text(s)}
	}
	r := fallback.Text(fallback.WithSummary())

	t.Run("an omitted summary keeps what was streamed", func(t *testing.T) {
		ups := renderEvents(t, r, started("cmp_1", protocol.Auto), chunk("## Retained\n\n"), chunk("context"), settled("cmp_1", protocol.Completed))
		require.Equal(t, []string{"Compacting...", "\n\nCompacting completed.\n\n", "## Retained\n\ncontext", "\n\n"}, texts(ups), "texts")
	})
	t.Run("a concrete summary replaces what was streamed", func(t *testing.T) {
		done := settled("cmp_1", protocol.Completed)
		done.Summary = protocol.Set([]protocol.ContentBlock{protocol.Text("authoritative")})
		ups := renderEvents(t, r, started("cmp_1", protocol.Auto), chunk("draft"), done)
		require.Equal(t, []string{"Compacting...", "\n\nCompacting completed.\n\n", "authoritative", "\n\n"}, texts(ups), "texts")
	})
	t.Run("a null summary clears what was streamed", func(t *testing.T) {
		done := settled("cmp_1", protocol.Completed)
		done.Summary = protocol.Null[[]protocol.ContentBlock]()
		ups := renderEvents(t, r, started("cmp_1", protocol.Auto), chunk("draft"), done)
		require.Equal(t, []string{"Compacting...", "\n\nCompacting completed.\n\n"}, texts(ups), "texts")
	})
	t.Run("a failure after partial output shows no summary", func(t *testing.T) {
		ups := renderEvents(t, r, started("cmp_1", protocol.Auto), chunk("partial"), failedWith("cmp_1", "provider overloaded"))
		require.Equal(t, []string{"Compacting...", "\n\nCompacting failed: provider overloaded\n\n"}, texts(ups), "texts")
	})
	t.Run("non-text blocks pass as their own chunks", func(t *testing.T) {
		done := settled("cmp_1", protocol.Completed)
		done.Summary = protocol.Set([]protocol.ContentBlock{
			protocol.Text("a"), protocol.Text("b"),
			{Type: "resource_link", Extra: map[string]jsonRaw{"uri": jsonRaw(`"file:///tmp/notes.md"`), "name": jsonRaw(`"notes.md"`)}},
			protocol.Text("c"),
		})
		ups := renderEvents(t, r, done)
		require.Len(t, ups, 5, "renderEvents")
		require.Equal(t, "ab", ups[1]["content"].(map[string]any)["text"], "adjacent text blocks are joined")
		require.Equal(t, "resource_link", ups[2]["content"].(map[string]any)["type"], "the non-text block's type")
	})
}

func TestTextReplayGivesOneOutcomeMessageAndNoStartLine(t *testing.T) {
	failed := replayed("cmp_2", protocol.Failed)
	failed.Error = protocol.Set("context window still exceeded")
	ups := renderEvents(t, fallback.Text(), replayed("cmp_1", protocol.Completed), failed, replayed("cmp_3", protocol.Cancelled))
	want := []string{
		"\n\nCompacting completed.\n\n",
		"\n\nCompacting failed: context window still exceeded\n\n",
		"\n\nCompacting cancelled.\n\n",
	}
	require.Equal(t, want, texts(ups), "texts")
}

func TestTextWordingIsConfigurableAndEmptyFieldsKeepTheirDefault(t *testing.T) {
	r := fallback.Text(fallback.WithWording(fallback.Wording{
		Started:   "Summarising the conversation…",
		Failed:    "Could not summarise ({error}).",
		Separator: "\n",
		Heartbeat: ".",
	}))
	ups := renderEvents(t, r,
		started("cmp_1", protocol.Auto),
		emitter.Event{Kind: emitter.EventHeartbeat, ID: "cmp_1", Status: protocol.InProgress},
		failedWith("cmp_1", "rate limited"),
		started("cmp_2", protocol.Auto), settled("cmp_2", protocol.Completed),
		started("cmp_3", protocol.Auto), settled("cmp_3", protocol.Failed),
	)
	want := []string{
		"Summarising the conversation…", ".", "\nCould not summarise (rate limited).\n",
		"Summarising the conversation…", "\nCompacting completed.\n",
		"Summarising the conversation…", "\nCompacting failed.\n",
	}
	require.Equal(t, want, texts(ups), "texts")
}

func TestTextHeartbeatIsSilentByDefault(t *testing.T) {
	ups := renderEvents(t, fallback.Text(), emitter.Event{Kind: emitter.EventHeartbeat, ID: "cmp_1", Status: protocol.InProgress})
	require.Empty(t, ups, "renderEvents")
}

func TestTextCarriesTheEventMetaOnItsMessages(t *testing.T) {
	ev := settled("cmp_1", protocol.Completed)
	ev.Meta = protocol.Meta{"example.com/usage": jsonRaw(`{"tokensAfter":42000}`)}
	ups := renderEvents(t, fallback.Text(), ev)
	require.Equal(t, map[string]any{"example.com/usage": map[string]any{"tokensAfter": float64(42000)}}, ups[0]["_meta"], "_meta")
	require.Len(t, ev.Meta, 1, "the event's map is shared and must not be written")
}

func TestTextThroughTheEmitterEndsEveryCompactionOnce(t *testing.T) {
	em, rec := newFallbackEmitter(t, fallback.Text())
	ctx := context.Background()
	s := em.Session("sess_1")
	a, err := s.Start(ctx, emitter.WithID("cmp_a"))
	require.NoError(t, err, "Start cmp_a")
	_, err = s.Start(ctx, emitter.WithID("cmp_b"))
	require.NoError(t, err, "Start cmp_b")
	require.NoError(t, a.Fail(ctx, errors.New("provider overloaded")), "Fail cmp_a")
	_, err = s.SettleAll(ctx, emitter.ErrCancelled)
	require.NoError(t, err, "SettleAll")
	require.ErrorIs(t, a.Complete(ctx), emitter.ErrSettled, "Complete after Fail")
	require.Equal(t, []string{"Compacting...", "Compacting...", "\n\nCompacting failed: provider overloaded\n\n", "\n\nCompacting cancelled.\n\n"}, texts(rec.Updates()), "texts")
}

// agentText is the text a v1 client shows for the session's agent message
// chunks (joined, as v1 clients join chunks without a messageId), from the
// reference client reducer.
func agentText(t *testing.T, lines [][]byte) []string {
	t.Helper()
	r := conformance.NewReducer(1)
	for _, l := range lines {
		require.NoError(t, r.ApplyMessage(l), "reducer: %s", l)
	}
	var out []string
	for _, it := range r.Timeline("sess_1") {
		if it.Kind == conformance.KindAgentMessage {
			out = append(out, it.Text)
		}
	}
	return out
}

// TestTextOutcomeIsAParagraphOfItsOwnLiveAndOnReplay: the agent's next
// message never runs into the outcome ("Compacting completed.Context
// compacted", seen in acpx), nor the outcome into the message before it,
// live and on replay, with and without the summary.
func TestTextOutcomeIsAParagraphOfItsOwnLiveAndOnReplay(t *testing.T) {
	ctx := context.Background()
	say := func(rec *wiretest.Recorder, text string) {
		require.NoError(t, rec.Notify(ctx, "sess_1", map[string]any{
			"sessionUpdate": "agent_message_chunk", "content": protocol.Text(text)}), "agent message %q", text)
	}
	type outcome struct {
		name   string
		settle func(c *emitter.Compaction) error
		rec    emitter.Record
		text   string
	}
	outcomes := []outcome{
		{"completed", func(c *emitter.Compaction) error { return c.Complete(ctx) },
			emitter.Record{Status: protocol.Completed}, "Compacting completed."},
		{"failed", func(c *emitter.Compaction) error { return c.Fail(ctx, errors.New("provider overloaded")) },
			emitter.Record{Status: protocol.Failed, Error: "provider overloaded"}, "Compacting failed: provider overloaded"},
		{"failed bare", func(c *emitter.Compaction) error { return c.Fail(ctx, nil) },
			emitter.Record{Status: protocol.Failed}, "Compacting failed."},
		{"cancelled", func(c *emitter.Compaction) error { return c.Cancel(ctx) },
			emitter.Record{Status: protocol.Cancelled}, "Compacting cancelled."},
	}
	for _, o := range outcomes {
		t.Run(o.name, func(t *testing.T) {
			em, live := newFallbackEmitter(t, fallback.Text())
			c, err := em.Session("sess_1").Start(ctx, emitter.WithID("cmp_1"))
			require.NoError(t, err, "Start")
			require.NoError(t, o.settle(c), "settle")
			say(live, "Context compacted: 42k tokens.")
			require.Equal(t, []string{"Compacting...\n\n" + o.text + "\n\nContext compacted: 42k tokens."}, agentText(t, live.Lines()), "live: agent text")
			requireValidV1(t, live.Lines())

			em, replay := newFallbackEmitter(t, fallback.Text())
			say(replay, "Earlier answer.")
			rec := o.rec
			rec.ID = "cmp_1"
			require.NoError(t, em.Session("sess_1").Replay(ctx, rec), "Replay")
			say(replay, "Context compacted: 42k tokens.")
			require.Equal(t, []string{"Earlier answer.\n\n" + o.text + "\n\nContext compacted: 42k tokens."}, agentText(t, replay.Lines()), "replay: agent text")
			requireValidV1(t, replay.Lines())
		})
	}
	t.Run("completed with the summary", func(t *testing.T) {
		em, live := newFallbackEmitter(t, fallback.Text(fallback.WithSummary()))
		c, err := em.Session("sess_1").Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable())
		require.NoError(t, err, "Start")
		require.NoError(t, c.Complete(ctx, emitter.Summary(protocol.Text("## Retained context"))), "Complete")
		say(live, "Next answer.")
		require.Equal(t, []string{"Compacting...\n\nCompacting completed.\n\n## Retained context\n\nNext answer."}, agentText(t, live.Lines()), "live: agent text")

		em, replay := newFallbackEmitter(t, fallback.Text(fallback.WithSummary()))
		say(replay, "Earlier answer.")
		require.NoError(t, em.Session("sess_1").Replay(ctx, emitter.Record{ID: "cmp_1", Status: protocol.Completed, Displayable: true,
			Summary: []protocol.ContentBlock{protocol.Text("## Retained context")}}), "Replay")
		say(replay, "Next answer.")
		require.Equal(t, []string{"Earlier answer.\n\nCompacting completed.\n\n## Retained context\n\nNext answer."}, agentText(t, replay.Lines()), "replay: agent text")
	})
}
