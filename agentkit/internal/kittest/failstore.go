package kittest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/history"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FailingStore is a history.Store whose appends fail with ENOSPC while it
// is Down, as a full disk's do.
type FailingStore struct {
	history.Store
	Down atomic.Bool
}

func (f *FailingStore) Create(ctx context.Context, id string) (history.Log, error) {
	l, err := f.Store.Create(ctx, id)
	if err != nil {
		return nil, err
	}
	return failingLog{l, f}, nil
}

func (f *FailingStore) Open(ctx context.Context, id string) (history.Log, error) {
	l, err := f.Store.Open(ctx, id)
	if err != nil {
		return nil, err
	}
	return failingLog{l, f}, nil
}

type failingLog struct {
	history.Log
	f *FailingStore
}

func (l failingLog) Append(ctx context.Context, e history.Entry) error {
	if l.f.Down.Load() {
		return fmt.Errorf("write history: %w", syscall.ENOSPC)
	}
	return l.Log.Append(ctx, e)
}

func (l failingLog) Entries(ctx context.Context) iter.Seq2[history.Entry, error] {
	return l.Log.Entries(ctx)
}

// StoreFailuresKeepLiveAndReplayAgreeing runs the kit on a store whose
// writes fail (a full disk) at chosen moments, and checks the outcomes
// docs/records.md promises ("When the store fails"):
//
//   - a start that cannot be written is refused (ErrStore): the client
//     sees nothing of the compaction, and the history holds nothing;
//   - an update that cannot be written is not sent (ErrStore);
//   - a final record that cannot be written is kept in memory and written
//     before the session's next entry; meanwhile the runtime's starts in
//     the session are refused (ErrStore). Once the store heals, the next
//     entry writes it, and the replay holds what the client saw;
//   - when it never heals, the replay shows that compaction failed (the
//     agent stopped before it finished): the one disagreement, logged.
func StoreFailuresKeepLiveAndReplayAgreeing(t *testing.T, st Stack, store history.Store) {
	t.Helper()
	fs := &FailingStore{Store: store}
	errStore := st.Errors().Store
	var refusedStart, refusedSend, refusedWhilePending atomic.Value
	agent := HistoryAgent(st)
	script := agent.Prompt
	agent.Prompt = func(ctx context.Context, c Conn, p Prompt) (string, error) {
		s := st.SessionFrom(ctx, p.SessionID)
		switch p.Text {
		case "/compact while down":
			fs.Down.Store(true)
			h, err := s.Start(ctx, emitter.UserDisplayable())
			fs.Down.Store(false)
			refusedStart.Store(fmt.Sprint(h == nil, " ", errors.Is(err, errStore), " ", errors.Is(err, syscall.ENOSPC)))
			return "end_turn", nil
		case "send while down":
			fs.Down.Store(true)
			err := s.Send(ctx, AgentText("never shown"))
			fs.Down.Store(false)
			refusedSend.Store(fmt.Sprint(errors.Is(err, errStore), " ", errors.Is(err, syscall.ENOSPC)))
			return "end_turn", nil
		case "/compact, final lost", "/compact, final lost for good":
			h, err := s.Start(ctx, emitter.UserDisplayable())
			if h == nil {
				return "", err
			}
			fs.Down.Store(true)
			_ = h.Complete(ctx, emitter.Summary(protocol.Text("kept summary")))
			_, err = s.Start(ctx)
			refusedWhilePending.Store(fmt.Sprint(errors.Is(err, errStore)))
			if p.Text == "/compact, final lost" {
				fs.Down.Store(false)
				if err := s.Send(ctx, AgentText("healed")); err != nil {
					return "", err
				}
			}
			return "end_turn", nil
		}
		return script(ctx, c, p)
	}

	// Healed: the replay holds what the client saw.
	r := Serve(t, st, Config{Store: fs}, agent)
	r.Initialize(1, true)
	r.NewSession()
	for _, p := range []string{"hello", "/compact while down", "send while down", "/compact, final lost", "bye"} {
		_, err := r.Client.Call(r.Ctx, "session/prompt", PromptText(SessionID, p, nil))
		require.NoError(t, err, "prompt %q", p)
	}
	live := Timeline(r.Finish(1), true)
	assert.Equal(t, "true true true", refusedStart.Load(), "a start the store cannot take is refused (nil handle, ErrStore, the store's error)")
	assert.Equal(t, "true true", refusedSend.Load(), "an update the store cannot take is not sent (ErrStore, the store's error)")
	assert.Equal(t, "true", refusedWhilePending.Load(), "while a final record waits to be written, starts are refused")
	assert.NotContains(t, live, "[agent] never shown", "the refused update never reached the client")
	replay := replayed(t, st, fs)
	assert.Equal(t, live, replay, "once the store heals, the replay holds what the client saw")

	// Never healed: the compaction replays failed, where the client saw
	// it completed (the store stays down past the connection's end).
	r2 := Serve(t, st, Config{Store: fs}, agent)
	r2.Initialize(1, true)
	_, err := r2.Client.Call(r2.Ctx, "session/load", map[string]any{"sessionId": SessionID, "cwd": "/", "mcpServers": []any{}})
	require.NoError(t, err)
	_, err = r2.Client.Call(r2.Ctx, "session/prompt", PromptText(SessionID, "/compact, final lost for good", nil))
	require.NoError(t, err)
	live2 := Timeline(r2.Finish(1), true)
	fs.Down.Store(false)
	replay2 := replayed(t, st, fs)
	require.Len(t, replay2, len(live2))
	last := len(live2) - 1
	assert.Contains(t, live2[last], "completed  summary: kept summary", "the client saw the compaction complete")
	assert.Contains(t, replay2[last], "failed  error: "+history.ErrInterrupted.Error(), "the final record never written: the replay shows it failed")
	assert.Equal(t, live2[:last], replay2[:last], "everything else replays as the client saw it")
}

// replayed loads SessionID on a new kit with store and returns the
// timeline the client is left with.
func replayed(t *testing.T, st Stack, store history.Store) []string {
	t.Helper()
	r := Serve(t, st, Config{Store: store}, HistoryAgent(st))
	r.Initialize(1, true)
	_, err := r.Client.Call(r.Ctx, "session/load", map[string]any{"sessionId": SessionID, "cwd": "/", "mcpServers": []any{}})
	require.NoError(t, err, "session/load on the new kit")
	return Timeline(r.Finish(1), false)
}
