// Package acpsdk wires acpcompact into a Go ACP agent built on
// coder/acp-go-sdk v0.13, per connection, and guarantees that no compaction
// outlives its turn. It is the acp-go-sdk counterpart of package agentkit and
// does not link sourcegraph/jsonrpc2.
//
// The SDK cannot do this by itself: its ClientCapabilities drops `session`,
// so the compaction capability is invisible to a typed Initialize; its
// SessionUpdate union cannot carry compaction updates; and it dispatches
// every request on its own goroutine while notifications go through a
// separate queue, so a session/cancel sent right behind its session/prompt
// usually reaches the agent before the prompt's context exists, and is lost.
//
// # Integration
//
// Agents implementing acp.Agent let the kit create their
// AgentSideConnection:
//
//	kit := acpsdk.New(acpsdk.WithFallback(renderer))
//	conn := kit.NewAgentSideConnection(agent, os.Stdout, os.Stdin)
//
//	// in Prompt (or the runtime it drives):
//	defer kit.Recover(conn) // optional: settle on a panic, see below
//	c, err := kit.Session(conn, string(p.SessionId)).Start(ctx, emitter.WithID(id))
//
// Agents that dispatch methods themselves with a raw acp.MethodHandler let
// the kit create their Connection:
//
//	conn := kit.NewConnection(handler, os.Stdout, os.Stdin)
//	c, err := kit.Session(conn, sessionID).Start(ctx, emitter.WithID(id))
//
// # How it works
//
// The kit wraps the io.Reader the SDK reads and the io.Writer it writes;
// the SDK's behaviour is otherwise untouched.
//
//   - Reader: the kit reads one line at a time and inspects it before handing
//     it to the SDK, so it sees every inbound message in wire order: the raw
//     initialize params (with clientCapabilities.session intact), each
//     session/prompt, which opens its session's turn, and each
//     session/cancel, which marks the turn cancelled and arms the wind-down
//     deadline. To cancel the prompt's context reliably, the kit hands the
//     SDK a `$/cancel_request` for each pending prompt of the session just
//     before the session/cancel line: the SDK applies it synchronously in its
//     read loop, to a request it registered when it read the prompt line, so
//     the prompt's context is cancelled whatever the goroutines' timing.
//   - Writer: the SDK writes each message as one line; the kit inspects each
//     line before writing it. The answer to initialize creates the
//     connection's emitter (capability.Parse of the raw request and result).
//     A response to a pending v1 session/prompt, or a v2 `state_update`
//     whose state is `idle`, first settles the session's open compactions
//     and then goes out. Compaction updates are written whole, through the
//     same lock, between the SDK's lines, so the wire keeps the order in
//     which messages were produced.
//
// Turn scoping, the cancel grace and connection close work as in package
// agentkit: at the end of a turn what is open is settled `cancelled` when
// the client cancelled the turn, otherwise `failed` (emitter.ErrTurnEnded);
// after session/cancel the runtime has the cancel grace (default 5 s) before
// the kit settles its compactions as cancelled; the response goes out when
// the agent returns; the peer hanging up settles what is open as failed
// (emitter.ErrConnectionClosed) before the SDK sees the end of its input.
//
// # Output
//
// The kit writes the SDK's output and its own through one queue, in the
// order of the writes: a notification is queued and the write returns, and
// what queued up while a write to peerInput was in progress leaves in the
// next one; a response returns only once it is written, behind everything
// sent before it. A notification's write error is returned by a later
// write. When the peer's input ends, what is queued is written before the
// SDK learns of it (waiting at most a few seconds for a client that does
// not read).
//
// # Panics
//
// A raw MethodHandler given to NewConnection is guarded: a panic settles the
// connection's open compactions as failed (emitter.ErrAgentCrashed) and goes
// on untouched. The SDK calls an acp.Agent on goroutines the kit has no hook
// in, so an Agent's methods opt in with `defer kit.Recover(conn)`.
//
// The prompt's `_meta` trace context is attached to the context of Start
// (and, for NewConnection, of the handler) for the emitter's observer.
//
// # Concurrency
//
// Kit, Session and everything they return are safe for concurrent use. The
// kit keeps no global state; all of it lives in the Kit and its connections.
package acpsdk
