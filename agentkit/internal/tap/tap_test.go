package tap

import (
	"context"
	"errors"
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
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Open returns how many compactions of the session are open, without
// creating the session's state in the emitter.
func (t *Tap) Open(sessionID string) int {
	em := t.Emitter()
	if em == nil || !t.h.Known(sessionID) {
		return 0
	}
	return em.Session(sessionID).Open()
}

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
	if err := tp.Send([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)); err != nil {
		t.Fatal(err)
	}
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`))
	_ = tp.BindPrompt(context.Background(), skim.IDKey([]byte("1")))
	if err := tp.Send([]byte(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)); err != nil {
		t.Fatal(err)
	}
	ctx := tp.BindPrompt(context.Background(), skim.IDKey([]byte("2")))
	if _, err := tp.Start(ctx, "s", emitter.WithID("cmp_2")); err != nil {
		t.Fatalf("a start in the new turn was refused: %v", err)
	}
	if ids := tp.Receive([]byte(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)).Cancelled; len(ids) != 1 || string(ids[0]) != "2" {
		t.Errorf("cancel reported prompts %s, want [2]", ids)
	}
	if !errors.Is(context.Cause(ctx), emitter.ErrCancelled) {
		t.Errorf("the new prompt's context was not cancelled: %v", context.Cause(ctx))
	}
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
	if _, err := tp.Start(context.Background(), "s", emitter.WithID("cmp_1")); err != nil {
		t.Fatal(err)
	}
	_ = tp.Send([]byte(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`))
	if !errors.Is(refused, emitter.ErrOutsideTurn) {
		t.Errorf("Start during settlement = %v, want ErrOutsideTurn", refused)
	}
	if tp.Open("s") != 0 {
		t.Errorf("%d compactions open after the turn", tp.Open("s"))
	}
	// After the turn, nothing about compaction may reach the client: a
	// start is refused, unless it may outlive its turn (Background), which
	// shows it when it settles.
	if _, err := tp.Start(context.Background(), "s", emitter.WithID("cmp_idle")); !errors.Is(err, emitter.ErrOutsideTurn) {
		t.Errorf("start after the turn = %v, want ErrOutsideTurn", err)
	}
	if _, err := tp.Start(context.Background(), "s", emitter.WithID("cmp_bg"), emitter.Background()); err != nil {
		t.Errorf("background start after the turn: %v", err)
	}
	tp.Close(emitter.ErrConnectionClosed)
	if tp.Open("s") != 0 {
		t.Error("close left a compaction open")
	}
}

func TestBatchedCancelIsSeen(t *testing.T) {
	tp := New(Config{CancelGrace: -1, Logger: slog.New(slog.DiscardHandler)}, func([]byte) error { return nil })
	defer tp.Close(emitter.ErrConnectionClosed)
	ids := tp.Receive([]byte(`[{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"s","prompt":[]}},
		{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}]`)).Cancelled
	if len(ids) != 1 || string(ids[0]) != `"p"` {
		t.Errorf("ids %s", ids)
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
	if err := tp.Send([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)); err != nil {
		t.Fatal(err)
	}
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`))
	ctx := tp.BindPrompt(context.Background(), skim.IDKey([]byte("1")))
	tp.Receive([]byte(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`))
	// late_1 is settled by the first grace if it has not run out yet, or
	// by one of its own; late_2 starts after a grace ran out for certain.
	for _, id := range []protocol.ID{"late_1", "late_2"} {
		if _, err := tp.Start(ctx, "s", emitter.WithID(id)); err != nil {
			t.Fatal(err)
		}
		var ev emitter.Event
		select {
		case ev = <-settled:
		case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
			t.Fatalf("%s was never settled after the cancel", id)
		}
		if ev.ID != id || ev.Status != protocol.Cancelled {
			t.Fatalf("got %s %s, want %s cancelled", ev.ID, ev.Status, id)
		}
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
	if err := tp.Send([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)); err != nil {
		t.Fatal(err)
	}
	for i, sid := range []string{"a", "b"} {
		tp.Receive(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[]}}`, i+1, sid))
		if _, err := tp.Start(context.Background(), sid, emitter.WithID(protocol.ID("cmp_"+sid))); err != nil {
			t.Fatal(err)
		}
	}
	tp.Receive([]byte(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"b"}}`))
	tp.Close(emitter.ErrConnectionClosed)
	mu.Lock()
	defer mu.Unlock()
	if got["cmp_a"] != protocol.Failed || got["cmp_b"] != protocol.Cancelled {
		t.Errorf("settled %v, want cmp_a failed, cmp_b cancelled", got)
	}
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
	if err := tp.Send([]byte(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}`)); err != nil {
		t.Fatal(err)
	}
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}`))
	if _, err := tp.Start(context.Background(), "s", emitter.WithID("cmp_open")); err != nil {
		t.Fatal(err)
	}
	tp.Receive([]byte(`{"jsonrpc":"2.0","id":5,"method":"session/close","params":{"sessionId":"s"}}`))
	if err := tp.Send([]byte(`{"jsonrpc":"2.0","id":5,"result":{}}`)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := len(lines); n < 3 || !strings.Contains(lines[n-2], `"status":"cancelled"`) || lines[n-1] != `{"jsonrpc":"2.0","id":5,"result":{}}` {
		t.Errorf("wire:\n%s", strings.Join(lines, "\n"))
	}
	if n := touched(tp); n != 0 {
		t.Errorf("the emitter still keeps %d sessions", n)
	}
}
