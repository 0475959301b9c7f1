package perfmodelexporter

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/sim/loadgen"
)

// BenchmarkIngest measures spans/s through ConsumeTraces and trace completion
// into the model (one goroutine: per core).
func BenchmarkIngest(b *testing.B) {
	cfg := loadgen.DefaultConfig()
	cfg.DropFraction = 0
	cfg.Start = loadStart
	traces, err := loadgen.Generate(cfg, 2000)
	require.NoError(b, err)
	ids := loadgen.NewIDs(1)
	var batches []ptrace.Traces
	spans := 0
	for i := 0; i < len(traces); i += 100 {
		td := ptrace.NewTraces()
		loadgen.AppendOTLP(td, traces[i:min(i+100, len(traces))], ids)
		spans += td.SpanCount()
		batches = append(batches, td)
	}
	te := startEngine(&testing.T{}, "sqlite://"+filepath.Join(b.TempDir(), "b.db"), "b", loadStart.Add(time.Minute), nil)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, td := range batches {
			_ = te.ConsumeTraces(context.Background(), td)
		}
		te.completeAll()
	}
	b.ReportMetric(float64(b.N*spans)/b.Elapsed().Seconds(), "spans/s")
}
