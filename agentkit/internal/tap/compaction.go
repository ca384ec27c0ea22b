package tap

import (
	"context"
	"errors"
	"fmt"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/internal/turn"
	"github.com/acpcompact/acpcompact/observe"
	"github.com/acpcompact/acpcompact/protocol"
)

// The reporting calls of a runtime. Every call that opens, streams or
// settles a compaction, on the kit's Session or on a handle it returned,
// passes the engine's turn guard (Admit), which the tap installs as the
// emitter's gate (emitter.WithGate; see gate): while the session's turn
// end is being settled and written such a call waits for it to be written
// (one from the settlement's own observer is refused), so nothing opens or
// changes between the settlement and the message that ends the turn, and
// the turn's end waits for one in progress. Between turns the emitter
// judges them (emitter.WithTurns with RefuseOutsideTurn): a start is
// refused with emitter.ErrOutsideTurn unless it is a background one. The
// settlements the tap drives itself (a turn's end, the cancel grace, a
// session's close, the connection's end, a panic) call the emitter
// directly and never pass the gate.

// gate is the emitter's gate (emitter.WithGate): the engine's turn guard
// for one reporting call. A call for the turn of a prompt queued behind a
// turn end being written waits for that write (bounded by the connection:
// its end releases it) whatever ctx says: the prompt's context may already
// be cancelled, and a cancelled turn must still be able to report. A call
// made with the settlement's context (turn.Settling: the settlement's
// observer) is refused at once rather than made to wait for the end it
// belongs to.
//
// Once the connection has closed, a call is refused with an error that
// wraps the public package's ErrClosed and emitter.ErrSettled: the close
// has settled (or is settling) every compaction of the connection. (Start
// checks the close first, and refuses with ErrClosed alone.)
func (t *Tap) gate(ctx context.Context, sessionID string) (func(), error) {
	release, err := t.e.Admit(context.WithoutCancel(ctx), sessionID)
	if errors.Is(err, turn.ErrClosed) {
		return nil, fmt.Errorf("%w: session %s (%w by the close)", t.cfg.ErrClosed, sessionID, emitter.ErrSettled)
	}
	if err != nil {
		return nil, t.refused(sessionID, err)
	}
	return release, nil
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
	if _, ok := observe.TraceFrom(ctx); ok {
		return ctx
	}
	if tr, ok := t.e.Trace(sessionID); ok {
		return observe.WithTrace(ctx, tr)
	}
	return ctx
}

// ready returns the emitter of a connection that reports compactions, or
// the public package's error for one that has closed or not yet answered
// initialize.
func (t *Tap) ready(sessionID string) (*emitter.Emitter, error) {
	if t.Closed() {
		return nil, fmt.Errorf("%w: session %s", t.cfg.ErrClosed, sessionID)
	}
	em := t.Emitter()
	if em == nil {
		return nil, fmt.Errorf("%w: session %s", t.cfg.ErrNotInitialized, sessionID)
	}
	return em, nil
}

// Start opens a compaction in sessionID; see emitter.Session.Start. It may
// return a handle and an error together (emitter.ErrUndeliverable: the
// compaction is open, its start did not reach the client).
func (t *Tap) Start(ctx context.Context, sessionID string, opts ...emitter.StartOption) (*emitter.Compaction, error) {
	if _, err := t.ready(sessionID); err != nil {
		return nil, err
	}
	if t.book != nil {
		return t.startRecorded(ctx, sessionID, opts)
	}
	// In a cancelled turn whose grace already ran out, the compaction
	// gets a grace of its own rather than waiting for a watchdog (the
	// host's Start).
	return t.h.Start(t.turnContext(ctx, sessionID), sessionID, opts...)
}

// Compaction returns the handle of the open compaction id in sessionID; see
// emitter.Session.Compaction. Its calls pass the turn guard as every
// handle's do.
func (t *Tap) Compaction(sessionID string, id protocol.ID) (*emitter.Compaction, error) {
	em, err := t.ready(sessionID)
	if err != nil {
		return nil, err
	}
	if !t.h.Known(sessionID) {
		// Nothing was ever opened in it: no state is created for a lookup.
		return nil, fmt.Errorf("%w: session %s, compaction %s", emitter.ErrNotOpen, sessionID, id)
	}
	return em.Session(sessionID).Compaction(id)
}

// Replay emits a settled compaction during history replay; see
// emitter.Session.Replay. It is not turn-guarded: a replay answers
// session/load (or a replaying session/resume), not a prompt.
func (t *Tap) Replay(ctx context.Context, sessionID string, rec emitter.Record) error {
	if _, err := t.ready(sessionID); err != nil {
		return err
	}
	return t.h.Session(sessionID).Replay(ctx, rec)
}
