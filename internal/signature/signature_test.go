package signature

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// psProfile fills a profile with windows of an ideal processor-sharing front
// server, R = S/(1−U), across utilizations lo..hi, with relative noise.
func psProfile(key Key, s, lo, hi, noise float64, windows int, seed uint64) *Profile {
	r := rand.New(rand.NewPCG(seed, 7))
	p := NewProfile(key)
	for range windows {
		u := lo + (hi-lo)*r.Float64()
		n := int64(50 + r.IntN(200))
		front := s / (1 - u) * (1 + noise*r.NormFloat64()/math.Sqrt(float64(n)))
		calls := 2 * n
		p.Add(Window{Count: n, LatencyMs: front + float64(calls)*3/float64(n), OutboundCalls: calls, OutboundLatencyMs: 3, CPUUtilization: u})
	}
	return p
}

func TestSignatureRecoversServiceTime(t *testing.T) {
	for _, w := range []Weighting{WeightCount, WeightNone} {
		opts := DefaultOptions()
		opts.Weighting = w
		sig := Signature(psProfile(Key{"shop", "v1", "Home"}, 8, 0.05, 0.75, 0.8, 300, 1), opts)
		if !sig.OK() {
			t.Fatalf("%s: %s", w, sig.Reason)
		}
		if math.Abs(*sig.ServiceTimeMs-8)/8 > 0.01 {
			t.Errorf("%s: service time %v, want 8 ± 1%%", w, *sig.ServiceTimeMs)
		}
		if sig.SpreadClass != ClassTight || *sig.Spread > 0.05 {
			t.Errorf("%s: spread %v %s", w, *sig.Spread, sig.SpreadClass)
		}
		if *sig.StandardErrorMs <= 0 || *sig.StandardErrorMs > 0.1 {
			t.Errorf("%s: standard error %v", w, *sig.StandardErrorMs)
		}
		if len(sig.Profile) != sig.BucketsTotal || sig.UtilizationRange[1] > opts.MaxUtilization {
			t.Errorf("%s: profile %d buckets %d, range %v", w, len(sig.Profile), sig.BucketsTotal, sig.UtilizationRange)
		}
	}
}

// Paper 004 §IX: a non-CPU bottleneck above some utilization inflates S_k;
// the utilization limit keeps those buckets out of the signature.
func TestUtilizationLimitGuardsHighLoad(t *testing.T) {
	p := psProfile(Key{"shop", "v1", "Execute Search"}, 8, 0.1, 0.6, 0.5, 200, 2)
	q := psProfile(p.Key, 8, 0.75, 0.98, 0.5, 400, 3)
	// Contention: above 0.8 the latency grows beyond processor sharing.
	for k := 80; k < NumBuckets; k++ {
		b := &q.Buckets[k]
		b.FrontLatencySum = b.FrontLatencySum * 3
	}
	p.Merge(q)
	guarded := Signature(p, DefaultOptions())
	open := DefaultOptions()
	open.MaxUtilization = 1
	unguarded := Signature(p, open)
	if math.Abs(*guarded.ServiceTimeMs-8)/8 > 0.02 {
		t.Fatalf("guarded %v", *guarded.ServiceTimeMs)
	}
	if *unguarded.ServiceTimeMs < 9 || unguarded.SpreadClass != ClassSpread {
		t.Fatalf("unguarded %v %s: the test's contention should show", *unguarded.ServiceTimeMs, unguarded.SpreadClass)
	}
	for _, b := range guarded.Buckets {
		if b.Utilization > 0.8 && (b.Used || b.Excluded != ExcludedAboveMax) {
			t.Fatalf("bucket %d used above the limit", b.Bucket)
		}
	}
}

func TestInsufficientData(t *testing.T) {
	key := Key{"shop", "v1", "Cart"}
	check := func(name string, p *Profile, wantReason string) {
		t.Helper()
		sig := Signature(p, DefaultOptions())
		if sig.Status != StatusInsufficientData || sig.ServiceTimeMs != nil || sig.Spread != nil || sig.OK() {
			t.Fatalf("%s: %+v", name, sig)
		}
		if !strings.Contains(sig.Reason, wantReason) {
			t.Fatalf("%s: reason %q lacks %q", name, sig.Reason, wantReason)
		}
	}
	check("empty", NewProfile(key), "no window")
	sat := NewProfile(key)
	sat.Add(Window{Count: 10, LatencyMs: 30, CPUUtilization: 1})
	sat.Add(Window{Count: 10, LatencyMs: 30, CPUUtilization: 1.2})
	check("saturated", sat, "2 at utilization ≥ 1")
	few := NewProfile(key)
	for i := range 3 {
		few.Add(Window{Count: 100, LatencyMs: 10, CPUUtilization: 0.1 + 0.1*float64(i)})
	}
	check("three buckets", few, "3 usable bucket(s), need 5")
	sparse := NewProfile(key)
	for i := range 10 {
		sparse.Add(Window{Count: 2, LatencyMs: 10, CPUUtilization: 0.05 + 0.05*float64(i)})
	}
	check("sparse buckets", sparse, "10 with fewer than 5 transactions")
	high := NewProfile(key)
	for i := range 10 {
		high.Add(Window{Count: 100, LatencyMs: 50, CPUUtilization: 0.85 + 0.01*float64(i)})
	}
	check("all above the limit", high, "9 above max utilization 0.70")
}

func TestSignaturesGroupByServiceVersion(t *testing.T) {
	var ps []*Profile
	for _, v := range []string{"v2", "v1"} {
		for _, tx := range []string{"Home", "Cart"} {
			ps = append(ps, psProfile(Key{"shop", v, tx}, 5, 0.1, 0.6, 0.5, 60, 4))
		}
	}
	ps = append(ps, psProfile(Key{"shop", "v1", "Home"}, 5, 0.1, 0.6, 0.5, 60, 5)) // merged into the first
	apps, err := Signatures(ps, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(apps) != 2 || apps[0].Version != "v1" || apps[1].Version != "v2" {
		t.Fatalf("%+v", apps)
	}
	if len(apps[0].Transactions) != 2 || apps[0].Transactions[0].Transaction != "Cart" {
		t.Fatalf("transactions %+v", apps[0].Transactions)
	}
	if apps[0].Transaction("Home").Windows != 120 {
		t.Fatalf("duplicate key not merged: %d windows", apps[0].Transaction("Home").Windows)
	}
	if apps[0].Transaction("Nope") != nil {
		t.Fatal("missing transaction found")
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mut := range []func(*Options){
		func(o *Options) { o.MaxUtilization = 0 },
		func(o *Options) { o.MaxUtilization = 1.1 },
		func(o *Options) { o.MinUtilization = 0.9 },
		func(o *Options) { o.MinBucketCount = 0 },
		func(o *Options) { o.MinBuckets = 0 },
		func(o *Options) { o.Weighting = "sqrt" },
		func(o *Options) { o.SpreadThreshold = 0 },
	} {
		o := DefaultOptions()
		mut(&o)
		if o.Validate() == nil {
			t.Errorf("accepted %+v", o)
		}
	}
	if err := DefaultCompareOptions().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultCompareOptions()
	c.Alpha = 0
	if c.Validate() == nil {
		t.Error("accepted alpha 0")
	}
}

// On one CPU ServiceTime is eq. 11; on c CPUs it inverts the M/M/c
// processor-sharing residence time, whose Erlang C is checked by hand:
// C(2, 0.6) = (0.6²/2 · 2/1.4) / (1 + 0.6 + 0.6²/2 · 2/1.4) = 0.13846.
func TestServiceTimeServers(t *testing.T) {
	for _, u := range []float64{0, 0.3, 0.69} {
		if got, want := ServiceTime(10, u, 1), 10*(1-u); math.Abs(got-want) > 1e-12 {
			t.Errorf("c=1, U=%v: %v, want %v", u, got, want)
		}
	}
	if c := erlangC(2, 0.6); math.Abs(c-0.138461538) > 1e-8 {
		t.Errorf("C(2, 0.6) = %v", c)
	}
	if got, want := ServiceTime(10, 0.3, 2), 10/(1+0.138461538/(2*0.7)); math.Abs(got-want) > 1e-6 {
		t.Errorf("c=2, U=0.3: %v, want %v", got, want)
	}
	// Many CPUs at moderate load: nobody waits, so S = R.
	if got := ServiceTime(10, 0.5, 64); math.Abs(got-10) > 1e-3 {
		t.Errorf("c=64, U=0.5: %v, want 10", got)
	}
}
