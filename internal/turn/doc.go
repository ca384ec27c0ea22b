// Package turn is the one wire engine of an ACP connection: it keeps the
// state that decides when compactions must be settled, for every host that
// carries ACP messages (agentkit on sourcegraph/jsonrpc2, agentkit/acpsdk on
// coder/acp-go-sdk, and the proxy).
//
// A host feeds the engine every JSON-RPC message it carries, in wire order:
// the client's messages through Client, the agent's through Agent. The
// engine never reads or writes a connection itself; it answers what a
// message means:
//
//   - the initialize exchange (request and answer) yields the connection's
//     capability.Negotiation, once;
//   - requests in flight are matched to their responses by the JSON value of
//     their id (`"init-é"` and `"init-\u00e9"` are one id, `1` and `"1"` are
//     two), never by their bytes;
//   - a prompt turn per session: in v1 it is the session/prompt that is
//     running, and only that prompt's response ends it (a second prompt
//     sent meanwhile is queued behind it, and its error response ends
//     nothing); in v2 it runs from the prompt or the `running` state_update
//     to the `idle` state_update; in either, nothing begins while a turn's
//     end is being written: a prompt (or a v2 running state) then begins
//     its turn once the end is written;
//   - session/cancel (and $/cancel_request for a prompt) in wire order: it
//     marks the running turn, and the prompts queued behind it, cancelled;
//   - the cancel grace (Config.CancelGrace): how long after the cancel the
//     runtime may take to report its compactions before the host settles
//     them as cancelled;
//   - the turn's end: Agent returns an End the host must settle (every
//     compaction of the session still open) before it writes the message
//     that ends the turn, and report with Ended once it has written it.
//
// Starts of compactions are admitted through Admit, which refuses them while
// a turn's end is being settled, so that nothing opens between the
// settlement and the message that ends the turn; between turns the session
// has no turn running (InTurn), and an emitter tied to the engine's turns
// (emitter.WithTurns) holds or refuses what would reach the client.
//
// State is kept only for what is live: requests in flight, sessions with a
// turn running or ending (or whose last turn was cancelled, until the next
// turn or session/close). A cancel for a session with no turn creates
// nothing.
//
// An Engine is safe for concurrent use. Its callback (Config.OnGrace) runs on
// a timer's goroutine with no lock of the engine held.
package turn
