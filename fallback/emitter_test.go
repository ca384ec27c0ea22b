package fallback_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/require"
)

// Tests at the emitter level: what a fallback client receives when the
// emitter drives the renderers.

var capableV1 = capability.Negotiation{Version: capability.V1, Compaction: true}

// historyMarker is an ordinary history item the test replays around the
// compactions, to see where each one lands.
func historyMarker(t *testing.T, rec *wiretest.Recorder, text string) {
	t.Helper()
	require.NoError(t, rec.Notify(context.Background(), "sess_1", map[string]any{
		"sessionUpdate": "user_message_chunk", "content": map[string]any{"type": "text", "text": text},
	}), "history item %q", text)
}

func TestReplayRendersEachSettledCompactionOnceAtItsPositionAndSkipsRunningOnes(t *testing.T) {
	for _, tc := range goldenRenderers() {
		t.Run(tc.name, func(t *testing.T) {
			em, rec := newFallbackEmitter(t, tc.r)
			s := em.Session("sess_1")
			ctx := context.Background()
			replay := func(r emitter.Record) {
				t.Helper()
				require.NoError(t, s.Replay(ctx, r), "Replay %s (%s)", r.ID, r.Status)
			}
			historyMarker(t, rec, "h1")
			replay(emitter.Record{ID: "cmp_1", Status: protocol.Completed, Trigger: protocol.Auto})
			historyMarker(t, rec, "h2")
			replay(emitter.Record{ID: "cmp_2", Status: protocol.InProgress, Trigger: protocol.Auto})
			replay(emitter.Record{ID: "cmp_3", Status: protocol.Failed, Trigger: protocol.Manual, Error: "provider overloaded"})
			historyMarker(t, rec, "h3")
			replay(emitter.Record{ID: "cmp_4", Status: protocol.Cancelled, Trigger: protocol.Manual})
			replay(emitter.Record{ID: "cmp_5", Status: "_vendor_paused"})
			requireValidV1(t, rec.Lines())
			requireNoStandardUpdates(t, rec.Updates())

			// Split the wire at the history items: each segment must hold
			// exactly the outcome forms of the compactions replayed there.
			var segments [][]lineInfo
			for _, l := range rec.Lines() {
				li, err := classify(l)
				require.NoError(t, err, "classify %s", l)
				if li.kind == "user_message_chunk" {
					segments = append(segments, nil)
					continue
				}
				require.NotEqual(t, formStart, li.form, "a replay has no start form: %s", l)
				segments[len(segments)-1] = append(segments[len(segments)-1], li)
			}
			require.Len(t, segments, 3, "(one per history item)")
			carriers := map[string]bool{}
			for _, li := range segments[0] {
				carriers[li.carrier] = true
			}
			perOutcome := len(carriers)
			if tc.name == "none" {
				require.Zero(t, perOutcome, "none: carriers for cmp_1's outcome")
			} else {
				require.NotZero(t, perOutcome, "carriers for cmp_1's outcome")
			}
			// cmp_1 | cmp_3 (cmp_2 skipped) | cmp_4 (cmp_5 skipped)
			for i, seg := range segments {
				terminals := 0
				for _, li := range seg {
					if li.form == formTerminal {
						terminals++
					}
				}
				require.Equal(t, perOutcome, terminals, "segment %d (one outcome per carrier): %v", i, seg)
			}
			// A later live start of a replayed ID is refused: replay marks it used.
			_, err := s.Start(ctx, emitter.WithID("cmp_2"))
			require.ErrorIs(t, err, emitter.ErrIDReused, "live start of replayed cmp_2")
		})
	}
}

func TestWithheldSummaryNeverReachesTheTextEvenWithTheOptIn(t *testing.T) {
	em, rec := newFallbackEmitter(t, fallback.Text(fallback.WithSummary()))
	ctx := context.Background()
	s := em.Session("sess_1")
	// Not marked UserDisplayable: the default policy withholds its summary.
	c, err := s.Start(ctx, emitter.WithID("cmp_1"))
	require.NoError(t, err, "Start cmp_1")
	require.ErrorIs(t, c.Chunk(ctx, protocol.Text("SECRET streamed")), emitter.ErrWithheld, "Chunk cmp_1")
	require.NoError(t, c.Complete(ctx, emitter.Summary(protocol.Text("SECRET final"))), "Complete cmp_1")
	c2, err := s.Start(ctx, emitter.WithID("cmp_2"))
	require.NoError(t, err, "Start cmp_2")
	require.ErrorIs(t, c2.Chunk(ctx, protocol.Text("SECRET streamed only")), emitter.ErrWithheld, "Chunk cmp_2")
	require.NoError(t, c2.Complete(ctx), "Complete cmp_2")
	require.NoError(t, s.Replay(ctx, emitter.Record{ID: "cmp_3", Status: protocol.Completed, Summary: []protocol.ContentBlock{protocol.Text("SECRET replayed")}}), "Replay cmp_3")

	require.NotContains(t, string(mustJSON(t, rec.Updates())), "SECRET", "a withheld summary reached the wire")
	want := []string{"Compacting...", "\n\nCompacting completed.\n\n", "Compacting...", "\n\nCompacting completed.\n\n", "\n\nCompacting completed.\n\n"}
	require.Equal(t, want, texts(rec.Updates()), "texts")
}

func TestRedactingPolicysOutputIsWhatTheTextShows(t *testing.T) {
	redact := func(_ emitter.Info, b protocol.ContentBlock) (protocol.ContentBlock, bool) {
		b.Text = strings.ReplaceAll(b.Text, "sk-live-123", "[redacted]")
		return b, true
	}
	em, rec := newFallbackEmitter(t, fallback.Text(fallback.WithSummary()), emitter.WithSummaryPolicy(redact))
	ctx := context.Background()
	s := em.Session("sess_1")
	c, err := s.Start(ctx, emitter.WithID("cmp_1"))
	require.NoError(t, err, "Start cmp_1")
	for _, chunk := range []string{"key sk-live-123 ", "rotated"} {
		require.NoError(t, c.Chunk(ctx, protocol.Text(chunk)), "Chunk %q", chunk)
	}
	require.NoError(t, c.Complete(ctx), "Complete cmp_1")
	c2, err := s.Start(ctx, emitter.WithID("cmp_2"))
	require.NoError(t, err, "Start cmp_2")
	require.NoError(t, c2.Complete(ctx, emitter.Summary(protocol.Text("final sk-live-123"))), "Complete cmp_2")
	require.NoError(t, s.Replay(ctx, emitter.Record{ID: "cmp_3", Status: protocol.Completed, Summary: []protocol.ContentBlock{protocol.Text("replayed sk-live-123")}}), "Replay cmp_3")

	want := []string{
		"Compacting...", "\n\nCompacting completed.\n\n", "key [redacted] rotated", "\n\n",
		"Compacting...", "\n\nCompacting completed.\n\n", "final [redacted]", "\n\n",
		"\n\nCompacting completed.\n\n", "replayed [redacted]", "\n\n",
	}
	require.Equal(t, want, texts(rec.Updates()), "texts")
	require.NotContains(t, string(mustJSON(t, rec.Updates())), "sk-live-123", "the unredacted key reached the wire")
}

func TestHeartbeatsReachFallbackClientsWithoutEndingTheCompaction(t *testing.T) {
	for _, r := range []emitter.Renderer{fallback.Marker(), fallback.ToolCall()} {
		em, rec := newFallbackEmitter(t, r, emitter.WithHeartbeat(time.Millisecond))
		ctx := context.Background()
		c, err := em.Session("sess_1").Start(ctx, emitter.WithID("cmp_1"))
		require.NoError(t, err, "%T: Start", r)
		// Wait (polling every millisecond, up to 5s) for the start and two heartbeats.
		for deadline := time.Now().Add(5 * time.Second); len(rec.Lines()) < 3; time.Sleep(time.Millisecond) {
			require.False(t, time.Now().After(deadline), "%T: %d lines after 5s, want at least 3 (the start and two heartbeats)", r, len(rec.Lines()))
		}
		require.NoError(t, c.Complete(ctx), "%T: Complete", r)
		lines := rec.Lines()
		requireValidV1(t, lines)
		last, err := classify(lines[len(lines)-1])
		require.NoError(t, err, "classify %s", lines[len(lines)-1])
		require.Equal(t, formTerminal, last.form, "%T: the last line is a %s form", r, last.form)
		for _, l := range lines[:len(lines)-1] {
			li, err := classify(l)
			require.NoError(t, err, "classify %s", l)
			require.NotEqual(t, formTerminal, li.form, "a heartbeat must never read as an outcome: %s", l)
		}
	}
}

// The emitter places its compaction records in the terminal event's _meta;
// fallback clients must get them too, next to the marker, never instead.
func TestEmitterRecordsReachFallbackClientsBesideTheMarker(t *testing.T) {
	for _, tc := range []struct {
		name      string
		r         emitter.Renderer
		markerKey string
	}{
		{"marker", fallback.Marker(), fallback.DefaultMarkerKey},
		{"opencode-marker", fallback.OpencodeMarker(), fallback.OpencodeMarkerKey},
		{"toolcall", fallback.ToolCall(), ""},
		{"text", fallback.Text(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			em, rec := newFallbackEmitter(t, tc.r, emitter.WithRecords(""))
			ctx := context.Background()
			s := em.Session("sess_1")
			c, err := s.Start(ctx, emitter.WithID("cmp_1"), emitter.WithTrigger(protocol.Auto),
				emitter.WithStartMeta(protocol.Meta{"example.com/trace": mustJSON(t, "span-1")}))
			require.NoError(t, err, "Start")
			require.NoError(t, c.Complete(ctx, emitter.WithDetails(emitter.Details{TokensBefore: 180000, TokensAfter: 42000})), "Complete")
			require.NoError(t, s.Replay(ctx, emitter.Record{ID: "cmp_0", Status: protocol.Failed, Error: "boom",
				Details: &emitter.Details{Trigger: protocol.Manual, Status: protocol.Failed, TokensBefore: 9}}), "Replay")
			lines := rec.Lines()
			requireValidV1(t, lines)
			ups := rec.Updates()
			for _, i := range []int{1, 2} { // the live outcome, then the replayed one
				meta, ok := ups[i]["_meta"].(map[string]any)
				require.True(t, ok, "terminal carrier without _meta: %s", lines[i])
				record, ok := meta[emitter.DefaultRecordKey].(map[string]any)
				require.True(t, ok, "the emitter's record is missing: %s", lines[i])
				// Present and non-zero, whatever JSON type it decodes to.
				v := record["tokensBefore"]
				require.NotNil(t, v, "record tokensBefore")
				require.False(t, reflect.ValueOf(v).IsZero(), "record tokensBefore: got %v, want non-zero: %s", v, lines[i])
				if tc.markerKey != "" {
					require.Contains(t, meta, tc.markerKey, "the marker must survive the merge: %s", lines[i])
				}

			}
			require.Equal(t, "span-1", ups[1]["_meta"].(map[string]any)["example.com/trace"], "outcome _meta example.com/trace ; the start's keys repeat on the outcome, as a v1 _meta replaces")
		})
	}
}
