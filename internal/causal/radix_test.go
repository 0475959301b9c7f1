package causal

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

// The radix sorts must order exactly as the comparison sorts they replaced: calls
// by (call, return, index), shares decreasing with ties in incoming order.
func TestRadixOrdersAsComparisonSorts(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for trial := range 50 {
		n := rng.IntN(3000)
		pairs := make([]CallPair, n)
		for i := range pairs {
			call := int64(rng.IntN(1 + trial*trial*1000)) // many ties in early trials
			if trial%5 == 0 {
				call = 1<<62 - call // large times, far from zero
			}
			pairs[i] = CallPair{Call: call, Return: call + int64(rng.IntN(50))}
		}
		got := orderByCall(pairs)
		want := make([]int32, n)
		for i := range want {
			want[i] = int32(i)
		}
		slices.SortFunc(want, func(a, b int32) int {
			pa, pb := &pairs[a], &pairs[b]
			switch {
			case pa.Call != pb.Call:
				return cmpInt64(pa.Call, pb.Call)
			case pa.Return != pb.Return:
				return cmpInt64(pa.Return, pb.Return)
			}
			return int(a - b)
		})
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: orderByCall differs from the comparison sort", trial)
		}

		share := make([]float64, n)
		for i := range share {
			share[i] = []float64{0, 1, 0.5, 1.0 / 3, rng.Float64()}[rng.IntN(5)]
			if trial == 49 && i == 0 {
				share[i] = -0.5 // out of range: the comparison sort takes over
			}
		}
		order := rng.Perm(n)
		got32, want32 := make([]int32, n), make([]int32, n)
		aligned := make([]float64, n)
		for i, v := range order {
			got32[i], want32[i] = int32(v), int32(v)
			aligned[i] = share[v]
		}
		byDecreasingShare(got32, aligned)
		slices.SortStableFunc(want32, func(a, b int32) int {
			switch {
			case share[a] > share[b]:
				return -1
			case share[a] < share[b]:
				return 1
			}
			return 0
		})
		if !slices.Equal(got32, want32) {
			t.Fatalf("trial %d: byDecreasingShare differs from the stable sort", trial)
		}
	}
}

// Nest runs parts of its work in parallel; its result must not depend on how many
// processors it has.
func TestNestIndependentOfProcessors(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	var msgs []Message
	var now int64
	type open struct {
		from NodeID
		id   uint32
		path uint32
	}
	var stack []open
	for i := range 200_000 {
		now += int64(rng.IntN(int(time.Millisecond)))
		if len(stack) > 0 && (len(stack) > 6 || rng.IntN(2) == 0) {
			c := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			msgs = append(msgs, Message{Time: now, Op: OpReturn, Sender: c.from + 1, Receiver: c.from, CallID: c.id, PathID: c.path})
			continue
		}
		from := NodeID(len(stack))
		path := uint32(i)
		if len(stack) > 0 {
			path = stack[0].path
		}
		stack = append(stack, open{from, uint32(i + 1), path})
		msgs = append(msgs, Message{Time: now, Op: OpCall, Sender: from, Receiver: from + 1, CallID: uint32(i + 1), PathID: path})
	}
	pairs, _ := FindCallPairs(msgs, 0)
	run := func(procs int, cfg NestingConfig) *Nesting {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		n, err := Nest(pairs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, cfg := range []NestingConfig{DefaultNestingConfig(), func() NestingConfig {
		c := DefaultNestingConfig()
		c.SkewWindow, c.SmoothSigma, c.UsePathIDs = time.Millisecond, 2, true
		return c
	}()} {
		one, four := run(1, cfg), run(4, cfg)
		if !slices.Equal(one.Parent, four.Parent) || !slices.Equal(one.Confidence, four.Confidence) || one.Nestings != four.Nestings {
			t.Fatalf("1 and 4 processors disagree (%d and %d nestings)", one.Nestings, four.Nestings)
		}
	}
}

func BenchmarkOrderByCall(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	pairs := make([]CallPair, 1_000_000)
	var now int64 = 1_700_000_000e9
	for i := range pairs {
		now += int64(rng.IntN(10_000_000))
		pairs[i] = CallPair{Call: now - int64(rng.IntN(200_000_000)), Return: now}
	}
	b.ReportAllocs()
	for b.Loop() {
		orderByCall(pairs)
	}
}
