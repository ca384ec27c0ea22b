package agentkit

import (
	"context"
	"fmt"

	"github.com/acpcompact/acpcompact/agentkit/internal/tap"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// Session reports the compactions of one ACP session on the connection of
// the handler that got it from SessionFrom: the emitter's Session behind
// the connection's wire engine. It is the one Session of both kits: a
// connection of Kit.NewConn and one of agentkit/acpsdk bind their handlers'
// contexts alike, and acpsdk.Session is this type. It is cheap, so getting
// it per call is fine. Safe for concurrent use.
//
// Start, and every call on the handles that Start and Compaction return
// (Chunk, Complete, Cancel, Fail), pass the engine's turn guard: while the
// session's turn end is being settled and written they wait for the
// message that ends the turn to be written, and the turn's end waits for
// one in progress, so nothing opens or changes between the settlement and
// that message. Then they are judged as calls of the next turn (a prompt
// was queued behind the one that ended) or as calls between turns: a
// handle whose compaction the turn's end settled is refused with
// emitter.ErrSettled, and a Start with emitter.ErrOutsideTurn unless it
// was started with emitter.Background. A call from the settlement's own
// observer is refused at once (emitter.ErrOutsideTurn, wrapping
// emitter.ErrTurnEnded).
//
// Every method fails with ErrUnknownConn when SessionFrom's context carries
// no kit connection; Start and Compaction fail with ErrNotInitialized
// before the initialize exchange and with ErrClosed once the connection
// has closed, when the handles' calls fail with an error that wraps both
// ErrClosed and emitter.ErrSettled (the close settled their compactions).
type Session struct {
	t   *tap.Tap
	id  string
	err error
}

// SessionFrom returns the reporter of session sessionID on the connection
// whose handler ctx belongs to: any handler a kit runs (session/prompt,
// session/load, every other request and notification; on a connection of
// this package or of agentkit/acpsdk) gets a context that carries its
// connection, and so does every context derived from it, such as one a
// goroutine of the runtime keeps after the handler returned. So a runtime
// never holds the connection itself. It never returns nil: with a context
// no kit handler derived, every method fails with ErrUnknownConn.
func SessionFrom(ctx context.Context, sessionID string) *Session {
	t := tap.From(ctx)
	if t == nil {
		return &Session{id: sessionID, err: fmt.Errorf("%w: no kit connection in the context of session %s", ErrUnknownConn, sessionID)}
	}
	return &Session{t: t, id: sessionID}
}

// Start opens a compaction and reports it as in_progress (see
// emitter.Session.Start), and returns its handle. It may return a handle
// and an error together: an error wrapping emitter.ErrUndeliverable means
// the compaction is open but its start did not reach the client; keep the
// handle and settle it as usual. Pass emitter.UserDisplayable() when the
// summary is fit to show the user; without it the summary is withheld (see
// the package documentation). When ctx carries no trace context, the
// turn's prompt `_meta` trace context is attached for the emitter's
// observer.
func (s *Session) Start(ctx context.Context, opts ...emitter.StartOption) (*emitter.Compaction, error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.t.Start(ctx, s.id, opts...)
}

// Compaction returns the handle of the open compaction id (emitter.WithID
// at Start), for a runtime that addresses compactions by ID rather than
// by handle; its calls pass the turn guard as every handle's do. An ID
// that is not open is refused with emitter.ErrSettled when the session
// used it, else with emitter.ErrNotOpen.
func (s *Session) Compaction(id protocol.ID) (*emitter.Compaction, error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.t.Compaction(s.id, id)
}

// Replay emits a settled compaction at the caller's position in a history
// replay (session/load, or a v2 session/resume that replays; see
// emitter.Session.Replay). Call it inside that request's handler, so the
// update precedes its response.
func (s *Session) Replay(ctx context.Context, rec emitter.Record) error {
	if s.err != nil {
		return s.err
	}
	return s.t.Replay(ctx, s.id, rec)
}

// Recover settles the connection's open compactions as failed
// (emitter.ErrAgentCrashed) when the goroutine is panicking, then panics
// again with the same value. The kits guard their handlers themselves; use
// it as `defer agentkit.Recover(ctx)` first thing in goroutines of your own
// that run with a kit handler's context (of either kit). It does nothing
// for other contexts and when there is no panic.
func Recover(ctx context.Context) {
	if v := recover(); v != nil {
		crash(ctx)
		panic(v)
	}
}

// crash settles the open compactions of the connection whose handler ctx
// belongs to as failed: its handler, or a goroutine of the runtime's, is
// panicking.
func crash(ctx context.Context) {
	if t := tap.From(ctx); t != nil {
		t.Crash()
	}
}
