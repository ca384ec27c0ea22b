// Package scenario is an ACP agent that reports context compaction on cue,
// built on agentkit and sourcegraph/jsonrpc2. It has no model: every prompt
// is a script, so an editor, a test or the acpcompact demo can watch each
// lifecycle the Session Compaction RFD describes, with the compaction
// capability (standard compaction_update / compaction_summary_chunk) and
// without it (the configured fallback form).
//
// # Prompts
//
// The first text block of each session/prompt picks the script:
//
//	/compact            in_progress, 4 summary chunks, completed with the whole
//	                    summary, a usage_update; then an agent message; end_turn
//	/compact nosummary  in_progress, then completed without a summary
//	/compact fail       in_progress, one chunk, then failed: "summary request failed"
//	/compact failearly  the runtime reports a failure before any start: the
//	                    client still sees in_progress, then failed
//	/compact slow       a chunk every 100 ms for 5 s, then completed; a
//	                    session/cancel interrupts it and the runtime reports
//	                    cancelled; stop reason cancelled
//	/compact hang       in_progress, then the runtime never reports again
//	/compact panic      the runtime panics mid-compaction
//	/compact flood N    N chunks (default 1000) as fast as the transport takes them
//	/compact twice      two compactions open at once, settled in reverse order
//	anything else       echoed back as an agent message; with
//	                    Config.AutoCompactEvery N, every Nth such prompt of a
//	                    session first runs an automatic compaction (trigger auto)
//
// Summaries are marked user-displayable (emitter.UserDisplayable). A failed
// or cancelled compaction reported by the runtime clears the summary it had
// streamed (summary: null). Every terminal update carries the compaction's
// record under `_meta["acpcompact/record"]` (emitter.WithRecords: token
// counts, the replaced message range, the summarizer "scenario-summarizer"),
// and a completed one is followed by a usage_update.
//
// # Ends that the runtime does not report
//
// For /compact hang the runtime drops its handle: after session/cancel the
// kit settles it cancelled when the cancel grace (Config.CancelGrace) runs
// out, without a cancel the watchdog (Config.CompactionTimeout) settles it
// failed; the prompt handler waits for that settlement, then answers
// (cancelled, or end_turn after the watchdog). With a negative CancelGrace
// it answers as soon as the cancel arrives, and the turn's end settles the
// compaction cancelled; with neither a grace nor a watchdog, an uncancelled
// hang lasts until the connection closes (failed).
//
// For /compact panic the agent recovers the panic around its runtime,
// settles the session's open compactions failed (emitter.ErrAgentCrashed)
// and answers the prompt with a JSON-RPC internal error (v2: the idle
// state_update carries stopReason "error"). It settles the session, not the
// connection as agentkit.Recover does, since other sessions live on.
//
// # Protocol versions and history
//
// The agent answers protocol version 2 to a client that asks for it (turns
// run from `running` to `idle`; messages carry IDs; replayed messages are
// upserts), and version 1 otherwise, advertising loadSession. session/load
// (v1) and session/resume with replayFrom {"type":"start"} (v2) replay the
// session from the kit's history (Session.ReplayHistory): its messages, and
// each settled compaction as one terminal update at its position, so the
// replay holds what the live client held. A running compaction is skipped. session/close stops a running turn as
// session/cancel does and forgets the session; session/list lists the open
// ones. Agent.Shutdown settles and writes what is open before the process
// exits.
//
// # Sessions that survive a restart
//
// The agent writes no record code: its kit keeps each session's history
// (agentkit.WithStore), every update it sends (through Session.Send), the
// client's prompts, each compaction's start and final record at their
// places, and session/load and session/resume replay it with one
// Session.ReplayHistory call, which also hands the agent the entries it
// restores its own state from (its messages, the token count, the ID
// counters; its working directory, kept with Session.Keep). With a state
// directory (Config.StateDir) the history is a file there, <session
// ID>.jsonl (package sessionlog), and a session this process does not
// hold is read back, replayed, and goes on; without one it is kept in
// memory, and ends with the session's close or the process. What a client
// sees after a restart, after a SIGKILL (an interrupted compaction replays
// failed, never in_progress) and for a corrupt, foreign or newer file (a
// JSON-RPC error naming the file and the line) is in docs/records.md
// ("Sessions that survive a restart"). One process at a time serves a
// session: the process whose connection holds a session's file holds its
// writer lock (sessionlog.ErrLocked), and another process's session/load
// or session/resume of it fails at once with a JSON-RPC error naming the
// file; that process serves its other sessions. The process that created
// a session numbers its IDs plainly (cmp_1, msg_user_2); a process that
// reopens it adds a random mark of its own (cmp_3f9a2c1b_4), so that no
// ID a client saw is minted again, even one the file lost.
//
// # Running it
//
// Agent.Serve serves one connection on any io.ReadWriteCloser: stdin/stdout
// in examples/scenario-agent, a net.Pipe in the demo and the tests. Several
// connections may be served at once; they share the Agent's sessions.
package scenario
