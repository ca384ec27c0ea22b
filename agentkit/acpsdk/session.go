package acpsdk

import (
	"context"

	"github.com/acpcompact/acpcompact/agentkit/internal/tap"
	"github.com/acpcompact/acpcompact/emitter"
)

// Session reports the compactions of one ACP session on one connection: the
// emitter's Session behind the kit's turn scoping. Get it from Kit.Session;
// it is cheap, so getting it per call is fine. Safe for concurrent use.
type Session struct {
	t   *tap.Tap
	id  string
	err error
}

// ID returns the ACP session ID.
func (s *Session) ID() string { return s.id }

// Start opens a compaction and reports it as in_progress (see
// emitter.Session.Start). When ctx carries no trace context, the turn's
// prompt `_meta` trace context is attached for the emitter's observer. It
// fails with ErrNotInitialized before initialize, ErrClosed after the
// connection closed, and emitter.ErrTurnEnded while the session's turn is
// being settled.
func (s *Session) Start(ctx context.Context, opts ...emitter.StartOption) (*emitter.Compaction, error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.t.Start(ctx, s.id, opts...)
}

// Fail reports the failure of compaction id, started or not (see
// emitter.Session.Fail); refused like Start.
func (s *Session) Fail(ctx context.Context, id emitter.ID, cause error, opts ...emitter.SettleOption) error {
	if s.err != nil {
		return s.err
	}
	return s.t.Fail(ctx, s.id, id, cause, opts...)
}

// Replay emits a settled compaction at the caller's position in a
// session/load history replay (see emitter.Session.Replay). Call it inside
// the load handler, so the update precedes the load response.
func (s *Session) Replay(ctx context.Context, rec emitter.Record) error {
	if s.err != nil {
		return s.err
	}
	return s.t.Replay(ctx, s.id, rec)
}

// SettleAll settles the session's open compactions now: cancelled for
// emitter.ErrCancelled, failed otherwise (see emitter.Session.SettleAll).
// The kit calls it itself at the end of each turn.
func (s *Session) SettleAll(ctx context.Context, reason error) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	return s.t.SettleAll(ctx, s.id, reason)
}

// Open returns how many compactions of the session are open.
func (s *Session) Open() int {
	if s.err != nil {
		return 0
	}
	return s.t.Open(s.id)
}
