// Package proxy sits between an ACP client and an agent it cannot change and
// makes that agent's context-compaction reporting correct on the wire.
//
// That is its one job. Everything else passes through byte for byte and in
// order; the proxy rewrites only compaction signals:
//
//   - Legacy signals (Claude's "Compacting..." text, the "Compact
//     conversation" tool call, opencode's _meta marker, codex's "Context
//     compacted" text, Qwen Code's contextCompression chunks and, before
//     0.24.2, its slash-command texts, Kimi Code's and Copilot CLI's
//     texts, and the messages Claude ACP and Kimi Code replay on
//     session/load in place of a compaction) become standard
//     compaction_update updates, one ID-addressed entity per
//     compaction, for a client that can read them (v1 with
//     clientCapabilities.session.compaction, or v2). A v1 client without
//     the capability gets the legacy form untouched, or the fallback
//     rendering configured with WithFallback instead of it. Each recogniser
//     is a named Translator. Which run is the agent's Profile's choice,
//     picked from the agentInfo of its initialize answer: a text that is a
//     signal in one agent's stream is prose in another's, so an agent
//     without a profile gets no text matching unless WithTranslators names
//     translators. A text that carries no mark of its own is read only
//     where nothing else can have written it: a command's result only in
//     a turn whose prompt ran that command (the engine knows each turn's
//     slash command), an outcome only while its compaction is open.
//   - Standard updates an agent sends to a v1 client that did not advertise
//     the capability are never forwarded; they are rewritten into a fallback
//     rendering (WithGateFallback, a tool call by default). One whose
//     envelope is malformed (a sessionId missing or not a string), or that
//     sits inside a JSON-RPC batch, cannot be rewritten: it is dropped and
//     logged, and the rest of the batch is forwarded.
//   - Every compaction the client saw start is settled, once, before the
//     turn ends (v1: the running session/prompt's response; v2: the idle
//     state_update) and when the agent's output ends: cancelled when the
//     client cancelled the turn, otherwise failed with a reason (a failed
//     prompt's own error text). A second terminal update from the agent is
//     dropped; while one is open and the agent is silent, its progress is
//     re-sent (WithHeartbeat).
//   - Nothing about compaction reaches the client outside a turn, and
//     nothing is lost: what the agent reports while the session has no
//     turn running is held by the emitter (emitter.WithTurns with
//     HoldOutsideTurn) and delivered when the session's next turn begins,
//     terminal-first if the compaction settled meanwhile, in_progress and
//     its chunks if it still runs (turns.go); no heartbeat goes out between
//     turns. A compaction the agent runs in the background past its turn
//     (Kimi Code's /compact) is started with emitter.Background: the end
//     of its turn does not settle it, and the client sees it once settled. The agent's later updates of a compaction the proxy settled
//     are dropped, and so is a signal of a compaction nobody saw start that
//     arrives between turns right after a cancelled one (Claude's
//     "Compaction failed: API Error: Request was aborted." tool call after
//     the cancelled prompt's response): the user cancelled it. With
//     neither the capability nor WithFallback, the agent's own legacy
//     lines pass as they come, whenever they come.
//
// # One wire engine
//
// The proxy keeps no turn, request or cancel state of its own: the
// connection's wire engine (internal/turn, shared with the agent kits)
// reads both directions in order and says when a turn ends. It matches
// requests to responses by the JSON value of their ids ("init-é" and
// "init-\u00e9" are one id); in v1 only the running prompt's response ends
// its turn (a second prompt that the agent rejects while one runs ends
// nothing); in v2 a prompt sent during a cancelled turn belongs to that
// turn and keeps its cancel.
//
// The cancel grace (WithCancelGrace, DefaultCancelGrace by default) means
// what it means for the kits: d > 0 settles a cancelled turn's open
// compactions as cancelled d after the cancel, 0 at once, a negative d when
// the turn ends.
//
// # Lines
//
// An agent line goes through three stages: read (framed as the client
// frames it), classify (what becomes of it, decided from the line and the
// connection's state: forwarded, rewritten, held or dropped, and whether
// the engine must read it first because it may end a turn) and act (the
// decision carried out: the turn settled, compactions opened and settled,
// the line written, the log and the checker shown it).
//
// The proxy reads one line from a side, writes it (or its replacement) to
// the other, then reads the next, so memory stays bounded by the longest
// line (a line costs about twice its length at most: it is collected in
// blocks and copied once, and a long update the gate rewrites is decoded
// without copying its text again; once a line of 8 MiB or more is handled
// it is let go of and the collector runs, so that the next one does not
// have to fit beside it) and a slow reader slows its writer down. Each line
// is read once, in one pass. Notifications already followed by a read line
// wait in a 64 KiB buffer to leave in one write; requests, responses and
// the updates that end a compaction or a turn never wait, nor does
// anything once no further input is at hand.
//
// Lines up to 64 MiB (WithMaxLineBytes) are read whole. A longer one is
// read from its head and streams through: the members complete within the
// head (a prompt's id, method and sessionId come before its content) are
// followed, so a huge prompt's turn is still settled before its response;
// a compaction update too long to read for a client that may lack the
// capability is dropped.
//
// # Reading as leniently as the peers, and failing closed
//
// The proxy reads every line, both ways, at least as leniently as the
// peers it serves, so that nothing a client (or an agent) reads escapes
// it. It frames a line as the official TypeScript SDK does: split at LF,
// a UTF-8 BOM at its start dropped and JavaScript's whitespace trimmed
// from both ends (U+0009 to U+000D, space, U+00A0, U+1680, U+2000 to
// U+200A, U+2028, U+2029, U+202F, U+205F, U+3000, U+FEFF). It sets no
// nesting limit on what it reads past, as JSON.parse sets none. Where
// member names matched as Go peers match them (ignoring case, as
// encoding/json matches struct fields) would change the gate or a turn's
// end, it reads them so too: for a client that may lack the capability, a
// line a Go client reads as a compaction update and the exact reading does
// not is dropped; for every client, an answer a Go peer reads as ending a
// turn is settled before, like any other. For a capable client compaction
// updates are followed by their exact reading. What is forwarded is always
// the line as it came.
//
// What it still cannot read is taken at its worst: a line that may carry
// a compaction update (it holds "ompaction", or an escape that may spell
// one of its letters) never reaches a client that may lack the capability
// (a v1 client without it, or any client before the initialize exchange
// completed); a compaction update it cannot follow (its sessionId,
// compactionId or status missing or not a string) reaches no client; and
// anything else is logged with its side and line number and forwarded as
// it came. The live checker (WithChecker with CheckClient) sees every line
// the client receives, as the client reads it.
//
// # The end of a connection
//
// What the proxy settles when the agent's output ends says why it ended:
// emitter.ErrConnectionClosed when the client's input ended first, when
// the host called Terminating (it was told to stop and passed the signal
// on) or when Run's context is done; the exit reason (WithExitReason,
// emitter.ErrAgentCrashed by default) when the agent's output ended on its
// own. A session the agent closed (its answer to session/close) is settled
// and forgotten, so that the proxy's memory follows the sessions that are
// live. Once Run's context is done, a client that does not read holds Run
// up for at most the stop timeout (WithStopTimeout).
package proxy
