package otelobs

import (
	"container/list"
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/observe"
	"github.com/acpcompact/acpcompact/protocol"
)

// Reasons a span is ended before its compaction settles. They share
// acpcompact.abandon.reason with observe's abandonments but are about the
// span, not the compaction.
const (
	reasonSpanLimit  = "span_limit"
	reasonSuperseded = "superseded"
)

// spanKey identifies a compaction across sessions: IDs are only unique
// within a session.
type spanKey struct {
	session string
	id      protocol.ID
}

type openSpan struct {
	key      spanKey
	span     trace.Span
	chunks   int64
	bytes    int64
	withheld int64
}

func keyOf(ev emitter.Event) spanKey {
	return spanKey{session: ev.SessionID, id: ev.ID}
}

// observeSpan updates the compaction's span for ev and returns ctx carrying
// that span, when there is one.
func (o *Observer) observeSpan(ctx context.Context, ev emitter.Event) context.Context {
	switch ev.Kind {
	case emitter.EventStarted:
		return o.start(ctx, ev)
	case emitter.EventSettled:
		return o.end(ctx, ev)
	case emitter.EventReplayed, emitter.EventSkipped:
		// A replayed compaction ran in an earlier connection; a span now
		// would claim it ran in this prompt's trace.
		return ctx
	}
	o.mu.Lock()
	e, ok := o.open[keyOf(ev)]
	var sp *openSpan
	if ok {
		sp = e.Value.(*openSpan)
		switch ev.Kind {
		case emitter.EventChunk:
			sp.chunks++
			sp.bytes += observe.BlockBytes(ev.Content)
		case emitter.EventWithheld:
			sp.withheld++
		}
	}
	o.mu.Unlock()
	if sp == nil {
		return ctx
	}
	switch ev.Kind {
	case emitter.EventDropped, emitter.EventUndeliverable:
		var attrs []attribute.KeyValue
		if ev.Err != nil {
			attrs = append(attrs, semconv.ErrorMessage(ev.Err.Error()))
		}
		sp.span.AddEvent(ev.Kind.String(), trace.WithAttributes(attrs...))
	}
	return trace.ContextWithSpan(ctx, sp.span)
}

func (o *Observer) start(ctx context.Context, ev emitter.Event) context.Context {
	attrs := []attribute.KeyValue{
		keyCompacted.Bool(true),
		semconv.GenAIConversationID(ev.SessionID),
		keySessionID.String(ev.SessionID),
		keyCompactionID.String(string(ev.ID)),
		keyTrigger.String(string(ev.Trigger)),
	}
	ctx, span := o.tracer.Start(parentContext(ctx), SpanName, trace.WithAttributes(attrs...))
	if !span.IsRecording() {
		// Nothing would be exported, so holding it would only cost memory.
		return ctx
	}
	sp := &openSpan{key: keyOf(ev), span: span}
	type eviction struct {
		sp     *openSpan
		reason string
	}
	var evicted []eviction
	o.mu.Lock()
	if old, ok := o.open[sp.key]; ok {
		// Two emitters sharing this observer used the same session and ID.
		evicted = append(evicted, eviction{o.removeLocked(old), reasonSuperseded})
	}
	o.open[sp.key] = o.order.PushBack(sp)
	for len(o.open) > o.maxSpans {
		evicted = append(evicted, eviction{o.removeLocked(o.order.Front()), reasonSpanLimit})
	}
	o.mu.Unlock()
	// Spans end outside the lock: a synchronous span processor exports
	// inside End, and other sessions should not wait for it.
	for _, e := range evicted {
		e.sp.span.SetAttributes(keyAbandonReason.String(e.reason))
		e.sp.finish(codes.Error, "abandoned")
	}
	return ctx
}

func (o *Observer) end(ctx context.Context, ev emitter.Event) context.Context {
	o.mu.Lock()
	e, ok := o.open[keyOf(ev)]
	var sp *openSpan
	if ok {
		sp = o.removeLocked(e)
	}
	o.mu.Unlock()
	if sp == nil {
		return ctx // never started here, or already ended as abandoned
	}
	if blocks, ok := ev.Summary.Get(); ok {
		sp.bytes += observe.BlocksBytes(blocks)
	}
	sp.span.SetAttributes(keyStatus.String(string(ev.Status)))
	reason, abandoned := observe.AbandonmentOfEvent(ev)
	if abandoned {
		sp.span.SetAttributes(keyAbandonReason.String(string(reason)))
	}
	code, desc := codes.Unset, ""
	if ev.Status == protocol.Failed {
		code, desc = codes.Error, failureText(ev)
		errType := "_OTHER" // the semantic conventions' value for an unclassified error
		if abandoned {
			errType = string(reason)
		}
		sp.span.SetAttributes(semconv.ErrorTypeKey.String(errType))
	}
	sp.finish(code, desc)
	return trace.ContextWithSpan(ctx, sp.span)
}

// finish records the counts gathered while the span was open and ends it.
func (sp *openSpan) finish(code codes.Code, desc string) {
	attrs := []attribute.KeyValue{keyChunks.Int64(sp.chunks), keySummaryBytes.Int64(sp.bytes)}
	if sp.withheld > 0 {
		attrs = append(attrs, keyWithheld.Int64(sp.withheld))
	}
	sp.span.SetAttributes(attrs...)
	if code != codes.Unset {
		sp.span.SetStatus(code, desc)
	}
	sp.span.End()
}

// failureText prefers the cause, which operators need, over the
// user-facing error patch, which may be the generic "Compaction failed".
func failureText(ev emitter.Event) string {
	if ev.Err != nil && ev.Err.Error() != "" {
		return ev.Err.Error()
	}
	if text, ok := ev.Error.Get(); ok && text != "" {
		return text
	}
	return string(protocol.Failed)
}

// parentContext returns the context a compaction span starts from. A W3C
// trace context attached by agentkit names the prompt the compaction belongs
// to, so it wins over whatever span the runtime's ctx happens to carry; an
// unparsable traceparent leaves ctx as it is.
func parentContext(ctx context.Context) context.Context {
	tc, ok := observe.TraceFrom(ctx)
	if !ok {
		return ctx
	}
	carrier := propagation.MapCarrier{"traceparent": tc.Traceparent}
	if tc.Tracestate != "" {
		carrier["tracestate"] = tc.Tracestate
	}
	if tc.Baggage != "" {
		carrier["baggage"] = tc.Baggage
	}
	// Baggage goes into the context even though this package sets no
	// attribute from it: span processors that copy baggage onto spans
	// read it from the start context.
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}).Extract(ctx, carrier)
}

func (o *Observer) removeLocked(e *list.Element) *openSpan {
	sp := o.order.Remove(e).(*openSpan)
	delete(o.open, sp.key)
	return sp
}
