package stitcheval

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Scores is what Score measures on a stitcher's output. A link is a span that
// had a true parent and lost it: its truth is non-empty and it does not still
// carry that parent untouched (same parentSpanId, no inferred attribute). Spans
// that kept their link (StripCrossProcess) are counted in Kept and nowhere else.
type Scores struct {
	Spans int `json:"spans"` // spans in the output
	Kept  int `json:"kept"`  // spans that kept their true parent through context
	Links int `json:"links"` // spans that lost their true parent
	// Unreachable counts links whose true parent is not among the spans: no
	// stitcher can get them right.
	Unreachable int `json:"unreachable,omitempty"`
	// Written counts links whose parentSpanId is set after stitching, Correct
	// those set to the true parent: Precision = Correct/Written, and Accuracy =
	// Correct/Links is the share of parent links right.
	Written   int     `json:"written"`
	Correct   int     `json:"correct"`
	Precision float64 `json:"precision"`
	Accuracy  float64 `json:"accuracy"`
	// Candidates counts links that carry an inferred parent whatever its
	// confidence, BestCorrect those whose inferred parent is the true one:
	// BestAccuracy = BestCorrect/Links is the accuracy with no threshold.
	Candidates   int     `json:"candidates"`
	BestCorrect  int     `json:"best_correct"`
	BestAccuracy float64 `json:"best_accuracy"`
	// Roots counts true roots, RootsAttached those given a parentSpanId and
	// RootsCandidates those given an inferred parent (all wrong).
	Roots           int `json:"roots"`
	RootsAttached   int `json:"roots_attached"`
	RootsCandidates int `json:"roots_candidates"`
	// Calibration is, per confidence decile, how many inferred parents (of links
	// and roots) were right: a reliability diagram.
	Calibration []Bucket `json:"calibration"`
	// Curve is precision against coverage for thresholds 0, 0.05, …, 1 applied to
	// the inferred attributes, as if the stitcher had written only the parents
	// whose confidence reaches the threshold.
	Curve []CurvePoint `json:"curve"`
	// ByKind breaks the links down by the child's span kind, ByLocality by whether
	// the true parent ran in the child's process ("local") or not ("remote").
	ByKind     map[string]Counts `json:"by_kind"`
	ByLocality map[string]Counts `json:"by_locality"`
}

// Counts is the share of Scores that breaks down by category.
type Counts struct {
	Links        int     `json:"links"`
	Written      int     `json:"written"`
	Correct      int     `json:"correct"`
	BestCorrect  int     `json:"best_correct"`
	Precision    float64 `json:"precision"`
	Accuracy     float64 `json:"accuracy"`
	BestAccuracy float64 `json:"best_accuracy"`
}

// Bucket holds the inferred parents whose confidence lies in [Low, High) (the
// last bucket includes 1).
type Bucket struct {
	Low            float64 `json:"low"`
	High           float64 `json:"high"`
	Candidates     int     `json:"candidates"`
	Correct        int     `json:"correct"`
	MeanConfidence float64 `json:"mean_confidence"`
	Accuracy       float64 `json:"accuracy"`
}

// CurvePoint is the outcome of a confidence threshold: Written links reach it,
// Correct of them rightly; Precision = Correct/Written, Coverage =
// Written/Links, Accuracy = Correct/Links; RootsAttached true roots reach it.
type CurvePoint struct {
	Threshold     float64 `json:"threshold"`
	Written       int     `json:"written"`
	Correct       int     `json:"correct"`
	RootsAttached int     `json:"roots_attached"`
	Precision     float64 `json:"precision"`
	Coverage      float64 `json:"coverage"`
	Accuracy      float64 `json:"accuracy"`
}

// CurveSteps is the number of threshold steps of Scores.Curve (101 points:
// thresholds 0.01 apart, so that the 0.95–1 range, where defaults lie, is seen).
const CurveSteps = 100

// Score measures the stitched spans of the batches against the truth that Strip
// recorded; spans without a truth attribute are ignored. It reads only the
// output contract, never the stitcher.
func Score(batches ...ptrace.Traces) Scores {
	recs := collect(batches...)
	process := make(map[string]string, len(recs)) // span id hex -> process
	for _, r := range recs {
		process[r.span.SpanID().String()] = r.process
	}
	s := Scores{Spans: len(recs), ByKind: map[string]Counts{}, ByLocality: map[string]Counts{}}
	s.Calibration = make([]Bucket, 10)
	confSum := make([]float64, 10)
	for d := range s.Calibration {
		s.Calibration[d].Low, s.Calibration[d].High = float64(d)/10, float64(d+1)/10
	}
	var cands []scoredCandidate
	for _, r := range recs {
		attrs := r.span.Attributes()
		truth, ok := strAttr(attrs, AttrTruthParent)
		if !ok {
			continue
		}
		got := ""
		if !r.span.ParentSpanID().IsEmpty() {
			got = r.span.ParentSpanID().String()
		}
		inferred, hasInferred := strAttr(attrs, AttrInferredParent)
		conf, _ := floatAttr(attrs, AttrInferredConfidence) // a missing confidence counts as 0
		conf = min(max(conf, 0), 1)
		if hasInferred {
			d := min(int(conf*10), 9)
			s.Calibration[d].Candidates++
			confSum[d] += conf
			if inferred == truth && truth != "" {
				s.Calibration[d].Correct++
			}
			cands = append(cands, scoredCandidate{conf, inferred == truth && truth != "", truth == ""})
		}
		if truth == "" {
			s.Roots++
			if got != "" {
				s.RootsAttached++
			}
			if hasInferred {
				s.RootsCandidates++
			}
			continue
		}
		if got == truth && !hasInferred {
			s.Kept++
			continue
		}
		s.Links++
		locality := "unreachable"
		if p, ok := process[truth]; !ok {
			s.Unreachable++
		} else if p == r.process {
			locality = "local"
		} else {
			locality = "remote"
		}
		var c Counts
		c.Links = 1
		if got != "" {
			c.Written = 1
			if got == truth {
				c.Correct = 1
			}
		}
		if hasInferred {
			s.Candidates++
			if inferred == truth {
				c.BestCorrect = 1
			}
		}
		s.Written += c.Written
		s.Correct += c.Correct
		s.BestCorrect += c.BestCorrect
		k := kindName(r.span.Kind())
		s.ByKind[k] = s.ByKind[k].add(c)
		s.ByLocality[locality] = s.ByLocality[locality].add(c)
	}
	s.finish(confSum)
	s.Curve = thresholdCurve(cands, s.Links)
	return s
}

// scoredCandidate is an inferred parent: its confidence, whether it is the
// true parent, and whether the orphan was a true root.
type scoredCandidate struct {
	conf          float64
	correct, root bool
}

// thresholdCurve sweeps the candidates by decreasing confidence: at each of
// the CurveSteps+1 thresholds, the parents written and right, over links
// lost links.
func thresholdCurve(cands []scoredCandidate, links int) []CurvePoint {
	slices.SortFunc(cands, func(a, b scoredCandidate) int {
		switch {
		case a.conf > b.conf:
			return -1
		case a.conf < b.conf:
			return 1
		}
		return 0
	})
	var curve []CurvePoint
	var written, correct, roots, next int
	for step := CurveSteps; step >= 0; step-- {
		th := float64(step) / CurveSteps
		for ; next < len(cands) && cands[next].conf >= th-1e-9; next++ {
			switch {
			case cands[next].root:
				roots++
			default:
				written++
				if cands[next].correct {
					correct++
				}
			}
		}
		curve = append(curve, CurvePoint{Threshold: th, Written: written, Correct: correct, RootsAttached: roots,
			Precision: ratio(correct, written), Coverage: ratio(written, links), Accuracy: ratio(correct, links)})
	}
	slices.Reverse(curve)
	return curve
}

func (c Counts) add(o Counts) Counts {
	c.Links += o.Links
	c.Written += o.Written
	c.Correct += o.Correct
	c.BestCorrect += o.BestCorrect
	return c
}

func (c Counts) finish() Counts {
	c.Precision = ratio(c.Correct, c.Written)
	c.Accuracy = ratio(c.Correct, c.Links)
	c.BestAccuracy = ratio(c.BestCorrect, c.Links)
	return c
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// finish derives the ratios of s from its counts; confSum holds, per
// calibration decile, the sum of the confidences counted in it.
func (s *Scores) finish(confSum []float64) {
	s.Precision = ratio(s.Correct, s.Written)
	s.Accuracy = ratio(s.Correct, s.Links)
	s.BestAccuracy = ratio(s.BestCorrect, s.Links)
	for d := range s.Calibration {
		b := &s.Calibration[d]
		b.Accuracy = ratio(b.Correct, b.Candidates)
		if b.Candidates > 0 {
			b.MeanConfidence = confSum[d] / float64(b.Candidates)
		}
	}
	for k, c := range s.ByKind {
		s.ByKind[k] = c.finish()
	}
	for k, c := range s.ByLocality {
		s.ByLocality[k] = c.finish()
	}
}
