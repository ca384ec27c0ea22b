package fallback_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/acpcompact/acpcompact/conformance"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
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
	if got := texts(ups); !slices.Equal(got, want) {
		t.Fatalf("texts:\ngot  %q\nwant %q", got, want)
	}
	for _, k := range kinds(ups) {
		if k != "agent_message_chunk" {
			t.Fatalf("kind: got %q, want agent_message_chunk", k)
		}
	}
}

func TestTextFailureShowsTheUserFacingErrorNeverTheCause(t *testing.T) {
	ups := renderEvents(t, fallback.Text(), failedWith("cmp_1", "context window still exceeded"))
	if got, want := texts(ups), []string{"\n\nCompacting failed: context window still exceeded\n\n"}; !slices.Equal(got, want) {
		t.Fatalf("texts:\ngot  %q\nwant %q", got, want)
	}
	if got := texts(ups)[0]; strings.Contains(got, "10.0.0.7") {
		t.Fatalf("the text %q shows Event.Err, which may hold detail unfit for the user", got)
	}
}

func TestTextFailureWithoutUsefulTextDoesNotRepeatItself(t *testing.T) {
	noText := settled("cmp_1", protocol.Failed)
	for _, ev := range []emitter.Event{noText, failedWith("cmp_2", "Compaction failed"), failedWith("cmp_3", "  ")} {
		if got, want := texts(renderEvents(t, fallback.Text(), ev)), []string{"\n\nCompacting failed.\n\n"}; !slices.Equal(got, want) {
			t.Fatalf("error %v: texts got %q, want %q", ev.Error, got, want)
		}
	}
}

func TestTextNeverEchoesStreamedChunks(t *testing.T) {
	for _, r := range []emitter.Renderer{fallback.Text(), fallback.Text(fallback.WithSummary())} {
		chunk := emitter.Event{Kind: emitter.EventChunk, ID: "cmp_1", Status: protocol.InProgress, Content: protocol.Text("## Retained")}
		ups := renderEvents(t, r, started("cmp_1", protocol.Auto), chunk, chunk)
		if got, want := texts(ups), []string{"Compacting..."}; !slices.Equal(got, want) {
			t.Fatalf("texts:\ngot  %q\nwant %q", got, want)
		}
	}
}

func TestTextLeavesTheSummaryOutOfTheConversationUnlessTheAgentOptsIn(t *testing.T) {
	done := settled("cmp_1", protocol.Completed)
	done.Summary = protocol.Set([]protocol.ContentBlock{protocol.Text("The user is updating the ACP schema.")})
	if got, want := texts(renderEvents(t, fallback.Text(), done)), []string{"\n\nCompacting completed.\n\n"}; !slices.Equal(got, want) {
		t.Fatalf("texts:\ngot  %q\nwant %q", got, want)
	}

	ups := renderEvents(t, fallback.Text(fallback.WithSummary()), done)
	if got, want := texts(ups), []string{"\n\nCompacting completed.\n\n", "The user is updating the ACP schema.", "\n\n"}; !slices.Equal(got, want) {
		t.Fatalf("with the opt-in the final summary follows the completion message; texts:\ngot  %q\nwant %q", got, want)
	}
}

func TestTextOptInSummaryFollowsThePatchRules(t *testing.T) {
	chunk := func(s string) emitter.Event {
		return emitter.Event{Kind: emitter.EventChunk, ID: "cmp_1", Status: protocol.InProgress, Content: protocol.Text(s)}
	}
	r := fallback.Text(fallback.WithSummary())

	t.Run("an omitted summary keeps what was streamed", func(t *testing.T) {
		ups := renderEvents(t, r, started("cmp_1", protocol.Auto), chunk("## Retained\n\n"), chunk("context"), settled("cmp_1", protocol.Completed))
		if got, want := texts(ups), []string{"Compacting...", "\n\nCompacting completed.\n\n", "## Retained\n\ncontext", "\n\n"}; !slices.Equal(got, want) {
			t.Fatalf("texts:\ngot  %q\nwant %q", got, want)
		}
	})
	t.Run("a concrete summary replaces what was streamed", func(t *testing.T) {
		done := settled("cmp_1", protocol.Completed)
		done.Summary = protocol.Set([]protocol.ContentBlock{protocol.Text("authoritative")})
		ups := renderEvents(t, r, started("cmp_1", protocol.Auto), chunk("draft"), done)
		if got, want := texts(ups), []string{"Compacting...", "\n\nCompacting completed.\n\n", "authoritative", "\n\n"}; !slices.Equal(got, want) {
			t.Fatalf("texts:\ngot  %q\nwant %q", got, want)
		}
	})
	t.Run("a null summary clears what was streamed", func(t *testing.T) {
		done := settled("cmp_1", protocol.Completed)
		done.Summary = protocol.Null[[]protocol.ContentBlock]()
		ups := renderEvents(t, r, started("cmp_1", protocol.Auto), chunk("draft"), done)
		if got, want := texts(ups), []string{"Compacting...", "\n\nCompacting completed.\n\n"}; !slices.Equal(got, want) {
			t.Fatalf("texts:\ngot  %q\nwant %q", got, want)
		}
	})
	t.Run("a failure after partial output shows no summary", func(t *testing.T) {
		ups := renderEvents(t, r, started("cmp_1", protocol.Auto), chunk("partial"), failedWith("cmp_1", "provider overloaded"))
		if got, want := texts(ups), []string{"Compacting...", "\n\nCompacting failed: provider overloaded\n\n"}; !slices.Equal(got, want) {
			t.Fatalf("texts:\ngot  %q\nwant %q", got, want)
		}
	})
	t.Run("non-text blocks pass as their own chunks", func(t *testing.T) {
		done := settled("cmp_1", protocol.Completed)
		done.Summary = protocol.Set([]protocol.ContentBlock{
			protocol.Text("a"), protocol.Text("b"),
			{Type: "resource_link", Extra: map[string]jsonRaw{"uri": jsonRaw(`"file:///tmp/notes.md"`), "name": jsonRaw(`"notes.md"`)}},
			protocol.Text("c"),
		})
		ups := renderEvents(t, r, done)
		if len(ups) != 5 {
			t.Fatalf("got %d updates, want 5: %v", len(ups), ups)
		}
		if got := ups[1]["content"].(map[string]any)["text"]; got != "ab" {
			t.Fatalf("adjacent text blocks are joined: got %q, want %q", got, "ab")
		}
		if got := ups[2]["content"].(map[string]any)["type"]; got != "resource_link" {
			t.Fatalf("the non-text block's type: got %v, want resource_link", got)
		}
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
	if got := texts(ups); !slices.Equal(got, want) {
		t.Fatalf("texts:\ngot  %q\nwant %q", got, want)
	}
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
	if got := texts(ups); !slices.Equal(got, want) {
		t.Fatalf("texts:\ngot  %q\nwant %q", got, want)
	}
}

func TestTextHeartbeatIsSilentByDefault(t *testing.T) {
	ups := renderEvents(t, fallback.Text(), emitter.Event{Kind: emitter.EventHeartbeat, ID: "cmp_1", Status: protocol.InProgress})
	if len(ups) != 0 {
		t.Fatalf("got updates %v, want none: prose cannot be invisible, so heartbeats show only when the agent words them", ups)
	}
}

func TestTextCarriesTheEventMetaOnItsMessages(t *testing.T) {
	ev := settled("cmp_1", protocol.Completed)
	ev.Meta = protocol.Meta{"example.com/usage": jsonRaw(`{"tokensAfter":42000}`)}
	ups := renderEvents(t, fallback.Text(), ev)
	if got, want := ups[0]["_meta"], map[string]any{"example.com/usage": map[string]any{"tokensAfter": float64(42000)}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("_meta: got %v, want %v", got, want)
	}
	if len(ev.Meta) != 1 {
		t.Fatalf("the event's map is shared and must not be written: got %d keys %s, want 1", len(ev.Meta), ev.Meta)
	}
}

func TestTextThroughTheEmitterEndsEveryCompactionOnce(t *testing.T) {
	em, rec := newFallbackEmitter(t, fallback.Text())
	ctx := context.Background()
	s := em.Session("sess_1")
	a, err := s.Start(ctx, emitter.WithID("cmp_a"))
	if err != nil {
		t.Fatalf("Start cmp_a: %v", err)
	}
	if _, err := s.Start(ctx, emitter.WithID("cmp_b")); err != nil {
		t.Fatalf("Start cmp_b: %v", err)
	}
	if err := a.Fail(ctx, errors.New("provider overloaded")); err != nil {
		t.Fatalf("Fail cmp_a: %v", err)
	}
	if _, err := s.SettleAll(ctx, emitter.ErrCancelled); err != nil {
		t.Fatalf("SettleAll: %v", err)
	}
	if err := a.Complete(ctx); !errors.Is(err, emitter.ErrSettled) {
		t.Fatalf("Complete after Fail: got error %v, want %v", err, emitter.ErrSettled)
	}
	if got, want := texts(rec.Updates()), []string{"Compacting...", "Compacting...", "\n\nCompacting failed: provider overloaded\n\n", "\n\nCompacting cancelled.\n\n"}; !slices.Equal(got, want) {
		t.Fatalf("texts:\ngot  %q\nwant %q", got, want)
	}
}

// agentText is the text a v1 client shows for the session's agent message
// chunks (joined, as v1 clients join chunks without a messageId), from the
// reference client reducer.
func agentText(t *testing.T, lines [][]byte) []string {
	t.Helper()
	r := conformance.NewReducer(1)
	for _, l := range lines {
		if err := r.ApplyMessage(l); err != nil {
			t.Fatalf("reducer: %s: %v", l, err)
		}
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
		if err := rec.Notify(ctx, "sess_1", map[string]any{
			"sessionUpdate": "agent_message_chunk", "content": protocol.Text(text)}); err != nil {
			t.Fatalf("agent message %q: %v", text, err)
		}
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
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if err := o.settle(c); err != nil {
				t.Fatalf("settle: %v", err)
			}
			say(live, "Context compacted: 42k tokens.")
			if got, want := agentText(t, live.Lines()), []string{"Compacting...\n\n" + o.text + "\n\nContext compacted: 42k tokens."}; !slices.Equal(got, want) {
				t.Fatalf("live: agent text:\ngot  %q\nwant %q", got, want)
			}
			requireValidV1(t, live.Lines())

			em, replay := newFallbackEmitter(t, fallback.Text())
			say(replay, "Earlier answer.")
			rec := o.rec
			rec.ID = "cmp_1"
			if err := em.Session("sess_1").Replay(ctx, rec); err != nil {
				t.Fatalf("Replay: %v", err)
			}
			say(replay, "Context compacted: 42k tokens.")
			if got, want := agentText(t, replay.Lines()), []string{"Earlier answer.\n\n" + o.text + "\n\nContext compacted: 42k tokens."}; !slices.Equal(got, want) {
				t.Fatalf("replay: agent text:\ngot  %q\nwant %q", got, want)
			}
			requireValidV1(t, replay.Lines())
		})
	}
	t.Run("completed with the summary", func(t *testing.T) {
		em, live := newFallbackEmitter(t, fallback.Text(fallback.WithSummary()))
		c, err := em.Session("sess_1").Start(ctx, emitter.WithID("cmp_1"), emitter.UserDisplayable())
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		if err := c.Complete(ctx, emitter.Summary(protocol.Text("## Retained context"))); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		say(live, "Next answer.")
		if got, want := agentText(t, live.Lines()), []string{"Compacting...\n\nCompacting completed.\n\n## Retained context\n\nNext answer."}; !slices.Equal(got, want) {
			t.Fatalf("live: agent text:\ngot  %q\nwant %q", got, want)
		}

		em, replay := newFallbackEmitter(t, fallback.Text(fallback.WithSummary()))
		say(replay, "Earlier answer.")
		if err := em.Session("sess_1").Replay(ctx, emitter.Record{ID: "cmp_1", Status: protocol.Completed, Displayable: true,
			Summary: []protocol.ContentBlock{protocol.Text("## Retained context")}}); err != nil {
			t.Fatalf("Replay: %v", err)
		}
		say(replay, "Next answer.")
		if got, want := agentText(t, replay.Lines()), []string{"Earlier answer.\n\nCompacting completed.\n\n## Retained context\n\nNext answer."}; !slices.Equal(got, want) {
			t.Fatalf("replay: agent text:\ngot  %q\nwant %q", got, want)
		}
	})
}
