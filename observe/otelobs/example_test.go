package otelobs_test

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/acpcompact/acpcompact/capability"
	"github.com/acpcompact/acpcompact/emitter"
	"github.com/acpcompact/acpcompact/observe"
	"github.com/acpcompact/acpcompact/observe/otelobs"
	"github.com/acpcompact/acpcompact/protocol"
)

func Example() {
	// In production these are the application's providers with real
	// exporters; in-memory ones make the output printable.
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	obs, err := otelobs.New(otelobs.WithMeterProvider(mp), otelobs.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}
	discard := emitter.NotifierFunc(func(context.Context, string, any) error { return nil })
	em := emitter.New(discard,
		emitter.WithNegotiation(capability.Negotiation{Version: 1, Compaction: true}),
		emitter.WithObserver(obs))

	// agentkit attaches the prompt's _meta trace context like this.
	ctx := observe.WithTrace(context.Background(), observe.TraceContext{
		Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	})
	c, _ := em.Session("sess_1").Start(ctx, emitter.WithID("cmp_001"), emitter.WithTrigger(protocol.Auto), emitter.UserDisplayable())
	_ = c.Chunk(ctx, protocol.Text("## Retained context\n"))
	_ = c.Complete(ctx)

	s := spans.GetSpans()[0]
	fmt.Println(s.Name, "in trace", s.SpanContext.TraceID())
	for _, kv := range s.Attributes {
		fmt.Printf("  %s=%s\n", kv.Key, kv.Value.String())
	}

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(ctx, &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "acpcompact.compaction.settled" {
			p := sum.DataPoints[0]
			fmt.Println(m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value)
		}
	}
	// Output:
	// compaction in trace 4bf92f3577b34da6a3ce929d0e0e4736
	//   gen_ai.conversation.compacted=true
	//   gen_ai.conversation.id=sess_1
	//   acpcompact.session.id=sess_1
	//   acpcompact.compaction.id=cmp_001
	//   acpcompact.compaction.trigger=auto
	//   acpcompact.compaction.status=completed
	//   acpcompact.compaction.chunks=1
	//   acpcompact.compaction.summary.size=20
	// acpcompact.compaction.settled acpcompact.compaction.status=completed,acpcompact.compaction.trigger=auto 1
}
