package emitter_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// gate is a host's gate (WithGate) that counts what passes it and refuses
// while closed.
type gate struct {
	mu       sync.Mutex
	refuse   error
	passed   []string // session IDs, in call order
	released int
}

var errGateClosed = errors.New("gate closed")

func (g *gate) admit(_ context.Context, sessionID string) (func(), error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refuse != nil {
		return nil, g.refuse
	}
	g.passed = append(g.passed, sessionID)
	return func() {
		g.mu.Lock()
		g.released++
		g.mu.Unlock()
	}, nil
}

func (g *gate) set(err error) {
	g.mu.Lock()
	g.refuse = err
	g.mu.Unlock()
}

func (g *gate) counts() (passed, released int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.passed), g.released
}

// TestGateJudgesHandleAndByIDCallsAlike: every reporting call of a runtime
// passes the host's gate, on a handle (from Start or Session.Compaction)
// as by ID; a refusal returns the gate's error and sends nothing.
func TestGateJudgesHandleAndByIDCallsAlike(t *testing.T) {
	ctx := context.Background()
	g := &gate{}
	em, rec, _ := newCapable(t, emitter.WithGate(g.admit), emitter.WithSummaryPolicy(emitter.AllSummaries))
	s := em.Session("s1")

	c, err := s.Start(ctx, emitter.WithID("a"))
	if err != nil {
		t.Fatalf("Start a: %v", err)
	}
	if err := c.Chunk(ctx, protocol.Text("x")); err != nil {
		t.Fatalf("Compaction.Chunk: %v", err)
	}
	if err := s.Chunk(ctx, "a", protocol.Text("y")); err != nil {
		t.Fatalf("Session.Chunk: %v", err)
	}
	h, err := s.Compaction("a")
	if err != nil {
		t.Fatalf("Session.Compaction a: %v", err)
	}
	if h != c {
		t.Fatalf("Session.Compaction a: got handle %p, want %p (the by-ID handle is the compaction's own)", h, c)
	}
	b, err := s.Start(ctx, emitter.WithID("b"))
	if err != nil {
		t.Fatalf("Start b: %v", err)
	}
	d, err := s.Start(ctx, emitter.WithID("d"))
	if err != nil {
		t.Fatalf("Start d: %v", err)
	}
	passed, released := g.counts()
	if passed != 5 {
		t.Errorf("calls through the gate: got %d, want 5", passed)
	}
	if released != passed {
		t.Errorf("gate releases: got %d, want %d (each admitted call releases the gate once)", released, passed)
	}

	g.set(errGateClosed)
	for name, call := range map[string]func() error{
		"Start": func() error {
			c, err := s.Start(ctx, emitter.WithID("refused"))
			if c != nil {
				t.Errorf("refused Start returned a handle %v", c.ID())
			}
			return err
		},
		"Compaction.Chunk":    func() error { return h.Chunk(ctx, protocol.Text("z")) },
		"Compaction.Complete": func() error { return h.Complete(ctx) },
		"Compaction.Fail":     func() error { return b.Fail(ctx, errors.New("boom")) },
		"Compaction.Cancel":   func() error { return d.Cancel(ctx) },
		"Session.Chunk":       func() error { return s.Chunk(ctx, "a", protocol.Text("z")) },
		"Session.Complete":    func() error { return s.Complete(ctx, "a") },
		"Session.Cancel":      func() error { return s.Cancel(ctx, "a") },
		"Session.Fail":        func() error { return s.Fail(ctx, "never", errors.New("boom")) },
	} {
		if err := call(); !errors.Is(err, errGateClosed) {
			t.Errorf("%s through a closed gate: got %v, want the gate's error", name, err)
		}
	}
	if n := s.Open(); n != 3 {
		t.Errorf("open compactions after the refusals: got %d, want 3 (a refused call changes nothing)", n)
	}
	before := len(rec.Lines())

	// What the host drives itself does not pass the gate.
	n, err := s.SettleAll(ctx, emitter.ErrTurnEnded)
	if err != nil {
		t.Fatalf("SettleAll: %v", err)
	}
	if n != 3 {
		t.Errorf("SettleAll settled %d, want 3", n)
	}
	if got := len(rec.Lines()); got != before+3 {
		t.Errorf("lines after SettleAll: got %d, want %d", got, before+3)
	}
	if err := s.Replay(ctx, emitter.Record{ID: "old", Status: protocol.Completed}); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if err := s.Deliver(ctx); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	_, err = em.CloseSession(ctx, "s1", emitter.ErrCancelled)
	if err != nil {
		t.Fatalf("CloseSession: %v", err)
	}
	passed, _ = g.counts()
	if passed != 5 {
		t.Errorf("calls through the gate after the host's own calls: got %d, want still 5", passed)
	}
	validateAll(t, rec, 1)
}

// TestCompactionByIDRefusesWhatIsNotOpen: Session.Compaction tells a
// settled ID (ErrSettled) from one never used (ErrNotOpen).
func TestCompactionByIDRefusesWhatIsNotOpen(t *testing.T) {
	ctx := context.Background()
	em, _, _ := newCapable(t)
	s := em.Session("s1")
	_, err := s.Compaction("nope")
	if !errors.Is(err, emitter.ErrNotOpen) {
		t.Errorf("Compaction of a never used ID: got %v, want ErrNotOpen", err)
	}
	c, err := s.Start(ctx, emitter.WithID("a"))
	if err != nil {
		t.Fatalf("Start a: %v", err)
	}
	if err := c.Complete(ctx); err != nil {
		t.Fatalf("Complete a: %v", err)
	}
	h, err := s.Compaction("a")
	if h != nil {
		t.Errorf("Compaction of a settled ID returned a handle %v", h.ID())
	}
	if !errors.Is(err, emitter.ErrSettled) {
		t.Errorf("Compaction of a settled ID: got %v, want ErrSettled", err)
	}
}

// TestFinalRecordHandedOverOutsideTheGate: the final record of a runtime's
// settlement reaches OnFinalRecord's sink once the call has released the
// host's gate, by handle as by ID, so that a sink that calls the emitter
// does not pass the gate while its own call still holds it (the kits'
// gate is a read lock, which a waiting turn end makes non-reentrant).
func TestFinalRecordHandedOverOutsideTheGate(t *testing.T) {
	ctx := context.Background()
	for name, settle := range map[string]func(s *emitter.Session, c *emitter.Compaction) error{
		"Compaction.Complete": func(_ *emitter.Session, c *emitter.Compaction) error { return c.Complete(ctx) },
		"Compaction.Fail":     func(_ *emitter.Session, c *emitter.Compaction) error { return c.Fail(ctx, errors.New("boom")) },
		"Compaction.Cancel":   func(_ *emitter.Session, c *emitter.Compaction) error { return c.Cancel(ctx) },
		"Session.Complete":    func(s *emitter.Session, c *emitter.Compaction) error { return s.Complete(ctx, c.ID()) },
		"Session.Fail":        func(s *emitter.Session, c *emitter.Compaction) error { return s.Fail(ctx, c.ID(), errors.New("boom")) },
		"Session.Cancel":      func(s *emitter.Session, c *emitter.Compaction) error { return s.Cancel(ctx, c.ID()) },
	} {
		t.Run(name, func(t *testing.T) {
			g := &gate{}
			sunk := 0
			sink := func(context.Context, string, emitter.Record) {
				sunk++
				if passed, released := g.counts(); released != passed {
					t.Errorf("gate at the sink: %d admitted, %d released; want every admission released", passed, released)
				}
			}
			em, _, _ := newCapable(t, emitter.WithGate(g.admit), emitter.OnFinalRecord(sink))
			s := em.Session("s1")
			c, err := s.Start(ctx, emitter.WithID("a"))
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if err := settle(s, c); err != nil {
				t.Fatalf("settle: %v", err)
			}
			if sunk != 1 {
				t.Errorf("final records handed over: got %d, want 1", sunk)
			}
		})
	}
}
