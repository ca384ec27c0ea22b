package emitter_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCloseSessionSettlesWhatIsOpenAndForgetsTheSession(t *testing.T) {
	ctx := context.Background()
	em, rec, _ := newCapable(t)
	s := em.Session("s")
	_, err := s.Start(ctx, emitter.WithID("a"))
	require.NoError(t, err, "Start a")
	_, err = s.Start(ctx, emitter.WithID("c"))
	require.NoError(t, err, "Start c")
	_, err = em.Session("other").Start(ctx, emitter.WithID("o"))
	require.NoError(t, err, "Start o in another session")

	n, err := em.CloseSession(ctx, "s", emitter.ErrCancelled)
	require.NoError(t, err, "CloseSession")
	assert.Equal(t, 2, n, "CloseSession settled (both of the session's compactions)")
	w := wire(rec)
	want := "compaction_update a cancelled"
	assert.Contains(t, w, want, "wire %q: no %q", w, want)
	assert.Equal(t, 1, emitter.SessionCount(em), "sessions kept (only the other session)")
	assert.Equal(t, 1, emitter.OpenCount(em), "open compactions")

	_, err = s.Start(ctx, emitter.WithID("b"))
	assert.ErrorIs(t, err, emitter.ErrSessionClosed, "Start on a handle kept past the close (it opens nothing)")
	_, err = em.Session("s").Start(ctx, emitter.WithID("a"))
	assert.NoError(t, err, "Start a in the session opened again (a session opened again with the same ID is a new session)")
}

func TestClosedSessionsDoNotAccumulate(t *testing.T) {
	ctx := context.Background()
	em, _, _ := newCapable(t)
	for i := range 10_000 {
		sid := fmt.Sprintf("s%d", i)
		c, err := em.Session(sid).Start(ctx)
		require.NoError(t, err, "Start in %s", sid)
		require.NoError(t, c.Complete(ctx), "Complete in %s", sid)
		_, err = em.CloseSession(ctx, sid, emitter.ErrConnectionClosed)
		require.NoError(t, err, "CloseSession %s", sid)
	}
	assert.Equal(t, 0, emitter.SessionCount(em), "sessions kept after closing all")
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
