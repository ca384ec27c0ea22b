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
// a client that only sees its replay (Session.Replay of its final Record)
// holds too. So a terminal update leaves the client holding the summary
// the record keeps: a Summary given at settlement, what a completion kept
// from the stream, or nothing. A failed or cancelled compaction (the
// runtime's Fail or Cancel, SettleAll at the end of a turn or after a
// cancel, a caught panic, the watchdog) retained no summary: what it
// streamed was never confirmed, so its terminal update clears it
// (summary: null), as its replay does. A runtime that wants a failed
// compaction to keep a partial summary passes it as Summary, and the
// record keeps it.
//
// # Records and replay
//
// A runtime that replays its history on session/load keeps each
// compaction's final Record and replays the kept records with
// Session.Replay, at their places among its own messages. OnFinalRecord
// hands it every final record, exactly once, whoever settles the
// compaction (the runtime, a SettleAll at the turn's end, after a cancel
// or a caught panic, the watchdog, the connection's close, CloseSession),
// once its terminal update is written, and without the emitter's locks
// held, in settlement order per session. A compaction that settles unseen
// between turns is handed over at settlement, though the client gets its
// terminal update only when the next turn begins: the replay must hold it
// even if the client never comes back. With OnFinalRecord set the emitter
// keeps the streamed blocks of each open compaction until it settles, so
// the record of a completion that kept what it streamed has that summary;
// without it no chunk is kept (memory per open compaction stays constant)
// and Compaction.Record of such a completion has none.
//
// A record carries the runtime's position in its history, given at Start
// with After (the ID of the message the compaction follows): the emitter
// does not read it, the runtime uses it to put the record back where the
// compaction happened. A failure reported before any start has none.
//
// json.Marshal writes a record in a versioned JSON form, for stores:
//
//	{"v":1,"compactionId":"cmp_001","status":"completed","trigger":"auto",
//	 "after":"msg_41","userDisplayable":true,
//	 "summary":[{"type":"text","text":"## Retained context"}]}
//
// with error, _meta and details when present (Record.MarshalJSON lists
// them). json.Unmarshal reads it back, ignoring fields it does not know, so
// a newer writer may add optional fields; a record of a version this
// package does not read is refused with ErrRecordVersion. The form holds
// no session ID: a record belongs to the session it is stored under.
//
// # Rules
//
// The lifecycle rules enforced here rather than left to each agent (unique,
// never reused IDs; one terminal update per ID; chunks only while open;
// SettleAll; the watchdog; detached terminal updates; nothing outside a
// turn) are listed once, in docs/architecture.md ("Lifecycle rules the
// emitter enforces"); each option's documentation states its own.
//
// The emitter knows no transport: it sends through a Notifier, and a
// Renderer decides what each lifecycle event looks like on the wire
// (standard updates, a fallback form, or nothing). The wire vocabulary
// itself (IDs, statuses, triggers, content blocks, patches and the update
// shapes) is package protocol's. It is safe for concurrent
// use across and within sessions, and preserves the order of each session's
// notifications.
package emitter
