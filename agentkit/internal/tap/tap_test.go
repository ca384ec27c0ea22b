package tap

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestIDKeyMatchesTheSameIDWrittenByEitherStack(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{`7`, ` 7 `},
		{`"7"`, `"\u0037"`},
	} {
		if IDKey([]byte(tc.a)) != IDKey([]byte(tc.b)) {
			t.Errorf("%s and %s differ", tc.a, tc.b)
		}
	}
	if IDKey([]byte(`7`)) == IDKey([]byte(`"7"`)) {
		t.Error("a number and a string id must differ")
	}
	if IDKey(nil) != "" || IDKey([]byte(`null`)) != "" {
		t.Error("a missing or null id must have no key")
	}
}

func TestClassifyReadsResponsesAndStateUpdatesOnly(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want outbound
	}{
		{`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`, outbound{response: true, key: "n:3", result: json.RawMessage(`{"stopReason":"end_turn"}`)}},
		{`{"jsonrpc":"2.0","id":"a","error":{"code":-1,"message":"x"}}`, outbound{response: true, key: "s:a", failed: true}},
		{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle"}}}`, outbound{sessionID: "s", state: "idle"}},
		{`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\"state_update\""}}}}`, outbound{}},
		{`{"jsonrpc":"2.0","id":4,"method":"session/request_permission","params":{}}`, outbound{}},
		{`not json`, outbound{}},
	} {
		got := classify([]byte(tc.msg))
		if got.response != tc.want.response || got.key != tc.want.key || got.failed != tc.want.failed ||
			got.sessionID != tc.want.sessionID || got.state != tc.want.state ||
			(tc.want.result != nil && string(got.result) != string(tc.want.result)) {
			t.Errorf("%s: got %+v want %+v", tc.msg, got, tc.want)
		}
	}
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
		if classify(msg).key == "n:1" {
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
	_ = tp.BindPrompt(context.Background(), "n:1")
	if err := tp.Send([]byte(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)); err != nil {
		t.Fatal(err)
	}
	ctx := tp.BindPrompt(context.Background(), "n:2")
	if _, err := tp.Start(ctx, "s", emitter.WithID("cmp_2")); err != nil {
		t.Fatalf("a start in the new turn was refused: %v", err)
	}
	if ids := tp.Receive([]byte(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)); len(ids) != 1 || string(ids[0]) != "2" {
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
	if !errors.Is(refused, emitter.ErrTurnEnded) {
		t.Errorf("Start during settlement = %v, want ErrTurnEnded", refused)
	}
	if tp.Open("s") != 0 {
		t.Errorf("%d compactions open after the turn", tp.Open("s"))
	}
	// After the turn, starts are welcome again (idle housekeeping).
	if _, err := tp.Start(context.Background(), "s", emitter.WithID("cmp_idle")); err != nil {
		t.Errorf("start after the turn: %v", err)
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
		{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}]`))
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
	ctx := tp.BindPrompt(context.Background(), "n:1")
	tp.Receive([]byte(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`))
	// Let the first grace (zero) fire with nothing open: a settle of an
	// empty session is observable only as the grace being gone.
	for {
		st := tp.session("s")
		st.mu.Lock()
		gone := st.grace == nil
		st.mu.Unlock()
		if gone {
			break
		}
		runtime.Gosched()
	}
	for _, id := range []emitter.ID{"late_1", "late_2"} {
		if _, err := tp.Start(ctx, "s", emitter.WithID(id)); err != nil {
			t.Fatal(err)
		}
		var ev emitter.Event
		select {
		case ev = <-settled:
		case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
			t.Fatalf("%s was never settled after the cancel", id)
		}
		if ev.ID != id || ev.Status != emitter.Cancelled {
			t.Fatalf("got %s %s, want %s cancelled", ev.ID, ev.Status, id)
		}
	}
}
