//go:build long

package causal_test

// Sweeps that reproduce the curves of paper 001 figures 19, 21 and 22 on generated
// traces. They take about a minute: run them with `make e2e-long`.

import (
	"fmt"
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/causal"
	"github.com/tierscope/tierscope/internal/maketrace"
)

// Figure 19: accuracy against parallelism, by scaling every tracelet's instances.
func TestFigure19Parallelism(t *testing.T) {
	for _, config := range []string{"multitier", "children-parallel", "children-0-2", "children-d-cc", "penalty-breaker"} {
		for _, load := range []float64{0.25, 0.5, 1, 2, 4} {
			tr := generateScaled(t, config+".yaml", load, maketrace.Options{Seed: 1})
			r := infer(t, tr, causal.DefaultNestingConfig())
			t.Logf("fig19\t%s\tload %.2f\tparallelism %.2f\tFN instances %.2f%%\tFP patterns %d\ttop-10 FN %d",
				config, load, r.nesting.MeanParallelism(), 100*r.acc.FalseNegativeInstanceRate, r.acc.FalsePositivePatterns, r.acc.TopNFalseNegatives[9])
		}
	}
}

// Figure 21: accuracy against the drop rate of a sniffer with a 64-message queue.
func TestFigure21MessageLoss(t *testing.T) {
	for _, rate := range []float64{0, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1} {
		tr := generate(t, "multitier.yaml", maketrace.Options{Seed: 1, DropRate: rate})
		r := infer(t, tr, causal.DefaultNestingConfig())
		t.Logf("fig21\tdrop rate %.1f%%\tFN instances %.2f%%\ttop-10 FN %d", 100*rate, 100*r.acc.FalseNegativeInstanceRate, r.acc.TopNFalseNegatives[9])
	}
}

// Figure 22: accuracy against WS2's clock skew, without compensation, with a 30 ms
// skew window, with the window and smoothing, and with WS2's clock slow instead.
func TestFigure22ClockSkew(t *testing.T) {
	for _, skew := range []time.Duration{0, 10, 20, 30, 40, 50, 60} {
		skew *= time.Millisecond
		for _, c := range []struct {
			name   string
			sign   time.Duration
			window time.Duration
			smooth float64
		}{
			{"no comp", 1, 0, 0},
			{"comp", 1, 30 * time.Millisecond, 0},
			{"comp+smooth", 1, 30 * time.Millisecond, 2},
			{"rev, comp+smooth", -1, 30 * time.Millisecond, 2},
		} {
			tr := generate(t, "multitier.yaml", maketrace.Options{Seed: 1, Skews: []maketrace.Skew{{Node: "WS2", Offset: c.sign * skew}}})
			cfg := causal.DefaultNestingConfig()
			cfg.SkewWindow, cfg.SmoothSigma = c.window, c.smooth
			r := infer(t, tr, cfg)
			t.Logf("fig22\tskew %v\t%-16s\tFN instances %.2f%%\ttop-10 FN %d", skew, c.name, 100*r.acc.FalseNegativeInstanceRate, r.acc.TopNFalseNegatives[9])
		}
	}
}

func generateScaled(t *testing.T, config string, load float64, opt maketrace.Options) *causal.Trace {
	t.Helper()
	data := readTestdata(t, config)
	cfg, err := maketrace.ParseConfig(data, config)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Tracelets {
		cfg.Tracelets[i].Instances = max(1, int(float64(cfg.Tracelets[i].Instances)*load+0.5))
	}
	tr, _, err := maketrace.Generate(cfg, opt)
	if err != nil {
		t.Fatal(fmt.Errorf("%s at load %v: %w", config, load, err))
	}
	return tr
}
