// Package acpsdk wires acpcompact into a Go ACP agent built on
// coder/acp-go-sdk v0.13, per connection, and guarantees that no compaction
// outlives its turn. It is the acp-go-sdk counterpart of package agentkit and
// does not link sourcegraph/jsonrpc2.
//
// The SDK cannot do this by itself: its ClientCapabilities drops `session`,
// so the compaction capability is invisible to a typed Initialize; its
// SessionUpdate union cannot carry compaction updates; and it dispatches
// every request on its own goroutine while notifications go through a
// separate queue, so its handling of a session/cancel sent right behind a
// session/prompt runs late: usually before the prompt's context exists (the
// cancel is lost), sometimes once the session's next prompt runs (the wrong
// prompt is cancelled).
//
// # Integration
//
// Agents implementing acp.Agent let the kit create their
// AgentSideConnection, and send through it:
//
//	kit := acpsdk.New(acpsdk.WithCancelGrace(5 * time.Second))
//	conn := kit.NewAgentSideConnection(agent, os.Stdout, os.Stdin)
//	// conn.AgentSideConnection().SessionUpdate(ctx, ...) as before
//
//	// in Prompt (or the runtime it drives), when the model starts compacting:
//	c, err := acpsdk.SessionFrom(ctx, string(p.SessionId)).Start(ctx, emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable())
//	c.Chunk(ctx, protocol.Text(delta))
//	c.Complete(ctx) // or c.Fail(ctx, err), c.Cancel(ctx)
//
//	// before the process exits (the client hung up, SIGTERM): settle and write what is open
//	err = kit.Shutdown(ctx)
//
// Agents that dispatch methods themselves with a raw acp.MethodHandler let
// the kit create their Connection:
//
//	conn := kit.NewConnection(handler, os.Stdout, os.Stdin)
//	c, err := acpsdk.SessionFrom(ctx, sessionID).Start(ctx, emitter.UserDisplayable())
//
// Either way a runtime needs no connection to report: every method of the
// agent (or call of the raw handler) runs with a context that carries its
// connection, and so does every context derived from it, such as the one a
// goroutine of the runtime keeps after Prompt returned. SessionFrom reads
// it there, so nothing has to be stored where Prompt reads it (the SDK may
// call the agent before the constructor returns); with a context no kit
// handler derived, the Session's methods fail with ErrUnknownConn. The
// *Conn the constructors return is for the agent's own sending through
// the SDK connection, Done, Kit.CloseConn and Kit.Emitter. Example
// (SummaryAndCancel) is a whole agent, the one in the README.
//
// Session.Start may return a handle and an error together: with
// emitter.ErrUndeliverable the compaction is open but its start did not
// reach the client; keep the handle and settle it as usual.
// Session.Compaction returns the handle of an open compaction by its ID
// (emitter.WithID at Start), for a runtime that keeps IDs rather than
// handles: there is one way to report, the handle, and every call on it
// passes the turn guard, as in package agentkit (while a turn's end is
// settled and written, reporting calls wait for it, then a handle whose
// compaction it settled is refused with emitter.ErrSettled, and a start
// outside a turn with emitter.ErrOutsideTurn unless started with
// emitter.Background). When the client cancels, Prompt's context ends with cause
// emitter.ErrCancelled (see "The prompt's context"): Prompt just returns
// (acp.StopReasonCancelled), and the kit settles what is still open as
// `cancelled` before the response.
//
// # Summaries are withheld unless user-displayable
//
// As in package agentkit: the RFD asks that a summary be user-displayable
// and never reveal context that was not otherwise visible to the user, and
// only the runtime knows whether its summary is that projection, so the
// emitter's default summary policy sends the summary only of a compaction
// started with emitter.UserDisplayable(). Without it, Chunk sends nothing
// and returns emitter.ErrWithheld, and a final summary is omitted (the
// terminal update still goes out). For a log line per compaction that
// withheld its summary, pass
// WithEmitterOptions(emitter.WithObserver(emitter.NewSlogObserver(logger))).
//
// # One wire engine
//
// What the messages mean is decided by one engine per connection, the one
// package agentkit and the proxy host too (see package agentkit, "One wire
// engine"): the negotiation from initialize, requests matched to responses
// by the JSON value of their ids, a v1 turn that only the running prompt's
// response ends (a second prompt rejected meanwhile ends nothing), a v2
// turn from the prompt to the `idle` state_update, and session/cancel in
// wire order. The kit keeps no turn, cancel or request-id state of its own.
//
// The kit wraps the io.Reader the SDK reads and the io.Writer it writes.
//
//   - Reader: the kit reads one line at a time and shows it to the engine
//     before handing it to the SDK, so the engine sees every inbound
//     message in wire order: the raw initialize params (with
//     clientCapabilities.session intact), each session/prompt, each
//     session/cancel.
//   - Writer: the SDK writes each message as one line; the kit shows each
//     line to the engine before writing it. The answer to initialize
//     creates the connection's emitter (capability.Parse of the raw request
//     and result). A message that ends a turn is written only after the
//     session's open compactions have been settled. Compaction updates are
//     written whole, through the same queue, between the SDK's lines, so
//     the wire keeps the order in which messages were produced.
//
// # The prompt's context
//
// A prompt's handler (acp.Agent.Prompt, or a raw handler's session/prompt)
// runs with the kit's context, not the SDK's: the engine cancels it in wire
// order when the client cancels the turn, with cause emitter.ErrCancelled
// (context.Cause), ends it with emitter.ErrTurnEnded once the turn is over
// and with emitter.ErrConnectionClosed when the connection closes, as in
// package agentkit. It carries the prompt's `_meta` trace context. The
// SDK's own cancellations of the request do not reach it: the SDK's
// session/cancel handling runs later, on its notification goroutine, and
// cancels whichever prompt of the session runs by then, and the SDK
// cancels a session's running prompt when the next one arrives, which
// ACP's turn rules do not (the agent rejects that prompt; the running turn
// goes on). The session/cancel itself still reaches the agent unchanged:
// the SDK calls acp.Agent.Cancel (or the raw handler) in its notification
// order. So a runtime stops on the prompt's context; an agent's Cancel
// must not cancel "the session's current prompt" on its own, since by
// then that may be the next one.
//
// The SDK tells a handler nothing of its request's id, and starts each
// request's handler on a goroutine of its own; so that each prompt handler
// gets its own prompt's context, the reader hands the SDK a session/prompt
// only once the one before it has reached its handler (or been answered),
// which takes the SDK microseconds.
//
// # The cancel grace and the end of the connection
//
// After session/cancel the runtime has the cancel grace (WithCancelGrace)
// before the kit settles its open compactions as cancelled: d > 0 after d,
// 0 at once, d < 0 only at the turn's end, the same meaning as for every
// host of the engine. The response goes out when the agent returns. The
// peer hanging up settles what is open (cancelled in a session whose turn
// the client cancelled, else failed with emitter.ErrConnectionClosed)
// before the SDK sees the end of its input.
//
// An agent about to exit (SIGINT, SIGTERM) calls Kit.Shutdown (or
// Kit.CloseConn for one connection): the kit refuses new compactions,
// settles what is open as above, ends the prompts' contexts (cause
// emitter.ErrConnectionClosed) and writes everything queued, the
// settlements last, before it returns, so the process exits without
// losing a terminal update. It is bounded by its context and by
// CloseTimeout (5 s, counted from the close or, if earlier, from the start
// of a write the client has not taken): a client that does not read is
// waited for no longer, what it has not taken is dropped, and every write
// still waiting returns at once. The SDK's connection runs on (the kit
// cannot close it), but no compaction opens on it any more. Memory is
// bounded as in package agentkit ("Memory"): the emitter keeps a tracker
// only for sessions with a compaction, until their session/close or the
// connection's end. The SDK dispatches each request on a goroutine of its
// own; unlike agentkit.AsyncHandler, the kit does not bound them.
//
// A v1 client without the compaction capability is shown compaction as
// the fallback.ToolCall() tool call unless WithFallback says otherwise:
// the one form every observed client displays, and the default of the
// proxy and the scenario agent too. fallback.None{} shows it nothing.
//
// # Output
//
// The kit writes the SDK's output and its own through one queue, in the
// order of the writes: a notification is queued and the write returns, and
// what queued up while a write to peerInput was in progress leaves in the
// next one; a response returns only once it is written, behind everything
// sent before it. A notification's write error is returned by a later
// write. When the peer's input ends, what is queued is written before the
// SDK learns of it (waiting at most CloseTimeout for a client that does
// not read).
//
// # Panics
//
// The kit stands between the SDK and the agent's methods (an acp.Agent's,
// all of them, optional ones included, or a raw MethodHandler): a panic in
// one settles the connection's open compactions as failed
// (emitter.ErrAgentCrashed) and goes on untouched. Goroutines of the
// agent's own that run mid-compaction opt in with `defer acpsdk.Recover(ctx)`.
//
// # Concurrency
//
// Kit, Conn, Session and everything they return are safe for concurrent
// use. The kit keeps no global state; all of it lives in the Kit and its
// connections.
package acpsdk
