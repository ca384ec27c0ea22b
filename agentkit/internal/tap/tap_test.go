package tap

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// settled says whether the compaction of handle c has settled.
func settled(c *emitter.Compaction) bool { return c.Record().Status != protocol.InProgress }

// TestPromptReadAsTheResponseIsWrittenBeginsANewTurn plays the fastest
// client: it sends the next prompt and its cancel while the previous
// response is still being written. The cancel must reach the new prompt.
func TestPromptReadAsTheResponseIsWrittenBeginsANewTurn(t *testing.T) {
	var (
		tp   *Tap
		once sync.Once
	)
	tp = New(Config{CancelGrace: -1, Logger: slog.New(slog.DiscardHandler)}, func(msg []byte) error {
		if m, _ := turn.Parse(msg); m.ID == skim.IDKey([]byte("1")) {
			once.Do(func() {
				tp.Receive([]byte(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`))
			})
		}
		return nil
	})
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`))
	require.NoError(t, tp.Send([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)))
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`))
	_ = tp.BindPrompt(context.Background(), skim.IDKey([]byte("1")))
	require.NoError(t, tp.Send([]byte(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)))
	ctx := tp.BindPrompt(context.Background(), skim.IDKey([]byte("2")))
	_, err := tp.Start(ctx, "s", emitter.WithID("cmp_2"))
	require.NoError(t, err, "a start in the new turn was refused")
	ids := tp.Receive([]byte(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)).Cancelled
	if assert.Len(t, ids, 1, "the prompts the cancel reported") {
		assert.Equal(t, "2", string(ids[0]), "the prompt the cancel reported")
	}
	assert.ErrorIs(t, context.Cause(ctx), emitter.ErrCancelled, "the new prompt's context was not cancelled")
	tp.Close(emitter.ErrConnectionClosed)
}

func TestStartIsRefusedWhileTheTurnIsBeingSettled(t *testing.T) {
	var tp *Tap
	var refused error
	obs := emitter.ObserverFunc(func(ctx context.Context, ev emitter.Event) {
		if ev.Kind == emitter.EventSettled {
			_, refused = tp.Start(ctx, "s", emitter.WithID("cmp_late"))
		}
	})
	tp = New(Config{CancelGrace: -1, Logger: slog.New(slog.DiscardHandler), EmitterOptions: []emitter.Option{emitter.WithObserver(obs)}},
		func([]byte) error { return nil })
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}`))
	_ = tp.Send([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`))
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`))
	c1, err := tp.Start(context.Background(), "s", emitter.WithID("cmp_1"))
	require.NoError(t, err)
	_ = tp.Send([]byte(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`))
	assert.ErrorIs(t, refused, emitter.ErrOutsideTurn, "Start during settlement")
	assert.True(t, settled(c1), "cmp_1 open after the turn")
	// After the turn, nothing about compaction may reach the client: a
	// start is refused, unless it may outlive its turn (Background), which
	// shows it when it settles.
	_, err = tp.Start(context.Background(), "s", emitter.WithID("cmp_idle"))
	assert.ErrorIs(t, err, emitter.ErrOutsideTurn, "start after the turn")
	bg, err := tp.Start(context.Background(), "s", emitter.WithID("cmp_bg"), emitter.Background())
	require.NoError(t, err, "background start after the turn")
	assert.False(t, settled(bg), "cmp_bg settled before the close")
	tp.Close(emitter.ErrConnectionClosed)
	assert.True(t, settled(bg), "close left cmp_bg open")
}

func TestBatchedCancelIsSeen(t *testing.T) {
	tp := New(Config{CancelGrace: -1, Logger: slog.New(slog.DiscardHandler)}, func([]byte) error { return nil })
	defer tp.Close(emitter.ErrConnectionClosed)
	ids := tp.Receive([]byte(`[{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"s","prompt":[]}},
		{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}]`)).Cancelled
	if assert.Len(t, ids, 1, "the prompts the batch's cancel reported") {
		assert.Equal(t, `"p"`, string(ids[0]), "the prompt the batch's cancel reported")
	}
}

// TestCompactionStartedAfterTheGraceRanOutGetsAGraceOfItsOwn: the client
// cancelled, the grace ran out with nothing open, and only then did the
// runtime start compacting. The kit must still wind it down as cancelled
// (it was a user cancel) instead of leaving it to a watchdog.
func TestCompactionStartedAfterTheGraceRanOutGetsAGraceOfItsOwn(t *testing.T) {
	settled := make(chan emitter.Event, 4)
	obs := emitter.ObserverFunc(func(_ context.Context, ev emitter.Event) {
		if ev.Kind == emitter.EventSettled {
			settled <- ev
		}
	})
	tp := New(Config{CancelGrace: 0, Logger: slog.New(slog.DiscardHandler), EmitterOptions: []emitter.Option{emitter.WithObserver(obs)}},
		func([]byte) error { return nil })
	defer tp.Close(emitter.ErrConnectionClosed)
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`))
	require.NoError(t, tp.Send([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)))
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`))
	ctx := tp.BindPrompt(context.Background(), skim.IDKey([]byte("1")))
	tp.Receive([]byte(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`))
	// late_1 is settled by the first grace if it has not run out yet, or
	// by one of its own; late_2 starts after a grace ran out for certain.
	for _, id := range []protocol.ID{"late_1", "late_2"} {
		_, err := tp.Start(ctx, "s", emitter.WithID(id))
		require.NoError(t, err)
		var ev emitter.Event
		select {
		case ev = <-settled:
		case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
			require.FailNow(t, string(id)+" was never settled after the cancel")
		}
		require.Equal(t, id, ev.ID, "the compaction settled")
		require.Equal(t, protocol.Cancelled, ev.Status, "how %s was settled", id)
	}
}

// TestCloseSettlesEachTurnForItsReason: the connection closing settles a
// turn the client cancelled as cancelled, and any other open compaction
// for the close's reason.
func TestCloseSettlesEachTurnForItsReason(t *testing.T) {
	var mu sync.Mutex
	got := map[protocol.ID]protocol.Status{}
	obs := emitter.ObserverFunc(func(_ context.Context, ev emitter.Event) {
		if ev.Kind == emitter.EventSettled {
			mu.Lock()
			got[ev.ID] = ev.Status
			mu.Unlock()
		}
	})
	tp := New(Config{CancelGrace: -1, Logger: slog.New(slog.DiscardHandler), EmitterOptions: []emitter.Option{emitter.WithObserver(obs)}},
		func([]byte) error { return nil })
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`))
	require.NoError(t, tp.Send([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)))
	for i, sid := range []string{"a", "b"} {
		tp.Receive(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[]}}`, i+1, sid))
		_, err := tp.Start(context.Background(), sid, emitter.WithID(protocol.ID("cmp_"+sid)))
		require.NoError(t, err)
	}
	tp.Receive([]byte(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"b"}}`))
	tp.Close(emitter.ErrConnectionClosed)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, protocol.Failed, got["cmp_a"], "cmp_a settled")
	assert.Equal(t, protocol.Cancelled, got["cmp_b"], "cmp_b settled")
}

// TestSessionCloseSettlesAndForgetsTheSession: the agent's answer to
// session/close is written after what the session still has open (here a
// compaction of the turn the close ends) is settled as cancelled, and the
// emitter forgets the session.
func TestSessionCloseSettlesAndForgetsTheSession(t *testing.T) {
	var lines []string
	var mu sync.Mutex
	tp := New(Config{CancelGrace: -1, Logger: slog.New(slog.DiscardHandler)}, func(msg []byte) error {
		mu.Lock()
		lines = append(lines, string(msg))
		mu.Unlock()
		return nil
	})
	defer tp.Close(emitter.ErrConnectionClosed)
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`))
	require.NoError(t, tp.Send([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)))
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`))
	_, err := tp.Start(context.Background(), "s", emitter.WithID("cmp_open"))
	require.NoError(t, err)
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":5,"method":"session/close","params":{"sessionId":"s"}}`))
	require.NoError(t, tp.Send([]byte(`{"jsonrpc":"2.0","id":5,"result":{}}`)))
	mu.Lock()
	defer mu.Unlock()
	wire := strings.Join(lines, "\n")
	if n := len(lines); assert.GreaterOrEqual(t, n, 3, "wire:\n%s", wire) {
		assert.Contains(t, lines[n-2], `"status":"cancelled"`, "the settlement before the answer to session/close; wire:\n%s", wire)
		assert.Equal(t, `{"jsonrpc":"2.0","id":5,"result":{}}`, lines[n-1], "the answer to session/close last; wire:\n%s", wire)
	}
	assert.Zero(t, touched(tp), "sessions the emitter still keeps")
}
