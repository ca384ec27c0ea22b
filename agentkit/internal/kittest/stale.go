package kittest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/emitter"
)

// StaleTurnOpensNothingInTheNextTurn: a runtime goroutine of a turn that
// is over (cancelled by the client, or ended) calls SessionFrom(ctx,
// id).Start with that turn's context while the session's next turn runs.
// The start is refused (emitter.ErrOutsideTurn, wrapping
// emitter.ErrTurnEnded) and nothing of it reaches the client; one started
// with emitter.Background is let through, as a compaction that may
// outlive its turn.
func StaleTurnOpensNothingInTheNextTurn(t *testing.T, st Stack) {
	for _, cancelled := range []bool{true, false} {
		t.Run(map[bool]string{true: "cancelled turn", false: "ended turn"}[cancelled], func(t *testing.T) {
			first := make(chan context.Context, 1)
			running := make(chan struct{})
			release := make(chan struct{})
			prompts := 0
			a := &Agent{Prompt: func(ctx context.Context, _ Conn, _ Prompt) (string, error) {
				prompts++
				if prompts == 1 {
					first <- ctx
					if cancelled {
						<-ctx.Done()
						return "cancelled", nil
					}
					return "end_turn", nil
				}
				close(running)
				<-release
				return "end_turn", nil
			}}
			r := Serve(t, st, Config{}, a)
			r.Initialize(1, true)
			call, err := r.Client.Conn.DispatchCall(r.Ctx, "session/prompt", PromptParams(SessionID, nil))
			require.NoError(t, err, "prompt 1")
			stale := <-first
			if cancelled {
				require.NoError(t, r.Client.Cancel(r.Ctx, SessionID), "cancel")
			}
			var res json.RawMessage
			require.NoError(t, call.Wait(r.Ctx, &res), "prompt 1's answer")
			next, err := r.Client.Conn.DispatchCall(r.Ctx, "session/prompt", PromptParams(SessionID, nil))
			require.NoError(t, err, "prompt 2")
			<-running

			s := st.SessionFrom(stale, SessionID)
			c, err := s.Start(stale, emitter.WithID("cmp_stale"))
			assert.Nil(t, c, "a handle for the stale start")
			assert.ErrorIs(t, err, emitter.ErrOutsideTurn, "a start with the context of a turn that is over")
			assert.ErrorIs(t, err, emitter.ErrTurnEnded, "the refusal says why")
			bg, err := s.Start(stale, emitter.WithID("cmp_bg"), emitter.Background())
			require.NoError(t, err, "a background start may outlive its turn")
			require.NoError(t, bg.Complete(stale), "the background compaction completes")

			close(release)
			require.NoError(t, next.Wait(r.Ctx, &res), "prompt 2's answer")
			evs := r.Finish(1)
			assert.Empty(t, Statuses(evs, "cmp_stale"), "the stale compaction reached the client:\n%s", Dump(evs))
			assert.Equal(t, []string{"completed"}, Statuses(evs, "cmp_bg"), "the background compaction: shown once it settled")
		})
	}
}
