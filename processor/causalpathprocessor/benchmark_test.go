package causalpathprocessor

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/tierscope/tierscope/internal/sim/loadgen"
	"github.com/tierscope/tierscope/processor/causalpathprocessor/internal/metadata"
)

// BenchmarkProcessor measures the whole cycle on one goroutine: buffering, a
// release round every 10 batches that stitches them with the younger batches as
// context, path tagging and forwarding. Each batch holds 100 broken web → app calls
// (300 spans), interleaved in time.
func BenchmarkProcessor(b *testing.B) {
	cfg := testConfig(time.Second, 100_000)
	proc, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	p := proc.(*causalPathProcessor)
	const callsPerBatch = 100
	batches := make([]ptrace.Traces, 64)
	fills := 0
	fill := func() {
		for i := range batches {
			web, app := ptrace.NewTraces(), ptrace.NewTraces()
			for c := 0; c < callsPerBatch; c++ {
				n := (fills*len(batches)+i)*callsPerBatch + c // time moves on across refills
				call(web, app, n, time.Unix(1700000000, 0).Add(time.Duration(n)*7*time.Millisecond))
			}
			app.ResourceSpans().MoveAndAppendTo(web.ResourceSpans())
			batches[i] = web
		}
		fills++
	}
	runCycle(b, p, batches, fill, 100*time.Millisecond, 10)
}

// BenchmarkProcessorLoad runs the cycle of BenchmarkProcessor on the spans that
// `make bench-causalpath` sends (internal/sim/loadgen: web → app → database
// with the attributes of current semantic conventions, half of the web → app
// hops without context), in requests of 64 traces: the attribute reading and
// writing that the collector does per span weigh here as they do there. A round
// releases 50 requests with 50 younger ones as context.
func BenchmarkProcessorLoad(b *testing.B) {
	cfg := testConfig(time.Second, 1_000_000)
	proc, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	p := proc.(*causalPathProcessor)
	lcfg := loadgen.DefaultConfig()
	lcfg.DropFraction = 0.5
	gen, err := loadgen.NewGenerator(lcfg)
	if err != nil {
		b.Fatal(err)
	}
	ids := loadgen.NewIDs(1)
	const tracesPerRequest = 64
	batches := make([]ptrace.Traces, 200)
	fill := func() {
		for i := range batches {
			batches[i] = ptrace.NewTraces()
			loadgen.AppendOTLP(batches[i], gen.Next(tracesPerRequest), ids)
		}
	}
	runCycle(b, p, batches, fill, 20*time.Millisecond, 50)
}

// runCycle feeds the batches in turn (refilled once all were sent), the clock
// moving step per batch, and releases a round every releaseEvery batches; it
// reports spans per second and nanoseconds per span.
func runCycle(b *testing.B, p *causalPathProcessor, batches []ptrace.Traces, fill func(), step time.Duration, releaseEvery int) {
	clock := time.Unix(1800000000, 0)
	p.now = func() time.Time { return clock }
	fill()
	spans := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%len(batches) == 0 && i > 0 {
			b.StopTimer()
			fill()
			b.StartTimer()
		}
		spans += batches[i%len(batches)].SpanCount()
		if err := p.ConsumeTraces(context.Background(), batches[i%len(batches)]); err != nil {
			b.Fatal(err)
		}
		clock = clock.Add(step)
		if i%releaseEvery == releaseEvery-1 {
			if err := p.release(context.Background(), false); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(spans)/b.Elapsed().Seconds(), "spans/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(spans), "ns/span")
}
