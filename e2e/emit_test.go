package e2e

import (
	"context"
	"sort"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierscope/tierscope/internal/sim/loadgen"
)

// Emitted is the truth about one span the SDK sent.
type Emitted struct {
	Request int // index of the request (plan trace)
	Index   int // index in the plan trace's Spans
	Plan    loadgen.PlannedSpan
	TraceID string // as emitted, hex
	SpanID  string
	Parent  string // parentSpanId as emitted ("" for a root)
	// TrueParent is the span ID of the causal parent ("" for the request's root);
	// it differs from Parent exactly when the span's context was dropped.
	TrueParent string
	// TrueTraceID is the trace the span belongs to once stitched: its request's root trace.
	TrueTraceID string
}

// Truth indexes what was emitted.
type Truth struct {
	Spans  []Emitted
	BySpan map[string]*Emitted
	// Requests[i] lists request i's spans in plan order.
	Requests [][]*Emitted
}

// Emit replays the plan through the OpenTelemetry Go SDK: one TracerProvider
// (with its own OTLP/gRPC exporter) per service instance, resources carrying
// service.name and service.instance.id. Spans start and end in global time
// order, as concurrent requests would, with explicit timestamps; a span whose
// context was dropped starts a new root. It returns after every provider has
// flushed and shut down.
func Emit(t *testing.T, endpoint string, plan []loadgen.Trace) *Truth {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	providers := map[string]*sdktrace.TracerProvider{}
	tracers := map[string]trace.Tracer{}
	tracerFor := func(s loadgen.PlannedSpan) trace.Tracer {
		if tr, ok := tracers[s.Instance]; ok {
			return tr
		}
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(endpoint), otlptracegrpc.WithInsecure())
		if err != nil {
			t.Fatalf("otlptracegrpc: %v", err)
		}
		res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
			attribute.String("service.name", s.Service),
			attribute.String("service.instance.id", s.Instance),
			attribute.String("host.name", s.Instance),
		))
		if err != nil {
			t.Fatal(err)
		}
		tp := sdktrace.NewTracerProvider(
			sdktrace.WithResource(res),
			sdktrace.WithSampler(sdktrace.AlwaysSample()),
			sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(100*time.Millisecond), sdktrace.WithMaxQueueSize(20000)),
		)
		providers[s.Instance] = tp
		tracers[s.Instance] = tp.Tracer("github.com/tierscope/tierscope/e2e")
		return tracers[s.Instance]
	}

	type event struct {
		at       time.Time
		end      bool
		req, idx int
	}
	var events []event
	for i, tr := range plan {
		for j, s := range tr.Spans {
			events = append(events, event{at: s.Start, req: i, idx: j}, event{at: s.End, end: true, req: i, idx: j})
		}
	}
	sort.SliceStable(events, func(a, b int) bool { return events[a].at.Before(events[b].at) })

	ctxs := make([][]context.Context, len(plan))
	live := make([][]trace.Span, len(plan))
	for i, tr := range plan {
		ctxs[i] = make([]context.Context, len(tr.Spans))
		live[i] = make([]trace.Span, len(tr.Spans))
	}
	for _, ev := range events {
		s := plan[ev.req].Spans[ev.idx]
		if ev.end {
			live[ev.req][ev.idx].End(trace.WithTimestamp(s.End))
			continue
		}
		parent := context.Background()
		if s.Parent >= 0 && !s.ContextDropped {
			parent = ctxs[ev.req][s.Parent]
			if parent == nil {
				t.Fatalf("request %d span %d starts before its parent", ev.req, ev.idx)
			}
		}
		kind := trace.SpanKindServer
		if s.Kind == loadgen.KindClient {
			kind = trace.SpanKindClient
		}
		attrs := make([]attribute.KeyValue, 0, len(s.Attrs))
		for _, a := range s.Attrs {
			if a.IsInt {
				attrs = append(attrs, attribute.Int64(a.Key, a.Int))
			} else {
				attrs = append(attrs, attribute.String(a.Key, a.Str))
			}
		}
		c, sp := tracerFor(s).Start(parent, s.Name,
			trace.WithSpanKind(kind), trace.WithTimestamp(s.Start), trace.WithAttributes(attrs...))
		ctxs[ev.req][ev.idx], live[ev.req][ev.idx] = c, sp
	}
	for inst, tp := range providers {
		if err := tp.ForceFlush(ctx); err != nil {
			t.Fatalf("flush %s: %v", inst, err)
		}
		if err := tp.Shutdown(ctx); err != nil {
			t.Fatalf("shutdown %s: %v", inst, err)
		}
	}

	truth := &Truth{BySpan: map[string]*Emitted{}, Requests: make([][]*Emitted, len(plan))}
	for i, tr := range plan {
		for j, s := range tr.Spans {
			sc := live[i][j].SpanContext()
			e := Emitted{Request: i, Index: j, Plan: s, TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String()}
			if s.Parent >= 0 {
				psc := live[i][s.Parent].SpanContext()
				e.TrueParent = psc.SpanID().String()
				if !s.ContextDropped {
					e.Parent = e.TrueParent
				}
			}
			e.TrueTraceID = live[i][0].SpanContext().TraceID().String()
			truth.Spans = append(truth.Spans, e)
		}
	}
	for k := range truth.Spans {
		e := &truth.Spans[k]
		truth.BySpan[e.SpanID] = e
		truth.Requests[e.Request] = append(truth.Requests[e.Request], e)
	}
	if len(truth.BySpan) != len(truth.Spans) {
		t.Fatalf("the SDK produced duplicate span IDs")
	}
	return truth
}
