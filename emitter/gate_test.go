package emitter_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// TestGateJudgesEveryReportingCall: every reporting call of a runtime
// passes the host's gate, on a handle from Start as on one from
// Session.Compaction; a refusal returns the gate's error and sends nothing.
func TestGateJudgesEveryReportingCall(t *testing.T) {
	ctx := context.Background()
	g := &gate{}
	em, rec, _ := newCapable(t, emitter.WithGate(g.admit), emitter.WithSummaryPolicy(emitter.AllSummaries))
	s := em.Session("s1")

	c, err := s.Start(ctx, emitter.WithID("a"))
	require.NoError(t, err, "Start a")
	require.NoError(t, c.Chunk(ctx, protocol.Text("x")), "Compaction.Chunk")
	h, err := s.Compaction("a")
	require.NoError(t, err, "Session.Compaction a")
	require.Same(t, c, h, "Session.Compaction a (the by-ID handle is the compaction's own)")
	require.NoError(t, h.Chunk(ctx, protocol.Text("y")), "Chunk by ID")

	b, err := s.Start(ctx, emitter.WithID("b"))
	require.NoError(t, err, "Start b")
	d, err := s.Start(ctx, emitter.WithID("d"))
	require.NoError(t, err, "Start d")
	passed, released := g.counts()
	assert.Equal(t, 5, passed, "calls through the gate")
	assert.Equal(t, passed, released, "gate releases (each admitted call releases the gate once)")

	g.set(errGateClosed)
	for name, call := range map[string]func() error{
		"Start": func() error {
			c, err := s.Start(ctx, emitter.WithID("refused"))
			assert.Nil(t, c, "refused Start returned a handle %v", c.ID())
			return err
		},
		"Compaction.Chunk":    func() error { return h.Chunk(ctx, protocol.Text("z")) },
		"Compaction.Complete": func() error { return h.Complete(ctx) },
		"Compaction.Fail":     func() error { return b.Fail(ctx, errors.New("boom")) },
		"Compaction.Cancel":   func() error { return d.Cancel(ctx) },
	} {
		assert.ErrorIs(t, call(), errGateClosed, "%s through a closed gate", name)
	}
	assert.Equal(t, 3, emitter.OpenOf(s), "open compactions after the refusals (a refused call changes nothing)")
	before := len(rec.Lines())

	// What the host drives itself does not pass the gate.
	n, err := s.SettleAll(ctx, emitter.ErrTurnEnded)
	require.NoError(t, err, "SettleAll")
	assert.Equal(t, 3, n, "SettleAll settled")
	assert.Equal(t, before+3, len(rec.Lines()), "lines after SettleAll")
	require.NoError(t, s.Replay(ctx, emitter.Record{ID: "old", Status: protocol.Completed}), "Replay")
	require.NoError(t, s.Deliver(ctx), "Deliver")
	_, err = em.CloseSession(ctx, "s1", emitter.ErrCancelled)
	require.NoError(t, err, "CloseSession")
	passed, _ = g.counts()
	assert.Equal(t, 5, passed, "calls through the gate after the host's own calls")
	validateAll(t, rec, 1)
}

// TestCompactionByIDRefusesWhatIsNotOpen: Session.Compaction tells a
// settled ID (ErrSettled) from one never used (ErrNotOpen).
func TestCompactionByIDRefusesWhatIsNotOpen(t *testing.T) {
	ctx := context.Background()
	em, _, _ := newCapable(t)
	s := em.Session("s1")
	_, err := s.Compaction("nope")
	assert.ErrorIs(t, err, emitter.ErrNotOpen, "Compaction of a never used ID")
	c, err := s.Start(ctx, emitter.WithID("a"))
	require.NoError(t, err, "Start a")
	require.NoError(t, c.Complete(ctx), "Complete a")
	h, err := s.Compaction("a")
	assert.Nil(t, h, "Compaction of a settled ID returned a handle %v", h.ID())
	assert.ErrorIs(t, err, emitter.ErrSettled, "Compaction of a settled ID")
}

// TestFinalRecordHandedOverOutsideTheGate: the final record of a runtime's
// settlement reaches OnFinalRecord's sink once the call has released the
// host's gate, on a handle from Start as on one by ID, so that a sink that calls the emitter
// does not pass the gate while its own call still holds it (the kits'
// gate is a read lock, which a waiting turn end makes non-reentrant).
func TestFinalRecordHandedOverOutsideTheGate(t *testing.T) {
	ctx := context.Background()
	for name, settle := range map[string]func(s *emitter.Session, c *emitter.Compaction) error{
		"Compaction.Complete": func(_ *emitter.Session, c *emitter.Compaction) error { return c.Complete(ctx) },
		"Compaction.Fail":     func(_ *emitter.Session, c *emitter.Compaction) error { return c.Fail(ctx, errors.New("boom")) },
		"Compaction.Cancel":   func(_ *emitter.Session, c *emitter.Compaction) error { return c.Cancel(ctx) },
		"Complete by ID": func(s *emitter.Session, c *emitter.Compaction) error {
			h, err := s.Compaction(c.ID())
			if err != nil {
				return err
			}
			return h.Complete(ctx)
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := &gate{}
			sunk := 0
			sink := func(context.Context, string, emitter.Record) {
				sunk++
				passed, released := g.counts()
				assert.Equal(t, passed, released, "gate at the sink: %d admitted, %d released", passed, released)
			}
			em, _, _ := newCapable(t, emitter.WithGate(g.admit), emitter.OnFinalRecord(sink))
			s := em.Session("s1")
			c, err := s.Start(ctx, emitter.WithID("a"))
			require.NoError(t, err, "Start")
			require.NoError(t, settle(s, c), "settle")
			assert.Equal(t, 1, sunk, "final records handed over")
		})
	}
}
