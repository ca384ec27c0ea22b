package kittest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// Outlive is the runtime whose event pump outlives its prompt's handler,
// shared by both stacks' tests: a run stream drained after the prompt
// returned, as real Go runtimes have. Nothing about compaction may reach
// the client between turns: the pump's Start with the prompt's own context
// is refused (emitter.ErrOutsideTurn), the handle of the compaction the
// turn's end settled refuses its late chunk and completion
// (emitter.ErrSettled), and a compaction started with emitter.Background
// is held while it runs and settles, and reaches the client, terminal
// first, when the session's next turn begins. Safe for concurrent use.
type Outlive struct {
	turnOver chan struct{} // closed by Play once the first prompt's response arrived
	pumped   chan error    // the pump's verdict
	started  chan struct{}
}

// NewOutlive returns an Outlive ready to play.
func NewOutlive() *Outlive {
	return &Outlive{turnOver: make(chan struct{}), pumped: make(chan error, 1), started: make(chan struct{}, 1)}
}

// Prompt is the agent's runtime. The first prompt opens cmp_turn, leaves
// it to the turn's end, and hands the session to its pump; later prompts
// end at once.
func (o *Outlive) Prompt(ctx context.Context, s Starter) (string, error) {
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
func (o *Outlive) pump(ctx context.Context, s Starter, turn *emitter.Compaction) error {
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

// Play is the client: the first prompt, then (once the pump is done, all
// of it between turns) the second.
func (o *Outlive) Play(ctx context.Context, t testing.TB, c *Client, sessionID string) {
	t.Helper()
	if _, err := c.Prompt(ctx, sessionID, nil); err != nil {
		t.Fatalf("first prompt: %v", err)
	}
	close(o.turnOver)
	select {
	case err := <-o.pumped:
		if err != nil {
			t.Error(err)
		}
	case <-ctx.Done():
		t.Fatal("the pump never finished")
	}
	if _, err := c.Prompt(ctx, sessionID, nil); err != nil {
		t.Fatalf("second prompt: %v", err)
	}
}

// Check checks the record: nothing about compaction outside a turn;
// cmp_turn settled by its turn's end; cmp_late never seen; cmp_bg seen
// once, completed with its streamed summary, in the second turn.
func (o *Outlive) Check(t testing.TB, evs []Event, version int) {
	t.Helper()
	if err := CheckTurns(evs, version); err != nil {
		t.Errorf("%v\n%s", err, Dump(evs))
	}
	if got, want := Statuses(evs, "cmp_turn"), []string{"in_progress", "failed"}; !slices.Equal(got, want) {
		t.Errorf("cmp_turn: %v, want %v\n%s", got, want, Dump(evs))
	}
	if got := Statuses(evs, "cmp_late"); len(got) != 0 {
		t.Errorf("cmp_late reached the client: %v", got)
	}
	if got, want := Statuses(evs, "cmp_bg"), []string{"completed"}; !slices.Equal(got, want) {
		t.Errorf("cmp_bg: %v, want %v (terminal-first)\n%s", got, want, Dump(evs))
	}
	prompts := 0
	for _, e := range evs {
		switch {
		case e.Sent && e.Method == "session/prompt":
			prompts++
		case e.CompactionID == "cmp_bg":
			if prompts != 2 {
				t.Errorf("cmp_bg arrived in turn %d, want the second", prompts)
			}
			if !SameJSON(Field(e, "summary"), `[{"type":"text","text":"## Retained"},{"type":"text","text":" context"}]`) {
				t.Errorf("cmp_bg summary %s, want what it streamed", Field(e, "summary"))
			}
		}
	}
}

// OutsideTheTurn is a runtime's goroutine that outlived its prompt, with
// the Session it got from the prompt's context after the prompt was
// answered: a start is refused with emitter.ErrOutsideTurn, and a
// background one opens and completes (CheckOutsideTheTurn sees it in the
// next turn).
func OutsideTheTurn(ctx context.Context, s Starter) error {
	if c, err := s.Start(ctx, emitter.WithID("cmp_late")); c != nil || !errors.Is(err, emitter.ErrOutsideTurn) {
		return fmt.Errorf("after the turn, Start = %v, %v; want emitter.ErrOutsideTurn", c, err)
	}
	bg, err := s.Start(ctx, emitter.WithID("cmp_bg"), emitter.Background())
	if err != nil {
		return fmt.Errorf("background Start after the turn: %w", err)
	}
	return bg.Complete(ctx)
}

// CheckOutsideTheTurn checks the record of OutsideTheTurn's runs: cmp_1 in
// the first turn, cmp_late never, cmp_bg completed (terminal-first) in the
// second.
func CheckOutsideTheTurn(t testing.TB, evs []Event) {
	t.Helper()
	if got, want := Statuses(evs, "cmp_1"), []string{"in_progress", "completed"}; !slices.Equal(got, want) {
		t.Errorf("cmp_1: %v, want %v\n%s", got, want, Dump(evs))
	}
	if got := Statuses(evs, "cmp_late"); len(got) != 0 {
		t.Errorf("cmp_late reached the client: %v", got)
	}
	if got, want := Statuses(evs, "cmp_bg"), []string{"completed"}; !slices.Equal(got, want) {
		t.Errorf("cmp_bg: %v, want %v\n%s", got, want, Dump(evs))
	}
	prompts := 0
	for _, e := range evs {
		switch {
		case e.Sent && e.Method == "session/prompt":
			prompts++
		case e.CompactionID == "cmp_bg" && prompts != 2:
			t.Errorf("cmp_bg arrived in turn %d, want the second", prompts)
		}
	}
}
