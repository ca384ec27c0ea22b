// Package observe turns the emitter's lifecycle events into compaction
// metrics: it defines the Metrics a backend implements, the Observer that
// feeds it (NewObserver), and Counters, an in-memory Metrics for tests and
// demos. It knows no metrics vendor; package otelobs is the OpenTelemetry
// backend.
//
// Counting rules, decided once here so every backend agrees:
//
//   - Started and Settled count live compactions only. A replayed
//     compaction (session/load) already settled in an earlier connection,
//     so counting it again would double its lifecycle; it goes to Replayed
//     instead. A record skipped during replay is not counted at all.
//   - Duration is recorded for every live settlement.
//   - Summary bytes are the UTF-8 bytes of summary text that passed the
//     summary policy: each streamed chunk plus the final summary when the
//     terminal update carries one. Replayed summaries are not counted, and
//     non-text blocks count zero bytes because their size is not text the
//     user reads.
//   - A settlement is abandoned when AbandonmentOf(ev.Err) reports one: the
//     runtime did not finish the compaction and something else (SettleAll,
//     the watchdog, a crash handler) ended it. See AbandonmentOf.
package observe

import (
	"context"
	"errors"
	"time"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// Metrics receives compaction measurements. NewObserver calls it from the
// emitter's observer hook, which holds the session's order, so every method
// must be quick and safe for concurrent use across sessions.
//
// ctx is the context of the event (see emitter.Observer); backends may use
// it for exemplars.
type Metrics interface {
	// Started counts a live compaction opening.
	Started(ctx context.Context, trigger protocol.Trigger)
	// Settled counts a live compaction reaching its terminal status and
	// records how long it ran.
	Settled(ctx context.Context, status protocol.Status, trigger protocol.Trigger, d time.Duration)
	// Replayed counts a settled compaction re-sent during history replay.
	Replayed(ctx context.Context, status protocol.Status, trigger protocol.Trigger)
	// Abandoned counts a live settlement that the runtime did not make.
	// It is called in addition to Settled.
	Abandoned(ctx context.Context, reason Abandonment)
	// SummaryBytes adds n bytes of summary text handed to the renderer.
	SummaryBytes(ctx context.Context, n int64)
	// Withheld counts a streamed summary block the summary policy withheld.
	Withheld(ctx context.Context)
	// Dropped counts a runtime call that broke a lifecycle rule and sent
	// nothing.
	Dropped(ctx context.Context, reason DropReason)
	// Undeliverable counts an update the Notifier failed to send.
	Undeliverable(ctx context.Context)
}

// Abandonment says why a compaction was settled on the runtime's behalf.
type Abandonment string

// Abandonment reasons, one per emitter sentinel.
const (
	AbandonedTimeout          Abandonment = "timeout"           // emitter.ErrTimeout: the watchdog fired
	AbandonedAgentCrashed     Abandonment = "agent_crashed"     // emitter.ErrAgentCrashed
	AbandonedConnectionClosed Abandonment = "connection_closed" // emitter.ErrConnectionClosed
	AbandonedTurnEnded        Abandonment = "turn_ended"        // emitter.ErrTurnEnded, also SettleAll(ctx, nil)
	// AbandonedCancelUnreported: the user cancelled and the runtime never
	// reported the compaction's end, so a SettleAll (agentkit's cancel
	// grace or turn end) settled it as cancelled. See AbandonmentOfEvent.
	AbandonedCancelUnreported Abandonment = "cancel_unreported"
)

// abandonments is ordered from the most specific cause to the most generic,
// so an error wrapping several sentinels (a connection close reported as the
// end of a turn) is attributed to the one that explains it.
var abandonments = [...]struct {
	err    error
	reason Abandonment
}{
	{emitter.ErrTimeout, AbandonedTimeout},
	{emitter.ErrAgentCrashed, AbandonedAgentCrashed},
	{emitter.ErrConnectionClosed, AbandonedConnectionClosed},
	{emitter.ErrTurnEnded, AbandonedTurnEnded},
}

// AbandonmentOf reports whether a settlement whose cause is err was an
// abandonment, and why. The rule: err is, or wraps, emitter.ErrTimeout,
// ErrAgentCrashed, ErrConnectionClosed or ErrTurnEnded, whoever settled
// the compaction and whatever its status.
//
// emitter.ErrCancelled alone is not an abandonment by its cause: a user
// cancel is a decision the client asked for. Whether the runtime honoured
// it is in the event, not the error; see AbandonmentOfEvent.
func AbandonmentOf(err error) (Abandonment, bool) {
	if err == nil {
		return "", false
	}
	for _, a := range abandonments {
		if errors.Is(err, a.err) {
			return a.reason, true
		}
	}
	return "", false
}

// AbandonmentOfEvent is AbandonmentOf for a settled event, plus one rule the
// cause alone cannot tell: a user cancel settled by a SettleAll rather than
// by the runtime's own Cancel (emitter.Event.ByHost) is an
// abandonment, AbandonedCancelUnreported, since the runtime never reported
// how its compaction ended.
func AbandonmentOfEvent(ev emitter.Event) (Abandonment, bool) {
	if reason, ok := AbandonmentOf(ev.Err); ok {
		return reason, true
	}
	if ev.ByHost && errors.Is(ev.Err, emitter.ErrCancelled) {
		return AbandonedCancelUnreported, true
	}
	return "", false
}

// DropReason classifies a dropped call.
type DropReason string

// Drop reasons.
const (
	DropIDReused     DropReason = "id_reused"     // Start with an ID already used in the session
	DropAfterSettled DropReason = "after_settled" // a chunk or terminal call after the terminal update
	DropOther        DropReason = "other"         // a rule this package does not know yet
)

func dropReasonOf(err error) DropReason {
	switch {
	case errors.Is(err, emitter.ErrIDReused):
		return DropIDReused
	case errors.Is(err, emitter.ErrSettled):
		return DropAfterSettled
	}
	return DropOther
}
