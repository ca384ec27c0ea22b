package observe

import "context"

// TraceContext is W3C trace context carried in ACP `_meta` (root keys
// traceparent, tracestate, baggage). The agent kits read it from a
// prompt's `_meta` and attach it to the contexts a prompt's compactions
// are reported with (WithTrace), so that an observer (otelobs's spans) can
// join the prompt's trace; the emitter itself never reads it.
type TraceContext struct {
	Traceparent string
	Tracestate  string
	Baggage     string
}

type traceKey struct{}

// WithTrace returns ctx carrying tc.
func WithTrace(ctx context.Context, tc TraceContext) context.Context {
	return context.WithValue(ctx, traceKey{}, tc)
}

// TraceFrom returns the trace context attached by WithTrace.
func TraceFrom(ctx context.Context) (TraceContext, bool) {
	tc, ok := ctx.Value(traceKey{}).(TraceContext)
	return tc, ok && tc.Traceparent != ""
}
