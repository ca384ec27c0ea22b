// Package conformance judges an ACP agent's context-compaction reporting
// against the Session Compaction RFD.
//
// It reads wire transcripts (ReadTranscript, Scanner), holds a session
// timeline the way a conforming client must (Reducer), and flags every
// obligation of the agent that a transcript breaks (Checker,
// CheckTranscript). The Checker is streaming so a live proxy can feed it
// message by message. It is a product feature, not a test helper: it backs
// `acpcompact check` and `acpcompact proxy --check`, and the project's own
// tests judge their transcripts with it.
//
// The Checker holds an agent to the RFD and to what ACP clients and peers
// are observed to need, and no further: the Rule constants list what it
// flags. A history replay is judged by the RFD's live semantics, so one that
// re-streams a compaction is legal; WithStrictReplay adds this project's own
// rule for what it sends, terminal-first replay.
//
// The Checker tells sessions, compactions and fallback tool calls apart by
// their IDs as a JavaScript client does (the official TypeScript SDK
// decodes a line with TextDecoder and parses it with JSON.parse): UTF-16
// code units, lone surrogates kept, invalid UTF-8 replaced per maximal
// subpart. encoding/json's strings would merge IDs such a client keeps
// apart ("\ud800" and "\udc00") and split IDs it merges.
package conformance
