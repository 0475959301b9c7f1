package stitch

import (
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/sim/loadgen"
)

// BenchmarkStitch stitches 2,000 overlapping web → app → db requests (about
// 10,000 spans) whose web → app hop lost its context, as one processor round.
func BenchmarkStitch(b *testing.B) {
	cfg := loadgen.DefaultConfig()
	cfg.MinGap, cfg.MaxGap, cfg.Separation = 2*time.Millisecond, 6*time.Millisecond, 2*time.Millisecond
	plan, err := loadgen.Generate(cfg, 2000)
	if err != nil {
		b.Fatal(err)
	}
	input := ptrace.NewTraces()
	loadgen.AppendOTLP(input, plan, loadgen.NewIDs(1))
	spans := input.SpanCount()
	opt := DefaultOptions()
	opt.Patterns = false
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		td := ptrace.NewTraces()
		input.CopyTo(td)
		s, err := New(opt)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		s.Stitch(td)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
}
