package emitter

import (
	"context"
	"log/slog"
)

// Observer receives every lifecycle event, for logging and metrics. It is
// called synchronously while the session's order is held, so it must be
// quick and must not call back into the emitter.
//
// ctx is the context of the call that caused the event (the runtime's, or
// the turn's for SettleAll; a background context for the watchdog and
// heartbeat), so observers can read request-scoped values such as the
// prompt's trace context (see TraceFrom).
type Observer interface {
	Observe(ctx context.Context, ev Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, ev Event)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, ev Event) { f(ctx, ev) }

// NewSlogObserver returns an observer that logs lifecycle events to l
// (slog.Default when nil): starts and settlements at Info,
// chunks, heartbeats and each withheld block at Debug, dropped and
// undeliverable updates at Warn. A compaction whose summary the policy
// withheld gets one more Info line when it settles or is replayed,
// "compaction summary withheld", with the count and how to opt in
// (UserDisplayable), so the default's silence is never a mystery.
func NewSlogObserver(l *slog.Logger) Observer {
	if l == nil {
		l = slog.Default()
	}
	return &slogObserver{logger: l}
}

type slogObserver struct {
	logger *slog.Logger
}

// Observe implements Observer.
func (o *slogObserver) Observe(ctx context.Context, ev Event) {
	level := slog.LevelInfo
	switch ev.Kind {
	case EventChunk, EventHeartbeat, EventWithheld, EventSkipped:
		level = slog.LevelDebug
	case EventDropped, EventUndeliverable:
		level = slog.LevelWarn
	}
	if !o.logger.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("session", ev.SessionID),
		slog.String("compaction", string(ev.ID)),
	}
	if ev.Status != "" {
		attrs = append(attrs, slog.String("status", string(ev.Status)))
	}
	if ev.Trigger != "" {
		attrs = append(attrs, slog.String("trigger", string(ev.Trigger)))
	}
	if ev.Duration > 0 {
		attrs = append(attrs, slog.Duration("duration", ev.Duration))
	}
	if ev.Err != nil {
		attrs = append(attrs, slog.String("error", ev.Err.Error()))
	}
	o.logger.LogAttrs(ctx, level, "compaction "+ev.Kind.String(), attrs...)
	if ev.Withheld > 0 && (ev.Kind == EventSettled || ev.Kind == EventReplayed) {
		o.logger.LogAttrs(ctx, slog.LevelInfo, "compaction summary withheld",
			slog.String("session", ev.SessionID),
			slog.String("compaction", string(ev.ID)),
			slog.Int("blocks", ev.Withheld),
			slog.String("why", withheldWhy))
	}
}

// withheldWhy is the explanation logged with a withheld summary.
const withheldWhy = "the summary policy withheld it: by default only a compaction started with emitter.UserDisplayable() shows its summary, since the RFD asks that a summary never reveal context the user has not seen; pass UserDisplayable() at Start when the summary is the user-displayable projection"
