package agentkit

import (
	"context"
	"fmt"

	"github.com/acpcompact/acpcompact/agentkit/internal/tap"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/history"
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
// observer. With a store (WithStore) the compaction's start is written to
// the session's history before it opens: a start the store cannot take
// is refused (no handle, an error wrapping ErrStore), so the client never
// sees a compaction the history lacks.
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

// Send sends one of the session's own updates (update marshals to the
// `update` object of session/update: an agent_message_chunk, a tool_call,
// a plan, ...) through the kit, so that a runtime never holds the
// connection. It is written as any notification of the agent's: in call
// order with the kit's compaction updates, after the turn guard's rules
// for a message that ends a turn (a v2 idle state_update). With a store
// (WithStore) it is recorded first, as every session update the agent
// writes is: when it cannot be, it is not sent, and the error wraps
// ErrStore. It returns before the update is written (a write error shows
// in a later call); with ErrClosed once the connection has closed.
func (s *Session) Send(ctx context.Context, update any) error {
	if s.err != nil {
		return s.err
	}
	return s.t.SendUpdate(ctx, s.id, update)
}

// Keep writes the runtime's own data (data marshals to JSON: token
// counts, its model's messages, what it needs to restore its state) to the
// session's history (WithStore), where it is never sent to the client:
// ReplayHistory hands it back, in its place among the rest. An error
// wraps ErrStore: no store, or the history could not be written.
func (s *Session) Keep(ctx context.Context, data any) error {
	if s.err != nil {
		return s.err
	}
	return s.t.Keep(ctx, s.id, data)
}

// ReplayHistory replays the session's history from the kit's store
// (WithStore) as the client saw it live: each update the agent sent, a v1
// client's prompts, each compaction at its place (interrupted ones
// failed), through Replay, so a client without the capability gets the
// fallback form. Call it in the session/load handler (or a v2
// session/resume's), before its response. It replays only when the client
// asked for a replay (a session/load, or a v2 session/resume with
// replayFrom, is in flight); otherwise it only restores. Either way it
// opens the history for appending (another process serving the session:
// an error wrapping ErrStore and history.ErrLocked; a session the store
// does not have: ErrStore and history.ErrNotFound), and hands restore, when
// not nil, every entry in order (updates, data kept with Keep, final
// records), for the runtime to restore its own state; an error of
// restore's stops it and is returned. A history the store cannot read is
// reported before anything is sent.
func (s *Session) ReplayHistory(ctx context.Context, restore func(history.Entry) error) error {
	if s.err != nil {
		return s.err
	}
	return s.t.ReplayHistory(ctx, s.id, restore)
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
