package tap

import (
	"context"
	"errors"
	"fmt"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/acpcompact/acpcompact/protocol"
)

// The reporting calls of a runtime. Those that open or settle a compaction
// run inside the engine's turn guard (Admit): while the session's turn end
// is being settled and written they wait for it to be written (one from
// the settlement's own observer is refused), so nothing opens or changes
// between the settlement and the message that ends the turn, and the
// turn's end waits for one in progress. Between turns the emitter judges
// them (emitter.WithTurns with RefuseOutsideTurn): a start is refused with
// emitter.ErrOutsideTurn unless it is a background one.

// guarded runs f on the session's emitter inside the turn guard, with ctx
// carrying the turn's trace context. A call for the turn of a prompt queued
// behind a turn end being written waits for that write (bounded by the
// connection: its end releases it) whatever ctx says: the prompt's context
// may already be cancelled, and a cancelled turn must still be able to
// report.
func (t *Tap) guarded(ctx context.Context, sessionID string, f func(context.Context, *emitter.Session) error) error {
	release, err := t.e.Admit(context.WithoutCancel(ctx), sessionID)
	if err != nil {
		return t.refused(sessionID, err)
	}
	defer release()
	em := t.Emitter()
	if em == nil {
		// The initialize answer is being read: the emitter is not created yet.
		return fmt.Errorf("%w: session %s", t.cfg.ErrNotInitialized, sessionID)
	}
	return f(t.turnContext(ctx, sessionID), t.session(em, sessionID))
}

// refused names the kit in an error of Admit, wrapping the public
// package's sentinel for the engine's.
func (t *Tap) refused(sessionID string, err error) error {
	switch {
	case errors.Is(err, turn.ErrClosed):
		return fmt.Errorf("%w: session %s", t.cfg.ErrClosed, sessionID)
	case errors.Is(err, turn.ErrNotInitialized):
		return fmt.Errorf("%w: session %s", t.cfg.ErrNotInitialized, sessionID)
	}
	return fmt.Errorf("%s: %w", t.cfg.Name, err)
}

// turnContext adds the turn's trace context when ctx carries none, so the
// observer of a compaction joins its prompt's trace whatever ctx the
// runtime passed.
func (t *Tap) turnContext(ctx context.Context, sessionID string) context.Context {
	if _, ok := emitter.TraceFrom(ctx); ok {
		return ctx
	}
	if tr, ok := t.e.Trace(sessionID); ok {
		return emitter.WithTrace(ctx, tr)
	}
	return ctx
}

// Start opens a compaction in sessionID; see emitter.Session.Start. It may
// return a handle and an error together (emitter.ErrUndeliverable: the
// compaction is open, its start did not reach the client).
func (t *Tap) Start(ctx context.Context, sessionID string, opts ...emitter.StartOption) (*emitter.Compaction, error) {
	var c *emitter.Compaction
	err := t.guarded(ctx, sessionID, func(ctx context.Context, s *emitter.Session) error {
		var err error
		c, err = s.Start(ctx, opts...)
		return err
	})
	if c != nil {
		// In a cancelled turn whose grace already ran out, the compaction
		// gets a grace of its own rather than waiting for a watchdog.
		t.e.Started(sessionID)
	}
	return c, err
}

// Chunk streams a summary chunk of compaction id; see
// emitter.Session.Chunk.
func (t *Tap) Chunk(ctx context.Context, sessionID string, id protocol.ID, block protocol.ContentBlock) error {
	return t.guarded(ctx, sessionID, func(ctx context.Context, s *emitter.Session) error {
		return s.Chunk(ctx, id, block)
	})
}

// Complete reports compaction id completed; see emitter.Session.Complete.
func (t *Tap) Complete(ctx context.Context, sessionID string, id protocol.ID, opts ...emitter.SettleOption) error {
	return t.guarded(ctx, sessionID, func(ctx context.Context, s *emitter.Session) error {
		return s.Complete(ctx, id, opts...)
	})
}

// Cancel reports compaction id cancelled; see emitter.Session.Cancel.
func (t *Tap) Cancel(ctx context.Context, sessionID string, id protocol.ID, opts ...emitter.SettleOption) error {
	return t.guarded(ctx, sessionID, func(ctx context.Context, s *emitter.Session) error {
		return s.Cancel(ctx, id, opts...)
	})
}

// Fail reports the failure of compaction id; see emitter.Session.Fail.
func (t *Tap) Fail(ctx context.Context, sessionID string, id protocol.ID, cause error, opts ...emitter.SettleOption) error {
	return t.guarded(ctx, sessionID, func(ctx context.Context, s *emitter.Session) error {
		return s.Fail(ctx, id, cause, opts...)
	})
}

// Replay emits a settled compaction during history replay; see
// emitter.Session.Replay. It is not turn-guarded: a replay answers
// session/load (or a replaying session/resume), not a prompt.
func (t *Tap) Replay(ctx context.Context, sessionID string, rec emitter.Record) error {
	if t.Closed() {
		return fmt.Errorf("%w: session %s", t.cfg.ErrClosed, sessionID)
	}
	em := t.Emitter()
	if em == nil {
		return fmt.Errorf("%w: session %s", t.cfg.ErrNotInitialized, sessionID)
	}
	return t.session(em, sessionID).Replay(ctx, rec)
}

// SettleAll settles the session's open compactions; see
// emitter.Session.SettleAll.
func (t *Tap) SettleAll(ctx context.Context, sessionID string, reason error) (int, error) {
	em := t.Emitter()
	if em == nil {
		return 0, fmt.Errorf("%w: session %s", t.cfg.ErrNotInitialized, sessionID)
	}
	if !t.known(sessionID) {
		return 0, nil
	}
	return em.Session(sessionID).SettleAll(ctx, reason)
}

// Open returns how many compactions of the session are open.
func (t *Tap) Open(sessionID string) int {
	em := t.Emitter()
	if em == nil || !t.known(sessionID) {
		return 0
	}
	return em.Session(sessionID).Open()
}
