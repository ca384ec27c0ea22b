// Package emitter is the compaction lifecycle engine: it turns a runtime's
// compaction events into ACP session updates and guarantees that every
// compaction it started ends with exactly one terminal status.
//
// One Emitter serves one connection. It keeps a Session per ACP session, and
// each Start returns a Compaction handle, the only thing a runtime holds:
//
//	c, err := em.Session(sessionID).Start(ctx, emitter.WithID(protocol.ID(evt.ID)),
//		emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable())
//	c.Chunk(ctx, protocol.Text(delta))
//	c.Complete(ctx, emitter.Summary(protocol.Text(full))) // or c.Fail(ctx, err), c.Cancel(ctx)
//
// # Summaries are withheld unless the runtime opts in
//
// The RFD asks that a summary be unencrypted, user-displayable content that
// excludes internal prompt framing and never reveals context that was not
// otherwise visible to the user. Only the runtime knows whether its summary
// is that projection, so every summary block passes the SummaryPolicy, and
// the default (DisplayableOnly) passes only those of compactions started
// with UserDisplayable. A withheld chunk is not sent and Chunk returns
// ErrWithheld; a withheld final summary is omitted (the terminal update
// still goes out); the observer sees every withheld block, and
// NewSlogObserver's observer logs one line per compaction that withheld any.
//
// # Live and replay agree
//
// Whatever a client holds once a compaction's terminal update is applied,
// a client that only sees its replay (Session.Replay of Compaction.Record)
// holds too. So a terminal update leaves the client holding the summary
// the record keeps: a Summary given at settlement, or nothing. A failed or
// cancelled compaction (the runtime's Fail or Cancel, SettleAll at the end
// of a turn or after a cancel, a caught panic, the watchdog) retained no
// summary: what it streamed was never confirmed, so its terminal update
// clears it (summary: null), as its replay does. A runtime that wants a
// failed compaction to keep a partial summary passes it as Summary, and the
// record keeps it. The emitter keeps no chunks (memory stays constant), so
// the one case it leaves to the runtime is a completion that kept what was
// streamed: Record.KeptStreamed says so, and the runtime sets
// Record.Summary to the text it streamed before replaying.
//
// # Rules
//
// Rules enforced here rather than left to each agent: IDs are unique within a
// session and never reused; several compactions may be open at once; a chunk
// is only sent while its compaction is open; there is exactly one terminal
// update per ID; a failure reported before any start still reaches the
// client as in_progress then failed; SettleAll ends whatever is left open
// (cancelled for a user cancel, failed otherwise); a failed or cancelled
// compaction clears a streamed summary nobody confirmed; a watchdog bounds a
// compaction's duration; terminal updates are sent on a detached context so
// a cancelled turn cannot swallow them.
//
// The emitter knows no transport: it sends through a Notifier, and a
// Renderer decides what each lifecycle event looks like on the wire
// (standard updates, a fallback form, or nothing). The wire vocabulary
// itself (IDs, statuses, triggers, content blocks, patches and the update
// shapes) is package protocol's. It is safe for concurrent
// use across and within sessions, and preserves the order of each session's
// notifications.
package emitter
