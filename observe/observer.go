package observe

import (
	"context"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/protocol"
)

// NewObserver returns an emitter.Observer that feeds m according to the
// package's counting rules. It keeps no state of its own, so one observer
// may serve any number of emitters and sessions concurrently.
func NewObserver(m Metrics) emitter.Observer { return metricsObserver{m} }

type metricsObserver struct{ m Metrics }

func (o metricsObserver) Observe(ctx context.Context, ev emitter.Event) {
	switch ev.Kind {
	case emitter.EventStarted:
		o.m.Started(ctx, ev.Trigger)
	case emitter.EventChunk:
		if n := BlockBytes(ev.Content); n > 0 {
			o.m.SummaryBytes(ctx, n)
		}
	case emitter.EventSettled:
		o.m.Settled(ctx, ev.Status, ev.Trigger, ev.Duration)
		if blocks, ok := ev.Summary.Get(); ok {
			if n := BlocksBytes(blocks); n > 0 {
				o.m.SummaryBytes(ctx, n)
			}
		}
		if reason, ok := AbandonmentOfEvent(ev); ok {
			o.m.Abandoned(ctx, reason)
		}
	case emitter.EventReplayed:
		o.m.Replayed(ctx, ev.Status, ev.Trigger)
	case emitter.EventWithheld:
		o.m.Withheld(ctx)
	case emitter.EventDropped:
		o.m.Dropped(ctx, dropReasonOf(ev.Err))
	case emitter.EventUndeliverable:
		o.m.Undeliverable(ctx)
	}
}

// BlockBytes is the summary size of one content block: the byte length of
// a text block's text, zero for other block types. Backends that measure
// summaries themselves (such as span attributes) use it so their numbers
// match the metrics.
func BlockBytes(b protocol.ContentBlock) int64 {
	if b.Type != "text" {
		return 0
	}
	return int64(len(b.Text))
}

// BlocksBytes is the summary size of a list of blocks (see BlockBytes).
func BlocksBytes(blocks []protocol.ContentBlock) int64 {
	var n int64
	for _, b := range blocks {
		n += BlockBytes(b)
	}
	return n
}
