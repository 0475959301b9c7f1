package stitch

import (
	"github.com/tierscope/tierscope/internal/causal"
)

// TruthScore compares the parents after stitching with the truth that test data
// carries in AttrTruthParent.
type TruthScore struct {
	// Links is the number of spans with a true parent, Correct those whose parent
	// after stitching is the true one (known or inferred), Accuracy their ratio.
	Links, Correct int
	Accuracy       float64
	// OrphanLinks and OrphanCorrect restrict the same to spans that had lost their
	// parent: the inference's own work.
	OrphanLinks, OrphanCorrect int
	OrphanAccuracy             float64
	// RootsAttached counts true roots that were given a parent.
	RootsAttached int
	// Written counts the inferred parents that were written (at or above the
	// minimum confidence), WrittenCorrect the right ones, Precision their ratio;
	// BestCorrect counts the lost links whose best candidate, written or not,
	// was right.
	Written, WrittenCorrect, BestCorrect int
	Precision                            float64
	// Calibration is the accuracy of inferred parents per confidence decile.
	Calibration []CalibrationBucket
}

// CalibrationBucket is the accuracy of the inferred parents whose confidence lies
// in [Low, High).
type CalibrationBucket struct {
	Low, High         float64
	Inferred, Correct int
	Accuracy          float64
}

// scoreTruth returns nil when no span carries a truth attribute.
func scoreTruth(refs []spanRef, rd *round, res *causal.StitchResult, written []int32) *TruthScore {
	t := &TruthScore{Calibration: make([]CalibrationBucket, 10)}
	for d := range t.Calibration {
		t.Calibration[d].Low, t.Calibration[d].High = float64(d)/10, float64(d+1)/10
	}
	seen := false
	for j, p := range written {
		if rd.ref[j] < 0 || refs[rd.ref[j]].context {
			continue
		}
		sp := refs[rd.ref[j]].span
		v, ok := sp.Attributes().Get(AttrTruthParent)
		if !ok {
			continue
		}
		seen = true
		truth := v.Str()
		got := ""
		switch {
		case p >= 0:
			got = rd.ids[p].String()
		case !sp.ParentSpanID().IsEmpty():
			got = sp.ParentSpanID().String()
		}
		wasOrphan := res.Inferred[j] || (p < 0 && sp.ParentSpanID().IsEmpty())
		if truth == "" {
			if got != "" {
				t.RootsAttached++
			}
		} else {
			t.Links++
			if got == truth {
				t.Correct++
			}
			if wasOrphan {
				t.OrphanLinks++
				if got == truth {
					t.OrphanCorrect++
				}
			}
		}
		if res.Inferred[j] {
			best := rd.ids[res.Parent[j]].String() == truth
			if best && truth != "" {
				t.BestCorrect++
			}
			if p >= 0 {
				t.Written++
				if best {
					t.WrittenCorrect++
				}
			}
			d := min(int(res.Confidence[j]*10), 9)
			t.Calibration[d].Inferred++
			if best {
				t.Calibration[d].Correct++
			}
		}
	}
	if !seen {
		return nil
	}
	t.Accuracy = ratio(t.Correct, t.Links)
	t.OrphanAccuracy = ratio(t.OrphanCorrect, t.OrphanLinks)
	t.Precision = ratio(t.WrittenCorrect, t.Written)
	for d := range t.Calibration {
		t.Calibration[d].Accuracy = ratio(t.Calibration[d].Correct, t.Calibration[d].Inferred)
	}
	return t
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
