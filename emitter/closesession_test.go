package emitter_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
)

func TestCloseSessionSettlesWhatIsOpenAndForgetsTheSession(t *testing.T) {
	ctx := context.Background()
	em, rec, _ := newCapable(t)
	s := em.Session("s")
	_, err := s.Start(ctx, emitter.WithID("a"))
	if err != nil {
		t.Fatalf("Start a: %v", err)
	}
	_, err = em.ChildSession("s", "child").Start(ctx, emitter.WithID("c"))
	if err != nil {
		t.Fatalf("Start c in the child session: %v", err)
	}
	_, err = em.Session("other").Start(ctx, emitter.WithID("o"))
	if err != nil {
		t.Fatalf("Start o in another session: %v", err)
	}

	n, err := em.CloseSession(ctx, "s", emitter.ErrCancelled)
	if err != nil {
		t.Fatalf("CloseSession: %v", err)
	}
	if n != 2 {
		t.Errorf("CloseSession settled %d, want 2 (the session's compaction and its child's)", n)
	}
	w := wire(rec)
	if want := "compaction_update a cancelled"; !slices.Contains(w, want) {
		t.Errorf("wire %q: no %q", w, want)
	}
	if got := emitter.SessionCount(em); got != 1 {
		t.Errorf("sessions kept: got %d, want 1 (only the other session)", got)
	}
	if got := emitter.OpenCount(em); got != 1 {
		t.Errorf("open compactions: got %d, want 1", got)
	}

	_, err = s.Start(ctx, emitter.WithID("b"))
	if !errors.Is(err, emitter.ErrSessionClosed) {
		t.Errorf("Start on a handle kept past the close: got %v, want ErrSessionClosed (it opens nothing)", err)
	}
	_, err = em.Session("s").Start(ctx, emitter.WithID("a"))
	if err != nil {
		t.Errorf("Start a in the session opened again: %v (a session opened again with the same ID is a new session)", err)
	}
}

func TestClosedSessionsDoNotAccumulate(t *testing.T) {
	ctx := context.Background()
	em, _, _ := newCapable(t)
	for i := range 10_000 {
		sid := fmt.Sprintf("s%d", i)
		c, err := em.Session(sid).Start(ctx)
		if err != nil {
			t.Fatalf("Start in %s: %v", sid, err)
		}
		if err := c.Complete(ctx); err != nil {
			t.Fatalf("Complete in %s: %v", sid, err)
		}
		if _, err := em.CloseSession(ctx, sid, emitter.ErrConnectionClosed); err != nil {
			t.Fatalf("CloseSession %s: %v", sid, err)
		}
	}
	if n := emitter.SessionCount(em); n != 0 {
		t.Errorf("sessions kept after closing all: got %d, want 0", n)
	}
}

func TestOneRecordsOptionServesEmittersCreatedConcurrently(t *testing.T) {
	// A kit applies the same options to every connection's emitter; under
	// -race this fails if applying the option writes shared state.
	opt := emitter.WithRecords("")
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			emitter.New(emitter.NotifierFunc(func(context.Context, string, any) error { return nil }), opt)
		}()
	}
	for range 8 {
		<-done
	}
}
