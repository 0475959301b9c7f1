package spectral

import (
	"errors"
	"fmt"
	"math"
)

// DefaultK is the paper's minimum number of requests per bin (§4).
const DefaultK = 8

// BinSizing is step 1 of the training phase (paper 000 §3): the mean and
// standard deviation of the time that k consecutive requests span, and the
// sampling interval ΔTs = mean + 3σ derived from them, so that a bin holds at
// least k requests with high probability (0.999 for normal intervals).
type BinSizing struct {
	K                   int     `json:"k"`
	IntervalMeanSeconds float64 `json:"interval_mean_seconds"`
	IntervalStdSeconds  float64 `json:"interval_std_seconds"`
	Intervals           int     `json:"intervals"`
	BinSeconds          float64 `json:"bin_seconds"`
}

// SizeBins computes ΔTs from request times sorted in ascending order. Every
// window of k consecutive requests counts (t[i+k] − t[i] for each i), which
// estimates the same mean and spread as disjoint windows with less variance.
// It needs at least k+2 requests, so that the spread has two windows.
func SizeBins(times []float64, k int) (BinSizing, error) {
	if k < 1 {
		return BinSizing{}, fmt.Errorf("k must be ≥ 1, got %d", k)
	}
	n := len(times) - k
	if n < 2 {
		return BinSizing{}, fmt.Errorf("sizing bins for k=%d needs at least %d requests, have %d", k, k+2, len(times))
	}
	var sum, sumsq float64
	for i := 0; i < n; i++ {
		d := times[i+k] - times[i]
		if d < 0 {
			return BinSizing{}, errors.New("request times are not sorted")
		}
		sum += d
	}
	mean := sum / float64(n)
	for i := 0; i < n; i++ {
		d := times[i+k] - times[i] - mean
		sumsq += d * d
	}
	std := math.Sqrt(sumsq / float64(n-1))
	s := BinSizing{K: k, IntervalMeanSeconds: mean, IntervalStdSeconds: std, Intervals: n, BinSeconds: mean + 3*std}
	if !(s.BinSeconds > 0) {
		return s, fmt.Errorf("the %d requests span no time: all share one timestamp", len(times))
	}
	return s, nil
}

// Bins accumulates irregular samples into a regular series: the count, sum
// and sum of squares of the response times whose time falls in
// [Start + i·Width, Start + (i+1)·Width). These are sufficient statistics, so
// Bins from shards of the same grid merge exactly.
type Bins struct {
	Start, Width float64
	Count        []int
	Sum, SumSq   []float64
	Outside      int // samples that fell before Start or after the last bin
}

// NewBins returns n empty bins of width seconds from start.
func NewBins(start, width float64, n int) *Bins {
	return &Bins{Start: start, Width: width, Count: make([]int, n), Sum: make([]float64, n), SumSq: make([]float64, n)}
}

// Len is the number of bins.
func (b *Bins) Len() int { return len(b.Count) }

// Index returns the bin of time t, or −1 outside the grid.
func (b *Bins) Index(t float64) int {
	if !(t >= b.Start) {
		return -1
	}
	i := int(math.Floor((t - b.Start) / b.Width))
	if i >= len(b.Count) {
		return -1
	}
	return i
}

// Add puts one response time in the bin of t and reports whether t was inside.
func (b *Bins) Add(t, ms float64) bool {
	i := b.Index(t)
	if i < 0 {
		b.Outside++
		return false
	}
	b.Count[i]++
	b.Sum[i] += ms
	b.SumSq[i] += ms * ms
	return true
}

// Merge adds the statistics of o, which must have the same grid.
func (b *Bins) Merge(o *Bins) error {
	if o.Start != b.Start || o.Width != b.Width || len(o.Count) != len(b.Count) {
		return errors.New("bins: merging different grids")
	}
	for i := range b.Count {
		b.Count[i] += o.Count[i]
		b.Sum[i] += o.Sum[i]
		b.SumSq[i] += o.SumSq[i]
	}
	b.Outside += o.Outside
	return nil
}

// Samples is the number of samples inside the grid.
func (b *Bins) Samples() int {
	n := 0
	for _, c := range b.Count {
		n += c
	}
	return n
}

// Series is a regular time series made from bins.
type Series struct {
	// Values holds the mean response time of each bin, empty bins filled.
	Values []float64
	// Empty is the number of bins that held no sample and were filled.
	Empty int
	// Samples is the number of samples in the series.
	Samples int
}

// MaxEmptyFraction is the largest share of empty bins a series may have. A
// series with more is refused: interpolating most of a series would make
// its spectrum up.
const MaxEmptyFraction = 0.5

// ErrTooSparse is returned for a series with more than MaxEmptyFraction of
// its bins empty.
var ErrTooSparse = errors.New("too sparse")

// Series returns the mean of each bin, with empty bins filled by the policy
// of FillEmpty.
func (b *Bins) Series() (Series, error) {
	values, empty, err := FillEmpty(b.Sum, b.Count)
	s := Series{Values: values, Empty: empty, Samples: b.Samples()}
	if err != nil {
		return s, err
	}
	if float64(empty) > MaxEmptyFraction*float64(len(values)) {
		return s, fmt.Errorf("%w: %d of %d bins are empty (at most %.0f%% may be)", ErrTooSparse, empty, len(values), 100*MaxEmptyFraction)
	}
	return s, nil
}

// FillEmpty turns per-bin sums and counts into per-bin means. The empty-bin
// policy: an empty bin takes the value linearly interpolated between the
// nearest non-empty bins on either side; empty bins before the first (after
// the last) non-empty bin take its value. Interpolation keeps the shape of a
// square wave that is many bins long (the spectral estimate keeps ≥ 8 bins
// per period) where filling with the series mean would shrink the injected
// amplitude by the share of empty bins, and filling with zero would inject a
// spike. It returns the number of empty bins, and an error if all are.
func FillEmpty(sum []float64, count []int) ([]float64, int, error) {
	n := len(count)
	out := make([]float64, n)
	last := -1 // last non-empty bin
	empty := 0
	for i := 0; i < n; i++ {
		if count[i] == 0 {
			empty++
			continue
		}
		out[i] = sum[i] / float64(count[i])
		switch {
		case last < 0:
			for j := 0; j < i; j++ {
				out[j] = out[i]
			}
		case last < i-1:
			for j := last + 1; j < i; j++ {
				w := float64(j-last) / float64(i-last)
				out[j] = (1-w)*out[last] + w*out[i]
			}
		}
		last = i
	}
	if last < 0 {
		return out, empty, errors.New("every bin is empty")
	}
	for j := last + 1; j < n; j++ {
		out[j] = out[last]
	}
	return out, empty, nil
}
