package gradient

import (
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/spectral"
)

// BenchmarkObserveTraining is the per-sample cost of the experiment while it
// trains (bins sized), with the SLO guard on: the coordinator's hot path.
func BenchmarkObserveTraining(b *testing.B) {
	x, err := NewExperiment(Config{Target: "T", CalibrationRequests: 20, Guard: Guard{P99Ms: 1000},
		Elements: []Element{{ID: "a->b", Basis: Link()}}})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		x.Observe(spectral.Sample{Time: 1000 + float64(i)*0.1, Transaction: "T", Ms: 100})
	}
	x.Tick(time.Unix(1004, 0))
	t := 1004.0
	txs := []string{"T", "U", "V"}
	i := 0
	for b.Loop() {
		x.Observe(spectral.Sample{Time: t, Transaction: txs[i%3], Ms: 100})
		t += 0.001
		i++
	}
}
