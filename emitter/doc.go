// Package emitter is the compaction lifecycle engine: it turns a runtime's
// compaction events into ACP session updates and guarantees that every
// compaction it started ends with exactly one terminal status.
//
// One Emitter serves one connection. It keeps a Session per ACP session, and
// each Start returns a Compaction handle, the only thing a runtime holds:
//
//	c, err := em.Session(sessionID).Start(ctx, emitter.WithID(evt.ID), emitter.WithTrigger(emitter.Auto))
//	c.Chunk(ctx, emitter.Text(delta))
//	c.Complete(ctx, emitter.Summary(emitter.Text(full))) // or c.Fail(ctx, err), c.Cancel(ctx)
//
// Rules enforced here rather than left to each agent: IDs are unique within a
// session and never reused; several compactions may be open at once; a chunk
// is only sent while its compaction is open; there is exactly one terminal
// update per ID; a failure reported before any start still reaches the
// client as in_progress then failed; SettleAll ends whatever is left open
// (cancelled for a user cancel, failed otherwise); a watchdog bounds a
// compaction's duration; terminal updates are sent on a detached context so
// a cancelled turn cannot swallow them.
//
// The emitter knows no transport: it sends through a Notifier, and a
// Renderer decides what each lifecycle event looks like on the wire
// (standard updates, a fallback form, or nothing). It is safe for concurrent
// use across and within sessions, and preserves the order of each session's
// notifications.
package emitter
