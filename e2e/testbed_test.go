package e2e

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierscope/tierscope/internal/stitch"
	"github.com/tierscope/tierscope/testbed/config"
	"github.com/tierscope/tierscope/testbed/load"
	"github.com/tierscope/tierscope/testbed/services"
)

// spanCounter counts the spans each tier ends, to know when all have arrived.
type spanCounter struct{ n atomic.Int64 }

func (c *spanCounter) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c *spanCounter) OnEnd(sdktrace.ReadOnlySpan)                     { c.n.Add(1) }
func (c *spanCounter) Shutdown(context.Context) error                  { return nil }
func (c *spanCounter) ForceFlush(context.Context) error                { return nil }

// The testbed under load, with the web → app hop losing its trace context, sends
// its spans to the real otelcol-tierscope; causalpath must put the app's SERVER
// spans back under the web CLIENT spans that called them. The testbed marks the
// true parent of every span on a dropped hop, so the repair is checked exactly.
func TestTestbedBrokenHopRepaired(t *testing.T) {
	bin := collectorBinary(t)
	requireComponent(t, bin, "processors", "causalpath")
	c := StartCollector(t, Causalpath("reparent"), Batch())

	sent := runTestbedLoad(t, c.Endpoint, []string{"web->app"}, 6*time.Second)

	out := c.WaitForSpans(t, sent, 60*time.Second)
	seen := map[string]int{}
	links, right, untagged := 0, 0, 0
	for _, o := range out {
		sp := o.Span
		seen[sp.SpanID().String()]++
		if _, ok := sp.Attributes().Get(stitch.AttrPathSignature); !ok {
			untagged++
		}
		truth, ok := attrString(sp, stitch.AttrTruthParent)
		if !ok {
			continue
		}
		links++
		if inferred, _ := attrString(sp, stitch.AttrInferredParent); inferred == truth && sp.ParentSpanID().String() == truth {
			right++
		}
	}
	if len(seen) != sent || len(out) != sent {
		t.Fatalf("%d spans sent, %d written, %d distinct", sent, len(out), len(seen))
	}
	if untagged > 0 {
		t.Errorf("%d spans without %s", untagged, stitch.AttrPathSignature)
	}
	if keep := os.Getenv("E2E_KEEP_SPANS"); keep != "" {
		if b, err := os.ReadFile(c.OutFile); err == nil {
			_ = os.WriteFile(keep, b, 0o644)
		}
	}
	t.Logf("dropped web → app hops: %d, repaired to their true parent: %d (%.2f%%)", links, right, 100*float64(right)/float64(links))
	// Measured 98.3–99.2% here (8 users, 20 ms think times: about 290 requests/s
	// on a shared 2-core machine); 97% keeps the test about the repair, not the
	// machine's load.
	if links == 0 || float64(right) < 0.97*float64(links) {
		t.Fatalf("%d of %d dropped hops repaired, want ≥ 97%%", right, links)
	}
}

// runTestbedLoad runs the testbed (web → app ×2 → db, a queue and a worker)
// with the given hops losing their trace context, under 8 closed-loop users
// for duration, its SDKs exporting to the collector at endpoint; it returns the
// number of spans the tiers ended, all flushed by then.
func runTestbedLoad(t *testing.T, endpoint string, dropContext []string, duration time.Duration) int {
	t.Helper()
	return runTestbedLoadMix(t, endpoint, dropContext, duration, "shopping", 8)
}

// runTestbedLoadMix is runTestbedLoad with the load generator's mix and users
// (the nonstationary mix varies both the users and the request mix).
func runTestbedLoadMix(t *testing.T, endpoint string, dropContext []string, duration time.Duration, mix string, users int) int {
	t.Helper()
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.SetDropContext(dropContext); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var (
		mu       sync.Mutex
		counter  spanCounter
		provides []*sdktrace.TracerProvider
	)
	st, err := services.StartStack(services.StackOptions{
		Config: cfg, Version: "v1",
		TracerProvider: func(service, instance string) trace.TracerProvider {
			exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(endpoint), otlptracegrpc.WithInsecure())
			if err != nil {
				t.Errorf("otlptracegrpc: %v", err)
				return nil
			}
			res := resource.NewSchemaless(attribute.String("service.name", service), attribute.String("service.instance.id", instance))
			tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res),
				sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(200*time.Millisecond), sdktrace.WithMaxQueueSize(50000)),
				sdktrace.WithSpanProcessor(&counter))
			mu.Lock()
			provides = append(provides, tp)
			mu.Unlock()
			return tp
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stats, err := load.Run(ctx, load.Options{
		Target: st.WebURL, Mode: "closed", Mix: mix, Users: users, Duration: duration,
		Seed: 1, Classes: cfg.Classes(), ThinkMean: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	closeCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := st.Close(closeCtx); err != nil {
		t.Fatalf("stopping the testbed: %v", err)
	}
	for _, tp := range provides {
		if err := tp.Shutdown(closeCtx); err != nil {
			t.Fatalf("flushing spans: %v", err)
		}
	}
	sent := int(counter.n.Load())
	t.Logf("load: %d requests, %d errors; %d spans sent", stats.Requests, stats.Errors, sent)
	// The nonstationary mix's peaks may time a request out on a busy host;
	// the tests that use it are about the models, not the testbed.
	allowed := int64(0)
	if mix == "nonstationary" {
		allowed = stats.Requests / 100
	}
	if stats.Requests < 100 || stats.Errors > allowed {
		t.Fatalf("the load did not run cleanly: %+v", stats)
	}
	return sent
}
