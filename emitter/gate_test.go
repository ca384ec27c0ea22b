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

// TestGateJudgesHandleAndByIDCallsAlike: every reporting call of a runtime
// passes the host's gate, on a handle (from Start or Session.Compaction)
// as by ID; a refusal returns the gate's error and sends nothing.
func TestGateJudgesHandleAndByIDCallsAlike(t *testing.T) {
	ctx := context.Background()
	g := &gate{}
	em, rec, _ := newCapable(t, emitter.WithGate(g.admit), emitter.WithSummaryPolicy(emitter.AllSummaries))
	s := em.Session("s1")

	c, err := s.Start(ctx, emitter.WithID("a"))
	require.NoError(t, err)
	require.NoError(t, c.Chunk(ctx, protocol.Text("x")))
	require.NoError(t, s.Chunk(ctx, "a", protocol.Text("y")))
	h, err := s.Compaction("a")
	require.NoError(t, err)
	require.Same(t, c, h, "the by-ID handle is the compaction's own")
	b, err := s.Start(ctx, emitter.WithID("b"))
	require.NoError(t, err)
	d, err := s.Start(ctx, emitter.WithID("d"))
	require.NoError(t, err)
	passed, released := g.counts()
	assert.Equal(t, 5, passed)
	assert.Equal(t, passed, released, "each admitted call releases the gate once")

	g.set(errGateClosed)
	for name, call := range map[string]func() error{
		"Start": func() error {
			c, err := s.Start(ctx, emitter.WithID("refused"))
			assert.Nil(t, c)
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
		assert.ErrorIs(t, call(), errGateClosed, name)
	}
	assert.Equal(t, 3, s.Open(), "a refused call changes nothing")
	before := len(rec.Lines())

	// What the host drives itself does not pass the gate.
	n, err := s.SettleAll(ctx, emitter.ErrTurnEnded)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Len(t, rec.Lines(), before+3)
	require.NoError(t, s.Replay(ctx, emitter.Record{ID: "old", Status: protocol.Completed}))
	require.NoError(t, s.Deliver(ctx))
	_, err = em.CloseSession(ctx, "s1", emitter.ErrCancelled)
	require.NoError(t, err)
	passed, _ = g.counts()
	assert.Equal(t, 5, passed)
	validateAll(t, rec, 1)
}

// TestCompactionByIDRefusesWhatIsNotOpen: Session.Compaction tells a
// settled ID (ErrSettled) from one never used (ErrNotOpen).
func TestCompactionByIDRefusesWhatIsNotOpen(t *testing.T) {
	ctx := context.Background()
	em, _, _ := newCapable(t)
	s := em.Session("s1")
	_, err := s.Compaction("nope")
	assert.ErrorIs(t, err, emitter.ErrNotOpen)
	c, err := s.Start(ctx, emitter.WithID("a"))
	require.NoError(t, err)
	require.NoError(t, c.Complete(ctx))
	h, err := s.Compaction("a")
	assert.Nil(t, h)
	assert.ErrorIs(t, err, emitter.ErrSettled)
}
