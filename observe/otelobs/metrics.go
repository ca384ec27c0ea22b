package otelobs

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/acpcompact/acpcompact/observe"
	"github.com/acpcompact/acpcompact/protocol"
)

// Compactions take from under a second (a short manual compact) to many
// minutes (a slow model summarising a long history); the SDK's default
// buckets are tuned for milliseconds and would put nearly all of them in
// the last bucket.
var durationBuckets = []float64{0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800}

// instruments implements observe.Metrics with OpenTelemetry instruments.
type instruments struct {
	started, settled, replayed, abandoned metric.Int64Counter
	summary, withheld, dropped, undeliv   metric.Int64Counter
	duration                              metric.Float64Histogram
}

var _ observe.Metrics = (*instruments)(nil)

func newInstruments(m metric.Meter) (*instruments, error) {
	var in instruments
	var errs []error
	counter := func(dst *metric.Int64Counter, name, unit, desc string) {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		*dst = c
	}
	counter(&in.started, "acpcompact.compaction.started", "{compaction}", "Compactions started live.")
	counter(&in.settled, "acpcompact.compaction.settled", "{compaction}", "Compactions that reached a terminal status live.")
	counter(&in.replayed, "acpcompact.compaction.replayed", "{compaction}", "Settled compactions re-sent during history replay.")
	counter(&in.abandoned, "acpcompact.compaction.abandoned", "{compaction}", "Live settlements the runtime did not make (turn end, timeout, connection close, crash).")
	counter(&in.summary, "acpcompact.compaction.summary.size", "By", "Summary text handed to the renderer: streamed chunks plus final summaries.")
	counter(&in.withheld, "acpcompact.compaction.withheld", "{block}", "Streamed summary blocks withheld by the summary policy.")
	counter(&in.dropped, "acpcompact.compaction.dropped", "{call}", "Runtime calls that broke a lifecycle rule and sent nothing.")
	counter(&in.undeliv, "acpcompact.compaction.undeliverable", "{update}", "Compaction updates the notifier failed to send.")
	h, err := m.Float64Histogram("acpcompact.compaction.duration", metric.WithUnit("s"),
		metric.WithDescription("How long live compactions ran, from start to terminal status."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	errs = append(errs, err)
	in.duration = h
	return &in, errors.Join(errs...)
}

func statusTrigger(status protocol.Status, trigger protocol.Trigger) metric.MeasurementOption {
	return metric.WithAttributes(keyStatus.String(string(status)), keyTrigger.String(string(trigger)))
}

func (in *instruments) Started(ctx context.Context, trigger protocol.Trigger) {
	in.started.Add(ctx, 1, metric.WithAttributes(keyTrigger.String(string(trigger))))
}

func (in *instruments) Settled(ctx context.Context, status protocol.Status, trigger protocol.Trigger, d time.Duration) {
	attrs := statusTrigger(status, trigger)
	in.settled.Add(ctx, 1, attrs)
	in.duration.Record(ctx, d.Seconds(), attrs)
}

func (in *instruments) Replayed(ctx context.Context, status protocol.Status, trigger protocol.Trigger) {
	in.replayed.Add(ctx, 1, statusTrigger(status, trigger))
}

func (in *instruments) Abandoned(ctx context.Context, reason observe.Abandonment) {
	in.abandoned.Add(ctx, 1, metric.WithAttributes(keyAbandonReason.String(string(reason))))
}

func (in *instruments) SummaryBytes(ctx context.Context, n int64) { in.summary.Add(ctx, n) }

func (in *instruments) Withheld(ctx context.Context) { in.withheld.Add(ctx, 1) }

func (in *instruments) Dropped(ctx context.Context, reason observe.DropReason) {
	in.dropped.Add(ctx, 1, metric.WithAttributes(keyDropReason.String(string(reason))))
}

func (in *instruments) Undeliverable(ctx context.Context) { in.undeliv.Add(ctx, 1) }
