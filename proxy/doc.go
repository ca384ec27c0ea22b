// Package proxy sits between an ACP client and an agent it cannot change and
// makes that agent's context-compaction reporting correct on the wire.
//
// That is its one job. Everything else passes through byte for byte and in
// order; the proxy rewrites only compaction signals:
//
//   - Legacy signals (Claude's "Compacting..." text, the "Compact
//     conversation" tool call, opencode's _meta marker, codex's "Context
//     compacted" text and notice) become standard compaction_update updates,
//     one ID-addressed entity per compaction, for a client that can read
//     them (v1 with clientCapabilities.session.compaction, or v2). A v1
//     client without the capability gets the legacy form untouched, or the
//     fallback rendering configured with WithFallback instead of it. Each
//     recogniser is a named Translator that can be switched off.
//   - Standard updates an agent sends to a v1 client that did not advertise
//     the capability are never forwarded; they are rewritten into a fallback
//     rendering (WithGateFallback, a tool call by default).
//   - Every compaction the client saw start is settled before the turn ends
//     (v1: the session/prompt response; v2: the idle state_update) and when
//     the agent's output ends: cancelled when the client sent session/cancel
//     for the session during the turn, otherwise failed with a reason.
//
// The proxy reads one line from a side, writes it (or its replacement) to
// the other, then reads the next, so memory stays bounded by the longest
// line and a slow reader slows its writer down. Notifications already
// followed by a read line wait in a 64 KiB buffer to leave in one write;
// requests, responses and the updates that end a compaction or a turn
// never wait, nor does anything once no further input is at hand. Lines up to 64 MiB are
// inspected; longer ones are streamed through unread. A malformed line is
// logged with its side and line number and forwarded as it came.
package proxy
