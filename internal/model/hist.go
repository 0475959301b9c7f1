package model

import (
	"encoding/json"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/stats"
)

// Bins is the layout of every histogram of the model, stats.LatencyBins: a
// database answering in 300 µs reads 300 µs, not "under 1 ms".
var Bins = stats.LatencyBins

const (
	belowMs = stats.BinsBelowMs
	// layoutMicro marks a histogram binned with Bins. Layout 0 marks one
	// stored before the bins below 1 ms existed, whose bin 0 held every
	// duration under 1 ms; it is upgraded when read (upgrade).
	layoutMicro = 2
	// legacyUnderMs is where a legacy bin 0 lands: the bin of 0.5 ms, the
	// value legacy quantiles read for it.
	legacyUnderMs = belowMs - 14
)

// Hist is a log-binned histogram of durations that merges exactly: counts are
// integers and the sum, minimum and maximum are integer nanoseconds, so any
// split of a stream over shards, windows or merge orders gives the same bits.
// Only the span of bins that received values is stored.
type Hist struct {
	Layout uint8    `json:"layout,omitempty"`
	First  int32    `json:"first,omitempty"`
	Counts []uint64 `json:"counts,omitempty"`
	N      uint64   `json:"n,omitempty"`
	SumNs  int64    `json:"sum_ns,omitempty"`
	MinNs  int64    `json:"min_ns,omitempty"`
	MaxNs  int64    `json:"max_ns,omitempty"`
}

// Add records one duration. Negative durations (clock skew) count as 0.
func (h *Hist) Add(ns int64) { h.AddN(ns, 1) }

// AddN records n equal durations.
func (h *Hist) AddN(ns int64, n uint64) {
	if n == 0 {
		return
	}
	if ns < 0 {
		ns = 0
	}
	h.addCount(int32(Bins.Index(float64(ns)/1e6)), n)
	if h.N == 0 || ns < h.MinNs {
		h.MinNs = ns
	}
	if h.N == 0 || ns > h.MaxNs {
		h.MaxNs = ns
	}
	h.N += n
	h.SumNs += ns * int64(n)
}

func (h *Hist) addCount(bin int32, c uint64) {
	first, counts := stats.AddToBins(int(h.First), h.Counts, int(bin), c)
	h.First, h.Counts, h.Layout = int32(first), counts, layoutMicro
}

// upgrade rebins a histogram stored in the legacy layout (no bins below 1
// ms): every bin moves up by the bins below, and the old bin 0 (all of
// [0, 1 ms)) goes to the bin of 0.5 ms, which legacy quantiles read it as.
func (h *Hist) upgrade() {
	if h.Layout == layoutMicro || h.N == 0 {
		h.Layout = layoutMicro
		return
	}
	first, counts := h.First, h.Counts
	h.First, h.Counts = 0, nil
	for i, c := range counts {
		if c == 0 {
			continue
		}
		bin := first + int32(i)
		if bin == 0 {
			bin = legacyUnderMs - belowMs
		}
		h.addCount(bin+belowMs, c)
	}
	h.Layout = layoutMicro
}

// UnmarshalJSON reads a histogram and upgrades a legacy one.
func (h *Hist) UnmarshalJSON(b []byte) error {
	type plain Hist
	if err := json.Unmarshal(b, (*plain)(h)); err != nil {
		return err
	}
	h.upgrade()
	return nil
}

// Merge adds o's values.
func (h *Hist) Merge(o *Hist) {
	if o.N == 0 {
		return
	}
	for i, c := range o.Counts {
		if c != 0 {
			h.addCount(o.First+int32(i), c)
		}
	}
	if h.N == 0 || o.MinNs < h.MinNs {
		h.MinNs = o.MinNs
	}
	if h.N == 0 || o.MaxNs > h.MaxNs {
		h.MaxNs = o.MaxNs
	}
	h.N += o.N
	h.SumNs += o.SumNs
}

// MeanMs is the exact mean in milliseconds (0 when empty).
func (h *Hist) MeanMs() float64 {
	if h.N == 0 {
		return 0
	}
	return float64(h.SumNs) / float64(h.N) / 1e6
}

// QuantileMs is the q-quantile in milliseconds, read as stats.LogHistogram
// reads it: the geometric middle of its bin, clamped to the exact extremes.
func (h *Hist) QuantileMs(q float64) float64 {
	lo, hi := float64(h.MinNs)/1e6, float64(h.MaxNs)/1e6
	switch {
	case h.N == 0:
		return 0
	case q <= 0:
		return lo
	case q >= 1:
		return hi
	}
	return stats.QuantileOfBins(Bins, int(h.First), h.Counts, h.N, q, lo, hi)
}

// Quantiles summarises the histogram for the API (nil when empty).
func (h *Hist) Quantiles() *api.Quantiles {
	if h.N == 0 {
		return nil
	}
	return &api.Quantiles{Mean: h.MeanMs(), P50: h.QuantileMs(0.5), P90: h.QuantileMs(0.9), P99: h.QuantileMs(0.99)}
}
