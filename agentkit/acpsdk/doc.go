// Package acpsdk is package agentkit's adapter for Go ACP agents built on
// coder/acp-go-sdk v0.13: it wires acpcompact into the SDK's connections
// and guarantees that no compaction outlives its turn. The two adapters
// share one wire engine, one set of rules and one surface, agentkit's:
// Session, Option, the sentinel errors, DefaultCancelGrace and
// CloseTimeout here are agentkit's (aliases and the same values),
// SessionFrom, Recover and the options behave as agentkit's, so a runtime
// written against either import path reports on either kit's connections.
// The rules are summarised in package agentkit's documentation and stated
// in docs/agentkit.md in the repository. Example (SummaryAndCancel) is the
// whole agent of that guide.
//
// What this adapter adds: Kit (NewAgentSideConnection, NewConnection,
// Shutdown, CloseConn, Emitter, Record) and Conn, the kit's reader and writer
// around the SDK's, the prompt's context, and the panic guard around every
// method of the agent. (It links package agentkit but none of
// sourcegraph/jsonrpc2's code: the linker drops what the jsonrpc2 adapter
// alone uses.)
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
// Agents that dispatch methods themselves with a raw acp.MethodHandler use
// kit.NewConnection(handler, os.Stdout, os.Stdin) instead. Either way every
// method of the agent runs with a context that carries its connection, and
// so does every context derived from it: SessionFrom reads it there, so
// nothing has to be stored where Prompt reads it (the SDK may call the
// agent before the constructor returns); with a context no kit handler
// derived, Session's methods fail with ErrUnknownConn. The *Conn the
// constructors return is for the agent's own sending, Done, Kit.CloseConn
// and Kit.Emitter; a runtime sends its session's updates through
// Session.Send. Start, Compaction, the turn guard, withheld summaries
// (emitter.UserDisplayable), the cancel grace (WithCancelGrace), the
// session's history (WithStore, Session.ReplayHistory, Kit.Record) and
// Kit.Shutdown behave as in package agentkit.
//
// # The reader and the writer
//
// The kit wraps the io.Reader the SDK reads and the io.Writer it writes.
// The reader shows each line to the engine before handing it to the SDK
// (the raw initialize params keep clientCapabilities.session), and hands
// the SDK a session/prompt only once the one before it has reached its
// handler, so that each handler gets its own prompt's context. The writer
// shows each of the SDK's lines to the engine before writing it, creates
// the emitter from the initialize answer, writes a message that ends a turn
// only after the session's open compactions are settled, and writes
// compaction updates whole, through the same queue, between the SDK's
// lines. A notification is queued and its write returns; a response
// returns once it is written, behind everything before it.
//
// # Memory bounds
//
// The reader holds at most one line of the client's, of up to 10 MiB, its
// newline included: the SDK's own bound (its bufio.Scanner's maxBufSize),
// so the kit refuses nothing the SDK reads. A longer line ends the
// connection, as it would end the SDK's: the kit reads no more of it,
// settles what is open and writes it (the connection's close, bounded by
// CloseTimeout), and the SDK's read fails with an error wrapping
// bufio.ErrTooLong, on which the SDK ends its connection (Done). The SDK
// writes a whole line per write, which the writer hands on as it is; a
// line the agent's output leaves unfinished is held up to the same bound,
// and past it dropped up to its newline (those writes fail).
//
// # The prompt's context
//
// A prompt's handler runs with the kit's context, not the SDK's: the
// engine cancels it in wire order when the client cancels the turn (cause
// emitter.ErrCancelled), ends it with emitter.ErrTurnEnded once the turn is
// over and with emitter.ErrConnectionClosed when the connection closes. The
// SDK's own cancellations do not reach it: its session/cancel handling runs
// late and would cancel whichever prompt of the session runs by then, and
// it cancels a running prompt when the next one arrives. The SDK still
// calls acp.Agent.Cancel in its notification order; a runtime stops on the
// prompt's context, and an agent's Cancel must not cancel "the session's
// current prompt" on its own, since by then that may be the next one.
//
// The SDK's connection runs on after Shutdown (the kit cannot close it),
// but no compaction opens on it any more. The SDK dispatches each request
// on a goroutine of its own; unlike agentkit.AsyncHandler, the kit does
// not bound them.
//
// # Panics and concurrency
//
// A panic in any of the agent's methods (optional ones included, or a raw
// MethodHandler) settles the connection's open compactions as failed
// (emitter.ErrAgentCrashed) and goes on untouched; goroutines of the
// agent's own opt in with `defer acpsdk.Recover(ctx)`. Kit, Conn, Session
// and everything they return are safe for concurrent use; the kit keeps no
// global state.
package acpsdk
