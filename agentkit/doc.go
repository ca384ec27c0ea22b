// Package agentkit wires acpcompact into a Go ACP agent built on
// sourcegraph/jsonrpc2, per connection, and guarantees that no compaction
// outlives its turn. (Agents on coder/acp-go-sdk use the subpackage
// agentkit/acpsdk, so that this package does not link the SDK.)
//
// # Integration
//
// Create one Kit per process, let it create each connection, and report
// compactions through Kit.Session:
//
//	kit := agentkit.New(agentkit.WithFallback(renderer), agentkit.WithCancelGrace(5*time.Second))
//	conn := kit.NewConn(ctx, agentkit.NewStream(stdio), agentkit.AsyncHandler(agentHandler))
//
//	// in the runtime, when the model starts compacting:
//	c, err := kit.Session(conn, sessionID).Start(ctx, emitter.WithID(id), emitter.WithTrigger(emitter.Auto))
//	c.Chunk(ctx, emitter.Text(delta))
//	c.Complete(ctx) // or c.Fail(ctx, err), c.Cancel(ctx)
//
// # Why the kit creates the connection
//
// A jsonrpc2.Handler alone cannot keep the guarantee: the agent answers a
// request through *jsonrpc2.Conn (Reply, ReplyWithError, SendResponse, or
// HandlerWithError's return), which writes straight to the ObjectStream, and
// a session/cancel is only read after the handler of the message before it
// has been dispatched. So NewConn wraps both ends of the connection:
//
//   - The ObjectStream. Every inbound message is seen in ReadObject, in wire
//     order, before jsonrpc2 dispatches it, whether or not the host's handler
//     is asynchronous: initialize's params are recorded, a session/prompt
//     opens its session's turn, a session/cancel marks the turn cancelled,
//     cancels the prompt handler's context and arms the wind-down deadline.
//     Every outbound message passes WriteObject: the initialize answer
//     creates the connection's emitter (capability.Parse of the raw request
//     and result) before it is written; a response to a pending v1
//     session/prompt, or a v2 `state_update` whose state is `idle`, first
//     settles the session's open compactions and then goes out. Compaction
//     updates are written through the same lock as the agent's own
//     messages, so the wire keeps the order in which they were produced.
//   - The Handler, outermost. It gives a session/prompt handler a context
//     that session/cancel cancels (also when the cancel was read before the
//     handler started) and that carries the prompt's `_meta` trace context
//     (emitter.WithTrace), and it settles open compactions as failed
//     (emitter.ErrAgentCrashed) when a handler panics, letting the panic go
//     on untouched. The context's cause (context.Cause) tells a user's
//     cancel (emitter.ErrCancelled) from the end of the turn
//     (emitter.ErrTurnEnded) and the connection closing, since only a
//     user's cancel is reported as `cancelled`.
//
// # Turns
//
// A v1 turn runs from session/prompt to its response; a v2 turn from the
// prompt (or a `running` state_update) to the `idle` state_update. When the
// turn ends, every compaction of the session still open is settled on the
// wire before the message that ends it: `cancelled` when the client sent
// session/cancel during the turn, otherwise `failed` with
// emitter.ErrTurnEnded. While that settlement runs, Session.Start and
// Session.Fail are refused with emitter.ErrTurnEnded, so nothing opens in
// between. Compactions started outside a turn (idle housekeeping, a v2
// background task) are settled at the end of the session's next turn or when
// the connection closes.
//
// After session/cancel the runtime has the cancel grace (WithCancelGrace,
// default 5 s) to report its compactions. Past it the kit settles them as
// `cancelled` itself. The prompt response still goes out when the host's
// handler returns: the kit never answers a request on the agent's behalf,
// since a second response to the same id would break the client.
//
// The connection closing (the peer hanging up, Conn.Close, or the context
// given to NewConn ending) settles what is open as failed
// (emitter.ErrConnectionClosed) before the stream is closed, so an
// agent-side close still delivers the terminal updates.
//
// # Panics
//
// A panic that unwinds through the kit's handler settles every open
// compaction of the connection as failed, because nothing above the kit
// recovers it: the process is about to end. jsonrpc2.AsyncHandler runs the
// host's handler on a goroutine the kit does not see; use this package's
// AsyncHandler instead, or `defer agentkit.Recover(ctx)` in goroutines of
// your own that run with the handler's context.
//
// Prompt handlers must not block the read loop for the whole turn (wrap them
// in AsyncHandler): a synchronous prompt handler cannot be cancelled, since
// jsonrpc2 reads the next message only after it returns.
//
// # Output
//
// Every message the connection writes, the agent's and the kit's, goes
// through one queue in the order of the calls. A notification is queued and
// the call returns; the queue is written as soon as the previous write
// returns, without waiting for more to come, so a burst of notifications
// does not hold its producer on one write syscall each. A response (and a
// request of the agent's) returns only once it is written, behind
// everything sent before it. A notification's write error is returned by a
// later write. Closing the connection writes what is queued first (waiting
// at most a few seconds for a client that does not read).
//
// Use NewStream instead of jsonrpc2.NewPlainObjectStream (same framing) to
// let the kit write the bytes itself: notifications that queue up while a
// write is in progress then leave together in the next write. On any other
// ObjectStream each message is still one WriteObject call, and the kit
// passes ordinary notifications to it as jsonrpc2's own message, marshalled
// once.
//
// # Concurrency
//
// Kit, Session and everything they return are safe for concurrent use. The
// kit keeps no global state; all of it lives in the Kit and its connections.
package agentkit
