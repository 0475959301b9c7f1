package signature

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Weighting says how the per-bucket solutions S_k enter the CDF whose median is
// the service time.
type Weighting string

const (
	// WeightCount weights each bucket's solution by its transaction count N_k:
	// the median is that of the transactions rather than of the buckets, so a
	// bucket holding a handful of transactions moves it as little as it should.
	WeightCount Weighting = "count"
	// WeightNone counts every bucket once, as the CDF of paper 004 fig. 8 does.
	WeightNone Weighting = "none"
)

// Status of a transaction signature or comparison.
const (
	StatusOK               = "ok"
	StatusInsufficientData = "insufficient data"
)

// Spread classes (paper 004 §IX).
const (
	ClassTight  = "tight"
	ClassSpread = "spread"
)

// Options control how a profile becomes a signature.
type Options struct {
	// MinUtilization and MaxUtilization bound the utilization of the buckets
	// used (inclusive of the bucket containing the bound's value: a bucket is
	// used when its transaction-weighted mean utilization lies in
	// [MinUtilization, MaxUtilization]). MaxUtilization is the guard against the
	// high-utilization false alarms of paper 004 §IX.
	MinUtilization float64 `json:"min_utilization"`
	MaxUtilization float64 `json:"max_utilization"`
	// MinBucketCount is the fewest transactions a bucket needs to be used; an
	// under-represented bucket is the outlier of paper 004 §V.
	MinBucketCount int64 `json:"min_bucket_count"`
	// MinBuckets is the fewest used buckets that give a signature; with fewer
	// the transaction is "insufficient data".
	MinBuckets int `json:"min_buckets"`
	// Weighting of the solutions in the CDF.
	Weighting Weighting `json:"weighting"`
	// SpreadThreshold: a transaction whose solutions have an interquartile
	// range above this fraction of their median is "spread", else "tight".
	SpreadThreshold float64 `json:"spread_threshold"`
}

// Defaults, chosen from the measurements in docs/signature-report.md.
const (
	DefaultMaxUtilization  = 0.7
	DefaultMinBucketCount  = 5
	DefaultMinBuckets      = 5
	DefaultSpreadThreshold = 0.15
)

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{
		MinUtilization:  0,
		MaxUtilization:  DefaultMaxUtilization,
		MinBucketCount:  DefaultMinBucketCount,
		MinBuckets:      DefaultMinBuckets,
		Weighting:       WeightCount,
		SpreadThreshold: DefaultSpreadThreshold,
	}
}

// Validate reports options that cannot make a signature.
func (o Options) Validate() error {
	switch {
	case !(o.MinUtilization >= 0 && o.MinUtilization < 1):
		return fmt.Errorf("min utilization must be in [0, 1), got %v", o.MinUtilization)
	case !(o.MaxUtilization > o.MinUtilization && o.MaxUtilization <= 1):
		return fmt.Errorf("max utilization must be in (min utilization, 1], got %v", o.MaxUtilization)
	case o.MinBucketCount < 1:
		return fmt.Errorf("min bucket count must be ≥ 1, got %d", o.MinBucketCount)
	case o.MinBuckets < 1:
		return fmt.Errorf("min buckets must be ≥ 1, got %d", o.MinBuckets)
	case o.Weighting != WeightCount && o.Weighting != WeightNone:
		return fmt.Errorf("weighting must be %q or %q, got %q", WeightCount, WeightNone, o.Weighting)
	case !(o.SpreadThreshold > 0) || math.IsInf(o.SpreadThreshold, 0):
		return fmt.Errorf("spread threshold must be > 0, got %v", o.SpreadThreshold)
	}
	return nil
}

// BucketSolution is one utilization bucket of a profile and its solution of
// equation 11, S_k = R_k·(1 − U_k).
type BucketSolution struct {
	Bucket         int     `json:"bucket"`      // k: 100·U in [k, k+1)
	Utilization    float64 `json:"utilization"` // the bucket's transaction-weighted mean U
	Windows        int64   `json:"windows"`
	Count          int64   `json:"count"`
	FrontLatencyMs float64 `json:"front_latency_ms"` // R_k
	ServiceTimeMs  float64 `json:"service_time_ms"`  // S_k
	Used           bool    `json:"used"`
	// Excluded says why an unused bucket was left out.
	Excluded string `json:"excluded,omitempty"`
}

// Reasons for leaving a bucket out.
const (
	ExcludedAboveMax = "above max utilization"
	ExcludedBelowMin = "below min utilization"
	ExcludedFewCount = "below min bucket count"
)

// TransactionSignature is the signature of one transaction type: its service
// time and how it was found.
type TransactionSignature struct {
	Transaction string `json:"transaction"`
	// Status is "ok", or "insufficient data", in which case the numbers below
	// are null and Reason says what was missing.
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// ServiceTimeMs is the 50th percentile of the CDF of the used S_k.
	ServiceTimeMs *float64 `json:"service_time_ms"`
	// Q25Ms and Q75Ms are its quartiles, in the same weighting.
	Q25Ms *float64 `json:"q25_ms"`
	Q75Ms *float64 `json:"q75_ms"`
	// StandardErrorMs is the bootstrap standard error of the service time
	// (the used buckets resampled with replacement, 200 times, with a fixed
	// seed): how far another run of the same load could put it.
	StandardErrorMs *float64 `json:"standard_error_ms"`
	// Spread is (Q75 − Q25)/median; SpreadClass compares it with the threshold.
	Spread      *float64 `json:"spread"`
	SpreadClass string   `json:"spread_class,omitempty"`
	BucketsUsed int      `json:"buckets_used"`
	// BucketsTotal counts the non-empty buckets, used or not.
	BucketsTotal int `json:"buckets_total"`
	// Count is the transactions in used buckets; Windows and TotalCount are all
	// windows and transactions added to the profile.
	Count      int64 `json:"count"`
	Windows    int64 `json:"windows"`
	TotalCount int64 `json:"total_count"`
	// UtilizationRange is the lowest and highest mean utilization of the used
	// buckets.
	UtilizationRange []float64 `json:"utilization_range,omitempty"`
	// Profile is the latency profile of paper 004 §V, one
	// [utilization_bucket, count, mean_front_latency_ms] per non-empty bucket.
	Profile [][3]float64 `json:"profile"`
	// Buckets details every non-empty bucket and its solution.
	Buckets        []BucketSolution `json:"buckets"`
	SkippedWindows map[string]int64 `json:"skipped_windows,omitempty"`
}

// OK reports whether the signature has a service time.
func (t *TransactionSignature) OK() bool { return t.Status == StatusOK && t.ServiceTimeMs != nil }

// UsedSolutions returns S_k of the used buckets, and their counts.
func (t *TransactionSignature) UsedSolutions() (s []float64, counts []float64, buckets []int) {
	for _, b := range t.Buckets {
		if b.Used {
			s = append(s, b.ServiceTimeMs)
			counts = append(counts, float64(b.Count))
			buckets = append(buckets, b.Bucket)
		}
	}
	return s, counts, buckets
}

func ptr(v float64) *float64 { return &v }

// ServiceTime solves a bucket for the service time: S = R·(1 − U) on one
// processor (eq. 11). On c > 1 CPUs whose mean utilization is U, a request
// that runs on one CPU at a time is not slowed by 1/(1 − U): it waits only
// when every CPU is busy. The M/M/c processor-sharing residence time is
// R = S·(1 + C(c, c·U)/(c·(1 − U))), with C the Erlang C probability that
// all c are busy, so S = R / (1 + C/(c·(1 − U))); for c = 1, C = U and
// this is eq. 11 again. At U = 0.3 on two CPUs it reads a +2 ms change of
// busy work as +1.8 ms where eq. 11 reads +1.4 ms.
func ServiceTime(r, u float64, servers int) float64 {
	if servers <= 1 {
		return r * (1 - u)
	}
	c := float64(servers)
	return r / (1 + erlangC(servers, c*u)/(c*(1-u)))
}

// erlangC is the probability that an arrival waits in M/M/c with offered
// load a = c·U < c, by the Erlang B recursion (stable for any c).
func erlangC(c int, a float64) float64 {
	b := 1.0
	for k := 1; k <= c; k++ {
		b = a * b / (float64(k) + a*b)
	}
	rho := a / float64(c)
	return b / (1 - rho + rho*b)
}

// Signature derives the service time of the profile's transaction (paper 004
// §VII): one solution S_k = R_k·(1 − U_k) per bucket that passes the guards,
// and the 50th percentile of their CDF. It never fails: a profile without
// enough data gives Status "insufficient data". opts must be valid.
func Signature(p *Profile, opts Options) TransactionSignature {
	t := TransactionSignature{
		Transaction:    p.Transaction,
		Profile:        [][3]float64{},
		Buckets:        []BucketSolution{},
		Windows:        p.Windows(),
		TotalCount:     p.Count(),
		SkippedWindows: p.SkippedWindows(),
	}
	if len(t.SkippedWindows) == 0 {
		t.SkippedWindows = nil
	}
	var s, w []float64
	uLo, uHi := math.Inf(1), math.Inf(-1)
	for k, b := range p.Buckets {
		if b.Count == 0 {
			continue
		}
		t.BucketsTotal++
		u, r := b.MeanUtilization(), b.MeanFrontLatencyMs()
		bs := BucketSolution{Bucket: k, Utilization: u, Windows: b.Windows, Count: b.Count,
			FrontLatencyMs: r, ServiceTimeMs: ServiceTime(r, u, p.Servers)}
		switch {
		case u > opts.MaxUtilization:
			bs.Excluded = ExcludedAboveMax
		case u < opts.MinUtilization:
			bs.Excluded = ExcludedBelowMin
		case b.Count < opts.MinBucketCount:
			bs.Excluded = ExcludedFewCount
		default:
			bs.Used = true
			t.BucketsUsed++
			t.Count += b.Count
			s = append(s, bs.ServiceTimeMs)
			if opts.Weighting == WeightNone {
				w = append(w, 1)
			} else {
				w = append(w, float64(b.Count))
			}
			uLo, uHi = math.Min(uLo, u), math.Max(uHi, u)
		}
		t.Profile = append(t.Profile, [3]float64{float64(k), float64(b.Count), r})
		t.Buckets = append(t.Buckets, bs)
	}
	if t.BucketsUsed < opts.MinBuckets {
		t.Status = StatusInsufficientData
		t.Reason = insufficientReason(p, t, opts)
		return t
	}
	med := weightedQuantile(s, w, 0.5)
	q25, q75 := weightedQuantile(s, w, 0.25), weightedQuantile(s, w, 0.75)
	t.Status = StatusOK
	t.ServiceTimeMs, t.Q25Ms, t.Q75Ms = ptr(med), ptr(q25), ptr(q75)
	t.UtilizationRange = []float64{uLo, uHi}
	t.StandardErrorMs = ptr(bootstrapSE(s, w))
	if med > 0 {
		sp := (q75 - q25) / med
		t.Spread = ptr(sp)
		t.SpreadClass = ClassTight
		if sp > opts.SpreadThreshold {
			t.SpreadClass = ClassSpread
		}
	} else {
		// A zero median (front latency all spent in outbound calls) has no
		// relative spread; it is as tight as it can be only if the quartiles agree.
		t.SpreadClass = ClassTight
		if q75 > q25 {
			t.SpreadClass = ClassSpread
		}
	}
	return t
}

func insufficientReason(p *Profile, t TransactionSignature, opts Options) string {
	if t.Windows == 0 {
		if n := p.Skipped[SkipSaturated]; n > 0 {
			return fmt.Sprintf("no usable window: %d at utilization ≥ 1", n)
		}
		return "no window with transactions"
	}
	var above, few int
	for _, b := range t.Buckets {
		switch b.Excluded {
		case ExcludedAboveMax:
			above++
		case ExcludedFewCount:
			few++
		}
	}
	return fmt.Sprintf("%d usable bucket(s), need %d (of %d non-empty: %d above max utilization %.2f, %d with fewer than %d transactions)",
		t.BucketsUsed, opts.MinBuckets, t.BucketsTotal, above, opts.MaxUtilization, few, opts.MinBucketCount)
}

// AppSignature is the application signature of one version of one service:
// one transaction signature per transaction type (paper 004 §VII).
type AppSignature struct {
	Service      string                 `json:"service"`
	Version      string                 `json:"version"`
	Transactions []TransactionSignature `json:"transactions"`
}

// Transaction returns the signature of the named transaction, or nil.
func (a AppSignature) Transaction(name string) *TransactionSignature {
	for i := range a.Transactions {
		if a.Transactions[i].Transaction == name {
			return &a.Transactions[i]
		}
	}
	return nil
}

// Signatures groups profiles by (service, version) and returns one
// application signature per group, ordered by service then version, with
// transactions in name order. Profiles with the same key are merged first.
func Signatures(profiles []*Profile, opts Options) ([]AppSignature, error) {
	merged := map[Key]*Profile{}
	for _, p := range profiles {
		if m, ok := merged[p.Key]; ok {
			if err := m.Merge(p); err != nil {
				return nil, err
			}
			continue
		}
		c := *p
		merged[p.Key] = &c
	}
	type sv struct{ service, version string }
	apps := map[sv]*AppSignature{}
	for key, p := range merged {
		id := sv{key.Service, key.Version}
		a := apps[id]
		if a == nil {
			a = &AppSignature{Service: key.Service, Version: key.Version}
			apps[id] = a
		}
		t := Signature(p, opts)
		a.Transactions = append(a.Transactions, t)
	}
	out := make([]AppSignature, 0, len(apps))
	for _, a := range apps {
		slices.SortFunc(a.Transactions, func(x, y TransactionSignature) int { return cmp.Compare(x.Transaction, y.Transaction) })
		out = append(out, *a)
	}
	slices.SortFunc(out, func(x, y AppSignature) int {
		return cmp.Or(cmp.Compare(x.Service, y.Service), cmp.Compare(x.Version, y.Version))
	})
	return out, nil
}

// bootstrapResamples is the number of bootstrap resamples of bootstrapSE.
const bootstrapResamples = 200

// bootstrapSE is the standard deviation of the weighted median over
// resamples of the (solution, weight) pairs drawn with replacement. The seed
// is fixed, so a signature is a pure function of its profile.
func bootstrapSE(s, w []float64) float64 {
	n := len(s)
	if n < 2 {
		return math.NaN()
	}
	rng := rand.New(rand.NewPCG(0x5167, 0x4e41))
	rs, rw := make([]float64, n), make([]float64, n)
	var sum, sumSq float64
	for range bootstrapResamples {
		for i := range n {
			j := rng.IntN(n)
			rs[i], rw[i] = s[j], w[j]
		}
		m := weightedQuantile(rs, rw, 0.5)
		sum += m
		sumSq += m * m
	}
	mean := sum / bootstrapResamples
	return math.Sqrt(math.Max(0, sumSq/bootstrapResamples-mean*mean) * bootstrapResamples / (bootstrapResamples - 1))
}
