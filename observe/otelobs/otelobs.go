// Package otelobs reports compactions to OpenTelemetry: metrics through a
// MeterProvider and one span per compaction through a TracerProvider. It is
// the only package of the module that imports OpenTelemetry; the counting
// rules are those of package observe, which it feeds.
//
// Metric instruments (attributes in brackets):
//
//	acpcompact.compaction.started        {compaction}  [trigger]
//	acpcompact.compaction.settled        {compaction}  [status, trigger]   live only
//	acpcompact.compaction.duration       s (histogram) [status, trigger]
//	acpcompact.compaction.replayed       {compaction}  [status, trigger]
//	acpcompact.compaction.abandoned      {compaction}  [abandon reason]
//	acpcompact.compaction.summary.size   By
//	acpcompact.compaction.withheld       {block}
//	acpcompact.compaction.dropped        {call}        [drop reason]
//	acpcompact.compaction.undeliverable  {update}
//
// The attribute keys are acpcompact.compaction.status,
// acpcompact.compaction.trigger, acpcompact.abandon.reason and
// acpcompact.drop.reason. Session and compaction IDs never appear on
// metrics, whose series count must stay bounded; they are on the spans.
//
// A span named "compaction" covers each live compaction from its start to
// its settlement. It joins the prompt's W3C trace when the event's context
// carries one (observe.TraceFrom), and otherwise is a child of any span
// already in that context. Its attributes:
//
//	gen_ai.conversation.compacted       true
//	gen_ai.conversation.id              the compacted session (GenAI semantic conventions)
//	acpcompact.session.id               the session the updates go to
//	acpcompact.compaction.id            the compaction ID
//	acpcompact.compaction.trigger       manual, auto, idle, ...
//	acpcompact.compaction.status        the terminal status
//	acpcompact.compaction.chunks        summary chunks streamed
//	acpcompact.compaction.summary.size  summary bytes, as in the metric
//	acpcompact.compaction.withheld      blocks withheld, when any
//	acpcompact.abandon.reason           see observe.AbandonmentOf; span_limit or
//	                                    superseded when the span was ended early
//	error.type                          on failure: the abandon reason or _OTHER
//
// A failed compaction's span has an error status whose description is the
// cause's text (ev.Err), which may be more detailed than what the client
// was shown. Undeliverable and dropped updates become span events.
package otelobs

import (
	"container/list"
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/observe"
)

// The attribute keys of this project, on metrics and spans alike; those the
// semantic conventions define (gen_ai.conversation.id, error.type,
// error.message) come from semconv, so they cannot drift from the
// conventions GenAI-aware backends read.
const (
	keyStatus        = attribute.Key("acpcompact.compaction.status")
	keyTrigger       = attribute.Key("acpcompact.compaction.trigger")
	keyAbandonReason = attribute.Key("acpcompact.abandon.reason")
	keyDropReason    = attribute.Key("acpcompact.drop.reason")
	keySessionID     = attribute.Key("acpcompact.session.id")
	keyCompactionID  = attribute.Key("acpcompact.compaction.id")
	keyChunks        = attribute.Key("acpcompact.compaction.chunks")
	keySummaryBytes  = attribute.Key("acpcompact.compaction.summary.size")
	keyWithheld      = attribute.Key("acpcompact.compaction.withheld")
	// keyCompacted marks the span as a GenAI conversation's compaction, in
	// the conventions' namespace; semconv has no key for it.
	keyCompacted = attribute.Key("gen_ai.conversation.compacted")
)

// ScopeName is the instrumentation scope of the meter and tracer.
const ScopeName = "github.com/acpcompact/acpcompact/observe/otelobs"

// SpanName is the name of every compaction span.
const SpanName = "compaction"

// DefaultMaxOpenSpans is how many compaction spans may be open at once
// unless WithMaxOpenSpans says otherwise.
const DefaultMaxOpenSpans = 1024

// Option configures New.
type Option func(*config)

type config struct {
	mp       metric.MeterProvider
	tp       trace.TracerProvider
	maxSpans int
}

// WithMeterProvider sets where metrics go. Without it New uses the global
// MeterProvider (otel.GetMeterProvider) as it is at the time of the call.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider sets where spans go. Without it New uses the global
// TracerProvider (otel.GetTracerProvider) as it is at the time of the call.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMaxOpenSpans caps the compaction spans held open at once, so a
// runtime that never settles its compactions cannot grow memory without
// bound. When a new span would exceed n, the oldest is ended with an error
// status "abandoned" and acpcompact.abandon.reason "span_limit"; its later
// settlement still counts in the metrics. n <= 0 means DefaultMaxOpenSpans.
func WithMaxOpenSpans(n int) Option {
	return func(c *config) { c.maxSpans = n }
}

// Observer is an emitter.Observer that records metrics and spans. It is
// safe for concurrent use; one Observer may serve several emitters.
//
// The emitter calls Observe while it holds a session's order, and a span
// ends inside Observe, so give the TracerProvider a batching span processor
// rather than a synchronous one outside tests.
type Observer struct {
	metrics  emitter.Observer
	tracer   trace.Tracer
	maxSpans int

	mu    sync.Mutex
	open  map[spanKey]*list.Element // of *openSpan
	order list.List                 // oldest first, for eviction
}

var _ emitter.Observer = (*Observer)(nil)

// New creates the metric instruments and returns the observer.
func New(opts ...Option) (*Observer, error) {
	cfg := config{maxSpans: DefaultMaxOpenSpans}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	if cfg.maxSpans <= 0 {
		cfg.maxSpans = DefaultMaxOpenSpans
	}
	m, err := newInstruments(cfg.mp.Meter(ScopeName))
	if err != nil {
		return nil, fmt.Errorf("otelobs: %w", err)
	}
	return &Observer{
		metrics:  observe.NewObserver(m),
		tracer:   cfg.tp.Tracer(ScopeName),
		maxSpans: cfg.maxSpans,
		open:     make(map[spanKey]*list.Element),
	}, nil
}

// Observe implements emitter.Observer.
func (o *Observer) Observe(ctx context.Context, ev emitter.Event) {
	// The span handling runs first so the metrics see the compaction's
	// span in ctx and can link exemplars to it.
	ctx = o.observeSpan(ctx, ev)
	o.metrics.Observe(ctx, ev)
}

// OpenSpans returns the number of compaction spans currently open; a value
// that only grows means a runtime is not settling its compactions.
func (o *Observer) OpenSpans() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.open)
}
