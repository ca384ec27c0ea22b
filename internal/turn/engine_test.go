package turn

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/skim"
)

// wire drives an engine with raw JSON-RPC lines, as a host would.
type wire struct {
	t     *testing.T
	e     *Engine
	grace chan Grace
}

func newWire(t *testing.T, grace time.Duration) *wire {
	w := &wire{t: t, grace: make(chan Grace, 16)}
	w.e = New(Config{CancelGrace: grace, OnGrace: func(g Grace) { w.grace <- g }})
	t.Cleanup(func() { w.e.Close(emitter.ErrConnectionClosed); w.e.Wait() })
	return w
}

func (w *wire) parse(line string) *Msg {
	w.t.Helper()
	m, ok := Parse([]byte(line))
	if !ok {
		w.t.Fatalf("Parse(%s): not a message", line)
	}
	return &m
}

func (w *wire) client(line string) int {
	w.t.Helper()
	return len(w.e.Client(w.parse(line)))
}

// agent feeds an agent line; an End is acknowledged as written at once.
func (w *wire) agent(line string) Effect {
	w.t.Helper()
	eff := w.e.Agent(w.parse(line))
	w.e.Ended(eff.End)
	return eff
}

func (w *wire) init(version int, capable bool) {
	caps := `{}`
	if capable {
		caps = `{"session":{"compaction":{}}}`
	}
	w.client(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":` + itoa(version) + `,"clientCapabilities":` + caps + `}}`)
	eff := w.agent(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":` + itoa(version) + `}}`)
	if eff.Negotiated == nil {
		w.t.Fatalf("the initialize answer (v%d) negotiated nothing", version)
	}
}

func itoa(v int) string { return string(rune('0' + v)) }

func TestInitializeAnswerMatchedByJSONValueOfItsID(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.client(`{"jsonrpc":"2.0","id":"init-é","method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`)
	eff := w.agent(`{"jsonrpc":"2.0","id":"init-\u00e9","result":{"protocolVersion":1}}`)
	if eff.Negotiated == nil {
		t.Fatal("the answer with the re-encoded id does not answer the initialize")
	}
	if !eff.Negotiated.Compaction {
		t.Error("Negotiated.Compaction = false, want true: the client advertised the capability")
	}
}

func TestRequestIDsOfDifferentJSONTypesNeverMatch(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	if w.agent(`{"jsonrpc":"2.0","id":"1","result":{"stopReason":"end_turn"}}`).End != nil {
		t.Error(`the answer with id "1" ended the turn of the prompt with id 1`)
	}
	if !w.e.InTurn("s") {
		t.Error(`InTurn = false after the answer with id "1", want true`)
	}
	if w.agent(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`).End == nil {
		t.Error("the answer with id 1 did not end the turn of the prompt with id 1")
	}
}

func TestPromptIDWithEscapesEndsItsTurn(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":"a<b&c","method":"session/prompt","params":{"sessionId":"s"}}`)
	end := w.e.Agent(w.parse(`{"jsonrpc":"2.0","id":"a\u003cb\u0026c","result":{"stopReason":"end_turn"}}`)).End
	if end == nil {
		t.Fatal("the answer with the escaped id did not end the turn")
	}
	if end.Session != "s" {
		t.Errorf("End.Session = %q, want %q", end.Session, "s")
	}
	w.e.Ended(end)
	if w.e.InTurn("s") {
		t.Error("InTurn = true after the turn ended")
	}
}

func TestSecondPromptRejectedWhileOneRunsEndsNothing(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	w.client(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s"}}`)
	eff := w.agent(`{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"a prompt is already running"}}`)
	if eff.End != nil {
		t.Error("the rejected prompt's error ended a turn")
	}
	if !w.e.InTurn("s") {
		t.Error("InTurn = false after the rejected prompt's error: the first prompt's turn still runs")
	}
	eff = w.agent(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
	if eff.End == nil {
		t.Fatal("the running prompt's response did not end the turn")
	}
	if w.e.InTurn("s") {
		t.Error("InTurn = true after the running prompt's response")
	}
}

func TestQueuedPromptBeginsItsOwnTurnWhenTheRunningOneEnds(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	w.client(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s"}}`)
	w.client(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
	end := w.agent(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`).End
	if end == nil {
		t.Fatal("the running prompt's response did not end its turn")
	}
	if !errors.Is(end.Reason, emitter.ErrCancelled) {
		t.Errorf("first End.Reason = %v, want %v", end.Reason, emitter.ErrCancelled)
	}
	if !w.e.InTurn("s") {
		t.Fatal("the queued prompt's turn did not begin")
	}
	if !w.e.Cancelled("s") {
		t.Error("the queued prompt's turn is not cancelled, yet it was pending when the client cancelled")
	}
	end = w.agent(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}`).End
	if end == nil {
		t.Fatal("the queued prompt's response did not end its turn")
	}
	if !errors.Is(end.Reason, emitter.ErrCancelled) {
		t.Errorf("second End.Reason = %v, want %v", end.Reason, emitter.ErrCancelled)
	}
	w.client(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s"}}`)
	if w.e.Cancelled("s") {
		t.Error("a prompt sent after the cancel starts cancelled")
	}
}

func TestV2PromptBehindCancelledTurnKeepsTheCancel(t *testing.T) {
	w := newWire(t, time.Hour)
	w.init(2, false)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	w.agent(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	w.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"running"}}}`)
	w.client(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
	w.client(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s"}}`)
	w.agent(`{"jsonrpc":"2.0","id":2,"result":{}}`)
	if !w.e.Cancelled("s") {
		t.Error("the prompt sent during the cancelled v2 turn made it forget the cancel")
	}
	end := w.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle"}}}`).End
	if end == nil {
		t.Fatal("the idle state_update did not end the turn")
	}
	if !errors.Is(end.Reason, emitter.ErrCancelled) {
		t.Errorf("End.Reason = %v, want %v", end.Reason, emitter.ErrCancelled)
	}
}

func TestV2TurnEndsOnlyAtIdle(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(2, false)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	if w.agent(`{"jsonrpc":"2.0","id":1,"result":{}}`).End != nil {
		t.Error("the v2 prompt's response ended the turn")
	}
	if !w.e.InTurn("s") {
		t.Error("InTurn = false after the v2 prompt's response, want true until idle")
	}
	if w.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle"}}}`).End == nil {
		t.Error("the idle state_update did not end the turn")
	}
}

func TestCancelGraceMeansTheSameEverywhere(t *testing.T) {
	t.Run("zero settles at once", func(t *testing.T) {
		w := newWire(t, 0)
		w.init(1, true)
		w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
		w.client(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
		select {
		case g := <-w.grace:
			if !w.e.GraceDue(g) {
				t.Error("GraceDue = false for a zero grace of a running cancelled turn")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a zero grace never ran out")
		}
	})
	t.Run("positive settles after it", func(t *testing.T) {
		w := newWire(t, 20*time.Millisecond)
		w.init(1, true)
		w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
		w.client(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
		g := <-w.grace
		if !w.e.GraceDue(g) {
			t.Error("GraceDue = false for the grace of a running cancelled turn")
		}
		if w.e.GraceDue(g) {
			t.Error("GraceDue = true a second time for one grace: one grace, one settlement")
		}
		w.e.Started("s")
		g = <-w.grace
		if !w.e.GraceDue(g) {
			t.Error("GraceDue = false for the grace of a compaction started after the first ran out")
		}
	})
	t.Run("negative waits for the turn's end", func(t *testing.T) {
		w := newWire(t, -1)
		w.init(1, true)
		w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
		w.client(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
		select {
		case <-w.grace:
			t.Fatal("a negative grace ran out")
		case <-time.After(50 * time.Millisecond):
		}
		end := w.agent(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`).End
		if end == nil {
			t.Fatal("the cancelled prompt's response did not end its turn")
		}
		if !errors.Is(end.Reason, emitter.ErrCancelled) {
			t.Errorf("End.Reason = %v, want %v", end.Reason, emitter.ErrCancelled)
		}
	})
	t.Run("a grace that ran out after the turn ended is stale", func(t *testing.T) {
		w := newWire(t, time.Millisecond)
		w.init(1, true)
		w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
		w.client(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
		g := <-w.grace
		w.agent(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`)
		w.client(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s"}}`)
		if w.e.GraceDue(g) {
			t.Error("GraceDue = true for the grace of a turn that has ended")
		}
	})
}

func TestCancelForSessionWithoutTurnKeepsNothing(t *testing.T) {
	w := newWire(t, time.Hour)
	w.init(1, true)
	for i := range 1000 {
		w.client(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"unknown-` + string(rune('a'+i%26)) + itoa(i%10) + `"}}`)
	}
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	if n := len(w.e.sessions); n != 0 {
		t.Errorf("the engine keeps %d sessions after cancels of sessions without a turn, want 0", n)
	}
}

func TestSessionStateEndsWithTheTurn(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	for i := range 100 {
		id := `"p` + itoa(i%10) + string(rune('a'+i/10)) + `"`
		w.client(`{"jsonrpc":"2.0","id":` + id + `,"method":"session/prompt","params":{"sessionId":"s` + id[1:len(id)-1] + `"}}`)
		w.agent(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32602,"message":"unknown session"}}`)
	}
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	if n := len(w.e.sessions); n != 0 {
		t.Errorf("the engine keeps %d sessions after their turns ended, want 0", n)
	}
	if n := len(w.e.requests); n != 0 {
		t.Errorf("the engine keeps %d requests after their answers, want 0", n)
	}
}

// Once a turn's end is marked the session has no turn running: a call
// waits until the end is written (the settlement's own is refused), and
// between turns Admit lets the call through for the emitter to judge.
func TestTurnEndMarksTheSessionOutsideATurnBeforeItIsWritten(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	ctx := context.Background()
	_, err := w.e.Admit(ctx, "s")
	if !errors.Is(err, ErrNotInitialized) {
		t.Errorf("Admit before initialize: err = %v, want %v", err, ErrNotInitialized)
	}
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	rel, err := w.e.Admit(ctx, "s")
	if err != nil {
		t.Fatalf("Admit during the turn: %v", err)
	}
	if !w.e.InTurn("s") {
		t.Error("InTurn = false during the turn")
	}
	rel()
	end := w.e.Agent(w.parse(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)).End
	if end == nil {
		t.Fatal("the prompt's response did not end the turn")
	}
	if w.e.InTurn("s") {
		t.Error("InTurn = true once the turn's end is marked, want false")
	}
	_, err = w.e.Admit(Settling(ctx), "s")
	if !errors.Is(err, emitter.ErrOutsideTurn) || !errors.Is(err, emitter.ErrTurnEnded) {
		t.Errorf("Admit with the settlement's context: err = %v, want one wrapping %v and %v at once", err, emitter.ErrOutsideTurn, emitter.ErrTurnEnded)
	}
	admitted := make(chan error, 1)
	go func() {
		rel, err := w.e.Admit(ctx, "s")
		if err == nil {
			rel()
		}
		admitted <- err
	}()
	w.e.Ended(end)
	if err := <-admitted; err != nil {
		t.Fatalf("Admit waiting for the end to be written: %v, want admitted once it is", err)
	}
	if w.e.InTurn("s") {
		t.Error("InTurn = true after the end was written and no prompt was queued")
	}
	rel, err = w.e.Admit(ctx, "s")
	if err != nil {
		t.Fatalf("Admit between turns: %v, want admitted (the emitter judges it)", err)
	}
	rel()
}

func TestAdmitForQueuedPromptWaitsForTheEndToBeWritten(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	end := w.e.Agent(w.parse(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)).End
	if end == nil {
		t.Fatal("the prompt's response did not end the turn")
	}
	w.client(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s"}}`)
	admitted := make(chan error, 1)
	go func() {
		rel, err := w.e.Admit(context.Background(), "s")
		if rel != nil {
			rel()
		}
		admitted <- err
	}()
	select {
	case err := <-admitted:
		t.Fatalf("admitted before the end was written: %v", err)
	case <-time.After(30 * time.Millisecond):
	}
	w.e.Ended(end)
	if err := <-admitted; err != nil {
		t.Fatalf("Admit after the end was written: %v", err)
	}
	if !w.e.InTurn("s") {
		t.Error("InTurn = false after the end was written, want the queued prompt's turn")
	}
}

func TestTurnEndWaitsForAnAdmittedStart(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	rel, err := w.e.Admit(context.Background(), "s")
	if err != nil {
		t.Fatalf("Admit during the turn: %v", err)
	}
	got := make(chan *End, 1)
	go func() { got <- w.e.Agent(w.parse(`{"jsonrpc":"2.0","id":1,"result":{}}`)).End }()
	select {
	case <-got:
		t.Fatal("the turn's end did not wait for the admitted start")
	case <-time.After(30 * time.Millisecond):
	}
	rel()
	if <-got == nil {
		t.Error("the prompt's response did not end the turn once the admitted start was released")
	}
}

func TestSignalRightAfterCancelledTurnIsAStraggler(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	w.client(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
	w.agent(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`)
	if !w.e.AfterCancel("s") {
		t.Error("AfterCancel = false right after the cancelled turn was answered")
	}
	w.client(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s"}}`)
	if w.e.AfterCancel("s") {
		t.Error("AfterCancel = true once the next turn began")
	}
}

func TestBindEndsHandlerContexts(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}`)
	var mu sync.Mutex
	var causes []error
	tr := w.e.Bind(skimKey(`1`), func(err error) { mu.Lock(); causes = append(causes, err); mu.Unlock() })
	if want := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"; tr.Traceparent != want {
		t.Errorf("Bind's Traceparent = %q, want %q", tr.Traceparent, want)
	}
	if n := w.client(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`); n != 1 {
		t.Errorf("the cancel returned %d raw ids, want 1 (the pending prompt's)", n)
	}
	w.e.Bind(skimKey(`1`), func(err error) { mu.Lock(); causes = append(causes, err); mu.Unlock() })
	mu.Lock()
	defer mu.Unlock()
	if len(causes) != 2 {
		t.Fatalf("bound contexts ended %d times (%v), want 2", len(causes), causes)
	}
	if !errors.Is(causes[0], emitter.ErrCancelled) || !errors.Is(causes[1], emitter.ErrCancelled) {
		t.Errorf("bound contexts ended with %v, want %v for both", causes, emitter.ErrCancelled)
	}
}

func TestCloseReturnsLiveTurnsAndEndsHandlersLast(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"a"}}`)
	w.client(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"b"}}`)
	w.client(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"b"}}`)
	var cause error
	w.e.Bind(skimKey(`1`), func(err error) { cause = err })
	live, endHandlers := w.e.Close(emitter.ErrConnectionClosed)
	if want := map[string]bool{"a": false, "b": true}; !maps.Equal(live, want) {
		t.Errorf("Close's live turns = %v, want %v", live, want)
	}
	if cause != nil {
		t.Errorf("a handler ended (%v) before the host called endHandlers", cause)
	}
	endHandlers()
	if !errors.Is(cause, emitter.ErrConnectionClosed) {
		t.Errorf("the handler ended with %v, want %v", cause, emitter.ErrConnectionClosed)
	}
	_, err := w.e.Admit(context.Background(), "a")
	if !errors.Is(err, ErrClosed) {
		t.Errorf("Admit after Close: err = %v, want %v", err, ErrClosed)
	}
}

func TestSessionCloseEndsTheSession(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	w.client(`{"jsonrpc":"2.0","id":2,"method":"session/close","params":{"sessionId":"s"}}`)
	if !w.e.Cancelled("s") {
		t.Error("session/close did not cancel the session's turn")
	}
	end := w.agent(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`).End
	if end == nil {
		t.Fatal("the prompt's response did not end its turn")
	}
	eff := w.agent(`{"jsonrpc":"2.0","id":2,"result":{}}`)
	if eff.Closed != "s" {
		t.Errorf("Effect.Closed = %q, want %q", eff.Closed, "s")
	}
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	if n := len(w.e.sessions); n != 0 {
		t.Errorf("the engine keeps %d sessions after the session closed, want 0", n)
	}
}

func skimKey(raw string) string { return skim.IDKey([]byte(raw)) }

func TestReplayIsFollowedUntilItsAnswer(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"s"}}`)
	on, first := w.e.Replaying("s")
	if !on {
		t.Error("Replaying = false while session/load is in flight")
	}
	w.agent(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	if on, _ = w.e.Replaying("s"); on {
		t.Error("Replaying = true after session/load was answered")
	}
	w.client(`{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"s"}}`)
	on, second := w.e.Replaying("s")
	if !on {
		t.Error("Replaying = false while the second session/load is in flight")
	}
	if first == second {
		t.Errorf("both replays have epoch %d, want one each", first)
	}
	w.client(`{"jsonrpc":"2.0","id":3,"method":"session/resume","params":{"sessionId":"t"}}`)
	if on, _ = w.e.Replaying("t"); on {
		t.Error("Replaying = true for a resume without a replay cursor")
	}
}

func TestV2HandlerContextEndsWithTheTurnNotWithTheAnswer(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(2, false)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	var cause error
	w.e.Bind(skimKey(`1`), func(err error) { cause = err })
	w.agent(`{"jsonrpc":"2.0","id":1,"result":{"messageId":"m"}}`)
	if cause != nil {
		t.Errorf("the v2 prompt's answer ended its handler's context (%v), want it running until idle", cause)
	}
	w.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle"}}}`)
	if !errors.Is(cause, emitter.ErrTurnEnded) {
		t.Errorf("after idle the handler's context ended with %v, want %v", cause, emitter.ErrTurnEnded)
	}
}

// OnBegin tells the host each turn's beginning, once, with no lock held:
// the prompt that starts one, a queued prompt when its turn comes, a v2
// running state; never a prompt queued behind a running turn.
func TestOnBeginReportsEachTurnsBeginningOnce(t *testing.T) {
	var mu sync.Mutex
	var begun []string
	var e *Engine
	e = New(Config{OnBegin: func(sid string) {
		if e.InTurn("nonexistent") { // answers at all: the engine's lock is not held
			t.Error("InTurn of an unknown session = true")
		}
		mu.Lock()
		begun = append(begun, sid)
		mu.Unlock()
	}})
	w := &wire{t: t, e: e}
	t.Cleanup(func() { e.Close(emitter.ErrConnectionClosed) })
	w.init(1, true)
	got := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), begun...) }

	w.client(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1"}}`)
	if want := []string{"s1"}; !slices.Equal(got(), want) {
		t.Errorf("OnBegin after the first prompt: %v, want %v", got(), want)
	}
	if !e.InTurn("s1") {
		t.Error("InTurn = false after the first prompt")
	}
	w.client(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1"}}`)
	if want := []string{"s1"}; !slices.Equal(got(), want) {
		t.Errorf("OnBegin after a prompt queued behind the running turn: %v, want %v (no new turn yet)", got(), want)
	}
	w.agent(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)
	if want := []string{"s1", "s1"}; !slices.Equal(got(), want) {
		t.Errorf("OnBegin once the first turn ended: %v, want %v (the queued prompt's turn)", got(), want)
	}

	v2 := New(Config{OnBegin: func(sid string) { mu.Lock(); begun = append(begun, "v2:"+sid); mu.Unlock() }})
	w2 := &wire{t: t, e: v2}
	t.Cleanup(func() { v2.Close(emitter.ErrConnectionClosed) })
	w2.init(2, false)
	w2.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s9","update":{"sessionUpdate":"state_update","state":"running"}}}`)
	w2.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s9","update":{"sessionUpdate":"state_update","state":"running"}}}`)
	if want := []string{"s1", "s1", "v2:s9"}; !slices.Equal(got(), want) {
		t.Errorf("OnBegin after two v2 running states: %v, want %v", got(), want)
	}
}

// A turn knows the slash command of the prompt that runs it; a prompt
// queued behind it brings its own when its turn comes.
func TestTurnKnowsItsPromptsCommand(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	prompt := func(id int, command string) {
		m := w.parse(`{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"session/prompt","params":{"sessionId":"s"}}`)
		m.Command = command
		w.e.Client(m)
	}
	if c := w.e.Command("s"); c != "" {
		t.Errorf("Command with no turn = %q, want none", c)
	}
	prompt(1, "compact")
	prompt(2, "")
	if c := w.e.Command("s"); c != "compact" {
		t.Errorf("Command of the first prompt's turn = %q, want %q", c, "compact")
	}
	w.agent(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
	if !w.e.InTurn("s") {
		t.Error("InTurn = false, want the queued prompt's turn")
	}
	if c := w.e.Command("s"); c != "" {
		t.Errorf("Command of the queued prompt's turn = %q, want none", c)
	}
	w.agent(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)
	if c := w.e.Command("s"); c != "" {
		t.Errorf("Command after the last turn = %q, want none", c)
	}
}
