// Package stats holds the mergeable sufficient statistics that every model shares:
// exponentially binned histograms with exact counts and sums.
//
// The binning follows Aguilera et al. (paper 001, §5.1.1.2): bins indexed by
// log_b(v/min), with b = 1.05 and 340 bins covering 1 ms to about 4 hours, so a
// quantile read from a bin is within ±2.5% of the true value. A layout may add bins
// below min (LogBins.Below) to resolve shorter values without moving any edge above.
package stats

import (
	"fmt"
	"math"
)

// LogBins maps non-negative values to exponentially sized bins. Without Below, bin 0
// holds [0, Min), bin i ≥ 1 holds [Min·Base^(i-1), Min·Base^i), and the last bin is
// open ended. Values below zero fall into bin 0.
//
// Below adds that many bins of the same ratio under Min: bin 0 then holds
// [0, Min·Base^−Below), bins 1..Below the values from there up to Min, and bin
// Below+i what bin i holds without them. Every edge at or above Min stays where it
// was, bit for bit, so a layout extended downwards indexes longer values exactly as
// before and only splits what used to share bin 0.
type LogBins struct {
	Base  float64 // growth factor between bin edges, > 1
	Min   float64 // the edge from which bins are counted, > 0, in the caller's unit
	Count int     // number of bins in all, ≥ Below+2
	Below int     // bins under Min, ≥ 0
}

// DefaultLogBins is the paper's layout in milliseconds: base 1.05, 340 bins from 1 ms.
var DefaultLogBins = LogBins{Base: 1.05, Min: 1, Count: 340}

// BinsBelowMs is the number of bins DurationBins adds under 1 ms: 1.05^−142 ms
// ≈ 0.98 µs, the first power of 1.05 under 1 µs, is the lowest edge.
const BinsBelowMs = 142

// DurationBins is the one binning of durations: the paper's 340 bins of base 1.05
// from 1 ms (§5.1.1.2) and BinsBelowMs more of the same ratio under it, so that a
// quantile is within ±2.5% from a microsecond to about four hours. ms is one
// millisecond in the caller's unit (1 for milliseconds, 1e6 for nanoseconds):
// every layout it returns has the same edges.
func DurationBins(ms float64) LogBins {
	return LogBins{Base: 1.05, Min: ms, Count: 340 + BinsBelowMs, Below: BinsBelowMs}
}

// LatencyBins is DurationBins in milliseconds, the layout of every latency
// histogram: the exporter's stored statistics (model.Hist), the patterns of
// `tierscope paths` and `stitch` and the stitcher's service graph.
var LatencyBins = DurationBins(1)

// Validate reports a layout that cannot index values.
func (l LogBins) Validate() error {
	switch {
	case !(l.Base > 1) || math.IsInf(l.Base, 0):
		return fmt.Errorf("log bins: base must be > 1, got %v", l.Base)
	case !(l.Min > 0) || math.IsInf(l.Min, 0):
		return fmt.Errorf("log bins: min must be > 0, got %v", l.Min)
	case l.Below < 0:
		return fmt.Errorf("log bins: bins below min must be ≥ 0, got %d", l.Below)
	case l.Count < l.Below+2:
		return fmt.Errorf("log bins: count must be ≥ %d (bins below min + 2), got %d", l.Below+2, l.Count)
	}
	return nil
}

// Index returns the bin of v.
func (l LogBins) Index(v float64) int {
	if !(v >= l.Min) { // also catches NaN
		if l.Below == 0 || !(v > 0) {
			return 0
		}
		// floor of a negative logarithm: −1 for [Min/Base, Min), and so on down.
		i := int(math.Floor(math.Log(v/l.Min)/math.Log(l.Base))) + 1 + l.Below
		// v/Min can round to 1 just under Min; the bin must still be under Min's.
		return max(0, min(i, l.Below))
	}
	// The same expression as without Below, so edges above Min do not move.
	i := int(math.Log(v/l.Min)/math.Log(l.Base)) + 1 + l.Below
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
	return l.Min * math.Pow(l.Base, float64(i-1-l.Below))
}

// Upper is the upper edge of bin i (+Inf for the last bin).
func (l LogBins) Upper(i int) float64 {
	if i >= l.Count-1 {
		return math.Inf(1)
	}
	return l.Min * math.Pow(l.Base, float64(i-l.Below))
}

// LogIndexer is LogBins.Index without a logarithm for almost every value: it
// finds the bin among precomputed edges, and takes Index's own formula only for
// values within a relative 1e-9 of an edge, where the formula's rounding (about
// 1e-13 of a bin) could decide. Its results are Index's, value for value.
type LogIndexer struct {
	bins  LogBins
	lower []float64 // lower[i] = bins.Lower(i), for 1 ≤ i < Count
	// cell maps a float's exponent (from expMin) and its top cellBits mantissa
	// bits to the bin of the cell's lowest value. Cells are narrower than bins,
	// so v's bin is that one or the next.
	cell     []uint32
	expMin   int
	cellBits uint
}

// edgeMargin is the relative distance from an edge within which LogIndexer asks
// Index: far above the formula's error, far below a bin's width.
const edgeMargin = 1e-9

// NewLogIndexer precomputes the edges of a valid layout. Its tables take a few
// kilobytes for layouts like the paper's; a layout whose table would exceed a
// megabyte is indexed by Index.
func NewLogIndexer(l LogBins) *LogIndexer {
	x := &LogIndexer{bins: l, lower: make([]float64, l.Count)}
	for i := 1; i < l.Count; i++ {
		x.lower[i] = l.Lower(i)
	}
	x.cellBits = uint(math.Ceil(-math.Log2(l.Base-1))) + 1
	first, last := math.Float64bits(x.lower[1]), math.Float64bits(x.lower[l.Count-1])
	x.expMin = int(first >> 52)
	cells := (int(last>>52) - x.expMin + 1) << x.cellBits
	if x.cellBits > 20 || cells > 1<<18 || !(x.lower[l.Count-1] <= math.MaxFloat64) {
		x.cell = nil
		return x
	}
	x.cell = make([]uint32, cells)
	i := 0
	for c := range x.cell {
		low := math.Float64frombits(uint64(x.expMin+c>>x.cellBits)<<52 | uint64(c&(1<<x.cellBits-1))<<(52-x.cellBits))
		for i+1 < l.Count && x.lower[i+1] <= low {
			i++
		}
		x.cell[c] = uint32(i)
	}
	return x
}

// Bins is the layout indexed.
func (x *LogIndexer) Bins() LogBins { return x.bins }

// Index returns the bin of v, as x.Bins().Index(v) does.
func (x *LogIndexer) Index(v float64) int {
	if x.cell == nil || !(v >= x.lower[1]) { // also NaN
		return x.bins.Index(v)
	}
	b := math.Float64bits(v)
	c := (int(b>>52)-x.expMin)<<x.cellBits | int(b>>(52-x.cellBits))&(1<<x.cellBits-1)
	last := x.bins.Count - 1
	if c >= len(x.cell) {
		if v > math.MaxFloat64 || v < x.lower[last]*(1+edgeMargin) {
			return x.bins.Index(v)
		}
		return last
	}
	i := int(x.cell[c])
	for i < last && v >= x.lower[i+1] {
		i++
	}
	if v < x.lower[i]*(1+edgeMargin) || i < last && v > x.lower[i+1]*(1-edgeMargin) {
		return x.bins.Index(v)
	}
	return i
}

// LogHistogram counts values in LogBins exactly and keeps their count, sum, minimum
// and maximum. Only the range of bins that received values is stored, so a
// histogram of values that cluster costs tens of words, not Count.
// The zero value is not usable; call NewLogHistogram.
type LogHistogram struct {
	bins   LogBins
	idx    *LogIndexer // finds bins without a logarithm, when set
	first  int         // bin index of counts[0]
	counts []uint64    // counts[i] is the count of bin first+i
	n      uint64
	sum    float64
	min    float64
	max    float64
}

// NewLogHistogram returns an empty histogram over the given bins.
func NewLogHistogram(bins LogBins) *LogHistogram {
	return &LogHistogram{bins: bins, min: math.Inf(1), max: math.Inf(-1)}
}

// NewIndexedLogHistogram is NewLogHistogram over x's bins, which finds bins with
// x: the same histogram, for less work per value. x may be shared.
func NewIndexedLogHistogram(x *LogIndexer) *LogHistogram {
	h := NewLogHistogram(x.bins)
	h.idx = x
	return h
}

// Add records one value.
func (h *LogHistogram) Add(v float64) {
	var bin int
	if h.idx != nil {
		bin = h.idx.Index(v)
	} else {
		bin = h.bins.Index(v)
	}
	if i := bin - h.first; i >= 0 && i < len(h.counts) {
		h.counts[i]++ // the usual case, without the call
	} else {
		h.addCount(bin, 1)
	}
	h.n++
	h.sum += v
	// The builtins treat NaN and signed zeros as math.Min and math.Max do.
	h.min = min(h.min, v)
	h.max = max(h.max, v)
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
