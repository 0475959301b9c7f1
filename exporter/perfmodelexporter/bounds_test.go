package perfmodelexporter

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/sim/loadgen"
)

// Under ten times the load its bounds allow, the engine's memory stays flat:
// open traces never exceed max_open_traces (the oldest complete early) and
// the heap after 10× the load is within a small margin of the heap after 1×.
func TestBoundedMemoryUnderTenfoldLoad(t *testing.T) {
	const bound = 2000
	heapAfter := func(multiple int) (uint64, *testEngine) {
		te := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"), "a", loadStart, func(c *Config) {
			c.MaxOpenTraces = bound
			c.TraceWait = time.Hour // nothing completes by time: only the bound does
		})
		cfg := loadgen.DefaultConfig()
		cfg.DropFraction = 0
		cfg.Start = loadStart
		gen, err := loadgen.NewGenerator(cfg)
		require.NoError(t, err)
		ids := loadgen.NewIDs(1)
		for range multiple * bound / 100 {
			td := ptrace.NewTraces()
			loadgen.AppendOTLP(td, gen.Next(100), ids)
			require.NoError(t, te.ConsumeTraces(context.Background(), td))
			require.LessOrEqual(t, te.ingest.OpenTraces(), bound)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc, te
	}
	h1, _ := heapAfter(1)
	h10, te := heapAfter(10)
	early := te.ingest.CompletedEarly()
	t.Logf("heap after 1× the bound: %d KiB; after 10×: %d KiB; traces completed early: %d", h1>>10, h10>>10, early)
	require.Equal(t, int64(9*bound), early)
	require.Less(t, float64(h10), 1.5*float64(h1)+8<<20, "heap grows with load")
}
