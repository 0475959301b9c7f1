package stitcheval

import "testing"

// Every random draw is an application the generator accepts, and a draw is
// the same for its index.
func TestRandomParamsValid(t *testing.T) {
	for i := range 200 {
		d := RandomParams(i)
		if err := d.Params.Validate(); err != nil {
			t.Fatalf("draw %d: %v", i, err)
		}
		if d.Params.Concurrency != d.Concurrency || d.String() != RandomParams(i).String() {
			t.Fatalf("draw %d is not deterministic: %s", i, d)
		}
	}
}
