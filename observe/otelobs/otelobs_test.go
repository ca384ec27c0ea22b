package otelobs_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/observe"
	"github.com/acpcompact/acpcompact/observe/internal/script"
	"github.com/acpcompact/acpcompact/observe/otelobs"
	"github.com/acpcompact/acpcompact/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

const (
	traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	parentSpan  = "00f067aa0ba902b7"
	traceparent = "00-" + traceID + "-" + parentSpan + "-01"
	tracestate  = "vendor=opaque"
)

// baggageSpy records the baggage in each span's start context, which is
// where baggage-copying span processors look for it.
type baggageSpy struct {
	sdktrace.SpanProcessor
	mu   sync.Mutex
	seen []string
}

func (b *baggageSpy) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	b.mu.Lock()
	b.seen = append(b.seen, baggage.FromContext(ctx).Member("tenant").Value())
	b.mu.Unlock()
}

type fixture struct {
	obs    *otelobs.Observer
	reader *sdkmetric.ManualReader
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	spy    *baggageSpy
}

func newFixture(t *testing.T, opts ...otelobs.Option) *fixture {
	t.Helper()
	f := &fixture{reader: sdkmetric.NewManualReader(), spans: tracetest.NewInMemoryExporter()}
	f.spy = &baggageSpy{SpanProcessor: sdktrace.NewSimpleSpanProcessor(tracetest.NewNoopExporter())}
	f.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(f.spans), sdktrace.WithSpanProcessor(f.spy))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(f.reader))
	t.Cleanup(func() {
		_ = f.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	obs, err := otelobs.New(append([]otelobs.Option{otelobs.WithMeterProvider(mp), otelobs.WithTracerProvider(f.tp)}, opts...)...)
	require.NoError(t, err, "otelobs.New")
	f.obs = obs
	return f
}

// metrics collects every data point as name -> encoded attributes ->
// value; histograms report their count.
func (f *fixture) metrics(t *testing.T) map[string]map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, f.reader.Collect(context.Background(), &rm), "f.reader.Collect")
	out := make(map[string]map[string]int64)
	enc := attribute.DefaultEncoder()
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, otelobs.ScopeName, sm.Scope.Name, "scope %q", sm.Scope.Name)
		for _, m := range sm.Metrics {
			points := make(map[string]int64)
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if assert.True(t, d.IsMonotonic, "%s: not a cumulative counter", m.Name) {
					assert.Equal(t, metricdata.CumulativeTemporality, d.Temporality, "%s: not a cumulative counter", m.Name)
				}
				for _, p := range d.DataPoints {
					points[p.Attributes.Encoded(enc)] = p.Value
				}
			case metricdata.Histogram[float64]:
				assert.Equal(t, "s", m.Unit, "%s: unit %q", m.Name, m.Unit)
				for _, p := range d.DataPoints {
					points[p.Attributes.Encoded(enc)] = int64(p.Count)
				}
			default:
				assert.Fail(t, fmt.Sprintf("%s: unexpected %T", m.Name, m.Data))
			}
			out[m.Name] = points
		}
	}
	return out
}

func (f *fixture) spanByID(t *testing.T) map[string]tracetest.SpanStub {
	t.Helper()
	out := make(map[string]tracetest.SpanStub)
	for _, s := range f.spans.GetSpans() {
		id := attrs(s)["acpcompact.compaction.id"]
		assert.NotContains(t, out, fmt.Sprint(id), "two spans for compaction %v", id)
		out[fmt.Sprint(id)] = s
	}
	return out
}

func attrs(s tracetest.SpanStub) map[string]any {
	m := make(map[string]any, len(s.Attributes))
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

const (
	st     = "acpcompact.compaction.status="
	tr     = "acpcompact.compaction.trigger="
	reason = "acpcompact.abandon.reason="
)

func TestScriptMetrics(t *testing.T) {
	f := newFixture(t)
	script.Run(t, context.Background(), f.obs)

	settled := map[string]int64{
		st + "completed," + tr + "auto":   2,
		st + "failed," + tr + "manual":    3,
		st + "cancelled," + tr + "manual": 1,
		st + "failed," + tr + "auto":      1,
		st + "cancelled," + tr + "auto":   1,
		st + "failed," + tr + "idle":      1,
	}
	want := map[string]map[string]int64{
		"acpcompact.compaction.started":  {tr + "auto": 4, tr + "manual": 4, tr + "idle": 1},
		"acpcompact.compaction.settled":  settled,
		"acpcompact.compaction.duration": settled,
		"acpcompact.compaction.replayed": {st + "completed," + tr + "auto": 1},
		"acpcompact.compaction.abandoned": {
			reason + "connection_closed": 1, reason + "turn_ended": 1,
			reason + "agent_crashed": 1, reason + "timeout": 1,
			reason + "cancel_unreported": 1,
		},
		"acpcompact.compaction.summary.size": {"": script.SummaryBytes},
		"acpcompact.compaction.withheld":     {"": 1},
		"acpcompact.compaction.dropped": {
			"acpcompact.drop.reason=after_settled": 2,
			"acpcompact.drop.reason=id_reused":     1,
		},
		"acpcompact.compaction.undeliverable": {"": 2},
	}
	got := f.metrics(t)
	for name, w := range want {
		assert.Equal(t, w, got[name], "%s", name)
	}
	for name := range got {
		assert.Contains(t, want, name, "unexpected metric %s", name)
	}
}

func TestScriptSpans(t *testing.T) {
	f := newFixture(t)
	ctx := observe.WithTrace(context.Background(), observe.TraceContext{
		Traceparent: traceparent, Tracestate: tracestate, Baggage: "tenant=acme",
	})
	script.Run(t, ctx, f.obs)
	n := f.obs.OpenSpans()
	assert.Equal(t, 0, n, "%d spans left open", n)

	spans := f.spanByID(t)
	type want struct {
		session, trigger, status string
		chunks, bytes            int64
		code                     codes.Code
		desc, abandon            string
		extra                    map[string]any
	}
	wants := map[string]want{
		"c1": {"s1", "auto", "completed", 2, script.SummaryBytes, codes.Unset, "", "", nil},
		"c2": {"s1", "manual", "failed", 0, 0, codes.Error, script.ProviderErr, "",
			map[string]any{"acpcompact.compaction.withheld": int64(1), "error.type": "_OTHER"}},
		"c3": {"s1", "manual", "cancelled", 0, 0, codes.Unset, "", "", nil},
		"c4": {"s1", "auto", "failed", 0, 0, codes.Error, emitter.ErrConnectionClosed.Error(), "connection_closed", nil},
		// A user cancel the runtime never reported: abandoned, but not an
		// error (the client asked for it).
		"c5": {"s2", "auto", "cancelled", 0, 0, codes.Unset, "", "",
			map[string]any{"acpcompact.abandon.reason": "cancel_unreported"}},
		"c6": {"s1", "manual", "failed", 0, 0, codes.Error, emitter.ErrTurnEnded.Error(), "turn_ended", nil},
		"c7": {"s1", "manual", "failed", 0, 0, codes.Error, emitter.ErrAgentCrashed.Error(), "agent_crashed", nil},
		"u1": {"u", "auto", "completed", 0, 0, codes.Unset, "", "", nil},
		"w1": {"w", "idle", "failed", 0, 0, codes.Error, "compaction timed out after 1ms", "timeout", nil},
	}
	assert.Len(t, spans, len(wants), "len")
	for id, w := range wants {
		s, ok := spans[id]
		if !assert.True(t, ok, "no span for %s", id) {
			continue
		}
		if assert.Equal(t, "compaction", s.Name, "%s: span %q kind %v", id, s.Name, s.SpanKind) {
			assert.Equal(t, "internal", s.SpanKind.String(), "%s: span %q kind %v", id, s.Name, s.SpanKind)
		}
		if assert.Equal(t, traceID, s.Parent.TraceID().String(), "%s: parent", id) {
			if assert.Equal(t, parentSpan, s.Parent.SpanID().String(), "%s: parent", id) {
				assert.True(t, s.Parent.IsRemote(), "%s: parent %v, want the traceparent's", id, s.Parent)
			}
		}
		if assert.Equal(t, traceID, s.SpanContext.TraceID().String(), "%s: span context %v", id, s.SpanContext) {
			assert.Equal(t, tracestate, s.SpanContext.TraceState().String(), "%s: span context %v", id, s.SpanContext)
		}
		wantAttrs := map[string]any{
			"gen_ai.conversation.compacted":      true,
			"gen_ai.conversation.id":             w.session,
			"acpcompact.session.id":              w.session,
			"acpcompact.compaction.id":           id,
			"acpcompact.compaction.trigger":      w.trigger,
			"acpcompact.compaction.status":       w.status,
			"acpcompact.compaction.chunks":       w.chunks,
			"acpcompact.compaction.summary.size": w.bytes,
		}
		if w.abandon != "" {
			wantAttrs["acpcompact.abandon.reason"] = w.abandon
			wantAttrs["error.type"] = w.abandon
		}
		maps.Copy(wantAttrs, w.extra)
		assert.Equal(t, wantAttrs, attrs(s), "%s attributes", id)
		if assert.Equal(t, w.code, s.Status.Code, "%s: status %v %q", id, s.Status.Code, w.desc) {
			assert.Equal(t, w.desc, s.Status.Description, "%s: status %v %q", id, s.Status.Code, w.desc)
		}
	}
	// u1's start was undeliverable before its span existed; its terminal
	// update's failure is recorded on the span.
	ev := spans["u1"].Events
	if assert.Len(t, ev, 1, "u1 events") {
		assert.Equal(t, "undeliverable", ev[0].Name, "u1 events")
	}
	f.spy.mu.Lock()
	defer f.spy.mu.Unlock()
	for _, v := range f.spy.seen {
		if !assert.Equal(t, "acme", v, "baggage at span start: %v", f.spy.seen) {
			break
		}
	}
}

// Without a W3C trace context, the compaction belongs to whatever span the
// runtime's ctx carries; an unparsable traceparent is ignored the same way.
func TestParentFromContextSpan(t *testing.T) {
	f := newFixture(t)
	ctx, prompt := f.tp.Tracer("test").Start(context.Background(), "prompt")
	em := emitter.New(emitter.NotifierFunc(func(context.Context, string, any) error { return nil }),
		emitter.WithNegotiation(script.Negotiation), emitter.WithObserver(f.obs))
	for i, c := range []context.Context{ctx, observe.WithTrace(ctx, observe.TraceContext{Traceparent: "not-a-traceparent"})} {
		cmp, err := em.Session("s").Start(c, emitter.WithID(protocol.ID(fmt.Sprint("p", i))))
		require.NoError(t, err, "em.Session(\"s\").Start")
		require.NoError(t, cmp.Complete(c), "cmp.Complete")
	}
	prompt.End()
	for id, s := range f.spanByID(t) {
		if id == "<nil>" {
			continue // the prompt span
		}
		if assert.Equal(t, prompt.SpanContext().SpanID(), s.Parent.SpanID(), "%s: parent", id) {
			assert.False(t, s.Parent.IsRemote(), "%s: parent %v, want the prompt span", id, s.Parent)
		}
	}
}

// The cap ends the oldest span as abandoned; its compaction's later
// settlement still counts in the metrics, but no second span appears.
func TestMaxOpenSpans(t *testing.T) {
	f := newFixture(t, otelobs.WithMaxOpenSpans(2))
	em := emitter.New(emitter.NotifierFunc(func(context.Context, string, any) error { return nil }),
		emitter.WithNegotiation(script.Negotiation), emitter.WithObserver(f.obs))
	ctx := context.Background()
	s := em.Session("s")
	var cs []*emitter.Compaction
	for _, id := range []protocol.ID{"a", "b", "c"} {
		c, err := s.Start(ctx, emitter.WithID(id))
		require.NoError(t, err, "s.Start")
		cs = append(cs, c)
	}
	assert.Equal(t, 2, f.obs.OpenSpans(), "OpenSpans")
	ended := f.spans.GetSpans()
	require.Len(t, ended, 1, "%d spans ended", len(ended))
	a := ended[0]
	got := attrs(a)
	if assert.Equal(t, "a", got["acpcompact.compaction.id"], "evicted span attributes %v", got) {
		assert.Equal(t, "span_limit", got["acpcompact.abandon.reason"], "evicted span attributes %v", got)
	}
	if assert.Equal(t, codes.Error, a.Status.Code, "evicted span status %v", a.Status) {
		assert.Equal(t, "abandoned", a.Status.Description, "evicted span status %v", a.Status)
	}
	for _, c := range cs {
		require.NoError(t, c.Complete(ctx), "c.Complete")
	}
	n := len(f.spans.GetSpans())
	if assert.Equal(t, 3, n, "%d spans ended, %d open", n, f.obs.OpenSpans()) {
		assert.Equal(t, 0, f.obs.OpenSpans(), "%d spans ended, %d open", n, f.obs.OpenSpans())
	}
	assert.Equal(t, int64(3), f.metrics(t)["acpcompact.compaction.settled"][st+"completed,"+tr+"manual"], "settled")
}

// With tracing switched off nothing is recorded, so nothing is held.
func TestNoopProviders(t *testing.T) {
	obs, err := otelobs.New(otelobs.WithMeterProvider(metricnoop.NewMeterProvider()), otelobs.WithTracerProvider(tracenoop.NewTracerProvider()))
	require.NoError(t, err, "otelobs.New")
	em := emitter.New(emitter.NotifierFunc(func(context.Context, string, any) error { return nil }),
		emitter.WithNegotiation(script.Negotiation), emitter.WithObserver(obs))
	_, err = em.Session("s").Start(context.Background())
	require.NoError(t, err, "Start")
	assert.Equal(t, 0, obs.OpenSpans(), "OpenSpans")
}

func TestConcurrentSessions(t *testing.T) {
	const sessions, perSession = 16, 20
	f := newFixture(t)
	em := emitter.New(emitter.NotifierFunc(func(context.Context, string, any) error { return nil }),
		emitter.WithNegotiation(script.Negotiation), emitter.WithObserver(f.obs),
		emitter.WithSummaryPolicy(emitter.AllSummaries))
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			s := em.Session(fmt.Sprint("s", i))
			for range perSession {
				c, err := s.Start(ctx, emitter.WithTrigger(protocol.Auto))
				if !assert.NoError(t, err, "s.Start") {
					return
				}
				_ = c.Chunk(ctx, protocol.Text("ab"))
				_ = c.Complete(ctx)
			}
		})
	}
	wg.Wait()
	const n = sessions * perSession
	m := f.metrics(t)
	assert.Equal(t, int64(n), m["acpcompact.compaction.settled"][st+"completed,"+tr+"auto"], "settled")
	assert.Equal(t, int64(2*n), m["acpcompact.compaction.summary.size"][""], "summary bytes")
	got := len(f.spans.GetSpans())
	if assert.Equal(t, n, got, "%d spans, %d open", got, f.obs.OpenSpans()) {
		assert.Equal(t, 0, f.obs.OpenSpans(), "%d spans, %d open", got, f.obs.OpenSpans())
	}
}
