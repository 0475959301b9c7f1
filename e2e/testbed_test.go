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
	thresholds := []float64{0, 0.5, 0.9, 0.95, stitch.DefaultMinConfidence, 0.99}
	written, writtenRight := make([]int, len(thresholds)), make([]int, len(thresholds))
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
		inferred, _ := attrString(sp, stitch.AttrInferredParent)
		if inferred == truth && sp.ParentSpanID().String() == truth {
			right++
		}
		// What other thresholds would have written, from the confidence every
		// inferred parent carries.
		if conf, ok := sp.Attributes().Get(stitch.AttrInferredConfidence); ok && inferred != "" {
			for i, th := range thresholds {
				if conf.Double() >= th {
					written[i]++
					if inferred == truth {
						writtenRight[i]++
					}
				}
			}
		}
	}
	for i, th := range thresholds {
		t.Logf("at confidence %.2f: %d written, %d right (%.2f%% of the dropped hops, precision %.2f%%)", th, written[i], writtenRight[i],
			100*float64(writtenRight[i])/float64(max(links, 1)), 100*float64(writtenRight[i])/float64(max(written[i], 1)))
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
	// Precision first: what the default writes must be right; how much it
	// writes falls with the machine's load (98.3% here at a quiet 290
	// requests/s and threshold 0.9, 84.8% with 0.98 on a host at load 20, where
	// the best candidates were still 95% right).
	best := writtenRight[0]
	// 99.07–99.68% on a host at load 20–31; 97% leaves room for a worse host.
	if links == 0 || float64(writtenRight[4]) < 0.97*float64(written[4]) {
		t.Errorf("at the default confidence %v, %d of %d parents written are right; want ≥ 97%%", stitch.DefaultMinConfidence, writtenRight[4], written[4])
	}
	if float64(right) < 0.8*float64(links) || float64(best) < 0.93*float64(links) {
		t.Errorf("%d of %d dropped hops repaired (want ≥ 80%%), best candidate right for %d (want ≥ 93%%)", right, links, best)
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
