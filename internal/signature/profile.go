package signature

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
)

// NumBuckets is the number of CPU-utilization buckets of a latency profile
// (paper 004 §V): bucket k holds the windows whose utilization U satisfies
// k ≤ 100·U < k+1, for k = 0…99. U ≥ 1 has no bucket.
const NumBuckets = 100

// Fixed-point units of the bucket sums. Sums are integers so that adding,
// merging and serialising profiles is exact, associative and commutative: a
// profile built from shards, restarts or time ranges equals, bit for bit, the
// one built from all its windows at once.
const (
	// LatencyUnitMs is the unit of Bucket.FrontLatencySum: one microsecond
	// (times one transaction). Rounding happens once per window, so a window's
	// mean front latency is kept to within 0.5 µs/count.
	LatencyUnitMs = 0.001
	// UtilizationUnit is the unit of Bucket.UtilizationSum: one part per million
	// (times one transaction).
	UtilizationUnit = 1e-6
)

// Window is one monitoring window (paper 004 §IV-B: one minute) of one
// transaction type at one front server: what the exporter, or one row of the
// docs/formats.md §6 CSV, holds.
type Window struct {
	// Count is N_i, the number of transactions that completed in the window.
	Count int64
	// LatencyMs is R_i, their mean end-to-end latency at the front server.
	LatencyMs float64
	// OutboundCalls is Σ_j N^DB_{i,j}, the outbound (database) calls those
	// transactions made.
	OutboundCalls int64
	// OutboundLatencyMs is the mean latency of those calls.
	OutboundLatencyMs float64
	// CPUUtilization is U_CPU, the front server's mean CPU utilization over the
	// window, as a fraction.
	CPUUtilization float64
}

// FrontLatencyMs is equation 1 of paper 004: R_front = R − Σ N^DB·R^DB / N, the
// part of the mean latency spent at the front server itself.
func (w Window) FrontLatencyMs() float64 {
	if w.Count <= 0 {
		return math.NaN()
	}
	return w.LatencyMs - float64(w.OutboundCalls)*w.OutboundLatencyMs/float64(w.Count)
}

// Why a window was not added to a profile. The window is counted under its
// reason in Profile.Skipped; it is no error of the caller's, but a window no
// signature can use.
type SkipReason int

const (
	// SkipSaturated: U ≥ 1. S = R·(1−U) has no solution there (paper 004 eq. 11
	// needs U < 1), and a monitoring agent that sums cores reports such values.
	SkipSaturated SkipReason = iota
	// SkipEmpty: no transaction completed in the window (count 0).
	SkipEmpty
	// SkipNegativeFront: the outbound calls took longer than the transactions
	// (R_front < 0), which happens when calls run in parallel; equation 1 then
	// does not describe the transaction.
	SkipNegativeFront
	numSkipReasons
)

var skipNames = [numSkipReasons]string{"saturated", "empty", "negative_front_latency"}

func (r SkipReason) String() string {
	if r < 0 || r >= numSkipReasons {
		return fmt.Sprintf("SkipReason(%d)", int(r))
	}
	return skipNames[r]
}

// Errors of Profile.Add and Profile.Merge. A window that returns one of these
// is malformed (not merely unusable) and has not been added.
var (
	ErrInvalidWindow = errors.New("signature: invalid window")
	ErrOverflow      = errors.New("signature: profile sum overflows int64")
	ErrKeyMismatch   = errors.New("signature: merging profiles of different keys")
)

// Key names one profile: one transaction type of one version of one service.
type Key struct {
	Service     string `json:"service"`
	Version     string `json:"version"`
	Transaction string `json:"transaction"`
}

// Bucket holds the sufficient statistics of one utilization bucket: counts and
// integer sums, so that it merges exactly.
type Bucket struct {
	// Windows is how many windows fell into the bucket.
	Windows int64 `json:"windows"`
	// Count is N_k, the transactions of those windows.
	Count int64 `json:"count"`
	// FrontLatencySum is Σ count·R_front over the windows, in LatencyUnitMs
	// (microseconds), so R_k = FrontLatencySum·LatencyUnitMs/Count.
	FrontLatencySum int64 `json:"front_latency_sum_us"`
	// UtilizationSum is Σ count·U over the windows, in UtilizationUnit (ppm), so
	// the bucket's transaction-weighted mean utilization is
	// UtilizationSum·UtilizationUnit/Count.
	UtilizationSum int64 `json:"utilization_sum_ppm"`
}

// MeanFrontLatencyMs is R_k, the transaction-weighted mean front latency.
func (b Bucket) MeanFrontLatencyMs() float64 {
	if b.Count == 0 {
		return math.NaN()
	}
	return float64(b.FrontLatencySum) * LatencyUnitMs / float64(b.Count)
}

// MeanUtilization is the transaction-weighted mean utilization of the windows
// in the bucket (within the bucket's 1% range).
func (b Bucket) MeanUtilization() float64 {
	if b.Count == 0 {
		return math.NaN()
	}
	return float64(b.UtilizationSum) * UtilizationUnit / float64(b.Count)
}

func (b *Bucket) add(o Bucket) error {
	var w, c, l, u int64
	var ok1, ok2, ok3, ok4 bool
	w, ok1 = addInt64(b.Windows, o.Windows)
	c, ok2 = addInt64(b.Count, o.Count)
	l, ok3 = addInt64(b.FrontLatencySum, o.FrontLatencySum)
	u, ok4 = addInt64(b.UtilizationSum, o.UtilizationSum)
	if !(ok1 && ok2 && ok3 && ok4) {
		return ErrOverflow
	}
	*b = Bucket{Windows: w, Count: c, FrontLatencySum: l, UtilizationSum: u}
	return nil
}

// addInt64 adds two int64 and reports whether the sum did not overflow.
func addInt64(a, b int64) (int64, bool) {
	s := a + b
	return s, (a >= 0) != (b >= 0) || (s >= 0) == (a >= 0)
}

// mulRound returns round(n·v/unit) as an int64, and false when it does not fit.
func mulRound(n int64, v, unit float64) (int64, bool) {
	x := math.Round(float64(n) * v / unit)
	if !(math.Abs(x) < 9.2e18) {
		return 0, false
	}
	return int64(x), true
}

// Profile is the transaction latency profile [U_k, N_k, R_k] of one key
// (paper 004 §V), kept as mergeable bucket sums. The zero value is an empty
// profile; set Key before use. It is not safe for concurrent use.
type Profile struct {
	Key
	// Servers is the number of CPUs the utilization is the mean of (the
	// machine's logical CPUs); 0 or 1 is the paper's single processor.
	Servers int `json:"servers,omitempty"`
	// Buckets are indexed by k = ⌊100·U⌋.
	Buckets [NumBuckets]Bucket
	// Skipped counts the windows not added, by SkipReason.
	Skipped [numSkipReasons]int64
}

// NewProfile returns an empty profile for key.
func NewProfile(key Key) *Profile { return &Profile{Key: key} }

// BucketIndex returns the bucket of utilization u, or -1 when u ≥ 1.
func BucketIndex(u float64) int {
	if !(u < 1) {
		return -1
	}
	k := int(math.Floor(u * NumBuckets))
	if k < 0 {
		return 0
	}
	if k >= NumBuckets { // u a hair below 1 rounding up
		return NumBuckets - 1
	}
	return k
}

// Validate reports a malformed window: a negative or non-finite field, or a
// negative utilization. Saturated, empty and negative-front windows are valid
// (they are skipped and counted, not refused).
func (w Window) Validate() error {
	switch {
	case w.Count < 0:
		return fmt.Errorf("%w: count %d < 0", ErrInvalidWindow, w.Count)
	case w.OutboundCalls < 0:
		return fmt.Errorf("%w: outbound_calls %d < 0", ErrInvalidWindow, w.OutboundCalls)
	case !finiteNonNeg(w.LatencyMs):
		return fmt.Errorf("%w: latency_ms %v is not a finite number ≥ 0", ErrInvalidWindow, w.LatencyMs)
	case !finiteNonNeg(w.OutboundLatencyMs):
		return fmt.Errorf("%w: outbound_latency_ms %v is not a finite number ≥ 0", ErrInvalidWindow, w.OutboundLatencyMs)
	case !finiteNonNeg(w.CPUUtilization):
		return fmt.Errorf("%w: cpu_utilization %v is not a finite fraction ≥ 0", ErrInvalidWindow, w.CPUUtilization)
	}
	return nil
}

func finiteNonNeg(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }

// Add classifies one window into its utilization bucket (paper 004 §V). It
// returns (true, 0, nil) when the window was added, (false, reason, nil) when
// it was valid but unusable and is counted under reason in Skipped, and an
// error, with the profile unchanged, when it is malformed or a sum would
// overflow.
func (p *Profile) Add(w Window) (added bool, reason SkipReason, err error) {
	if err := w.Validate(); err != nil {
		return false, 0, err
	}
	reason = -1
	switch {
	case w.Count == 0:
		reason = SkipEmpty
	case BucketIndex(w.CPUUtilization) < 0:
		reason = SkipSaturated
	case w.FrontLatencyMs() < 0:
		reason = SkipNegativeFront
	}
	if reason >= 0 {
		p.Skipped[reason]++
		return false, reason, nil
	}
	k := BucketIndex(w.CPUUtilization)
	lat, ok1 := mulRound(w.Count, w.FrontLatencyMs(), LatencyUnitMs)
	util, ok2 := mulRound(w.Count, w.CPUUtilization, UtilizationUnit)
	if !ok1 || !ok2 {
		return false, 0, ErrOverflow
	}
	if err := p.Buckets[k].add(Bucket{Windows: 1, Count: w.Count, FrontLatencySum: lat, UtilizationSum: util}); err != nil {
		return false, 0, err
	}
	return true, 0, nil
}

// Merge adds q's sums into p. Both must have the same key. On overflow p is
// left unchanged.
func (p *Profile) Merge(q *Profile) error {
	if p.Key != q.Key {
		return fmt.Errorf("%w: %v and %v", ErrKeyMismatch, p.Key, q.Key)
	}
	out := p.Buckets
	for k := range out {
		if err := out[k].add(q.Buckets[k]); err != nil {
			return err
		}
	}
	skipped := p.Skipped
	for i := range skipped {
		s, ok := addInt64(skipped[i], q.Skipped[i])
		if !ok {
			return ErrOverflow
		}
		skipped[i] = s
	}
	p.Buckets, p.Skipped = out, skipped
	p.Servers = max(p.Servers, q.Servers)
	return nil
}

// Windows returns how many windows were added.
func (p *Profile) Windows() int64 {
	var n int64
	for _, b := range p.Buckets {
		n += b.Windows
	}
	return n
}

// Count returns how many transactions were added.
func (p *Profile) Count() int64 {
	var n int64
	for _, b := range p.Buckets {
		n += b.Count
	}
	return n
}

// SkippedWindows returns the skipped-window counts by reason name, omitting
// zeros.
func (p *Profile) SkippedWindows() map[string]int64 {
	m := map[string]int64{}
	for i, n := range p.Skipped {
		if n > 0 {
			m[skipNames[i]] = n
		}
	}
	return m
}

// profileJSON is the serialised form: sparse buckets, each with its index.
type profileJSON struct {
	Key
	Buckets []bucketJSON     `json:"buckets"`
	Skipped map[string]int64 `json:"skipped_windows,omitempty"`
}

type bucketJSON struct {
	Index int `json:"bucket"`
	Bucket
}

// MarshalJSON writes the key, the non-empty buckets and the skipped counts.
// Every number is an integer, so the round trip is exact.
func (p Profile) MarshalJSON() ([]byte, error) {
	j := profileJSON{Key: p.Key, Buckets: []bucketJSON{}, Skipped: p.SkippedWindows()}
	for k, b := range p.Buckets {
		if b != (Bucket{}) {
			j.Buckets = append(j.Buckets, bucketJSON{Index: k, Bucket: b})
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes. Buckets may repeat (they add)
// and come in any order.
func (p *Profile) UnmarshalJSON(data []byte) error {
	var j profileJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	q := Profile{Key: j.Key}
	for _, b := range j.Buckets {
		if b.Index < 0 || b.Index >= NumBuckets {
			return fmt.Errorf("signature: profile bucket %d outside 0..%d", b.Index, NumBuckets-1)
		}
		if b.Windows < 0 || b.Count < 0 || b.FrontLatencySum < 0 || b.UtilizationSum < 0 {
			return fmt.Errorf("signature: profile bucket %d has a negative sum", b.Index)
		}
		if err := q.Buckets[b.Index].add(b.Bucket); err != nil {
			return err
		}
	}
	for name, n := range j.Skipped {
		i := slices.Index(skipNames[:], name)
		if i < 0 {
			return fmt.Errorf("signature: unknown skipped-window reason %q", name)
		}
		if n < 0 {
			return fmt.Errorf("signature: negative skipped-window count for %q", name)
		}
		q.Skipped[i] += n
	}
	*p = q
	return nil
}

// WindowFromSums builds a window from the sums an exporter keeps: the total
// end-to-end latency of the count transactions and the total latency of their
// outbound calls, both in milliseconds.
func WindowFromSums(count int64, latencySumMs float64, outboundCalls int64, outboundSumMs float64, cpuUtilization float64) Window {
	w := Window{Count: count, OutboundCalls: outboundCalls, CPUUtilization: cpuUtilization}
	if count > 0 {
		w.LatencyMs = latencySumMs / float64(count)
	}
	if outboundCalls > 0 {
		w.OutboundLatencyMs = outboundSumMs / float64(outboundCalls)
	}
	return w
}
