package emitter_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/emitter"
)

func TestCloseSessionSettlesWhatIsOpenAndForgetsTheSession(t *testing.T) {
	ctx := context.Background()
	em, rec, _ := newCapable(t)
	s := em.Session("s")
	_, err := s.Start(ctx, emitter.WithID("a"))
	require.NoError(t, err)
	_, err = em.ChildSession("s", "child").Start(ctx, emitter.WithID("c"))
	require.NoError(t, err)
	_, err = em.Session("other").Start(ctx, emitter.WithID("o"))
	require.NoError(t, err)

	n, err := em.CloseSession(ctx, "s", emitter.ErrCancelled)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the session's compaction and its child's")
	w := wire(rec)
	assert.Contains(t, w, "compaction_update a cancelled")
	assert.Equal(t, 1, emitter.SessionCount(em), "only the other session is kept")
	assert.Equal(t, 1, emitter.OpenCount(em))

	_, err = s.Start(ctx, emitter.WithID("b"))
	assert.ErrorIs(t, err, emitter.ErrSessionClosed, "a handle kept past the close opens nothing")
	_, err = em.Session("s").Start(ctx, emitter.WithID("a"))
	assert.NoError(t, err, "a session opened again with the same ID is a new session")
}

func TestClosedSessionsDoNotAccumulate(t *testing.T) {
	ctx := context.Background()
	em, _, _ := newCapable(t)
	for i := range 10_000 {
		sid := fmt.Sprintf("s%d", i)
		c, err := em.Session(sid).Start(ctx)
		require.NoError(t, err)
		require.NoError(t, c.Complete(ctx))
		_, err = em.CloseSession(ctx, sid, emitter.ErrConnectionClosed)
		require.NoError(t, err)
	}
	assert.Zero(t, emitter.SessionCount(em))
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
