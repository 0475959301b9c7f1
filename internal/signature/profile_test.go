package signature

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestFrontLatencyEquation1(t *testing.T) {
	// The docs/formats.md §6 example row: 35.2 − 240·4.1/120 = 27.0 ms.
	w := Window{Count: 120, LatencyMs: 35.2, OutboundCalls: 240, OutboundLatencyMs: 4.1, CPUUtilization: 0.31}
	if got := w.FrontLatencyMs(); math.Abs(got-27.0) > 1e-12 {
		t.Fatalf("front latency %v, want 27.0", got)
	}
	if got := (Window{Count: 10, LatencyMs: 5}).FrontLatencyMs(); got != 5 {
		t.Fatalf("no outbound calls: %v, want 5", got)
	}
	if got := (Window{}).FrontLatencyMs(); !math.IsNaN(got) {
		t.Fatalf("empty window: %v, want NaN", got)
	}
}

func TestBucketIndex(t *testing.T) {
	for _, c := range []struct {
		u    float64
		want int
	}{{0, 0}, {0.004, 0}, {0.10, 10}, {0.31, 31}, {0.999999, 99}, {1, -1}, {1.3, -1}, {math.NaN(), -1}} {
		if got := BucketIndex(c.u); got != c.want {
			t.Errorf("BucketIndex(%v) = %d, want %d", c.u, got, c.want)
		}
	}
}

func TestAddSkipsAndRefuses(t *testing.T) {
	p := NewProfile(Key{"shop", "v1", "Home"})
	for _, c := range []struct {
		w      Window
		reason SkipReason
	}{
		{Window{Count: 10, LatencyMs: 20, CPUUtilization: 1}, SkipSaturated},
		{Window{Count: 10, LatencyMs: 20, CPUUtilization: 1.7}, SkipSaturated},
		{Window{Count: 0, CPUUtilization: 0.3}, SkipEmpty},
		{Window{Count: 10, LatencyMs: 5, OutboundCalls: 20, OutboundLatencyMs: 3, CPUUtilization: 0.3}, SkipNegativeFront},
	} {
		added, reason, err := p.Add(c.w)
		if err != nil || added || reason != c.reason {
			t.Errorf("%+v: added %v reason %v err %v, want skipped as %v", c.w, added, reason, err, c.reason)
		}
	}
	if p.Windows() != 0 || p.Skipped != [numSkipReasons]int64{2, 1, 1} {
		t.Fatalf("windows %d skipped %v", p.Windows(), p.Skipped)
	}
	for _, w := range []Window{
		{Count: -1, CPUUtilization: 0.3},
		{Count: 1, LatencyMs: math.NaN(), CPUUtilization: 0.3},
		{Count: 1, LatencyMs: -2, CPUUtilization: 0.3},
		{Count: 1, LatencyMs: 2, CPUUtilization: -0.1},
		{Count: 1, LatencyMs: 2, OutboundCalls: -1, CPUUtilization: 0.1},
		{Count: 1, LatencyMs: 2, OutboundLatencyMs: math.Inf(1), CPUUtilization: 0.1},
	} {
		if _, _, err := p.Add(w); !errors.Is(err, ErrInvalidWindow) {
			t.Errorf("%+v: err %v, want ErrInvalidWindow", w, err)
		}
	}
	if added, _, err := p.Add(Window{Count: 3, LatencyMs: 12, OutboundCalls: 3, OutboundLatencyMs: 2, CPUUtilization: 0.255}); !added || err != nil {
		t.Fatal(added, err)
	}
	b := p.Buckets[25]
	if b.Windows != 1 || b.Count != 3 || b.FrontLatencySum != 30000 || b.UtilizationSum != 765000 {
		t.Fatalf("bucket %+v", b)
	}
	if b.MeanFrontLatencyMs() != 10 || math.Abs(b.MeanUtilization()-0.255) > 1e-15 {
		t.Fatalf("means %v %v", b.MeanFrontLatencyMs(), b.MeanUtilization())
	}
}

func randomWindow(r *rand.Rand) Window {
	n := int64(1 + r.IntN(500))
	calls := int64(r.IntN(4)) * n
	return Window{Count: n, LatencyMs: 5 + 50*r.Float64() + 4*float64(calls)/float64(n), OutboundCalls: calls,
		OutboundLatencyMs: 4 * r.Float64(), CPUUtilization: r.Float64() * 1.05}
}

// Profiles built from shards, in any order, merge to exactly the profile of
// all windows, and survive a JSON round trip bit for bit.
func TestMergeIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	key := Key{"shop", "v1", "Home"}
	whole := NewProfile(key)
	shards := []*Profile{NewProfile(key), NewProfile(key), NewProfile(key)}
	for range 5000 {
		w := randomWindow(r)
		if _, _, err := whole.Add(w); err != nil {
			t.Fatal(err)
		}
		if _, _, err := shards[r.IntN(3)].Add(w); err != nil {
			t.Fatal(err)
		}
	}
	for _, order := range [][]int{{0, 1, 2}, {2, 0, 1}, {1, 2, 0}} {
		m := NewProfile(key)
		for _, i := range order {
			// Through JSON, as shards stored apart would be.
			data, err := json.Marshal(shards[i])
			if err != nil {
				t.Fatal(err)
			}
			var q Profile
			if err := json.Unmarshal(data, &q); err != nil {
				t.Fatal(err)
			}
			if q != *shards[i] {
				t.Fatal("JSON round trip changed the profile")
			}
			if err := m.Merge(&q); err != nil {
				t.Fatal(err)
			}
		}
		if *m != *whole {
			t.Fatalf("merge in order %v differs from the whole", order)
		}
	}
	if whole.Skipped[SkipSaturated] == 0 {
		t.Fatal("test should exercise saturated windows")
	}
	// Signatures of equal profiles are equal.
	a, _ := json.Marshal(Signature(whole, DefaultOptions()))
	m := NewProfile(key)
	for _, s := range shards {
		m.Merge(s)
	}
	b, _ := json.Marshal(Signature(m, DefaultOptions()))
	if string(a) != string(b) {
		t.Fatal("signature of the merged profile differs")
	}
}

func TestMergeRefuses(t *testing.T) {
	p := NewProfile(Key{"shop", "v1", "Home"})
	if err := p.Merge(NewProfile(Key{"shop", "v2", "Home"})); !errors.Is(err, ErrKeyMismatch) {
		t.Fatalf("key mismatch: %v", err)
	}
	q := NewProfile(p.Key)
	p.Buckets[3].Count = math.MaxInt64 - 1
	q.Buckets[3].Count = 2
	q.Buckets[4].Count = 7
	before := *p
	if err := p.Merge(q); !errors.Is(err, ErrOverflow) {
		t.Fatalf("overflow: %v", err)
	}
	if *p != before {
		t.Fatal("a failed merge changed the profile")
	}
	var bad Profile
	for _, s := range []string{
		`{"service":"a","version":"b","transaction":"c","buckets":[{"bucket":100,"windows":1,"count":1,"front_latency_sum_us":1,"utilization_sum_ppm":1}]}`,
		`{"service":"a","version":"b","transaction":"c","buckets":[{"bucket":3,"windows":1,"count":-1,"front_latency_sum_us":1,"utilization_sum_ppm":1}]}`,
		`{"service":"a","version":"b","transaction":"c","buckets":[],"skipped_windows":{"bogus":1}}`,
	} {
		if err := json.Unmarshal([]byte(s), &bad); err == nil {
			t.Errorf("accepted %s", s)
		}
	}
}
