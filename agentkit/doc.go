// Package agentkit wires acpcompact into a Go ACP agent built on
// sourcegraph/jsonrpc2, per connection, and guarantees that no compaction
// outlives its turn. (Agents on coder/acp-go-sdk use the subpackage
// agentkit/acpsdk, so that this package does not link the SDK.)
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
// Example (SummaryAndCancel) is a whole agent, the one in the README.
//
// Start may return a handle and an error together: with
// emitter.ErrUndeliverable the compaction is open but its start did not
// reach the client; keep the handle and settle it as usual. A runtime that
// addresses compactions by ID rather than by handle gets the handle back
// with Session.Compaction (emitter.WithID at Start): there is one way to
// report, the handle, and every call on it passes the turn guard (see "One
// wire engine").
//
// Every handler the kit runs gets a context that carries its connection,
// and so does every context derived from it, such as the one a goroutine
// of the runtime keeps after the handler returned: SessionFrom needs
// nothing else, so the runtime never holds the connection. With a context
// no kit handler derived, the Session's methods fail with ErrUnknownConn.
// Outside a turn (a goroutine that outlived its prompt) a start is refused
// with emitter.ErrOutsideTurn unless it was started with
// emitter.Background.
//
// When the client cancels, the prompt handler's context ends with cause
// emitter.ErrCancelled (context.Cause): the handler just returns (stop
// reason `cancelled`), and the kit settles what is still open as
// `cancelled` before the response.
//
// # Summaries are withheld unless user-displayable
//
// The RFD asks that a compaction summary be user-displayable and never
// reveal context that was not otherwise visible to the user. Only the
// runtime knows whether its summary is that projection, so the emitter's
// default summary policy (emitter.DisplayableOnly) sends the summary only
// of a compaction started with emitter.UserDisplayable(). Without it,
// Chunk sends nothing and returns emitter.ErrWithheld, and a final summary
// is omitted (the terminal update still goes out): the client sees the
// compaction, not its summary. Treat ErrWithheld as "not shown", not as a
// failure. For a log line per compaction that withheld its summary, pass
// WithEmitterOptions(emitter.WithObserver(emitter.NewSlogObserver(logger))).
//
// # Why the kit creates the connection
//
// A jsonrpc2.Handler alone cannot keep the guarantee: the agent answers a
// request through *jsonrpc2.Conn (Reply, ReplyWithError, SendResponse, or
// HandlerWithError's return), which writes straight to the ObjectStream, and
// a session/cancel is only read after the handler of the message before it
// has been dispatched. So NewConn wraps both ends of the connection:
//
//   - The ObjectStream. Every message is shown to the connection's wire
//     engine in wire order: an inbound one in ReadObject, before jsonrpc2
//     dispatches it, whether or not the host's handler is asynchronous; an
//     outbound one in WriteObject, before it is written. The initialize
//     answer creates the connection's emitter (capability.Parse of the raw
//     request and result) before it is written; a message that ends a turn
//     is written only after every compaction of its session still open has
//     been settled. Compaction updates are written through the same queue
//     as the agent's own messages, so the wire keeps the order in which
//     they were produced.
//   - The Handler, outermost. It gives a session/prompt handler a context
//     that the client's session/cancel cancels (also when the cancel was
//     read before the handler started) and that carries the prompt's
//     `_meta` trace context (emitter.WithTrace), and it settles open
//     compactions as failed (emitter.ErrAgentCrashed) when a handler
//     panics, letting the panic go on untouched. The context's cause
//     (context.Cause) tells a user's cancel (emitter.ErrCancelled) from the
//     end of the turn (emitter.ErrTurnEnded) and the connection closing,
//     since only a user's cancel is reported as `cancelled`.
//
// # One wire engine
//
// What the messages mean is decided by one engine per connection, the one
// package agentkit/acpsdk and the proxy (acpcompact proxy) also host; the
// kit keeps no turn, cancel or request-id state of its own. The engine
// reads the initialize exchange once for the negotiation; matches each
// response to its request by the JSON value of the id (an id the client
// wrote as "a<b" and jsonrpc2 answers as "a\u003cb" is the same id); and
// follows each session's prompt turn. A v1 turn is the running
// session/prompt's: only that prompt's response ends it, and a second
// prompt sent meanwhile waits behind it (an error answering it before its
// turn began, such as "a prompt is already running", ends nothing). A v2
// turn runs from the prompt (or a `running` state_update) to the `idle`
// state_update. session/cancel (and $/cancel_request for a prompt) marks
// the running turn, and the prompts queued behind it, cancelled, in wire
// order: it never reaches a prompt sent after it.
//
// When a turn ends, every compaction of the session still open is settled
// on the wire before the message that ends it: `cancelled` when the client
// cancelled the turn, otherwise `failed` with emitter.ErrTurnEnded. While
// that settlement runs and the message is written, every reporting call
// waits for the message to be written: the kit installs the engine's turn
// guard as the emitter's gate (emitter.WithGate), so Session.Start and the
// handles' Chunk, Complete, Cancel and Fail pass it alike, and the turn's
// end waits for one in progress; nothing opens or changes in between.
// Then a handle whose compaction the end settled is refused with
// emitter.ErrSettled, and a start with no turn running with
// emitter.ErrOutsideTurn. A compaction started with emitter.Background
// outlives its turn: the client sees it when it settles (at the start of
// the session's next turn when that is between turns), and the
// connection's end or the session's close settles it if it has not. A
// successful answer to session/close is written after what its session
// still has open is settled (as cancelled: closing ends a session's work
// as a cancel does), and the emitter forgets the session.
//
// # The cancel grace
//
// After session/cancel the runtime has the cancel grace (WithCancelGrace)
// to report the cancelled turn's compactions itself; past it the kit
// settles what is still open as `cancelled`. It means the same for every
// host of the engine: d > 0 settles d after the cancel (and gives a
// compaction started after the grace ran out a grace of its own), 0 at
// once, d < 0 only when the turn ends. The default is DefaultCancelGrace
// (5 s). The prompt response still goes out when the host's handler
// returns: the kit never answers a request on the agent's behalf, since a
// second response to the same id would break the client.
//
// The connection closing (the peer hanging up, Kit.Shutdown,
// Kit.CloseConn, Conn.Close, or the context given to NewConn ending)
// settles what is open before the stream is closed, so an agent-side close
// still delivers the terminal updates: `cancelled` in a session whose turn
// the client had cancelled, otherwise `failed`
// (emitter.ErrConnectionClosed).
//
// # Shutting down
//
// An agent about to exit (SIGINT, SIGTERM, the end of its input) calls
// Kit.Shutdown: on every connection the kit refuses new compactions,
// settles every one still open as above, ends the prompt handlers'
// contexts (cause emitter.ErrConnectionClosed) after the settlement, writes
// everything queued, the settlements last, and closes the connection; it
// returns when that is done, so the process exits without losing a
// terminal update. Kit.CloseConn does the same for one connection. Without
// it, an exit races jsonrpc2's own close, which fires DisconnectNotify and
// ends the handlers' contexts before it closes the stream, where the kit
// writes. When the client hangs up (the end of the input), the kit settles
// and writes before jsonrpc2 learns of it; Shutdown (or CloseConn) then
// also waits for the stream to be closed.
//
// Every close is bounded: by the context given to Shutdown and by
// CloseTimeout (5 s), counted from the close or, if earlier, from the start
// of a write the client has not taken. A client that does not read is
// waited for no longer: what it has not taken is dropped, and every write
// still waiting (a runtime streaming a summary, a response) returns at
// once with an error. So neither the end of stdin nor a signal can leave
// the agent hanging on a client that stopped reading.
//
// Give NewConn a context that outlives the signal (context.Background()),
// and stop on the signal with Shutdown: a cancelled NewConn context makes
// jsonrpc2 close the connection on its own, handlers first, so the
// handlers see context.Canceled rather than emitter.ErrConnectionClosed
// (the settlement is still written).
//
// # Memory
//
// What the kit keeps for a connection ends with it: the wire engine's
// state, the emitter and the output queue. Within a connection, the
// emitter keeps a tracker only for a session in which a compaction was
// opened, reported or replayed through Session, until the answer to its
// session/close (or the connection's end); a turn without compactions, or
// a prompt for a session the agent does not know, leaves nothing behind.
// The emitter's no-reuse guarantee for compaction IDs covers that span,
// from a session's first compaction to its close (see
// emitter.Emitter.CloseSession): an agent that lets a closed session be
// loaded again on the same connection must mint IDs that do not repeat
// the old ones (a counter kept with the session's history, or the
// emitter's random default). Once Kit.Emitter has handed the emitter out,
// every turn's end settles its session in the emitter, which then keeps a
// tracker of each session that had a turn, until it closes.
//
// # Clients without the capability
//
// A v1 client that did not advertise the compaction capability is shown
// compaction as the fallback.ToolCall() tool call unless WithFallback says
// otherwise: the one form every observed client displays, and the default
// of the proxy and the scenario agent too. fallback.None{} shows it
// nothing.
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
// AsyncHandler runs at most DefaultMaxConcurrent (256) handlers of a
// connection at once (MaxConcurrent sets it): at the limit the read loop
// waits, so a client that pipelines requests faster than they are handled
// fills its own pipe rather than the agent's memory. The kit still sees
// each message in wire order as it is read. A handler waiting for the
// client's answer to a request of its own (session/request_permission)
// does not count while it waits, so that answer is always read; a handler
// that waits for any other message of the client's holds its slot (see
// AsyncHandler).
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
// at most CloseTimeout for a client that does not read; see "Shutting
// down").
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
