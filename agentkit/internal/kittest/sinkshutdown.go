package kittest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/emitter"
)

// ShutdownIsBoundedWhenASinkBlocks: with a compaction open and an
// OnFinalRecord sink that blocks (a store that hangs), Shutdown with a
// 500 ms context returns once its context ends, with an error wrapping
// context.DeadlineExceeded, and the client already holds the compaction's
// terminal update: the sink delays no update. The record is still handed
// over, once, when the sink unblocks. When the sink returns in time,
// Shutdown returns nil after it did: an agent may close its store once
// Shutdown returned nil.
func ShutdownIsBoundedWhenASinkBlocks(t *testing.T, st Stack) {
	for _, blocks := range []bool{true, false} {
		t.Run(map[bool]string{true: "a sink that blocks", false: "a sink that returns"}[blocks], func(t *testing.T) {
			unblock := make(chan struct{})
			var mu sync.Mutex
			var handed []string
			sunk := make(chan struct{}, 1)
			sink := emitter.OnFinalRecord(func(_ context.Context, _ string, rec emitter.Record) {
				if blocks {
					<-unblock
				}
				mu.Lock()
				handed = append(handed, string(rec.ID)+":"+string(rec.Status))
				mu.Unlock()
				sunk <- struct{}{}
			})
			started := make(chan struct{})
			a := &Agent{Prompt: func(ctx context.Context, _ Conn, p Prompt) (string, error) {
				if _, err := st.SessionFrom(ctx, p.SessionID).Start(ctx, emitter.WithID("cmp_1")); err != nil {
					return "", err
				}
				close(started)
				<-ctx.Done() // the shutdown ends it
				return "end_turn", nil
			}}
			r := Serve(t, st, Config{Emitter: []emitter.Option{sink}}, a)
			require.NotNil(t, r.Served.Shutdown, "the stack serves no Shutdown")
			r.Initialize(1, true)
			_, err := r.Client.Conn.DispatchCall(r.Ctx, "session/prompt", PromptParams(SessionID, nil))
			require.NoError(t, err, "prompt")
			<-started

			ctx, cancel := context.WithTimeout(r.Ctx, 500*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- r.Served.Shutdown(ctx) }()
			var serr error
			select {
			case serr = <-done:
			case <-r.Ctx.Done():
				close(unblock)
				require.FailNow(t, "Shutdown did not return within its context")
			}
			_, err = r.Client.Wire.Wait(r.Ctx, func(e Event) bool { return e.CompactionID == "cmp_1" && e.Status == "failed" })
			require.NoError(t, err, "the client got cmp_1's terminal update")
			if blocks {
				assert.ErrorIs(t, serr, context.DeadlineExceeded, "Shutdown's error with a sink still running")
				mu.Lock()
				assert.Empty(t, handed, "records handed over while the sink blocks")
				mu.Unlock()
				close(unblock)
				select {
				case <-sunk:
				case <-r.Ctx.Done():
					require.FailNow(t, "the record was never handed over once the sink unblocked")
				}
			} else {
				assert.NoError(t, serr, "Shutdown with a sink that returns")
			}
			mu.Lock()
			assert.Equal(t, []string{"cmp_1:failed"}, handed, "records handed over")
			mu.Unlock()
		})
	}
}
