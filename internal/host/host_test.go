package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/host"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/acpcompact/acpcompact/protocol"
)

// wire records what the emitter sends, in order, as "kind id status".
type wire struct {
	mu    sync.Mutex
	lines []string
}

func (w *wire) Notify(_ context.Context, sid string, update any) error {
	b, err := protocol.MarshalUpdate(update)
	if err != nil {
		return err
	}
	var u struct {
		Kind   string `json:"sessionUpdate"`
		ID     string `json:"compactionId"`
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	if err := json.Unmarshal(b, &u); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, fmt.Sprintf("%s %s %s %s", sid, u.ID, u.Status, u.Error))
	return nil
}

func (w *wire) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.lines
	w.lines = nil
	return out
}

// conn is one host over a recording wire, with the v1 initialize
// exchange of a capable client done.
type conn struct {
	t    *testing.T
	h    *host.Host
	w    *wire
	next int
}

func newConn(t *testing.T, cfg host.Config) *conn {
	t.Helper()
	w := &wire{}
	cfg.Notifier, cfg.Logger = w, slog.New(slog.DiscardHandler)
	c := &conn{t: t, h: host.New(cfg), w: w, next: 100}
	c.client(turn.Msg{ID: "0", Method: turn.MethodInitialize,
		Params: json.RawMessage(`{"protocolVersion":1,"clientCapabilities":{"session":{"compaction":{}}}}`)})
	eff := c.agent(turn.Msg{ID: "0", Result: json.RawMessage(`{"protocolVersion":1}`)}, nil)
	require.NotNil(t, eff.Negotiated, "the initialize answer negotiates")
	require.NotNil(t, c.h.Emitter(), "the emitter is made at initialize")
	return c
}

func (c *conn) client(m turn.Msg) { c.h.Client(&m) }

// agent feeds one agent message as a host does: told, written, Written.
func (c *conn) agent(m turn.Msg, failed func(string) error) turn.Effect {
	eff := c.h.Agent(context.Background(), &m, failed)
	c.h.Written(eff)
	return eff
}

// prompt begins a turn of sid and returns its request id.
func (c *conn) prompt(sid string) string {
	c.next++
	id := fmt.Sprint(c.next)
	c.client(turn.Msg{ID: id, Method: turn.MethodPrompt, SessionID: sid})
	require.True(c.t, c.h.InTurn(sid), "the prompt begins a turn of %s", sid)
	return id
}

func (c *conn) start(sid, id string, opts ...emitter.StartOption) *emitter.Compaction {
	cmp, err := c.h.Start(context.Background(), sid, append(opts, emitter.WithID(protocol.ID(id)))...)
	require.NoError(c.t, err, "start %s", id)
	return cmp
}

// A turn's end settles what is open in its session before the message
// that ends it is written, with the turn's reason.
func TestTurnEndSettlesBeforeTheMessageThatEndsIt(t *testing.T) {
	c := newConn(t, host.Config{Outside: emitter.RefuseOutsideTurn})
	id := c.prompt("s1")
	c.start("s1", "cmp_1")
	assert.Equal(t, []string{"s1 cmp_1 in_progress "}, c.w.take())
	eff := c.h.Agent(context.Background(), &turn.Msg{ID: id, Result: json.RawMessage(`{"stopReason":"end_turn"}`)}, nil)
	require.NotNil(t, eff.End, "the response ends the turn")
	assert.Equal(t, []string{"s1 cmp_1 failed " + emitter.ErrTurnEnded.Error()}, c.w.take(), "settled before the response is written")
	assert.False(t, c.h.InTurn("s1"), "the turn is over once settled")
	c.h.Written(eff)
}

// A failed prompt response that the client did not cancel settles with
// the caller's reason (the proxy reads the agent's own error text); a
// cancelled turn's end settles as cancelled whatever the response says.
func TestFailedTurnSettlesWithTheCallersReason(t *testing.T) {
	c := newConn(t, host.Config{Outside: emitter.RefuseOutsideTurn})
	id := c.prompt("s1")
	c.start("s1", "cmp_1")
	c.w.take()
	asked := ""
	c.agent(turn.Msg{ID: id, Failed: true}, func(sid string) error {
		asked = sid
		assert.True(t, c.h.InTurn(sid), "what the caller shows while the turn ends belongs to that turn")
		return errors.New("overloaded")
	})
	assert.Equal(t, "s1", asked)
	assert.Equal(t, []string{"s1 cmp_1 failed overloaded"}, c.w.take())

	id = c.prompt("s1")
	c.start("s1", "cmp_2")
	c.w.take()
	c.client(turn.Msg{Method: turn.MethodCancel, SessionID: "s1"})
	c.agent(turn.Msg{ID: id, Failed: true}, func(string) error {
		assert.Fail(t, "the reason of a cancelled turn was asked for")
		return nil
	})
	assert.Equal(t, []string{"s1 cmp_2 cancelled "}, c.w.take())
}

// A cancelled turn's grace settles what the runtime left open as
// cancelled, through the caller's Serialize.
func TestCancelGraceSettlesAsCancelled(t *testing.T) {
	var serialized sync.WaitGroup
	serialized.Add(1)
	c := newConn(t, host.Config{Outside: emitter.RefuseOutsideTurn, CancelGrace: time.Millisecond,
		Serialize: func(f func()) { f(); serialized.Done() }})
	c.prompt("s1")
	c.start("s1", "cmp_1")
	c.w.take()
	c.client(turn.Msg{Method: turn.MethodCancel, SessionID: "s1"})
	serialized.Wait()
	assert.Equal(t, []string{"s1 cmp_1 cancelled "}, c.w.take())
}

// A compaction opened in a cancelled turn whose grace already ran out gets
// a grace of its own, however it was opened: through the host's Start or on
// the shared emitter itself (Kit.Emitter), which the host only sees through
// the emitter's events.
func TestCompactionOpenedAfterTheGraceGetsAGraceOfItsOwn(t *testing.T) {
	for name, open := range map[string]func(c *conn){
		"Host.Start": func(c *conn) { c.start("s1", "cmp_late") },
		"the shared emitter": func(c *conn) {
			_, err := c.h.Share().Session("s1").Start(context.Background(), emitter.WithID("cmp_late"))
			require.NoError(t, err, "start on the shared emitter")
		},
	} {
		t.Run(name, func(t *testing.T) {
			graces := make(chan struct{}, 4)
			c := newConn(t, host.Config{Outside: emitter.RefuseOutsideTurn, CancelGrace: time.Millisecond,
				Serialize: func(f func()) { f(); graces <- struct{}{} }})
			c.prompt("s1")
			c.client(turn.Msg{Method: turn.MethodCancel, SessionID: "s1"})
			<-graces // the turn's grace ran out with nothing open
			open(c)
			require.Equal(t, []string{"s1 cmp_late in_progress "}, c.w.take())
			select {
			case <-graces:
			case <-time.After(10 * time.Second):
				require.Fail(t, "no grace of its own: the compaction waits on the runtime")
			}
			assert.Equal(t, []string{"s1 cmp_late cancelled "}, c.w.take(), "settled by its own grace")
		})
	}
}

// What the emitter held between turns is delivered when the session's
// next turn begins; with DeferBegin, only when the caller says.
func TestHeldCompactionIsDeliveredWhenTheNextTurnBegins(t *testing.T) {
	for _, deferred := range []bool{false, true} {
		t.Run(fmt.Sprintf("deferred=%v", deferred), func(t *testing.T) {
			c := newConn(t, host.Config{Outside: emitter.HoldOutsideTurn, DeferBegin: deferred,
				Serialize: func(func()) {}}) // the deferred goroutine does nothing here
			cmp := c.start("s1", "cmp_1")
			require.NoError(t, cmp.Complete(context.Background()))
			assert.Empty(t, c.w.take(), "nothing between turns")
			c.prompt("s1")
			if deferred {
				assert.Empty(t, c.w.take(), "a deferred beginning waits for the caller")
				c.h.DeliverBegun(context.Background())
			}
			assert.Equal(t, []string{"s1 cmp_1 completed "}, c.w.take(), "delivered terminal-first")
		})
	}
}

// The answer to session/close settles the session for CloseReason and the
// emitter forgets it.
func TestSessionCloseSettlesAndForgets(t *testing.T) {
	c := newConn(t, host.Config{Outside: emitter.HoldOutsideTurn, CloseReason: errors.New("closed by the agent")})
	c.start("s1", "cmp_1")
	require.Equal(t, 1, c.h.KnownSessions())
	c.client(turn.Msg{ID: "7", Method: turn.MethodClose, SessionID: "s1"})
	eff := c.agent(turn.Msg{ID: "7", Result: json.RawMessage(`{}`)}, nil)
	assert.Equal(t, "s1", eff.Closed)
	assert.Equal(t, 0, c.h.KnownSessions(), "the session is forgotten")
}

// The connection's end settles every open compaction: cancelled in a
// session whose running turn the client cancelled, otherwise for the
// reason; the hooks see the settlement.
func TestCloseSettlesEverything(t *testing.T) {
	var before, after []string
	c := newConn(t, host.Config{Outside: emitter.RefuseOutsideTurn, CancelGrace: -1, Hooks: host.Hooks{
		Before: func(_ context.Context, sid string, _ error, why string) { before = append(before, sid+": "+why) },
		After:  func(_ context.Context, why string) { after = append(after, why) },
	}})
	c.prompt("s1")
	c.prompt("s2")
	c.start("s1", "cmp_1")
	c.start("s2", "cmp_2")
	c.w.take()
	c.client(turn.Msg{Method: turn.MethodCancel, SessionID: "s1"})
	c.h.Close(context.Background(), emitter.ErrConnectionClosed, "the connection closed")()
	assert.ElementsMatch(t, []string{"s1 cmp_1 cancelled ", "s2 cmp_2 failed " + emitter.ErrConnectionClosed.Error()}, c.w.take())
	assert.Equal(t, []string{"s1: the connection closed"}, before, "Before runs for the cancelled session only")
	assert.NotEmpty(t, after)
	_, err := c.h.Start(context.Background(), "s1")
	assert.ErrorIs(t, err, turn.ErrClosed, "no start after the close")
}

// A session that never had a compaction leaves nothing in the emitter: a
// turn's end does not make the emitter keep it.
func TestTurnWithoutCompactionsLeavesNothingBehind(t *testing.T) {
	c := newConn(t, host.Config{Outside: emitter.RefuseOutsideTurn})
	for i := range 100 {
		sid := fmt.Sprint("s", i)
		id := c.prompt(sid)
		c.agent(turn.Msg{ID: id, Result: json.RawMessage(`{"stopReason":"end_turn"}`)}, nil)
	}
	assert.Equal(t, 0, c.h.KnownSessions())
	assert.NotNil(t, c.h.Share(), "the shared emitter")
	assert.True(t, c.h.Known("any"), "a shared emitter's sessions are all known")
}
