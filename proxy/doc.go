// Package proxy sits between an ACP client and an agent it cannot change and
// makes that agent's context-compaction reporting correct on the wire.
//
// That is its one job. Everything else passes through byte for byte and in
// order; the proxy rewrites only compaction signals. The user's guide, with
// the generated table of agent profiles, what each client receives, the
// limits and the signals, is docs/proxy.md in the repository; this comment
// is the summary, and the one account of how a line goes through.
//
//   - Legacy signals (Claude's "Compacting..." text, the "Compact
//     conversation" tool call, opencode's _meta marker, codex's "Context
//     compacted" text, Qwen Code's, Kimi Code's and Copilot CLI's forms,
//     and the messages Claude ACP and Kimi Code replay on session/load in
//     place of a compaction) become standard compaction_update updates,
//     one ID-addressed entity per compaction, for a client that can read
//     them (v1 with clientCapabilities.session.compaction, or v2). A v1
//     client without the capability gets the legacy form untouched, or the
//     rendering configured with WithFallback. What each agent sends, and
//     the recognisers of it, are package agents' (proxy/agents), one file
//     per agent family; which run is the agent's Profile's choice, picked
//     from the agentInfo of its initialize answer, so an agent without a
//     profile gets no text matching unless WithTranslators names
//     translators.
//   - Standard updates an agent sends to a v1 client that did not advertise
//     the capability are never forwarded; they are rewritten into a fallback
//     rendering (WithGateFallback, a tool call by default), or dropped and
//     logged when they cannot be rewritten.
//   - Every compaction the client saw start is settled, once, before the
//     turn ends and when the agent's output ends: cancelled when the client
//     cancelled the turn (after the cancel grace, WithCancelGrace, whose
//     rule docs/agentkit.md states), otherwise failed with a reason. A
//     second terminal update from the agent is dropped; while one is open
//     and silent, its progress is re-sent (WithHeartbeat).
//   - Nothing about compaction reaches the client outside a turn, and
//     nothing is lost: what the agent reports while the session has no turn
//     running is held by the emitter (emitter.HoldOutsideTurn) and delivered
//     when the session's next turn begins. A compaction the agent runs in
//     the background past its turn (Kimi Code's /compact) is started with
//     emitter.Background.
//
// # How a line goes through
//
// An agent line is read (read.go: framed as the client frames it, by
// internal/lines, the one line framer), classified (classify.go: what the
// line is, for the policy) and acted on (act.go):
//
//   - policy.go is the one table of what becomes of a line that is, or may
//     be, about compaction: forward, rewrite, wait or drop, from how it was
//     read, what it is, the client's mode (capability.DefaultPolicy's),
//     the session's turn and what the client already saw of the
//     compaction. It is the only place the capability rule and the
//     between-turns rule are applied.
//   - follow.go is the compaction's lifecycle through the emitter: the
//     agent's own standard updates followed by ID, rendered or held; a
//     legacy signal's step (open, update, settle, replay).
//   - internal/host, shared with the agent kits, hosts the wire engine
//     (internal/turn): the emitter made at initialize, a turn's end
//     settled before the message that ends it is written, the cancel
//     grace, delivery at a turn's beginning, a session's close; the proxy
//     adds its hooks (a line awaiting confirmation let go, what waited for
//     its facts completed, a provider's error text) and keeps no turn,
//     request or cancel state of its own. Requests and responses are
//     matched by the JSON value of their ids.
//
// The proxy reads one line from a side, writes it (or its replacement) to
// the other, then reads the next, so memory stays bounded by the longest
// line (internal/lines, and protocol.UnmarshalLongUpdate for a long
// update) and a slow reader slows its writer down. Lines up to
// 64 MiB (WithMaxLineBytes) are read whole; a longer one is read from its
// head and streams through. The client's lines are only read, noted with
// the engine and forwarded (client.go).
//
// It reads every line, both ways, at least as leniently as the peers it
// serves (the TypeScript SDK's framing and whitespace, no nesting limit,
// member names matched as Go peers match them where that decides the gate
// or a turn), so that nothing a client reads escapes it, and it takes what
// it still cannot read at its worst: a line that may carry a compaction
// update never reaches a client that may lack the capability. What is
// forwarded is always the line as it came.
//
// # The end of a connection
//
// What the proxy settles when the agent's output ends says why it ended:
// emitter.ErrConnectionClosed when the client's input ended first, when
// the host called Terminating or when Run's context is done; the exit
// reason (WithExitReason, emitter.ErrAgentCrashed by default) when the
// agent's output ended on its own. A session the agent closed is settled
// and forgotten. Once Run's context is done, a client that does not read
// holds Run up for at most the stop timeout (WithStopTimeout).
package proxy
