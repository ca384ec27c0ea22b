// Package agentkit wires acpcompact into a Go ACP agent, per connection,
// and guarantees that no compaction outlives its turn. It is the kit's one
// surface, and its adapter for agents built on sourcegraph/jsonrpc2.
//
// The surface, shared by every adapter and written here once: Session
// (Start, Compaction, Replay, Send, Keep, ReplayHistory), SessionFrom,
// Recover, the options (Option, WithFallback, WithCancelGrace,
// WithEmitterOptions, WithLogger, WithStore), DefaultCancelGrace,
// CloseTimeout and the sentinel errors. What the jsonrpc2 adapter adds:
// Kit (NewConn, Shutdown, CloseConn, Emitter, Record), NewStream and
// AsyncHandler.
// Agents on coder/acp-go-sdk use the adapter agentkit/acpsdk, whose Kit
// creates the SDK's connections; its Session, Option and errors are this
// package's (aliases), so a runtime reports through the same Session on
// either. (This package does not link the SDK.)
//
// The guide, with the whole agent, the wire rules and the shutdown
// sequence, is docs/agentkit.md in the repository; this comment is the
// summary. Example (SummaryAndCancel) is the whole agent of that guide.
//
// # Integration
//
// Create one Kit per process, let it create each connection, and report
// compactions through SessionFrom, from the handler's context:
//
//	kit := agentkit.New(agentkit.WithCancelGrace(5 * time.Second))
//	conn := kit.NewConn(ctx, agentkit.NewStream(stdio), agentkit.AsyncHandler(agentHandler))
//
//	// in the prompt's handler, when the model starts compacting:
//	c, err := agentkit.SessionFrom(ctx, sessionID).Start(ctx, emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable())
//	c.Chunk(ctx, protocol.Text(delta))
//	c.Complete(ctx) // or c.Fail(ctx, err), c.Cancel(ctx)
//
//	// before the process exits (the client hung up, SIGTERM): settle and write what is open
//	err = kit.Shutdown(ctx)
//
// Start may return a handle and an error together (emitter.ErrUndeliverable:
// open, but the start did not reach the client; keep the handle). A runtime
// that addresses compactions by ID gets the handle back with
// Session.Compaction. Every handler a kit runs (of either adapter) gets a
// context that carries its connection, and so does every context derived
// from it, so the runtime never holds the connection; with a context no kit
// handler derived, Session's methods fail with ErrUnknownConn. Outside a turn a start is
// refused with emitter.ErrOutsideTurn unless it was started with
// emitter.Background.
//
// # The session's history
//
// With WithStore the kit keeps every session's history itself, in a
// history.Store (sessionlog's files, or sqlstore's database): each session
// update the agent writes (Session.Send, or its own connection), before
// it is written; a v1 client's prompts; each compaction's start, before
// the client sees it, and its final record, whoever settles it; the
// runtime's data (Session.Keep). On session/load, Session.ReplayHistory
// replays it as the client saw it live (an interrupted compaction failed)
// and hands the runtime every entry to restore its own state; Kit.Record
// records a compaction applied with no client connected. What cannot be
// written is not shown: a start or an update the store refuses is refused
// (ErrStore). docs/records.md ("The kit keeps the history") has the rules,
// and what a store failure leaves.
//
// A summary is sent only for a compaction started with
// emitter.UserDisplayable(); otherwise Chunk returns emitter.ErrWithheld
// ("not shown", not a failure) and the terminal update goes out without it.
//
// # What the kit does on the wire
//
// A jsonrpc2.Handler alone cannot hold back a prompt response, so NewConn
// wraps both ends of the connection. Its ObjectStream shows every message to
// the connection's wire engine (internal/turn, shared with agentkit/acpsdk
// and the proxy) in wire order, creates the emitter from the initialize
// exchange, and writes a message that ends a turn only after every
// compaction of its session still open has been settled: `cancelled` when
// the client cancelled the turn, otherwise `failed` (emitter.ErrTurnEnded).
// Its Handler gives a session/prompt handler a context that session/cancel
// ends in wire order with cause emitter.ErrCancelled (context.Cause) and
// that carries the prompt's `_meta` trace context. While a turn's end is
// settled and written every reporting call waits (the engine's turn guard
// is the emitter's gate, emitter.WithGate).
//
// After session/cancel the runtime has the cancel grace (WithCancelGrace,
// default DefaultCancelGrace) to settle the turn's compactions itself; the
// rule is stated once, in docs/agentkit.md ("The cancel grace"). The kit
// never answers a request on the agent's behalf.
//
// # Shutting down
//
// An agent about to exit calls Kit.Shutdown (Kit.CloseConn for one
// connection): new compactions are refused, every open one is settled
// (`cancelled` in a cancelled turn, otherwise `failed` with
// emitter.ErrConnectionClosed), the handlers' contexts end, everything
// queued is written and the connection closed. Every close is bounded by
// Shutdown's context and CloseTimeout. Give NewConn a context that outlives
// the signal (context.Background()).
//
// # Handlers, panics and output
//
// Wrap handlers in AsyncHandler: a synchronous prompt handler cannot be
// cancelled, and AsyncHandler settles open compactions as failed when a
// handler panics (Recover does the same in goroutines of your own). It runs
// at most DefaultMaxConcurrent handlers of a connection at once
// (MaxConcurrent). Every message the connection writes goes through one
// queue in call order: a notification returns at once, a response once it
// is written behind everything before it. NewStream, a drop-in for
// jsonrpc2.NewPlainObjectStream, writes what queued up in one write.
//
// A v1 client without the compaction capability sees the
// fallback.ToolCall() tool call unless WithFallback says otherwise.
// What the kit keeps for a connection ends with it (docs/agentkit.md,
// "Memory bounds").
//
// # Concurrency
//
// Kit, Session and everything they return are safe for concurrent use. The
// kit keeps no global state; all of it lives in the Kit and its connections.
package agentkit
