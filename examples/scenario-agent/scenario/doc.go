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
// Summaries are marked user-displayable (emitter.UserDisplayable), so they
// reach the client. A failed or cancelled compaction reported by the runtime
// clears the summary it had streamed (summary: null), since nothing was
// retained; live and replayed rows then agree. Every terminal update carries
// the compaction's record under `_meta["acpcompact/record"]`
// (emitter.WithRecords): token counts, the replaced message range, and the
// summarizer model "scenario-summarizer". A completed compaction is followed
// by a usage_update (emitter.WithUsageUpdates).
//
// # Ends that the runtime does not report
//
// For /compact hang the runtime drops its handle, so only the kit or the
// emitter can end the compaction: after session/cancel the kit settles it as
// cancelled when the cancel grace (Config.CancelGrace) runs out, and without
// a cancel the watchdog (Config.CompactionTimeout) settles it as failed
// ("compaction timed out after ..."). The prompt handler waits for that
// settlement and then answers: stop reason cancelled after a cancel, end_turn
// after the watchdog. With a negative CancelGrace it answers as soon as the
// cancel arrives, and the end of the turn settles the compaction as
// cancelled. With neither a grace nor a watchdog, an uncancelled hang lasts
// until the connection closes, which settles it as failed.
//
// For /compact panic the agent recovers the panic around its runtime, settles
// the session's open compactions as failed (emitter.ErrAgentCrashed) and
// answers the prompt with a JSON-RPC internal error (in v2, whose prompt was
// already acknowledged, the idle state_update carries stopReason "error"
// instead). The process and the connection carry on. It settles the session,
// not the connection as agentkit.Recover does: Recover serves processes that
// are about to die, and here other sessions' runtimes live on.
//
// # Protocol versions and history
//
// The agent answers protocol version 2 to a client that asks for it (turns
// run from the `running` to the `idle` state_update; user and agent messages
// carry message IDs), and version 1 otherwise, advertising loadSession.
// session/load (v1) and session/resume with replayFrom {"type":"start"} (v2)
// replay the session: user and agent messages, and each settled compaction as
// one terminal update at its position (agentkit's Session.Replay, which
// renders the fallback form for a v1 client without the capability); a
// compaction still running is skipped. The history keeps the final record
// the emitter hands over when a compaction settles (emitter.OnFinalRecord),
// whoever settled it, with the summary the client was left holding, so the
// replay leaves a client holding what the live one held; the agent keeps
// no streamed text of its own. In v2, replayed messages are
// user_message / agent_message upserts, so a client that still holds them
// does not get their content twice.
//
// session/close stops a running turn as session/cancel does (the runtime
// sees emitter.ErrCancelled) and ends the session in this process: the
// agent forgets it, so its memory is bounded by the sessions still open;
// session/list lists the process's open sessions. Agent.Shutdown (on
// SIGINT or SIGTERM in examples/scenario-agent) settles and writes what is
// open on every connection before the process exits.
//
// # Sessions that survive a restart
//
// Without a state directory (Config.StateDir empty) history lives in
// memory, in the Agent: sessions outlive a connection only within one
// process, and a closed session is gone. With one, every session is also a
// file there, <session ID>.jsonl (package sessionlog): session/new creates
// it, and each user and agent message and each compaction's start and
// final record (the one OnFinalRecord hands over, placed by Record.After,
// the message it follows) are appended as they happen. session/load and
// session/resume of a session this process does not hold read it back
// into memory, replay it as above, and the session goes on (its message
// and compaction IDs continue). A closed session's file stays, to be
// loaded again.
//
// What a client then sees:
//
//   - After a restart, the replay is what the client saw live, for every
//     outcome (completed with or without a summary, failed, cancelled by
//     the runtime, the kit or the watchdog, a panic, two at once, automatic),
//     with and without the capability.
//   - A compaction the process did not live to settle (SIGKILL during
//     /compact slow; a power loss) replays as failed, with the error "the
//     agent stopped before the compaction finished", at its place: never
//     in_progress, and not absent, since the client saw it start and a
//     replayed terminal update settles the row a client may still show
//     (sessionlog's "Crash safety"). SIGINT and SIGTERM settle what is
//     open first, so the replay is what the client saw.
//   - A file that is corrupt (a checksum that does not match, in the
//     middle), foreign (not a session file, or another session's) or of a
//     newer version fails that session/load with a JSON-RPC internal error
//     whose message names the file and the line (and whose data holds
//     them); the agent serves its other sessions as before. A torn final
//     line, from a process killed while it wrote, is ignored, and cut off
//     before the next append.
//
// One process at a time should serve a session's file: the agent takes no
// lock across processes.
//
// # Running it
//
// Agent.Serve serves one connection on any io.ReadWriteCloser: stdin/stdout
// in examples/scenario-agent, a net.Pipe in the demo and the tests. Several
// connections may be served at once; they share the Agent's sessions.
package scenario
