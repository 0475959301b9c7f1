// Package stats holds the mergeable sufficient statistics that every model shares:
// exponentially binned histograms with exact counts and sums.
//
// The binning follows Aguilera et al. (paper 001, §5.1.1.2): bins indexed by
// log_b(v/min), with b = 1.05 and 340 bins covering 1 ms to about 4 hours, so a
// quantile read from a bin is within ±2.5% of the true value.
package stats

import (
	"fmt"
	"math"
)

// LogBins maps non-negative values to exponentially sized bins. Bin 0 holds
// [0, Min), bin i ≥ 1 holds [Min·Base^(i-1), Min·Base^i), and the last bin is open
// ended. Values below zero fall into bin 0.
type LogBins struct {
	Base  float64 // growth factor between bin edges, > 1
	Min   float64 // upper edge of bin 0, > 0, in the caller's unit
	Count int     // number of bins, ≥ 2
}

// DefaultLogBins is the paper's layout in milliseconds: base 1.05, 340 bins from 1 ms.
var DefaultLogBins = LogBins{Base: 1.05, Min: 1, Count: 340}

// Validate reports a layout that cannot index values.
func (l LogBins) Validate() error {
	switch {
	case !(l.Base > 1) || math.IsInf(l.Base, 0):
		return fmt.Errorf("log bins: base must be > 1, got %v", l.Base)
	case !(l.Min > 0) || math.IsInf(l.Min, 0):
		return fmt.Errorf("log bins: min must be > 0, got %v", l.Min)
	case l.Count < 2:
		return fmt.Errorf("log bins: count must be ≥ 2, got %d", l.Count)
	}
	return nil
}

// Index returns the bin of v.
func (l LogBins) Index(v float64) int {
	if !(v >= l.Min) { // also catches NaN
		return 0
	}
	i := int(math.Log(v/l.Min)/math.Log(l.Base)) + 1
	if i >= l.Count || i < 0 {
		return l.Count - 1
	}
	return i
}

// Lower is the lower edge of bin i.
func (l LogBins) Lower(i int) float64 {
	if i <= 0 {
		return 0
	}
	return l.Min * math.Pow(l.Base, float64(i-1))
}

// Upper is the upper edge of bin i (+Inf for the last bin).
func (l LogBins) Upper(i int) float64 {
	if i >= l.Count-1 {
		return math.Inf(1)
	}
	return l.Min * math.Pow(l.Base, float64(i))
}

// LogHistogram counts values in LogBins exactly and keeps their count, sum, minimum
// and maximum. Only the range of bins that received values is stored, so a
// histogram of values that cluster costs tens of words, not Count.
// The zero value is not usable; call NewLogHistogram.
type LogHistogram struct {
	bins   LogBins
	first  int      // bin index of counts[0]
	counts []uint64 // counts[i] is the count of bin first+i
	n      uint64
	sum    float64
	min    float64
	max    float64
}

// NewLogHistogram returns an empty histogram over the given bins.
func NewLogHistogram(bins LogBins) *LogHistogram {
	return &LogHistogram{bins: bins, min: math.Inf(1), max: math.Inf(-1)}
}

// Add records one value.
func (h *LogHistogram) Add(v float64) {
	h.addCount(h.bins.Index(v), 1)
	h.n++
	h.sum += v
	h.min = math.Min(h.min, v)
	h.max = math.Max(h.max, v)
}

func (h *LogHistogram) addCount(bin int, c uint64) {
	h.first, h.counts = AddToBins(h.first, h.counts, bin, c)
}

// AddToBins adds c to bin of a sparse run of bin counts (counts[i] is bin
// first+i), growing the run as needed, and returns the run. It is the storage
// of LogHistogram, shared by histograms that keep other sums.
func AddToBins(first int, counts []uint64, bin int, c uint64) (int, []uint64) {
	switch {
	case len(counts) == 0:
		first = bin
		counts = append(counts, 0)
	case bin < first:
		grown := make([]uint64, first-bin+len(counts))
		copy(grown[first-bin:], counts)
		counts, first = grown, bin
	case bin >= first+len(counts):
		counts = append(counts, make([]uint64, bin-first-len(counts)+1)...)
	}
	counts[bin-first] += c
	return first, counts
}

// Merge adds all of o's values. Both histograms must share one LogBins layout.
func (h *LogHistogram) Merge(o *LogHistogram) error {
	if h.bins != o.bins {
		return fmt.Errorf("log histogram: cannot merge layouts %+v and %+v", h.bins, o.bins)
	}
	for i, c := range o.counts {
		if c != 0 {
			h.addCount(o.first+i, c)
		}
	}
	h.n += o.n
	h.sum += o.sum
	h.min = math.Min(h.min, o.min)
	h.max = math.Max(h.max, o.max)
	return nil
}

// Count is the number of values recorded.
func (h *LogHistogram) Count() uint64 { return h.n }

// Sum is the exact sum of the values recorded.
func (h *LogHistogram) Sum() float64 { return h.sum }

// Mean is the exact mean, 0 when empty.
func (h *LogHistogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Min and Max are the exact extremes (0 when empty).
func (h *LogHistogram) Min() float64 {
	if h.n == 0 {
		return 0
	}
	return h.min
}

// Max is the largest value recorded, 0 when empty.
func (h *LogHistogram) Max() float64 {
	if h.n == 0 {
		return 0
	}
	return h.max
}

// Quantile returns the q-quantile: the exact extreme for q ≤ 0 or q ≥ 1, else the geometric middle of the bin that
// holds the value of rank ⌈q·n⌉, clamped to the exact minimum and maximum. Its
// relative error is at most (√Base − 1), about 2.5% for base 1.05.
func (h *LogHistogram) Quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return h.min
	}
	if q >= 1 {
		return h.max
	}
	return QuantileOfBins(h.bins, h.first, h.counts, h.n, q, h.min, h.max)
}

// QuantileOfBins is LogHistogram.Quantile over a sparse run of n counts whose
// exact extremes are lo and hi, for 0 < q < 1.
func QuantileOfBins(bins LogBins, first int, counts []uint64, n uint64, q, lo, hi float64) float64 {
	rank := max(uint64(math.Ceil(q*float64(n))), 1)
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen < rank {
			continue
		}
		bin := first + i
		bl, bh := bins.Lower(bin), bins.Upper(bin)
		var v float64
		switch {
		case bin == 0:
			v = bh / 2
		case math.IsInf(bh, 1):
			v = bl
		default:
			v = math.Sqrt(bl * bh)
		}
		return math.Max(lo, math.Min(hi, v))
	}
	return hi
}
