package fallback_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/fallback"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
)

// Tests at the emitter level: what a fallback client receives when the
// emitter drives the renderers.

var capableV1 = capability.Negotiation{Version: capability.V1, Compaction: true}

func TestChildCompactionOnAStandardClientsParentStreamIsOnlyAMarker(t *testing.T) {
	rec := &wiretest.Recorder{}
	em := emitter.New(rec, emitter.WithNegotiation(capableV1), emitter.WithChildRenderer(fallback.Marker()))
	if got := em.Mode(); got != capability.Standard {
		t.Fatalf("mode: got %v, want %v", got, capability.Standard)
	}
	ctx := context.Background()

	c, err := em.ChildSession("sess_parent", "sess_child").Start(ctx, emitter.WithID("cmp_1"), emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable())
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := c.Chunk(ctx, protocol.Text("child summary")); err != nil {
		t.Fatalf("Chunk: %v", err)
	}
	if err := c.Complete(ctx); err != nil {
		t.Fatalf("Complete: %v", err)
	}

	ups := rec.Updates()
	requireValidV1(t, rec.Lines())
	requireNoStandardUpdates(t, ups) // a standard update here would read as the parent's own compaction
	for _, u := range ups {
		if got := u["·session"]; got != "sess_parent" {
			t.Fatalf("update sent to session %v, want sess_parent: %v", got, u)
		}
	}
	want := []map[string]any{
		{"status": "started", "compactionId": "cmp_1", "trigger": "auto", "childSessionId": "sess_child"},
		{"status": "completed", "compactionId": "cmp_1", "trigger": "auto", "childSessionId": "sess_child"},
	}
	if got := markers(ups, fallback.DefaultMarkerKey); !reflect.DeepEqual(got, want) {
		t.Fatalf("markers:\ngot  %v\nwant %v", got, want)
	}

	// The parent's own compactions stay standard on the same connection.
	rec.Reset()
	p, err := em.Session("sess_parent").Start(ctx, emitter.WithID("cmp_p"))
	if err != nil {
		t.Fatalf("parent Start: %v", err)
	}
	if err := p.Complete(ctx); err != nil {
		t.Fatalf("parent Complete: %v", err)
	}
	wantKinds := []string{protocol.KindUpdate, protocol.KindUpdate}
	if got := kinds(rec.Updates()); !slices.Equal(got, wantKinds) {
		t.Fatalf("the parent's own compaction: kinds got %q, want %q", got, wantKinds)
	}
}

func TestChildCompactionGoesToTheChildsOwnStreamWithChildStreams(t *testing.T) {
	rec := &wiretest.Recorder{}
	em := emitter.New(rec, emitter.WithNegotiation(capableV1), emitter.WithChildRenderer(fallback.Marker()), emitter.WithChildStreams())
	ctx := context.Background()
	c, err := em.ChildSession("sess_parent", "sess_child").Start(ctx, emitter.WithID("cmp_1"))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := c.Complete(ctx); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	ups := rec.Updates()
	want := []string{protocol.KindUpdate, protocol.KindUpdate}
	if got := kinds(ups); !slices.Equal(got, want) {
		t.Fatalf("kinds: got %q, want %q", got, want)
	}
	for _, u := range ups {
		if got := u["·session"]; got != "sess_child" {
			t.Fatalf("update sent to session %v, want sess_child: %v", got, u)
		}
	}
	if m := markers(ups, fallback.DefaultMarkerKey); len(m) != 0 {
		t.Fatalf("markers: got %v, want none", m)
	}
}

func TestChildCompactionOnAFallbackClientUsesTheChildRenderer(t *testing.T) {
	rec := &wiretest.Recorder{}
	em := emitter.New(rec, emitter.WithNegotiation(v1NoCapability),
		emitter.WithFallback(fallback.Text()), emitter.WithChildRenderer(fallback.Marker()), emitter.WithChildStreams())
	ctx := context.Background()
	c, err := em.ChildSession("sess_parent", "sess_child").Start(ctx, emitter.WithID("cmp_1"))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := c.Cancel(ctx); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	ups := rec.Updates()
	requireNoStandardUpdates(t, ups)
	want := []string{"session_info_update", "session_info_update"}
	if got := kinds(ups); !slices.Equal(got, want) {
		t.Fatalf("kinds: got %q, want %q; child streams are for standard clients, a fallback client sees the child marker on the parent", got, want)
	}
	m := markers(ups, fallback.DefaultMarkerKey)
	if got := m[1]["status"]; got != "cancelled" {
		t.Fatalf("outcome marker status: got %v, want cancelled", got)
	}
	if got := m[1]["childSessionId"]; got != "sess_child" {
		t.Fatalf("outcome marker childSessionId: got %v, want sess_child", got)
	}
}

// historyMarker is an ordinary history item the test replays around the
// compactions, to see where each one lands.
func historyMarker(t *testing.T, rec *wiretest.Recorder, text string) {
	t.Helper()
	if err := rec.Notify(context.Background(), "sess_1", map[string]any{
		"sessionUpdate": "user_message_chunk", "content": map[string]any{"type": "text", "text": text},
	}); err != nil {
		t.Fatalf("history item %q: %v", text, err)
	}
}

func TestReplayRendersEachSettledCompactionOnceAtItsPositionAndSkipsRunningOnes(t *testing.T) {
	for _, tc := range goldenRenderers() {
		t.Run(tc.name, func(t *testing.T) {
			em, rec := newFallbackEmitter(t, tc.r)
			s := em.Session("sess_1")
			ctx := context.Background()
			replay := func(r emitter.Record) {
				t.Helper()
				if err := s.Replay(ctx, r); err != nil {
					t.Fatalf("Replay %s (%s): %v", r.ID, r.Status, err)
				}
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
				if err != nil {
					t.Fatalf("classify %s: %v", l, err)
				}
				if li.kind == "user_message_chunk" {
					segments = append(segments, nil)
					continue
				}
				if li.form == formStart {
					t.Fatalf("a replay has no start form: %s", l)
				}
				segments[len(segments)-1] = append(segments[len(segments)-1], li)
			}
			if len(segments) != 3 {
				t.Fatalf("got %d segments, want 3 (one per history item): %v", len(segments), segments)
			}
			carriers := map[string]bool{}
			for _, li := range segments[0] {
				carriers[li.carrier] = true
			}
			perOutcome := len(carriers)
			if tc.name == "none" && perOutcome != 0 {
				t.Fatalf("none: got %d carriers for cmp_1's outcome, want 0", perOutcome)
			}
			if tc.name != "none" && perOutcome == 0 {
				t.Fatalf("no carrier for cmp_1's outcome")
			}
			// cmp_1 | cmp_3 (cmp_2 skipped) | cmp_4 (cmp_5 skipped)
			for i, seg := range segments {
				terminals := 0
				for _, li := range seg {
					if li.form == formTerminal {
						terminals++
					}
				}
				if terminals != perOutcome {
					t.Fatalf("segment %d: got %d terminal forms, want %d (one outcome per carrier): %v", i, terminals, perOutcome, seg)
				}
			}
			// A later live start of a replayed ID is refused: replay marks it used.
			_, err := s.Start(ctx, emitter.WithID("cmp_2"))
			if !errors.Is(err, emitter.ErrIDReused) {
				t.Fatalf("live start of replayed cmp_2: got error %v, want %v", err, emitter.ErrIDReused)
			}
		})
	}
}

func TestWithheldSummaryNeverReachesTheTextEvenWithTheOptIn(t *testing.T) {
	em, rec := newFallbackEmitter(t, fallback.Text(fallback.WithSummary()))
	ctx := context.Background()
	s := em.Session("sess_1")
	// Not marked UserDisplayable: the default policy withholds its summary.
	c, err := s.Start(ctx, emitter.WithID("cmp_1"))
	if err != nil {
		t.Fatalf("Start cmp_1: %v", err)
	}
	if err := c.Chunk(ctx, protocol.Text("SECRET streamed")); !errors.Is(err, emitter.ErrWithheld) {
		t.Fatalf("Chunk cmp_1: got error %v, want %v", err, emitter.ErrWithheld)
	}
	if err := c.Complete(ctx, emitter.Summary(protocol.Text("SECRET final"))); err != nil {
		t.Fatalf("Complete cmp_1: %v", err)
	}
	c2, err := s.Start(ctx, emitter.WithID("cmp_2"))
	if err != nil {
		t.Fatalf("Start cmp_2: %v", err)
	}
	if err := c2.Chunk(ctx, protocol.Text("SECRET streamed only")); !errors.Is(err, emitter.ErrWithheld) {
		t.Fatalf("Chunk cmp_2: got error %v, want %v", err, emitter.ErrWithheld)
	}
	if err := c2.Complete(ctx); err != nil {
		t.Fatalf("Complete cmp_2: %v", err)
	}
	if err := s.Replay(ctx, emitter.Record{ID: "cmp_3", Status: protocol.Completed, Summary: []protocol.ContentBlock{protocol.Text("SECRET replayed")}}); err != nil {
		t.Fatalf("Replay cmp_3: %v", err)
	}

	if wire := string(mustJSON(t, rec.Updates())); strings.Contains(wire, "SECRET") {
		t.Fatalf("a withheld summary reached the wire: %s", wire)
	}
	want := []string{"Compacting...", "\n\nCompacting completed.\n\n", "Compacting...", "\n\nCompacting completed.\n\n", "\n\nCompacting completed.\n\n"}
	if got := texts(rec.Updates()); !slices.Equal(got, want) {
		t.Fatalf("texts:\ngot  %q\nwant %q", got, want)
	}
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
	if err != nil {
		t.Fatalf("Start cmp_1: %v", err)
	}
	for _, chunk := range []string{"key sk-live-123 ", "rotated"} {
		if err := c.Chunk(ctx, protocol.Text(chunk)); err != nil {
			t.Fatalf("Chunk %q: %v", chunk, err)
		}
	}
	if err := c.Complete(ctx); err != nil {
		t.Fatalf("Complete cmp_1: %v", err)
	}
	c2, err := s.Start(ctx, emitter.WithID("cmp_2"))
	if err != nil {
		t.Fatalf("Start cmp_2: %v", err)
	}
	if err := c2.Complete(ctx, emitter.Summary(protocol.Text("final sk-live-123"))); err != nil {
		t.Fatalf("Complete cmp_2: %v", err)
	}
	if err := s.Replay(ctx, emitter.Record{ID: "cmp_3", Status: protocol.Completed, Summary: []protocol.ContentBlock{protocol.Text("replayed sk-live-123")}}); err != nil {
		t.Fatalf("Replay cmp_3: %v", err)
	}

	want := []string{
		"Compacting...", "\n\nCompacting completed.\n\n", "key [redacted] rotated", "\n\n",
		"Compacting...", "\n\nCompacting completed.\n\n", "final [redacted]", "\n\n",
		"\n\nCompacting completed.\n\n", "replayed [redacted]", "\n\n",
	}
	if got := texts(rec.Updates()); !slices.Equal(got, want) {
		t.Fatalf("texts:\ngot  %q\nwant %q", got, want)
	}
	if wire := string(mustJSON(t, rec.Updates())); strings.Contains(wire, "sk-live-123") {
		t.Fatalf("the unredacted key reached the wire: %s", wire)
	}
}

func TestHeartbeatsReachFallbackClientsWithoutEndingTheCompaction(t *testing.T) {
	for _, r := range []emitter.Renderer{fallback.Marker(), fallback.ToolCall()} {
		em, rec := newFallbackEmitter(t, r, emitter.WithHeartbeat(time.Millisecond))
		ctx := context.Background()
		c, err := em.Session("sess_1").Start(ctx, emitter.WithID("cmp_1"))
		if err != nil {
			t.Fatalf("%T: Start: %v", r, err)
		}
		// Wait (polling every millisecond, up to 5s) for the start and two heartbeats.
		for deadline := time.Now().Add(5 * time.Second); len(rec.Lines()) < 3; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%T: %d lines after 5s, want at least 3 (the start and two heartbeats)", r, len(rec.Lines()))
			}
		}
		if err := c.Complete(ctx); err != nil {
			t.Fatalf("%T: Complete: %v", r, err)
		}
		lines := rec.Lines()
		requireValidV1(t, lines)
		last, err := classify(lines[len(lines)-1])
		if err != nil {
			t.Fatalf("classify %s: %v", lines[len(lines)-1], err)
		}
		if last.form != formTerminal {
			t.Fatalf("%T: the last line is a %s form, want %s: %s", r, last.form, formTerminal, lines[len(lines)-1])
		}
		for _, l := range lines[:len(lines)-1] {
			li, err := classify(l)
			if err != nil {
				t.Fatalf("classify %s: %v", l, err)
			}
			if li.form == formTerminal {
				t.Fatalf("a heartbeat must never read as an outcome: %s", l)
			}
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
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if err := c.Complete(ctx, emitter.WithDetails(emitter.Details{TokensBefore: 180000, TokensAfter: 42000})); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if err := s.Replay(ctx, emitter.Record{ID: "cmp_0", Status: protocol.Failed, Error: "boom",
				Details: &emitter.Details{Trigger: protocol.Manual, Status: protocol.Failed, TokensBefore: 9}}); err != nil {
				t.Fatalf("Replay: %v", err)
			}
			lines := rec.Lines()
			requireValidV1(t, lines)
			ups := rec.Updates()
			for _, i := range []int{1, 2} { // the live outcome, then the replayed one
				meta, ok := ups[i]["_meta"].(map[string]any)
				if !ok {
					t.Fatalf("terminal carrier without _meta: %s", lines[i])
				}
				record, ok := meta[emitter.DefaultRecordKey].(map[string]any)
				if !ok {
					t.Fatalf("the emitter's record is missing: %s", lines[i])
				}
				// Present and non-zero, whatever JSON type it decodes to.
				if v := record["tokensBefore"]; v == nil || reflect.ValueOf(v).IsZero() {
					t.Fatalf("record tokensBefore: got %v, want non-zero: %s", v, lines[i])
				}
				if _, ok := meta[tc.markerKey]; tc.markerKey != "" && !ok {
					t.Fatalf("the marker must survive the merge: _meta has no %s: %s", tc.markerKey, lines[i])
				}
			}
			if got := ups[1]["_meta"].(map[string]any)["example.com/trace"]; got != "span-1" {
				t.Fatalf("outcome _meta example.com/trace: got %v, want span-1; the start's keys repeat on the outcome, as a v1 _meta replaces", got)
			}
		})
	}
}
