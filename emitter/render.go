package emitter

import (
	"context"
	"time"

	"github.com/acpcompact/acpcompact/protocol"
)

// EventKind names a lifecycle event.
type EventKind uint8

// Lifecycle events. Renderers receive Started, Chunk, Heartbeat, Settled and
// Replayed; observers receive every kind.
const (
	EventStarted       EventKind = iota + 1 // a compaction opened
	EventChunk                              // a summary block was streamed
	EventHeartbeat                          // a silent compaction is still alive
	EventSettled                            // the terminal status was reached
	EventReplayed                           // a settled compaction was replayed
	EventSkipped                            // a running compaction was not replayed
	EventWithheld                           // the summary policy withheld a block (Err wraps ErrWithheld)
	EventDropped                            // a call broke a rule and sent nothing
	EventUndeliverable                      // the Notifier failed
)

var kindNames = [...]string{"", "started", "chunk", "heartbeat", "settled", "replayed", "skipped", "withheld", "dropped", "undeliverable"}

// String returns the event's name, as used in logs.
func (k EventKind) String() string {
	if int(k) < len(kindNames) && k > 0 {
		return kindNames[k]
	}
	return "unknown"
}

// Event is one lifecycle event of one compaction.
type Event struct {
	Kind EventKind
	// SessionID is the session the updates are sent under.
	SessionID string
	ID        protocol.ID
	Trigger   protocol.Trigger
	// Status is in_progress for Started, Chunk and Heartbeat, and the
	// terminal status for Settled and Replayed.
	Status protocol.Status
	// Version is the connection's protocol version (1 or 2).
	Version int
	// Content is the streamed block (Chunk).
	Content protocol.ContentBlock
	// Summary is the terminal update's summary patch.
	Summary protocol.Patch[[]protocol.ContentBlock]
	// Error is the terminal update's error patch (user-visible text).
	Error protocol.Patch[string]
	// Meta is the update's _meta (Started, Settled, Replayed), nil for none.
	Meta protocol.Meta
	// Err is the cause of a failure or cancel, or what went wrong for
	// Dropped and Undeliverable; for Withheld it wraps ErrWithheld. It may
	// hold detail unfit for the user.
	Err error
	// Duration is how long the compaction ran (Settled).
	Duration time.Duration
	// Details is the compaction's record (Settled, Replayed), when the
	// runtime gave one or WithRecords is on.
	Details *Details
	// SettledBy says who ended the compaction (Settled): the runtime
	// itself, a SettleAll (the turn's end, a cancel's wind-down, the
	// connection closing), or the watchdog.
	SettledBy SettledBy
	// Unseen (Settled) says the client never saw the compaction start: it
	// settled while held between turns, or was started with Background.
	// The terminal update is its first sight, as a replayed one is.
	Unseen bool
	// Withheld counts the summary blocks the SummaryPolicy withheld
	// (Settled: over the compaction's life, chunks and final summary;
	// Replayed: of the record's summary). Zero when nothing was withheld.
	// NewSlogObserver's observer logs one line per compaction when it is not zero.
	Withheld int
}

// SettledBy names who settled a compaction.
type SettledBy uint8

const (
	// SettledByRuntime: the runtime's own Complete, Fail or Cancel.
	SettledByRuntime SettledBy = iota
	// SettledBySettleAll: Session.SettleAll or Emitter.SettleAll, which is
	// how agentkit and the proxy end what a runtime left open.
	SettledBySettleAll
	// SettledByWatchdog: the WithMaxDuration watchdog.
	SettledByWatchdog
)

// String returns "runtime", "settle_all" or "watchdog".
func (s SettledBy) String() string {
	switch s {
	case SettledByRuntime:
		return "runtime"
	case SettledBySettleAll:
		return "settle_all"
	case SettledByWatchdog:
		return "watchdog"
	}
	return "unknown"
}

// info returns the event's compaction identity.
func (e Event) info() Info { return Info{SessionID: e.SessionID, ID: e.ID, Trigger: e.Trigger} }

// Renderer turns a lifecycle event into zero or more session updates sent
// through n. Every renderer must give each started compaction exactly one
// terminal form, live and on replay. Calls for one session are serialized.
type Renderer interface {
	Render(ctx context.Context, ev Event, n Notifier) error
}

// Standard renders the ACP compaction updates. It is what capable v1 clients
// and every v2 client receive.
type Standard struct{}

// Render implements Renderer.
func (Standard) Render(ctx context.Context, ev Event, n Notifier) error {
	switch ev.Kind {
	case EventStarted:
		u := &protocol.CompactionUpdate{CompactionID: ev.ID, Status: protocol.InProgress}
		if ev.Meta != nil {
			u.Meta = protocol.Set(ev.Meta)
		}
		return n.Notify(ctx, ev.SessionID, u)
	case EventHeartbeat:
		return n.Notify(ctx, ev.SessionID, &protocol.CompactionUpdate{CompactionID: ev.ID, Status: protocol.InProgress})
	case EventChunk:
		return n.Notify(ctx, ev.SessionID, &protocol.CompactionSummaryChunk{CompactionID: ev.ID, Content: ev.Content})
	case EventSettled, EventReplayed:
		return n.Notify(ctx, ev.SessionID, terminalUpdate(ev))
	}
	return nil
}

// terminalUpdate builds the compaction_update of a Settled or Replayed
// event.
func terminalUpdate(ev Event) *protocol.CompactionUpdate {
	u := &protocol.CompactionUpdate{CompactionID: ev.ID, Status: ev.Status, Summary: ev.Summary, Error: ev.Error}
	if ev.Meta != nil {
		u.Meta = protocol.Set(ev.Meta)
	}
	return u
}

// silent renders nothing: the emitter's renderer for a client that is to
// see no compaction at all (mode Off).
type silent struct{}

func (silent) Render(context.Context, Event, Notifier) error { return nil }
