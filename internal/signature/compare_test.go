package signature

import (
	"testing"
)

func sigOf(s float64, seed uint64, lo, hi float64) TransactionSignature {
	return Signature(psProfile(Key{"shop", "v", "Home"}, s, lo, hi, 0.8, 200, seed), DefaultOptions())
}

func TestCompareDetectsShift(t *testing.T) {
	base := sigOf(8, 1, 0.1, 0.6)
	// The candidate runs under a different load: its buckets span another range.
	for _, c := range []struct {
		delta   float64
		changed bool
	}{{0, false}, {0.2, false}, {1, true}, {2, true}, {-1, true}} {
		cand := sigOf(8+c.delta, 2, 0.2, 0.75)
		r := Compare(&base, &cand, DefaultCompareOptions())
		if r.Changed != c.changed {
			t.Errorf("delta %+v ms: %s (%s)", c.delta, r.Verdict, r.Reason)
		}
		if r.DeltaMs == nil || r.Confidence == nil || r.Test == nil || r.Test.Name != "mann-whitney-u" {
			t.Fatalf("delta %+v: %+v", c.delta, r)
		}
		if c.changed && (r.Verdict != VerdictChanged || *r.Confidence < 0.99 || (*r.DeltaMs)*c.delta <= 0) {
			t.Errorf("delta %+v: verdict %s confidence %v delta %v", c.delta, r.Verdict, *r.Confidence, *r.DeltaMs)
		}
		if !c.changed && r.Verdict != VerdictUnchanged {
			t.Errorf("delta %+v: verdict %s", c.delta, r.Verdict)
		}
	}
}

func TestCompareSpreadVerdict(t *testing.T) {
	// A spread transaction whose solutions drift within their spread: the
	// shift is significant and above the minimum effect but within the IQR.
	mk := func(offset float64) TransactionSignature {
		ts := TransactionSignature{Transaction: "Execute Search", Status: StatusOK}
		for i := range 20 {
			s := 6 + 8*float64(i)/19
			ts.Buckets = append(ts.Buckets, BucketSolution{Bucket: 10 + 2*i, Utilization: 0.1 + 0.02*float64(i), Count: 100, ServiceTimeMs: s + offset, Used: true})
		}
		ts.ServiceTimeMs, ts.Q25Ms, ts.Q75Ms = ptr(10+offset), ptr(8+offset), ptr(12+offset)
		ts.SpreadClass = ClassSpread
		return ts
	}
	base, cand := mk(0), mk(3.5)
	r := Compare(&base, &cand, DefaultCompareOptions())
	if r.Verdict != VerdictSpread || r.Changed {
		t.Fatalf("%s: %s", r.Verdict, r.Reason)
	}
	cand = mk(9)
	if r := Compare(&base, &cand, DefaultCompareOptions()); r.Verdict != VerdictChanged {
		t.Fatalf("a shift beyond the spread: %s: %s", r.Verdict, r.Reason)
	}
}

func TestCompareInsufficient(t *testing.T) {
	ok := sigOf(8, 1, 0.1, 0.6)
	bad := Signature(NewProfile(Key{"shop", "v2", "Home"}), DefaultOptions())
	for name, c := range map[string]TransactionComparison{
		"no base":         Compare(nil, &ok, DefaultCompareOptions()),
		"no candidate":    Compare(&ok, nil, DefaultCompareOptions()),
		"base empty":      Compare(&bad, &ok, DefaultCompareOptions()),
		"candidate empty": Compare(&ok, &bad, DefaultCompareOptions()),
	} {
		if c.Verdict != VerdictInsufficient || c.Changed || c.DeltaMs != nil || c.Confidence != nil || c.Reason == "" {
			t.Errorf("%s: %+v", name, c)
		}
	}
}

func TestCompareApps(t *testing.T) {
	base := AppSignature{Service: "shop", Version: "v1", Transactions: []TransactionSignature{sigOf(8, 1, 0.1, 0.6), sigOf(4, 2, 0.1, 0.6)}}
	base.Transactions[1].Transaction = "Cart"
	cand := AppSignature{Service: "shop", Version: "v2", Transactions: []TransactionSignature{sigOf(10, 3, 0.2, 0.7), sigOf(4, 4, 0.2, 0.7)}}
	cand.Transactions[1].Transaction = "Cart"
	c := CompareApps(&base, &cand, DefaultCompareOptions())
	if len(c.Changed) != 1 || c.Changed[0] != "Home" || len(c.Transactions) != 2 || c.BaseVersion != "v1" || c.CandidateVersion != "v2" {
		t.Fatalf("%+v", c)
	}
}
