package kittest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// NothingAboutCompactionBetweenTurns: a runtime whose event pump outlives
// its prompt's handler (a run stream drained after the prompt returned, as
// real Go runtimes have) reports after the prompt's response. Nothing
// about compaction may reach the client between turns: the pump's Start
// with the prompt's own context is refused (emitter.ErrOutsideTurn), the
// handle of the compaction the turn's end settled refuses its late chunk
// and completion (emitter.ErrSettled), and a compaction started with
// emitter.Background is held while it runs and settles, and reaches the
// client, terminal first, when the session's next turn begins. For a
// client with the compaction capability, and one that gets the fallback.
func NothingAboutCompactionBetweenTurns(t *testing.T, st Stack) {
	for _, capable := range []bool{true, false} {
		t.Run(map[bool]string{true: "capable", false: "fallback"}[capable], func(t *testing.T) {
			o := &outlive{turnOver: make(chan struct{}), pumped: make(chan error, 1), started: make(chan struct{}, 1)}
			a := &Agent{Prompt: func(ctx context.Context, _ Conn, p Prompt) (string, error) {
				return o.prompt(ctx, st.SessionFrom(ctx, p.SessionID))
			}}
			r := Serve(t, st, Config{}, a)
			r.Initialize(1, capable)
			o.play(r.Ctx, t, r.Client, SessionID)
			evs := r.Finish(1)
			if capable {
				o.check(t, evs, 1)
			}
		})
	}
}

// outlive plays both sides of NothingAboutCompactionBetweenTurns. Safe for
// concurrent use.
type outlive struct {
	turnOver chan struct{} // closed by play once the first prompt's response arrived
	pumped   chan error    // the pump's verdict
	started  chan struct{}
}

// prompt is the agent's runtime. The first prompt opens cmp_turn, leaves
// it to the turn's end, and hands the session to its pump; later prompts
// end at once.
func (o *outlive) prompt(ctx context.Context, s Starter) (string, error) {
	select {
	case o.started <- struct{}{}:
	default:
		return "end_turn", nil
	}
	c, err := s.Start(ctx, emitter.WithID("cmp_turn"), emitter.UserDisplayable())
	if err != nil {
		return "", err
	}
	go func() { o.pumped <- o.pump(ctx, s, c) }()
	return "end_turn", nil
}

// pump runs once the client holds the first prompt's response.
func (o *outlive) pump(ctx context.Context, s Starter, turn *emitter.Compaction) error {
	<-o.turnOver
	var errs []error
	if c, err := s.Start(ctx, emitter.WithID("cmp_late")); c != nil || !errors.Is(err, emitter.ErrOutsideTurn) {
		errs = append(errs, fmt.Errorf("after the turn, Start = %v, %v; want ErrOutsideTurn", c, err))
	}
	if err := turn.Chunk(ctx, protocol.Text("late")); !errors.Is(err, emitter.ErrSettled) {
		errs = append(errs, fmt.Errorf("after the turn, Chunk of the settled compaction = %v; want ErrSettled", err))
	}
	if err := turn.Complete(ctx); !errors.Is(err, emitter.ErrSettled) {
		errs = append(errs, fmt.Errorf("after the turn, Complete of the settled compaction = %v; want ErrSettled", err))
	}
	bg, err := s.Start(context.WithoutCancel(ctx), emitter.WithID("cmp_bg"), emitter.Background(), emitter.UserDisplayable())
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("background Start: %w", err))...)
	}
	for _, text := range []string{"## Retained", " context"} {
		if err := bg.Chunk(ctx, protocol.Text(text)); err != nil {
			errs = append(errs, fmt.Errorf("background Chunk: %w", err))
		}
	}
	if err := bg.Complete(ctx); err != nil {
		errs = append(errs, fmt.Errorf("background Complete: %w", err))
	}
	if r := bg.Record(); r.Status != protocol.Completed || len(r.Summary) != 2 {
		errs = append(errs, fmt.Errorf("background record %+v; want completed with the streamed summary", r))
	}
	return errors.Join(errs...)
}

// play is the client: the first prompt, then (once the pump is done, all
// of it between turns) the second.
func (o *outlive) play(ctx context.Context, t testing.TB, c *Client, sessionID string) {
	t.Helper()
	_, err := c.Prompt(ctx, sessionID, nil)
	require.NoError(t, err, "first prompt")
	close(o.turnOver)
	select {
	case err := <-o.pumped:
		assert.NoError(t, err)
	case <-ctx.Done():
		require.FailNow(t, "the pump never finished")
	}
	_, err = c.Prompt(ctx, sessionID, nil)
	require.NoError(t, err, "second prompt")
}

// check checks the record: nothing about compaction outside a turn;
// cmp_turn settled by its turn's end; cmp_late never seen; cmp_bg seen
// once, completed with its streamed summary, in the second turn.
func (o *outlive) check(t testing.TB, evs []Event, version int) {
	t.Helper()
	assert.NoError(t, CheckTurns(evs, version), "turn rules\n%s", Dump(evs))
	assert.Equal(t, []string{"in_progress", "failed"}, Statuses(evs, "cmp_turn"), "cmp_turn\n%s", Dump(evs))
	for _, e := range checkLateAndBackground(t, evs) {
		assert.JSONEq(t, `[{"type":"text","text":"## Retained"},{"type":"text","text":" context"}]`, string(Field(e, "summary")), "cmp_bg's summary: what it streamed")
	}
}

// SessionFromInAHandlerAndAGoroutineThatOutlivesIt: SessionFrom reads
// the connection from the prompt handler's context, and from that context
// in a goroutine that outlives the handler; there, with no turn running, a
// start is refused with emitter.ErrOutsideTurn unless it is a background
// one, which the client sees when the next turn begins.
func SessionFromInAHandlerAndAGoroutineThatOutlivesIt(t *testing.T, st Stack) {
	answered := make(chan struct{})
	late := make(chan error, 1)
	var prompts atomic.Int32
	a := &Agent{Prompt: func(ctx context.Context, _ Conn, p Prompt) (string, error) {
		if prompts.Add(1) > 1 {
			return "end_turn", nil
		}
		c, err := st.SessionFrom(ctx, p.SessionID).Start(ctx, emitter.WithID("cmp_1"))
		if err != nil {
			return "", err
		}
		if err := c.Complete(ctx); err != nil {
			return "", err
		}
		go func() {
			<-answered
			late <- outsideTheTurn(ctx, st.SessionFrom(ctx, p.SessionID))
		}()
		return "end_turn", nil
	}}
	r := Serve(t, st, Config{}, a)
	r.Initialize(1, true)
	_, err := r.Client.Prompt(r.Ctx, SessionID, nil)
	require.NoError(t, err)
	close(answered)
	assert.NoError(t, <-late)
	_, err = r.Client.Prompt(r.Ctx, SessionID, nil)
	require.NoError(t, err)
	checkOutsideTheTurn(t, r.Finish(1))
}

// outsideTheTurn is a runtime's goroutine that outlived its prompt, with
// the Session it got from the prompt's context after the prompt was
// answered: a start is refused with emitter.ErrOutsideTurn, and a
// background one opens and completes (checkOutsideTheTurn sees it in the
// next turn).
func outsideTheTurn(ctx context.Context, s Starter) error {
	if c, err := s.Start(ctx, emitter.WithID("cmp_late")); c != nil || !errors.Is(err, emitter.ErrOutsideTurn) {
		return fmt.Errorf("after the turn, Start = %v, %v; want emitter.ErrOutsideTurn", c, err)
	}
	bg, err := s.Start(ctx, emitter.WithID("cmp_bg"), emitter.Background())
	if err != nil {
		return fmt.Errorf("background Start after the turn: %w", err)
	}
	return bg.Complete(ctx)
}

// checkOutsideTheTurn checks the record of outsideTheTurn's runs: cmp_1 in
// the first turn, cmp_late never, cmp_bg completed (terminal-first) in the
// second.
func checkOutsideTheTurn(t testing.TB, evs []Event) {
	t.Helper()
	assert.Equal(t, []string{"in_progress", "completed"}, Statuses(evs, "cmp_1"), "cmp_1\n%s", Dump(evs))
	checkLateAndBackground(t, evs)
}

// checkLateAndBackground checks what the runtime reported after its turn
// ended: cmp_late never reached the client, and cmp_bg did once,
// completed (terminal-first), in the second turn. It returns cmp_bg's
// events.
func checkLateAndBackground(t testing.TB, evs []Event) []Event {
	t.Helper()
	assert.Empty(t, Statuses(evs, "cmp_late"), "cmp_late reached the client")
	assert.Equal(t, []string{"completed"}, Statuses(evs, "cmp_bg"), "cmp_bg (terminal-first)\n%s", Dump(evs))
	var bg []Event
	prompts := 0
	for _, e := range evs {
		switch {
		case e.Sent && e.Method == "session/prompt":
			prompts++
		case e.CompactionID == "cmp_bg":
			assert.Equal(t, 2, prompts, "the turn cmp_bg arrived in")
			bg = append(bg, e)
		}
	}
	return bg
}
