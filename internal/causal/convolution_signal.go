package causal

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/dsp/fourier"
)

// CorrelationMethod chooses how cross-correlations are computed.
type CorrelationMethod uint8

const (
	// CorrelateAuto uses whichever of the two methods is estimated to be cheaper
	// for each correlation; both give the same values up to rounding.
	CorrelateAuto CorrelationMethod = iota
	// CorrelateFFT always uses the FFT: O(S log S) per correlation.
	CorrelateFFT
	// CorrelateDirect always sums directly: over the occupied quanta of the
	// first signal, either against a dense copy of the second, O(nnz·(2L+1)),
	// or against the second's occupied quanta within ±L, O(pairs), whichever is
	// estimated cheaper.
	CorrelateDirect
)

// String names the method as the command line spells it.
func (m CorrelationMethod) String() string {
	switch m {
	case CorrelateFFT:
		return "fft"
	case CorrelateDirect:
		return "direct"
	}
	return "auto"
}

// quantum is one occupied time quantum of an indicator function: its index and
// the square root of the number of messages in it (§5.2.1).
type quantum struct {
	bin int32
	val float64
}

// indicator appends to dst the occupied quanta of the messages at times (sorted,
// nanoseconds): quantum b covers [t0 + b·mu, t0 + (b+1)·mu), and its value is the
// square root of its message count, so that a quantum with x messages matched by
// one with x messages adds x, not x², to the correlation (§5.2.1).
func indicator(dst []quantum, times []int64, t0, mu int64) []quantum {
	for i := 0; i < len(times); {
		b := (times[i] - t0) / mu
		j := i + 1
		for j < len(times) && (times[j]-t0)/mu == b {
			j++
		}
		dst = append(dst, quantum{int32(b), math.Sqrt(float64(j - i))})
		i = j
	}
	return dst
}

// CrossCorrelation returns C(d) = Σ_t s1(t)·s2(t+d) for the lags d = −maxLag..maxLag,
// at index d+maxLag: the convolution of s2 with the time inverse of s1 (§5.2). It
// uses the FFT of gonum/dsp/fourier on sequences zero-padded to at least
// len + maxLag, so that no lag in range wraps around. It is the reference for the
// algorithm's own correlator, which reuses plans and spectra.
func CrossCorrelation(s1, s2 []float64, maxLag int) []float64 {
	n := max(len(s1), len(s2))
	size := fftSize(n + maxLag)
	fft := fourier.NewFFT(size)
	seq := make([]float64, size)
	copy(seq, s1)
	c1 := fft.Coefficients(nil, seq)
	clear(seq)
	copy(seq, s2)
	c2 := fft.Coefficients(nil, seq)
	for k := range c1 {
		c1[k] = complexConjMul(c1[k], c2[k])
	}
	fft.Sequence(seq, c1)
	out := make([]float64, 2*maxLag+1)
	for d := -maxLag; d <= maxLag; d++ {
		out[d+maxLag] = seq[(d+size)%size] / float64(size)
	}
	return out
}

// complexConjMul returns conj(a)·b.
func complexConjMul(a, b complex128) complex128 {
	ar, ai, br, bi := real(a), imag(a), real(b), imag(b)
	return complex(ar*br+ai*bi, ar*bi-ai*br)
}

// fftSize returns the smallest n ≥ min whose only prime factors are 2, 3 and 5,
// the radices gonum's FFTPACK handles fastest. A size with a large prime factor
// can be several times slower than the next 5-smooth size.
func fftSize(min int) int {
	if min <= 1 {
		return 1
	}
	best := math.MaxInt
	for p5 := 1; p5 < best; p5 *= 5 {
		for p35 := p5; p35 < best; p35 *= 3 {
			n := p35
			for n < min {
				n *= 2
			}
			if n < best {
				best = n
			}
		}
	}
	return best
}

// correlator computes the cross-correlations of one run. All vectors have the
// length of the trace in quanta, so memory is O(S) whatever the number of
// correlations: one FFT plan (3N floats), one sequence and one spectrum, a cache
// of the second signal's spectra (per sending node, bounded), and for the direct
// method one padded copy of the second signal (S+2L floats).
type correlator struct {
	S, L   int
	method CorrelationMethod

	n      int // FFT length, ≥ S+L and 5-smooth
	fft    *fourier.FFT
	seq    []float64
	spec   []complex128
	cache  map[signalKey][]complex128
	order  []signalKey // cached spectra, oldest first
	budget int         // most spectra the cache may hold

	pad []float64 // S+2L: the second signal at offset L, for the direct method
	q2  []quantum // the second signal's occupied quanta, for the pairs method
	out []float64 // 2L+1

	ffts, directs int
}

// signalKey names a second signal: the messages node j sends, to every node
// (k = allNodes) or to k only.
type signalKey struct{ j, k NodeID }

const allNodes NodeID = -1

// spectrumCacheBytes and spectrumCacheMax bound the cache of second-signal
// spectra, which always holds at least one: so the correlator's memory stays
// O(S) (at most 16 spectra of 8·N bytes), and within 64 MB unless one spectrum
// is bigger.
const (
	spectrumCacheBytes = 64 << 20
	spectrumCacheMax   = 16
)

func newCorrelator(S, L int, method CorrelationMethod) *correlator {
	c := &correlator{S: S, L: L, method: method, out: make([]float64, 2*L+1)}
	c.n = fftSize(S + L)
	c.budget = min(spectrumCacheMax, max(1, spectrumCacheBytes/(16*(c.n/2+1))))
	return c
}

// Cost model of the two methods, in nanoseconds, measured with gonum v0.16 on a
// 2.4 GHz core: a real FFT of length n takes about fftNs·n·log2(n); one
// multiply-add of the direct sum about directNs.
const (
	fftNs    = 2.8
	directNs = 0.5
)

// Correlation methods, as chosen by choose.
const (
	viaFFT = iota
	viaDense
	viaPairs
)

// choose returns the method estimated cheapest for a first signal with nnz
// occupied quanta against the second signal j of n2 messages. The pairs
// method's cost is the expected number of pairs of occupied quanta within ±L,
// at most nnz·n2·(2L+1)/S.
func (c *correlator) choose(nnz, n2 int, j signalKey) int {
	w := float64(2*c.L + 1)
	dense := directNs*float64(nnz)*w + float64(n2)
	pairs := 2 * directNs * (float64(nnz)*float64(n2)*w/float64(c.S) + float64(nnz+n2))
	direct := viaDense
	if pairs < dense {
		direct, dense = viaPairs, pairs
	}
	switch c.method {
	case CorrelateFFT:
		return viaFFT
	case CorrelateDirect:
		return direct
	}
	transforms := 3.0
	if _, ok := c.cache[j]; ok {
		transforms = 2
	}
	if transforms*fftNs*float64(c.n)*math.Log2(float64(c.n)) < dense {
		return viaFFT
	}
	return direct
}

// correlate returns C(d) for d = −L..L (index d+L) of the first signal s1 (the
// caused-by messages) against the second, the messages named by j at times t2
// (sorted), normalised for the overlap of the two signals at each lag:
// C(d)·S/(S−|d|). The slice is reused by the next call.
func (c *correlator) correlate(s1 []quantum, j signalKey, t2 []int64, t0, mu int64) []float64 {
	out := c.out
	clear(out)
	if len(s1) == 0 || len(t2) == 0 {
		return out
	}
	switch c.choose(len(s1), len(t2), j) {
	case viaFFT:
		c.correlateFFT(s1, j, t2, t0, mu)
	case viaDense:
		c.correlateDirect(s1, t2, t0, mu)
	default:
		c.correlatePairs(s1, t2, t0, mu)
	}
	for k := range out {
		d := k - c.L
		if d < 0 {
			d = -d
		}
		out[k] *= float64(c.S) / float64(c.S-d)
	}
	return out
}

func (c *correlator) correlateFFT(s1 []quantum, j signalKey, t2 []int64, t0, mu int64) {
	if c.fft == nil {
		c.fft = fourier.NewFFT(c.n)
		c.seq = make([]float64, c.n)
		c.spec = make([]complex128, c.n/2+1)
		c.cache = make(map[signalKey][]complex128)
	}
	c.ffts++
	spec2, ok := c.cache[j]
	if !ok {
		clear(c.seq)
		fillIndicator(c.seq, t2, t0, mu, 0)
		if len(c.order) >= c.budget {
			old := c.order[0]
			spec2 = c.cache[old]
			delete(c.cache, old)
			c.order = c.order[1:]
		} else {
			spec2 = make([]complex128, c.n/2+1)
		}
		c.fft.Coefficients(spec2, c.seq)
		c.cache[j] = spec2
		c.order = append(c.order, j)
	}
	clear(c.seq)
	for _, q := range s1 {
		c.seq[q.bin] = q.val
	}
	c.fft.Coefficients(c.spec, c.seq)
	for k, x := range spec2 {
		c.spec[k] = complexConjMul(c.spec[k], x)
	}
	c.fft.Sequence(c.seq, c.spec)
	scale := 1 / float64(c.n)
	for k := range c.out {
		c.out[k] = c.seq[(k-c.L+c.n)%c.n] * scale
	}
}

func (c *correlator) correlateDirect(s1 []quantum, t2 []int64, t0, mu int64) {
	if c.pad == nil {
		c.pad = make([]float64, c.S+2*c.L)
	}
	c.directs++
	fillIndicator(c.pad, t2, t0, mu, c.L)
	w := 2*c.L + 1
	out := c.out[:w]
	for _, q := range s1 {
		row := c.pad[int(q.bin) : int(q.bin)+w]
		v := q.val
		for k, x := range row {
			out[k] += v * x
		}
	}
	// Clear only what was written.
	for _, t := range t2 {
		c.pad[int((t-t0)/mu)+c.L] = 0
	}
}

// correlatePairs sums s1(a)·s2(b) over the pairs of occupied quanta with
// |b−a| ≤ L, sliding a window over the second signal's quanta.
func (c *correlator) correlatePairs(s1 []quantum, t2 []int64, t0, mu int64) {
	c.directs++
	c.q2 = indicator(c.q2[:0], t2, t0, mu)
	q2 := c.q2
	L := int32(c.L)
	start := 0
	for _, a := range s1 {
		for start < len(q2) && q2[start].bin < a.bin-L {
			start++
		}
		base := int(L - a.bin)
		for _, b := range q2[start:] {
			if b.bin > a.bin+L {
				break
			}
			c.out[int(b.bin)+base] += a.val * b.val
		}
	}
}

// fillIndicator writes the indicator function of the messages at times (sorted)
// into dst at offset off: dst[off+b] = √(messages in quantum b).
func fillIndicator(dst []float64, times []int64, t0, mu int64, off int) {
	for i := 0; i < len(times); {
		b := (times[i] - t0) / mu
		j := i + 1
		for j < len(times) && (times[j]-t0)/mu == b {
			j++
		}
		dst[int(b)+off] = math.Sqrt(float64(j - i))
		i = j
	}
}

// Spike is a spike of a cross-correlation (§5.2): the lag of its highest point,
// the extent of the region around it that stays above the lower threshold, its
// height and its height in standard deviations above the mean.
type Spike struct {
	Lag    int
	Lo, Hi int
	Height float64
	Sigmas float64
}

// SpikeStats returns the mean and standard deviation of a correlation that the
// spike test compares against. They are estimated with sigma clipping: points
// more than s standard deviations above the mean are set aside and the estimate
// repeated, so that a strong spike (the email trace's zero-delay forwarding)
// does not inflate σ enough to hide weaker ones (its 10 s and 15 s delays). The
// deviation is at least floor.
func SpikeStats(c []float64, s, floor float64) (mean, sigma float64) {
	limit := math.Inf(1)
	prev := -1
	for iter := 0; iter < 20; iter++ {
		var sum, sum2 float64
		n := 0
		for _, x := range c {
			if x <= limit {
				sum += x
				sum2 += x * x
				n++
			}
		}
		if n == 0 {
			break
		}
		mean = sum / float64(n)
		sigma = math.Sqrt(max(0, sum2/float64(n)-mean*mean))
		if n == prev {
			break
		}
		prev = n
		limit = mean + s*max(sigma, floor)
	}
	return mean, max(sigma, floor)
}

// SpikeDip is the relative dip that also separates two spikes: between two local
// maxima above the upper threshold, a point whose height above the mean is less
// than SpikeDip times the lower maximum's. A strong spike spills into the
// neighbouring quanta (a message 0.2 s after its cause lands one quantum later
// whenever its cause was in the quantum's last 0.2 s), so at μ = 5 s the email
// trace's zero-delay spike keeps the 5 s lag above S σ, and the paper's rule alone
// would merge the 10 s spike into it.
const SpikeDip = 0.5

// FindSpikes finds the spikes of c, whose index zero is lag 0, as in §5.2: a
// spike is a local maximum at least n standard deviations above the mean, and two
// spikes must be separated by a point less than s standard deviations above it
// (s < n), or by a relative dip (SpikeDip). Within each maximal run of points
// above mean+s·σ, the local maxima that reach mean+n·σ are grouped, left to
// right, until a dip separates one from the highest of the group so far; each
// group is one spike at its highest point (the earliest among equal ones), and
// extends to the run's ends or to the dips, which belong to no spike. Spikes are
// returned in order of lag.
func FindSpikes(c []float64, zero int, n, s, mean, sigma float64) []Spike {
	if sigma <= 0 {
		return nil
	}
	var spikes []Spike
	hiT, loT := mean+n*sigma, mean+s*sigma
	emit := func(lo, hi, best int) {
		spikes = append(spikes, Spike{Lag: best - zero, Lo: lo - zero, Hi: hi - zero, Height: c[best], Sigmas: (c[best] - mean) / sigma})
	}
	for k := 0; k < len(c); {
		if c[k] <= loT {
			k++
			continue
		}
		start := k
		for k < len(c) && c[k] > loT {
			k++
		}
		end := k - 1 // the run is c[start..end]
		lo, best := start, -1
		for i := start; i <= end; i++ {
			if c[i] < hiT || (i > start && c[i-1] > c[i]) || (i < end && c[i+1] > c[i]) {
				continue // not a local maximum above the upper threshold
			}
			if best < 0 {
				best = i
				continue
			}
			// The lowest point between the group's peak and this maximum.
			dip := best + 1
			for j := best + 1; j < i; j++ {
				if c[j] < c[dip] {
					dip = j
				}
			}
			if dip < i && c[dip]-mean < SpikeDip*(min(c[best], c[i])-mean) {
				emit(lo, dip-1, best)
				lo, best = dip+1, i
			} else if c[i] > c[best] {
				best = i
			}
		}
		if best >= 0 {
			emit(lo, end, best)
		}
	}
	return spikes
}

// medianInt64 returns the median of xs (the lower middle for an even count),
// reordering xs.
func medianInt64(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[(len(xs)-1)/2]
}
