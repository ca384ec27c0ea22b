package turn

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/skim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.True(w.t, ok, "Parse(%s): not a message", line)
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
	require.NotNil(w.t, eff.Negotiated, "the initialize answer (v%d) negotiated nothing", version)

}

func itoa(v int) string { return string(rune('0' + v)) }

func TestInitializeAnswerMatchedByJSONValueOfItsID(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.client(`{"jsonrpc":"2.0","id":"init-é","method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}}`)
	eff := w.agent(`{"jsonrpc":"2.0","id":"init-\u00e9","result":{"protocolVersion":1}}`)
	require.NotNil(t, eff.Negotiated, "the answer with the re-encoded id does not answer the initialize")
	assert.True(t, eff.Negotiated.Compaction, "Negotiated.Compaction = false, want true: the client advertised the capability")
}

func TestRequestIDsOfDifferentJSONTypesNeverMatch(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	assert.Nil(t, w.agent(`{"jsonrpc":"2.0","id":"1","result":{"stopReason":"end_turn"}}`).End, "the answer with id \"1\" ended the turn of the prompt with id 1")
	assert.True(t, w.e.InTurn("s"), "InTurn = false after the answer with id \"1\", want true")
	assert.NotNil(t, w.agent(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`).End, "the answer with id 1 did not end the turn of the prompt with id 1")
}

func TestPromptIDWithEscapesEndsItsTurn(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":"a<b&c","method":"session/prompt","params":{"sessionId":"s"}}`)
	end := w.e.Agent(w.parse(`{"jsonrpc":"2.0","id":"a\u003cb\u0026c","result":{"stopReason":"end_turn"}}`)).End
	require.NotNil(t, end, "the answer with the escaped id did not end the turn")
	assert.Equal(t, "s", end.Session, "End.Session")
	w.e.Ended(end)
	assert.False(t, w.e.InTurn("s"), "InTurn = true after the turn ended")
}

func TestSecondPromptRejectedWhileOneRunsEndsNothing(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	w.client(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s"}}`)
	eff := w.agent(`{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"a prompt is already running"}}`)
	assert.Nil(t, eff.End, "the rejected prompt's error ended a turn")
	assert.True(t, w.e.InTurn("s"), "InTurn = false after the rejected prompt's error: the first prompt's turn still runs")
	eff = w.agent(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
	require.NotNil(t, eff.End, "the running prompt's response did not end the turn")
	assert.False(t, w.e.InTurn("s"), "InTurn = true after the running prompt's response")
}

func TestQueuedPromptBeginsItsOwnTurnWhenTheRunningOneEnds(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	w.client(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s"}}`)
	w.client(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
	end := w.agent(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`).End
	require.NotNil(t, end, "the running prompt's response did not end its turn")
	assert.ErrorIs(t, end.Reason, emitter.ErrCancelled, "first End.Reason")
	require.True(t, w.e.InTurn("s"), "the queued prompt's turn did not begin")
	assert.True(t, w.e.Cancelled("s"), "the queued prompt's turn is not cancelled, yet it was pending when the client cancelled")
	end = w.agent(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}`).End
	require.NotNil(t, end, "the queued prompt's response did not end its turn")
	assert.ErrorIs(t, end.Reason, emitter.ErrCancelled, "second End.Reason")
	w.client(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s"}}`)
	assert.False(t, w.e.Cancelled("s"), "a prompt sent after the cancel starts cancelled")
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
	assert.True(t, w.e.Cancelled("s"), "the prompt sent during the cancelled v2 turn made it forget the cancel")
	end := w.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle"}}}`).End
	require.NotNil(t, end, "the idle state_update did not end the turn")
	assert.ErrorIs(t, end.Reason, emitter.ErrCancelled, "End.Reason")
}

func TestV2TurnEndsOnlyAtIdle(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(2, false)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	assert.Nil(t, w.agent(`{"jsonrpc":"2.0","id":1,"result":{}}`).End, "the v2 prompt's response ended the turn")
	assert.True(t, w.e.InTurn("s"), "InTurn = false after the v2 prompt's response, want true until idle")
	assert.NotNil(t, w.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle"}}}`).End, "the idle state_update did not end the turn")
}

func TestCancelGraceMeansTheSameEverywhere(t *testing.T) {
	t.Run("zero settles at once", func(t *testing.T) {
		w := newWire(t, 0)
		w.init(1, true)
		w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
		w.client(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
		select {
		case g := <-w.grace:
			assert.True(t, w.e.GraceDue(g), "GraceDue = false for a zero grace of a running cancelled turn")
		case <-time.After(10 * time.Second):
			require.Fail(t, "a zero grace never ran out")
		}
	})
	t.Run("positive settles after it", func(t *testing.T) {
		w := newWire(t, 20*time.Millisecond)
		w.init(1, true)
		w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
		w.client(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
		g := <-w.grace
		assert.True(t, w.e.GraceDue(g), "GraceDue = false for the grace of a running cancelled turn")
		assert.False(t, w.e.GraceDue(g), "GraceDue = true a second time for one grace: one grace, one settlement")
		w.e.CompactionStarted("s")
		g = <-w.grace
		assert.True(t, w.e.GraceDue(g), "GraceDue = false for the grace of a compaction started after the first ran out")
	})
	t.Run("negative waits for the turn's end", func(t *testing.T) {
		w := newWire(t, -1)
		w.init(1, true)
		w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
		w.client(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
		select {
		case <-w.grace:
			require.Fail(t, "a negative grace ran out")
		case <-time.After(50 * time.Millisecond):
		}
		end := w.agent(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`).End
		require.NotNil(t, end, "the cancelled prompt's response did not end its turn")
		assert.ErrorIs(t, end.Reason, emitter.ErrCancelled, "End.Reason")
	})
	t.Run("a grace that ran out after the turn ended is stale", func(t *testing.T) {
		w := newWire(t, time.Millisecond)
		w.init(1, true)
		w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
		w.client(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
		g := <-w.grace
		w.agent(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`)
		w.client(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s"}}`)
		assert.False(t, w.e.GraceDue(g), "GraceDue = true for the grace of a turn that has ended")
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
	n := len(w.e.sessions)
	assert.Equal(t, 0, n, "the engine keeps %d sessions after cancels of sessions without a turn", n)
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
	n := len(w.e.sessions)
	assert.Equal(t, 0, n, "the engine keeps %d sessions after their turns ended", n)
	n = len(w.e.requests)
	assert.Equal(t, 0, n, "the engine keeps %d requests after their answers", n)
}

// Once a turn's end is marked the session has no turn running: a call
// waits until the end is written (the settlement's own is refused), and
// between turns Admit lets the call through for the emitter to judge.
func TestTurnEndMarksTheSessionOutsideATurnBeforeItIsWritten(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	ctx := context.Background()
	_, err := w.e.Admit(ctx, "s")
	assert.ErrorIs(t, err, ErrNotInitialized, "Admit before initialize: err")
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	rel, err := w.e.Admit(ctx, "s")
	require.NoError(t, err, "Admit during the turn")
	assert.True(t, w.e.InTurn("s"), "InTurn = false during the turn")
	rel()
	end := w.e.Agent(w.parse(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)).End
	require.NotNil(t, end, "the prompt's response did not end the turn")
	assert.False(t, w.e.InTurn("s"), "InTurn = true once the turn's end is marked, want false")
	_, err = w.e.Admit(Settling(ctx), "s")
	if assert.ErrorIs(t, err, emitter.ErrOutsideTurn, "Admit with the settlement's context: err") {
		assert.ErrorIs(t, err, emitter.ErrTurnEnded, "Admit with the settlement's context: err")
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
	require.NoError(t, <-admitted, "Admit waiting for the end to be written")
	assert.False(t, w.e.InTurn("s"), "InTurn = true after the end was written and no prompt was queued")
	rel, err = w.e.Admit(ctx, "s")
	require.NoError(t, err, "Admit between turns (the emitter judges it)")
	rel()
}

func TestAdmitForQueuedPromptWaitsForTheEndToBeWritten(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	end := w.e.Agent(w.parse(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)).End
	require.NotNil(t, end, "the prompt's response did not end the turn")
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
		require.Fail(t, fmt.Sprintf("admitted before the end was written: %v", err))
	case <-time.After(30 * time.Millisecond):
	}
	w.e.Ended(end)
	require.NoError(t, <-admitted, "Admit after the end was written")
	assert.True(t, w.e.InTurn("s"), "InTurn = false after the end was written, want the queued prompt's turn")
}

func TestTurnEndWaitsForAnAdmittedStart(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	rel, err := w.e.Admit(context.Background(), "s")
	require.NoError(t, err, "Admit during the turn")
	got := make(chan *End, 1)
	go func() { got <- w.e.Agent(w.parse(`{"jsonrpc":"2.0","id":1,"result":{}}`)).End }()
	select {
	case <-got:
		require.Fail(t, "the turn's end did not wait for the admitted start")
	case <-time.After(30 * time.Millisecond):
	}
	rel()
	assert.NotNil(t, <-got, "the prompt's response did not end the turn once the admitted start was released")
}

func TestSignalRightAfterCancelledTurnIsAStraggler(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	w.client(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
	w.agent(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`)
	assert.True(t, w.e.AfterCancel("s"), "AfterCancel = false right after the cancelled turn was answered")
	w.client(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s"}}`)
	assert.False(t, w.e.AfterCancel("s"), "AfterCancel = true once the next turn began")
}

func TestBindEndsHandlerContexts(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}`)
	var mu sync.Mutex
	var causes []error
	tr := w.e.Bind(skimKey(`1`), func(err error) { mu.Lock(); causes = append(causes, err); mu.Unlock() })
	assert.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tr.Traceparent, "Bind's Traceparent")
	n := w.client(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`)
	assert.Equal(t, 1, n, "the cancel returned %d raw ids(the pending prompt's)", n)
	w.e.Bind(skimKey(`1`), func(err error) { mu.Lock(); causes = append(causes, err); mu.Unlock() })
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, causes, 2, "bound contexts ended %d times (%v)", len(causes), causes)
	if assert.ErrorIs(t, causes[0], emitter.ErrCancelled, "bound contexts ended with for both") {
		assert.ErrorIs(t, causes[1], emitter.ErrCancelled, "bound contexts ended with for both")
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
	assert.Equal(t, map[string]bool{"a": false, "b": true}, live, "Close's live turns")
	assert.NoError(t, cause, "a handler ended (%v) before the host called endHandlers", cause)
	endHandlers()
	assert.ErrorIs(t, cause, emitter.ErrConnectionClosed, "the handler ended with")
	_, err := w.e.Admit(context.Background(), "a")
	assert.ErrorIs(t, err, ErrClosed, "Admit after Close: err")
}

func TestSessionCloseEndsTheSession(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	w.client(`{"jsonrpc":"2.0","id":2,"method":"session/close","params":{"sessionId":"s"}}`)
	assert.True(t, w.e.Cancelled("s"), "session/close did not cancel the session's turn")
	end := w.agent(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"cancelled"}}`).End
	require.NotNil(t, end, "the prompt's response did not end its turn")
	eff := w.agent(`{"jsonrpc":"2.0","id":2,"result":{}}`)
	assert.Equal(t, "s", eff.Closed, "Effect.Closed")
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	n := len(w.e.sessions)
	assert.Equal(t, 0, n, "the engine keeps %d sessions after the session closed", n)
}

func skimKey(raw string) string { return skim.IDKey([]byte(raw)) }

func TestReplayIsFollowedUntilItsAnswer(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(1, true)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"s"}}`)
	on, first := w.e.Replaying("s")
	assert.True(t, on, "Replaying = false while session/load is in flight")
	w.agent(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	on, _ = w.e.Replaying("s")
	assert.False(t, on, "Replaying = true after session/load was answered")
	w.client(`{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"s"}}`)
	on, second := w.e.Replaying("s")
	assert.True(t, on, "Replaying = false while the second session/load is in flight")
	assert.NotEqual(t, second, first, "both replays have epoch")
	w.client(`{"jsonrpc":"2.0","id":3,"method":"session/resume","params":{"sessionId":"t"}}`)
	on, _ = w.e.Replaying("t")
	assert.False(t, on, "Replaying = true for a resume without a replay cursor")
}

func TestV2HandlerContextEndsWithTheTurnNotWithTheAnswer(t *testing.T) {
	w := newWire(t, DefaultCancelGrace)
	w.init(2, false)
	w.client(`{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s"}}`)
	var cause error
	w.e.Bind(skimKey(`1`), func(err error) { cause = err })
	w.agent(`{"jsonrpc":"2.0","id":1,"result":{"messageId":"m"}}`)
	assert.NoError(t, cause, "the v2 prompt's answer ended its handler's context (%v)", cause)
	w.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"state_update","state":"idle"}}}`)
	assert.ErrorIs(t, cause, emitter.ErrTurnEnded, "after idle the handler's context ended with")
}

// OnBegin tells the host each turn's beginning, once, with no lock held:
// the prompt that starts one, a queued prompt when its turn comes, a v2
// running state; never a prompt queued behind a running turn.
func TestOnBeginReportsEachTurnsBeginningOnce(t *testing.T) {
	var mu sync.Mutex
	var begun []string
	var e *Engine
	e = New(Config{OnBegin: func(sid string) {
		// It answers at all: the engine's lock is not held.
		assert.False(t, e.InTurn("nonexistent"), "InTurn of an unknown session")

		mu.Lock()
		begun = append(begun, sid)
		mu.Unlock()
	}})
	w := &wire{t: t, e: e}
	t.Cleanup(func() { e.Close(emitter.ErrConnectionClosed) })
	w.init(1, true)
	got := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), begun...) }

	w.client(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1"}}`)
	assert.Equal(t, []string{"s1"}, got(), "OnBegin after the first prompt")
	assert.True(t, e.InTurn("s1"), "InTurn = false after the first prompt")
	w.client(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1"}}`)
	assert.Equal(t, []string{"s1"}, got(), "OnBegin after a prompt queued behind the running turn (no new turn yet)")
	w.agent(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)
	assert.Equal(t, []string{"s1", "s1"}, got(), "OnBegin once the first turn ended (the queued prompt's turn)")

	v2 := New(Config{OnBegin: func(sid string) { mu.Lock(); begun = append(begun, "v2:"+sid); mu.Unlock() }})
	w2 := &wire{t: t, e: v2}
	t.Cleanup(func() { v2.Close(emitter.ErrConnectionClosed) })
	w2.init(2, false)
	w2.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s9","update":{"sessionUpdate":"state_update","state":"running"}}}`)
	w2.agent(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s9","update":{"sessionUpdate":"state_update","state":"running"}}}`)
	assert.Equal(t, []string{"s1", "s1", "v2:s9"}, got(), "OnBegin after two v2 running states")
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
	assert.Empty(t, w.e.Command("s"), "Command with no turn")
	prompt(1, "compact")
	prompt(2, "")
	assert.Equal(t, "compact", w.e.Command("s"), "Command of the first prompt's turn")
	w.agent(`{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`)
	assert.True(t, w.e.InTurn("s"), "InTurn = false, want the queued prompt's turn")
	assert.Empty(t, w.e.Command("s"), "Command of the queued prompt's turn")
	w.agent(`{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)
	assert.Empty(t, w.e.Command("s"), "Command after the last turn")
}
