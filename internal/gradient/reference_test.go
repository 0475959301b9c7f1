package gradient

import (
	"testing"

	"github.com/tierscope/tierscope/internal/spectral"
)

func TestCrossingsHas(t *testing.T) {
	c := Crossings(1<<0 | 1<<63)
	for i, want := range map[int]bool{0: true, 1: false, 63: true, 64: false, 100: false} {
		if c.Has(i) != want {
			t.Errorf("Has(%d) = %v", i, !want)
		}
	}
}

// A reference is used only where it is a fair share of the transaction:
// too few requests cannot follow the noise, and a transaction that hardly
// crosses the element would be adjusted for nearly itself.
func TestReferenceShareBounds(t *testing.T) {
	for _, tc := range []struct {
		ref  int // of every 10 requests
		want bool
	}{{0, false}, {1, false}, {2, true}, {5, true}, {8, true}, {9, false}, {10, false}} {
		all, ref := spectral.NewBins(0, 1, 16), spectral.NewBins(0, 1, 16)
		for bin := range 16 {
			for i := range 10 {
				at, ms := float64(bin)+0.05*float64(i), float64(10+i)
				all.Add(at, ms)
				if i < tc.ref {
					ref.Add(at, ms)
				}
			}
		}
		if _, ok := referenceSeries(ref, all); ok != tc.want {
			t.Errorf("%d of 10 requests not crossing: used %v, want %v", tc.ref, ok, tc.want)
		}
	}
}
