package emitter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/acpschema/schematest"
	"github.com/acpcompact/acpcompact/internal/wiretest"
	"github.com/acpcompact/acpcompact/protocol"
)

var capable = capability.Negotiation{Version: 1, Compaction: true}

// events collects observer events for assertions.
type events struct {
	mu  sync.Mutex
	evs []emitter.Event
	ch  chan emitter.Event
}

func newEvents() *events { return &events{ch: make(chan emitter.Event, 1024)} }

func (e *events) Observe(_ context.Context, ev emitter.Event) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
	select {
	case e.ch <- ev:
	default:
	}
}

func (e *events) kinds() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.evs {
		out = append(out, ev.Kind.String())
	}
	return out
}

// waitFor blocks until an event of kind arrives (no timing assertion: the
// test fails only if it never comes).
func (e *events) waitFor(t *testing.T, kind emitter.EventKind) emitter.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-e.ch:
			if ev.Kind == kind {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s event; saw %v", kind, e.kinds())
		}
	}
}

func newCapable(t *testing.T, opts ...emitter.Option) (*emitter.Emitter, *wiretest.Recorder, *events) {
	t.Helper()
	rec := &wiretest.Recorder{}
	obs := newEvents()
	all := append([]emitter.Option{emitter.WithNegotiation(capable), emitter.WithObserver(obs), emitter.WithSummaryPolicy(emitter.AllSummaries)}, opts...)
	return emitter.New(rec, all...), rec, obs
}

// wire renders the recorded updates compactly: kind/id/status plus the
// patch fields present, so assertions read like the RFD's examples.
func wire(rec *wiretest.Recorder) []string {
	var out []string
	for _, u := range rec.Updates() {
		s := fmt.Sprintf("%s %s", u["sessionUpdate"], u["compactionId"])
		if st, ok := u["status"]; ok {
			s += " " + st.(string)
		}
		if c, ok := u["content"].(map[string]any); ok {
			s += fmt.Sprintf(" +%q", c["text"])
		}
		for _, k := range []string{"summary", "error", "_meta"} {
			if v, ok := u[k]; ok {
				switch v := v.(type) {
				case nil:
					s += " " + k + "=null"
				case []any:
					var texts []string
					for _, b := range v {
						texts = append(texts, fmt.Sprint(b.(map[string]any)["text"]))
					}
					s += fmt.Sprintf(" %s=%q", k, texts)
				default:
					s += fmt.Sprintf(" %s=%v", k, v)
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// noLines fails t unless rec holds no lines; why says what that shows.
func noLines(t *testing.T, rec *wiretest.Recorder, why string) {
	t.Helper()
	if lines := rec.Lines(); len(lines) != 0 {
		t.Errorf("%d lines sent, want none (%s):\n%s", len(lines), why, bytes.Join(lines, []byte("\n")))
	}
}

func validateAll(t *testing.T, rec *wiretest.Recorder, version int) {
	t.Helper()
	v := schematest.For(t, version)
	for _, l := range rec.Lines() {
		if err := v.Update(wiretest.RawUpdate(l)); err != nil {
			t.Errorf("v%d update schema: %v\nline: %s", version, err, l)
		}
		if err := v.Message(l); err != nil {
			t.Errorf("v%d message schema: %v\nline: %s", version, err, l)
		}
	}
}

func TestLifecycleTransitions(t *testing.T) {
	ctx := context.Background()
	em, rec, _ := newCapable(t)
	s := em.Session("s1")

	a, err := s.Start(ctx, emitter.WithID("a"))
	if err != nil {
		t.Fatalf("Start a: %v", err)
	}
	if err := a.Chunk(ctx, protocol.Text("## Retained")); err != nil {
		t.Fatalf("a.Chunk 1: %v", err)
	}
	if err := a.Chunk(ctx, protocol.Text(" context")); err != nil {
		t.Fatalf("a.Chunk 2: %v", err)
	}
	if err := a.Complete(ctx, emitter.Summary(protocol.Text("## Retained context"))); err != nil {
		t.Fatalf("a.Complete: %v", err)
	}

	b, _ := s.Start(ctx, emitter.WithID("b"))
	if err := b.Chunk(ctx, protocol.Text("partial")); err != nil {
		t.Fatalf("b.Chunk: %v", err)
	}
	if err := b.Fail(ctx, errors.New("summary request failed")); err != nil {
		t.Fatalf("b.Fail: %v", err)
	}

	c, _ := s.Start(ctx, emitter.WithID("c"))
	if err := c.Cancel(ctx); err != nil {
		t.Fatalf("c.Cancel: %v", err)
	}

	// A runtime that only exposes completed compactions.
	d, _ := s.Start(ctx, emitter.WithID("d"))
	if err := d.Complete(ctx); err != nil {
		t.Fatalf("d.Complete: %v", err)
	}

	want := []string{
		`compaction_update a in_progress`,
		`compaction_summary_chunk a +"## Retained"`,
		`compaction_summary_chunk a +" context"`,
		`compaction_update a completed summary=["## Retained context"]`,
		`compaction_update b in_progress`,
		`compaction_summary_chunk b +"partial"`,
		`compaction_update b failed summary=null error=summary request failed`,
		`compaction_update c in_progress`,
		`compaction_update c cancelled`,
		`compaction_update d in_progress`,
		`compaction_update d completed`,
	}
	if got := wire(rec); !slices.Equal(got, want) {
		t.Errorf("wire:\n got %q\nwant %q", got, want)
	}
	if n := emitter.OpenCount(em); n != 0 {
		t.Errorf("open compactions: got %d, want 0", n)
	}
	validateAll(t, rec, 1)
}

func TestCompactionIDsAreNeverReusedEvenAfterSettlement(t *testing.T) {
	ctx := context.Background()
	em, rec, obs := newCapable(t)
	s := em.Session("s1")
	c, err := s.Start(ctx, emitter.WithID("x"))
	if err != nil {
		t.Fatalf("Start x: %v", err)
	}
	_, err = s.Start(ctx, emitter.WithID("x"))
	if !errors.Is(err, emitter.ErrIDReused) {
		t.Errorf("Start x while x is open: got %v, want ErrIDReused (an open ID is never overwritten)", err)
	}
	if err := c.Complete(ctx); err != nil {
		t.Fatalf("Complete x: %v", err)
	}
	_, err = s.Start(ctx, emitter.WithID("x"))
	if !errors.Is(err, emitter.ErrIDReused) {
		t.Errorf("Start x after x settled: got %v, want ErrIDReused (a settled ID is never reused)", err)
	}
	if !strings.Contains(err.Error(), "s1") {
		t.Errorf("ErrIDReused text %q does not name the session s1", err)
	}
	if !strings.Contains(err.Error(), "x") {
		t.Errorf("ErrIDReused text %q does not name the ID x", err)
	}
	_, err = s.Start(ctx, emitter.WithID(""))
	if !errors.Is(err, protocol.ErrInvalidID) {
		t.Errorf("Start with an empty ID: got %v, want protocol.ErrInvalidID", err)
	}

	// The same ID in another session is a different compaction.
	_, err = em.Session("s2").Start(ctx, emitter.WithID("x"))
	if err != nil {
		t.Errorf("Start x in another session: %v", err)
	}

	// Replayed IDs are used too.
	if err := s.Replay(ctx, emitter.Record{ID: "old", Status: protocol.Completed}); err != nil {
		t.Fatalf("Replay old: %v", err)
	}
	_, err = s.Start(ctx, emitter.WithID("old"))
	if !errors.Is(err, emitter.ErrIDReused) {
		t.Errorf("Start of a replayed ID: got %v, want ErrIDReused", err)
	}
	if kinds := obs.kinds(); !slices.Contains(kinds, "dropped") {
		t.Errorf("observed events %v: no dropped event", kinds)
	}
	if got := wire(rec); len(got) != 4 {
		t.Errorf("wire: got %d updates %q, want 4 (refused starts send nothing)", len(got), got)
	}
}

func TestMintedIDsAreUniqueAndSkipUsedOnes(t *testing.T) {
	ctx := context.Background()
	seq := []protocol.ID{"dup", "dup", "dup", "fresh"}
	i := 0
	em, _, _ := newCapable(t, emitter.WithIDGenerator(func() protocol.ID { i++; return seq[i-1] }))
	s := em.Session("s")
	a, err := s.Start(ctx)
	if err != nil {
		t.Fatalf("first Start: %v", err)
	}
	b, err := s.Start(ctx)
	if err != nil {
		t.Fatalf("second Start: %v", err)
	}
	if a.ID() != "dup" {
		t.Errorf("first minted ID: got %q, want %q", a.ID(), "dup")
	}
	if b.ID() != "fresh" {
		t.Errorf("second minted ID: got %q, want %q (the used ID skipped)", b.ID(), "fresh")
	}

	em2, _, _ := newCapable(t)
	seen := map[protocol.ID]bool{}
	for range 1000 {
		c, err := em2.Session("s").Start(ctx)
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		if !strings.HasPrefix(string(c.ID()), "cmp_") {
			t.Errorf("minted ID %q: want the prefix cmp_", c.ID())
		}
		if seen[c.ID()] {
			t.Errorf("minted ID %q twice", c.ID())
		}
		seen[c.ID()] = true
	}
}

func TestSeveralOpenCompactionsSettleIndependently(t *testing.T) {
	ctx := context.Background()
	em, rec, _ := newCapable(t)
	s := em.Session("s")
	a, _ := s.Start(ctx, emitter.WithID("a"))
	b, _ := s.Start(ctx, emitter.WithID("b"))
	if n := s.Open(); n != 2 {
		t.Errorf("open compactions: got %d, want 2", n)
	}
	if err := b.Chunk(ctx, protocol.Text("b1")); err != nil {
		t.Fatalf("b.Chunk: %v", err)
	}
	if err := a.Chunk(ctx, protocol.Text("a1")); err != nil {
		t.Fatalf("a.Chunk: %v", err)
	}
	if err := b.Complete(ctx); err != nil {
		t.Fatalf("b.Complete: %v", err)
	}
	if err := a.Complete(ctx); err != nil {
		t.Fatalf("a.Complete: %v", err)
	}
	want := []string{
		`compaction_update a in_progress`,
		`compaction_update b in_progress`,
		`compaction_summary_chunk b +"b1"`,
		`compaction_summary_chunk a +"a1"`,
		`compaction_update b completed`,
		`compaction_update a completed`,
	}
	if got := wire(rec); !slices.Equal(got, want) {
		t.Errorf("wire:\n got %q\nwant %q", got, want)
	}
}

func TestChunksOutsideAnOpenCompactionAreDroppedAndReported(t *testing.T) {
	ctx := context.Background()
	em, rec, obs := newCapable(t)
	s := em.Session("s")
	err := s.Chunk(ctx, "early", protocol.Text("before start"))
	if !errors.Is(err, emitter.ErrNotOpen) {
		t.Errorf("Chunk before Start: got %v, want ErrNotOpen", err)
	}
	c, _ := s.Start(ctx, emitter.WithID("c"))
	if err := s.Chunk(ctx, "c", protocol.Text("ok")); err != nil {
		t.Fatalf("Session.Chunk c: %v", err)
	}
	if err := c.Complete(ctx); err != nil {
		t.Fatalf("Complete c: %v", err)
	}
	if err := c.Chunk(ctx, protocol.Text("late")); !errors.Is(err, emitter.ErrSettled) {
		t.Errorf("Compaction.Chunk after settlement: got %v, want ErrSettled", err)
	}
	if err := s.Chunk(ctx, "c", protocol.Text("late")); !errors.Is(err, emitter.ErrSettled) {
		t.Errorf("Session.Chunk after settlement: got %v, want ErrSettled", err)
	}
	want := []string{
		`compaction_update c in_progress`,
		`compaction_summary_chunk c +"ok"`,
		`compaction_update c completed`,
	}
	if got := wire(rec); !slices.Equal(got, want) {
		t.Errorf("wire:\n got %q\nwant %q", got, want)
	}
	dropped := 0
	for _, k := range obs.kinds() {
		if k == "dropped" {
			dropped++
		}
	}
	if dropped != 3 {
		t.Errorf("dropped events: got %d, want 3", dropped)
	}
}

func TestExactlyOneTerminalPerID(t *testing.T) {
	ctx := context.Background()
	em, rec, obs := newCapable(t)
	s := em.Session("s")
	c, _ := s.Start(ctx, emitter.WithID("c"))
	if err := c.Complete(ctx); err != nil {
		t.Fatalf("Complete c: %v", err)
	}
	if err := c.Fail(ctx, errors.New("late")); !errors.Is(err, emitter.ErrSettled) {
		t.Errorf("Compaction.Fail after settlement: got %v, want ErrSettled", err)
	}
	if err := c.Cancel(ctx); !errors.Is(err, emitter.ErrSettled) {
		t.Errorf("Compaction.Cancel after settlement: got %v, want ErrSettled", err)
	}
	if err := c.Complete(ctx); !errors.Is(err, emitter.ErrSettled) {
		t.Errorf("Compaction.Complete after settlement: got %v, want ErrSettled", err)
	}
	if err := s.Complete(ctx, "c"); !errors.Is(err, emitter.ErrSettled) {
		t.Errorf("Session.Complete after settlement: got %v, want ErrSettled", err)
	}
	if err := s.Cancel(ctx, "c"); !errors.Is(err, emitter.ErrSettled) {
		t.Errorf("Session.Cancel after settlement: got %v, want ErrSettled", err)
	}
	if err := s.Fail(ctx, "c", errors.New("x")); !errors.Is(err, emitter.ErrSettled) {
		t.Errorf("Session.Fail after settlement: got %v, want ErrSettled", err)
	}
	if err := s.Complete(ctx, "never"); !errors.Is(err, emitter.ErrNotOpen) {
		t.Errorf("Session.Complete of an unknown ID: got %v, want ErrNotOpen", err)
	}
	n, err := s.SettleAll(ctx, emitter.ErrTurnEnded)
	if err != nil {
		t.Errorf("SettleAll: %v", err)
	}
	if n != 0 {
		t.Errorf("SettleAll settled %d, want 0", n)
	}
	want := []string{`compaction_update c in_progress`, `compaction_update c completed`}
	if got := wire(rec); !slices.Equal(got, want) {
		t.Errorf("wire:\n got %q\nwant %q", got, want)
	}
	if kinds := obs.kinds(); !slices.Contains(kinds, "dropped") {
		t.Errorf("observed events %v: no dropped event", kinds)
	}
}

func TestFailureBeforeStartIsSentAsInProgressThenFailed(t *testing.T) {
	ctx := context.Background()
	em, rec, _ := newCapable(t)
	if err := em.Session("s").Fail(ctx, "early", errors.New("provider overloaded")); err != nil {
		t.Fatalf("Session.Fail before Start: %v", err)
	}
	want := []string{
		`compaction_update early in_progress`,
		`compaction_update early failed error=provider overloaded`,
	}
	if got := wire(rec); !slices.Equal(got, want) {
		t.Errorf("wire:\n got %q\nwant %q", got, want)
	}
}

func TestFinalSummaryIsAnAuthoritativeReplacement(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		opts []emitter.SettleOption
		want string
	}{
		{"omitted keeps the streamed content", nil, `compaction_update c completed`},
		{"concrete summary replaces", []emitter.SettleOption{emitter.Summary(protocol.Text("new"))}, `compaction_update c completed summary=["new"]`},
		{"ClearSummary sends null", []emitter.SettleOption{emitter.Summary()}, `compaction_update c completed summary=null`},
		{"empty Summary clears", []emitter.SettleOption{emitter.Summary()}, `compaction_update c completed summary=null`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			em, rec, _ := newCapable(t)
			c, _ := em.Session("s").Start(ctx, emitter.WithID("c"))
			if err := c.Chunk(ctx, protocol.Text("streamed")); err != nil {
				t.Fatalf("Chunk: %v", err)
			}
			if err := c.Complete(ctx, tc.opts...); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			w := wire(rec)
			if got := w[len(w)-1]; got != tc.want {
				t.Errorf("terminal update: got %q, want %q", got, tc.want)
			}
			validateAll(t, rec, 1)
		})
	}
}

func TestOmitRedundantSummaryComparesByRunningHash(t *testing.T) {
	ctx := context.Background()
	em, rec, _ := newCapable(t, emitter.WithOmitRedundantSummary())
	s := em.Session("s")
	a, _ := s.Start(ctx, emitter.WithID("same"))
	for _, part := range []string{"## Retained", " context\n", "more"} {
		if err := a.Chunk(ctx, protocol.Text(part)); err != nil {
			t.Fatalf("Chunk %q: %v", part, err)
		}
	}
	if err := a.Complete(ctx, emitter.Summary(protocol.Text("## Retained context\nmore"))); err != nil {
		t.Fatalf("Complete same: %v", err)
	}
	b, _ := s.Start(ctx, emitter.WithID("differs"))
	if err := b.Chunk(ctx, protocol.Text("draft")); err != nil {
		t.Fatalf("Chunk differs: %v", err)
	}
	if err := b.Complete(ctx, emitter.Summary(protocol.Text("final"))); err != nil {
		t.Fatalf("Complete differs: %v", err)
	}
	c, _ := s.Start(ctx, emitter.WithID("nothing-streamed"))
	if err := c.Complete(ctx, emitter.Summary(protocol.Text("x"))); err != nil {
		t.Fatalf("Complete nothing-streamed: %v", err)
	}
	w := wire(rec)
	for _, want := range []string{
		`compaction_update same completed`,
		`compaction_update differs completed summary=["final"]`,
		`compaction_update nothing-streamed completed summary=["x"]`,
	} {
		if !slices.Contains(w, want) {
			t.Errorf("wire %q: no %q", w, want)
		}
	}
	// The record still knows the final summary for replay.
	if got, want := a.Record().Summary[0].Text, "## Retained context\nmore"; got != want {
		t.Errorf("recorded summary: got %q, want %q", got, want)
	}
}

func TestFailureTextIsHumanReadable(t *testing.T) {
	ctx := context.Background()
	trace := errors.New("panic: runtime error: index out of range\n\ngoroutine 1 [running]:\nmain.main()")
	cases := []struct {
		name  string
		opts  []emitter.Option
		cause error
		want  string
	}{
		{"short prose passes", nil, errors.New("summary request failed"), "summary request failed"},
		{"stack trace becomes generic", nil, trace, "Compaction failed"},
		{"empty becomes generic", nil, errors.New(" "), "Compaction failed"},
		{"nil becomes generic", nil, nil, "Compaction failed"},
		{"very long becomes generic", nil, errors.New(strings.Repeat("x", 400)), "Compaction failed"},
		{"generic text configurable", []emitter.Option{emitter.WithGenericError("Context compaction failed")}, trace, "Context compaction failed"},
		{"whole mapping configurable", []emitter.Option{emitter.WithErrorText(func(error) string { return "nope" })}, errors.New("x"), "nope"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			em, rec, obs := newCapable(t, tc.opts...)
			c, _ := em.Session("s").Start(ctx, emitter.WithID("c"))
			if err := c.Fail(ctx, tc.cause); err != nil {
				t.Fatalf("Fail: %v", err)
			}
			w := wire(rec)
			if got, want := w[len(w)-1], "compaction_update c failed error="+tc.want; got != want {
				t.Errorf("terminal update: got %q, want %q", got, want)
			}
			if tc.cause != nil {
				settled := obs.waitFor(t, emitter.EventSettled)
				if !reflect.DeepEqual(settled.Err, tc.cause) {
					t.Errorf("settled event's error: got %v, want %v (observers see the full cause)", settled.Err, tc.cause)
				}
			}
		})
	}
}

func TestSettleAllDistinguishesCancelFromFailure(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		reason error
		want   string
	}{
		{emitter.ErrCancelled, "cancelled"},
		{fmt.Errorf("turn: %w", emitter.ErrCancelled), "cancelled"},
		{emitter.ErrTurnEnded, "failed error=" + emitter.ErrTurnEnded.Error()},
		{emitter.ErrConnectionClosed, "failed error=" + emitter.ErrConnectionClosed.Error()},
		{errors.New("provider returned 529"), "failed error=provider returned 529"},
		{nil, "failed error=" + emitter.ErrTurnEnded.Error()},
	} {
		t.Run(fmt.Sprint(tc.reason), func(t *testing.T) {
			em, rec, _ := newCapable(t)
			s := em.Session("s")
			_, _ = s.Start(ctx, emitter.WithID("a"))
			_, _ = s.Start(ctx, emitter.WithID("b"))
			done, _ := s.Start(ctx, emitter.WithID("done"))
			if err := done.Complete(ctx); err != nil {
				t.Fatalf("Complete done: %v", err)
			}
			other, _ := em.Session("other").Start(ctx, emitter.WithID("o"))
			n, err := s.SettleAll(ctx, tc.reason)
			if err != nil {
				t.Fatalf("SettleAll: %v", err)
			}
			if n != 2 {
				t.Errorf("SettleAll settled %d, want 2", n)
			}
			w := wire(rec)
			if got, want := w[len(w)-2], "compaction_update a "+tc.want; got != want {
				t.Errorf("first settled (oldest first): got %q, want %q", got, want)
			}
			if got, want := w[len(w)-1], "compaction_update b "+tc.want; got != want {
				t.Errorf("second settled: got %q, want %q", got, want)
			}
			if n := emitter.OpenCount(em); n != 1 {
				t.Errorf("open compactions: got %d, want 1 (other sessions are untouched)", n)
			}
			n, _ = em.SettleAll(ctx, emitter.ErrConnectionClosed)
			if n != 1 {
				t.Errorf("Emitter.SettleAll settled %d, want 1", n)
			}
			if err := other.Complete(ctx); !errors.Is(err, emitter.ErrSettled) {
				t.Errorf("Complete of the other session's compaction after Emitter.SettleAll: got %v, want ErrSettled", err)
			}
		})
	}
}

func TestWatchdogSettlesARunawayCompactionAsFailed(t *testing.T) {
	ctx := context.Background()
	em, rec, obs := newCapable(t, emitter.WithMaxDuration(20*time.Millisecond))
	c, _ := em.Session("s").Start(ctx, emitter.WithID("runaway"))
	ev := obs.waitFor(t, emitter.EventSettled)
	if ev.Status != protocol.Failed {
		t.Errorf("settled status: got %q, want %q", ev.Status, protocol.Failed)
	}
	if !errors.Is(ev.Err, emitter.ErrTimeout) {
		t.Errorf("settled event's error: got %v, want ErrTimeout", ev.Err)
	}
	if err := c.Complete(ctx); !errors.Is(err, emitter.ErrSettled) {
		t.Errorf("the runtime's late Complete: got %v, want ErrSettled (it is dropped)", err)
	}
	w := wire(rec)
	if got, want := w[len(w)-1], "compaction_update runaway failed error=compaction timed out after 20ms"; got != want {
		t.Errorf("terminal update: got %q, want %q", got, want)
	}
}

func TestHeartbeatResendsInProgressDuringSilence(t *testing.T) {
	ctx := context.Background()
	em, rec, obs := newCapable(t, emitter.WithHeartbeat(5*time.Millisecond))
	c, _ := em.Session("s").Start(ctx, emitter.WithID("slow"))
	obs.waitFor(t, emitter.EventHeartbeat)
	if err := c.Complete(ctx); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	w := wire(rec)
	if len(w) < 3 {
		t.Errorf("wire: got %d updates %q, want at least 3 (start, a heartbeat, the terminal)", len(w), w)
	}
	for _, l := range w[1 : len(w)-1] {
		if want := "compaction_update slow in_progress"; l != want {
			t.Errorf("heartbeat: got %q, want %q (heartbeats are field-less in_progress updates)", l, want)
		}
	}
	n := len(rec.Lines())
	time.Sleep(20 * time.Millisecond)
	if got := len(rec.Lines()); got != n {
		t.Errorf("lines 20ms after settlement: got %d, want %d (no heartbeat after settlement)", got, n)
	}
}

func TestTerminalUpdatesSurviveACancelledContext(t *testing.T) {
	var sawCancelled bool
	var lines int
	n := emitter.NotifierFunc(func(ctx context.Context, _ string, _ any) error {
		if ctx.Err() != nil {
			sawCancelled = true
			return ctx.Err()
		}
		lines++
		return nil
	})
	em := emitter.New(n, emitter.WithNegotiation(capable))
	ctx, cancel := context.WithCancel(context.Background())
	c, err := em.Session("s").Start(ctx)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	cancel()
	if err := c.Cancel(ctx); err != nil {
		t.Fatalf("Cancel with a cancelled context: %v", err)
	}
	if sawCancelled {
		t.Error("the notifier got a cancelled context for the terminal update")
	}
	if lines != 2 {
		t.Errorf("lines sent: got %d, want 2", lines)
	}
	_, err = em.Session("s").Start(ctx)
	if !errors.Is(err, emitter.ErrUndeliverable) {
		t.Errorf("Start with a cancelled context: got %v, want ErrUndeliverable (non-terminal updates honour the caller's context)", err)
	}
}

func TestUndeliverableUpdatesAreReportedAndStillSettle(t *testing.T) {
	ctx := context.Background()
	em, rec, obs := newCapable(t)
	c, _ := em.Session("s").Start(ctx, emitter.WithID("c"))
	rec.Fail = errors.New("broken pipe")
	err := c.Complete(ctx)
	if !errors.Is(err, emitter.ErrUndeliverable) {
		t.Errorf("Complete over a broken notifier: got %v, want ErrUndeliverable", err)
	}
	if !strings.Contains(err.Error(), "broken pipe") {
		t.Errorf("error %q does not carry the notifier's error %q", err, "broken pipe")
	}
	if n := emitter.OpenCount(em); n != 0 {
		t.Errorf("open compactions: got %d, want 0", n)
	}
	if kinds := obs.kinds(); !slices.Contains(kinds, "undeliverable") {
		t.Errorf("observed events %v: no undeliverable event", kinds)
	}
}

func TestReplayIsTerminalFirstAtTheCallersPosition(t *testing.T) {
	ctx := context.Background()
	em, rec, obs := newCapable(t)
	s := em.Session("s")
	for _, r := range []emitter.Record{
		{ID: "done", Status: protocol.Completed, Summary: []protocol.ContentBlock{protocol.Text("kept")}, Displayable: true},
		{ID: "nosum", Status: protocol.Completed},
		{ID: "bad", Status: protocol.Failed, Error: "summary request failed"},
		{ID: "stopped", Status: protocol.Cancelled},
		{ID: "running", Status: protocol.InProgress},
	} {
		if err := s.Replay(ctx, r); err != nil {
			t.Fatalf("Replay %s: %v", r.ID, err)
		}
	}
	if err := s.Replay(ctx, emitter.Record{}); !errors.Is(err, protocol.ErrInvalidID) {
		t.Errorf("Replay of a record without an ID: got %v, want protocol.ErrInvalidID", err)
	}
	// Replay uses authoritative patches so a client that still holds the
	// entity ends with exactly the stored state, never a duplicate.
	want := []string{
		`compaction_update done completed summary=["kept"] error=null`,
		`compaction_update nosum completed summary=null error=null`,
		`compaction_update bad failed summary=null error=summary request failed`,
		`compaction_update stopped cancelled summary=null error=null`,
	}
	if got := wire(rec); !slices.Equal(got, want) {
		t.Errorf("wire:\n got %q\nwant %q", got, want)
	}
	if kinds := obs.kinds(); !slices.Contains(kinds, "skipped") {
		t.Errorf("observed events %v: no skipped event", kinds)
	}
	if n := emitter.OpenCount(em); n != 0 {
		t.Errorf("open compactions: got %d, want 0", n)
	}
	validateAll(t, rec, 1)
	validateAll(t, rec, 2)
}

func TestCapabilityGateLiveAndOnReplay(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		n    capability.Negotiation
		mode capability.Mode
		sent bool
	}{
		{"v1 without the capability", capability.Negotiation{Version: 1}, capability.Off, false},
		{"v1 zero negotiation", capability.Negotiation{}, capability.Off, false},
		{"v1 with the capability", capable, capability.Standard, true},
		{"v2", capability.Negotiation{Version: 2, Compaction: true}, capability.Standard, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &wiretest.Recorder{}
			em := emitter.New(rec, emitter.WithNegotiation(tc.n))
			if got := em.Mode(); got != tc.mode {
				t.Errorf("mode: got %v, want %v", got, tc.mode)
			}
			s := em.Session("s")
			c, err := s.Start(ctx, emitter.UserDisplayable())
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if err := c.Chunk(ctx, protocol.Text("x")); err != nil {
				t.Fatalf("Chunk: %v", err)
			}
			if err := c.Complete(ctx); err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if err := s.Fail(ctx, "early", errors.New("x")); err != nil {
				t.Fatalf("Session.Fail before Start: %v", err)
			}
			if err := s.Replay(ctx, emitter.Record{ID: "r", Status: protocol.Completed}); err != nil {
				t.Fatalf("Replay: %v", err)
			}
			if tc.sent {
				if len(rec.Lines()) == 0 {
					t.Error("nothing sent to a client with the capability")
				}
			} else {
				noLines(t, rec, "a client without the capability never receives a compaction update")
			}
		})
	}
	// A fallback renderer is used only for clients without the capability.
	var rendered []emitter.EventKind
	fb := emitter.RendererFunc(func(_ context.Context, ev emitter.Event, _ emitter.Notifier) error {
		rendered = append(rendered, ev.Kind)
		return nil
	})
	em := emitter.New(&wiretest.Recorder{}, emitter.WithFallback(fb))
	if got := em.Mode(); got != capability.Fallback {
		t.Errorf("mode with a fallback renderer: got %v, want %v", got, capability.Fallback)
	}
	c, _ := em.Session("s").Start(ctx)
	_ = c.Complete(ctx)
	_ = em.Session("s").Replay(ctx, emitter.Record{ID: "r", Status: protocol.Failed})
	if want := []emitter.EventKind{emitter.EventStarted, emitter.EventSettled, emitter.EventReplayed}; !slices.Equal(rendered, want) {
		t.Errorf("rendered events: got %v, want %v", rendered, want)
	}
	em = emitter.New(&wiretest.Recorder{}, emitter.WithFallback(fb), emitter.WithNegotiation(capable))
	if got := em.Mode(); got != capability.Standard {
		t.Errorf("mode with a fallback renderer and the capability: got %v, want %v", got, capability.Standard)
	}
	em = emitter.New(&wiretest.Recorder{}, emitter.WithPolicy(func(capability.Negotiation, bool) capability.Mode { return capability.Fallback }))
	if got := em.Mode(); got != capability.Off {
		t.Errorf("mode: got %v, want %v (fallback mode without a renderer is off)", got, capability.Off)
	}
}

func TestSummaryPolicyDefaultsToUserDisplayableOnly(t *testing.T) {
	ctx := context.Background()
	rec := &wiretest.Recorder{}
	obs := newEvents()
	em := emitter.New(rec, emitter.WithNegotiation(capable), emitter.WithObserver(obs))
	s := em.Session("s")
	hidden, _ := s.Start(ctx, emitter.WithID("hidden"))
	if err := hidden.Chunk(ctx, protocol.Text("secret context")); !errors.Is(err, emitter.ErrWithheld) {
		t.Fatalf("Chunk of a compaction not UserDisplayable: got %v, want ErrWithheld", err)
	}
	if err := hidden.Complete(ctx, emitter.Summary(protocol.Text("secret context"))); err != nil {
		t.Fatalf("Complete hidden: %v", err)
	}
	shown, _ := s.Start(ctx, emitter.WithID("shown"), emitter.UserDisplayable())
	if err := shown.Chunk(ctx, protocol.Text("visible")); err != nil {
		t.Fatalf("Chunk shown: %v", err)
	}
	if err := shown.Complete(ctx, emitter.Summary(protocol.Text("visible"))); err != nil {
		t.Fatalf("Complete shown: %v", err)
	}
	want := []string{
		`compaction_update hidden in_progress`,
		`compaction_update hidden completed`,
		`compaction_update shown in_progress`,
		`compaction_summary_chunk shown +"visible"`,
		`compaction_update shown completed summary=["visible"]`,
	}
	if got := wire(rec); !slices.Equal(got, want) {
		t.Errorf("wire:\n got %q\nwant %q", got, want)
	}
	if kinds := obs.kinds(); !slices.Contains(kinds, "withheld") {
		t.Errorf("observed events %v: no withheld event", kinds)
	}

	redact := func(_ emitter.Info, b protocol.ContentBlock) (protocol.ContentBlock, bool) {
		b.Text = strings.ReplaceAll(b.Text, "sk-123", "[redacted]")
		return b, true
	}
	rec2 := &wiretest.Recorder{}
	em = emitter.New(rec2, emitter.WithNegotiation(capable), emitter.WithSummaryPolicy(redact))
	c, _ := em.Session("s").Start(ctx, emitter.WithID("r"))
	if err := c.Chunk(ctx, protocol.Text("key sk-123")); err != nil {
		t.Fatalf("Chunk r: %v", err)
	}
	if err := c.Complete(ctx, emitter.Summary(protocol.Text("uses sk-123"))); err != nil {
		t.Fatalf("Complete r: %v", err)
	}
	want = []string{
		`compaction_update r in_progress`,
		`compaction_summary_chunk r +"key [redacted]"`,
		`compaction_update r completed summary=["uses [redacted]"]`,
	}
	if got := wire(rec2); !slices.Equal(got, want) {
		t.Errorf("wire with a redacting policy:\n got %q\nwant %q", got, want)
	}
}

func TestNilHandleIsAnErrorNotAPanic(t *testing.T) {
	var c *emitter.Compaction
	ctx := context.Background()
	if err := c.Chunk(ctx, protocol.Text("x")); !errors.Is(err, emitter.ErrNilCompaction) {
		t.Errorf("Chunk on a nil handle: got %v, want ErrNilCompaction", err)
	}
	if err := c.Complete(ctx); !errors.Is(err, emitter.ErrNilCompaction) {
		t.Errorf("Complete on a nil handle: got %v, want ErrNilCompaction", err)
	}
	if err := c.Fail(ctx, nil); !errors.Is(err, emitter.ErrNilCompaction) {
		t.Errorf("Fail on a nil handle: got %v, want ErrNilCompaction", err)
	}
	if err := c.Cancel(ctx); !errors.Is(err, emitter.ErrNilCompaction) {
		t.Errorf("Cancel on a nil handle: got %v, want ErrNilCompaction", err)
	}
	if id := c.ID(); id != "" {
		t.Errorf("ID of a nil handle: got %q, want empty", id)
	}
	if r := c.Record(); !reflect.DeepEqual(r, emitter.Record{}) {
		t.Errorf("Record of a nil handle: got %s, want the zero Record", recordJSON(r))
	}
}

func TestStartMetaAndSettleMetaReachTheWire(t *testing.T) {
	ctx := context.Background()
	em, rec, _ := newCapable(t)
	c, _ := em.Session("s").Start(ctx, emitter.WithID("m"), emitter.WithStartMeta(protocol.Meta{"k": []byte(`1`)}))
	if err := c.Complete(ctx, emitter.WithSettleMeta(protocol.Meta{"k": []byte(`2`)})); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	want := []string{
		`compaction_update m in_progress _meta=map[k:1]`,
		`compaction_update m completed _meta=map[k:2]`,
	}
	if got := wire(rec); !slices.Equal(got, want) {
		t.Errorf("wire:\n got %q\nwant %q", got, want)
	}
}

func TestSettledEventsSayWhoSettled(t *testing.T) {
	ctx := context.Background()
	em, _, obs := newCapable(t, emitter.WithMaxDuration(20*time.Millisecond))
	s := em.Session("s")
	byRuntime, _ := s.Start(ctx, emitter.WithID("runtime"))
	if err := byRuntime.Cancel(ctx); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if got := obs.waitFor(t, emitter.EventSettled).SettledBy; got != emitter.SettledByRuntime {
		t.Errorf("settled by after Cancel: got %v, want %v", got, emitter.SettledByRuntime)
	}
	_, _ = s.Start(ctx, emitter.WithID("bulk"))
	_, err := s.SettleAll(ctx, emitter.ErrCancelled)
	if err != nil {
		t.Fatalf("SettleAll: %v", err)
	}
	ev := obs.waitFor(t, emitter.EventSettled)
	if ev.ID != "bulk" {
		t.Errorf("settled event's ID: got %q, want %q", ev.ID, "bulk")
	}
	if ev.SettledBy != emitter.SettledBySettleAll {
		t.Errorf("settled by after SettleAll: got %v, want %v", ev.SettledBy, emitter.SettledBySettleAll)
	}
	_, _ = s.Start(ctx, emitter.WithID("runaway"))
	ev = obs.waitFor(t, emitter.EventSettled)
	if ev.SettledBy != emitter.SettledByWatchdog {
		t.Errorf("settled by after the watchdog: got %v, want %v", ev.SettledBy, emitter.SettledByWatchdog)
	}
	if got := ev.SettledBy.String(); got != "watchdog" {
		t.Errorf("SettledByWatchdog.String(): got %q, want %q", got, "watchdog")
	}
}
