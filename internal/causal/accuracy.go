package causal

// Accuracy compares an inferred nesting with the ground truth using the metrics of
// paper 001 §7.5.1. Both nestings must be over the same call pairs; the truth is the
// nesting computed with UsePathIDs (the paper's "cheat" mode).
type Accuracy struct {
	// TopNFalseNegatives[N-1] is the number of the N most frequent true patterns
	// that are missing from the N most frequent inferred patterns.
	TopNFalseNegatives []int `json:"top_n_false_negatives"`
	// FalsePositivePatterns counts inferred patterns that never occur in the truth.
	FalsePositivePatterns int `json:"false_positive_patterns"`
	// FalseNegativeInstances is Σ over patterns of max(0, true count − inferred
	// count), and FalsePositiveInstances the converse, as in the paper's example.
	FalseNegativeInstances int `json:"false_negative_instances"`
	FalsePositiveInstances int `json:"false_positive_instances"`
	TruthInstances         int `json:"truth_instances"`
	// FalseNegativeInstanceRate is FalseNegativeInstances / TruthInstances.
	FalseNegativeInstanceRate float64 `json:"false_negative_instance_rate"`
	// MessageAttributionError is the fraction of matched messages that do not lie
	// in an inferred path instance identical to their true instance (same call
	// pairs, same parents).
	MessageAttributionError float64 `json:"message_attribution_error"`
}

// Compare scores inferred against truth for top-N ranks 1..maxN.
func Compare(inferred, truth *Nesting, inferredPatterns, truthPatterns []*Pattern, maxN int) Accuracy {
	var a Accuracy
	inferredCount := make(map[string]int, len(inferredPatterns))
	for _, p := range inferredPatterns {
		inferredCount[p.Signature] = p.Count
	}
	truthCount := make(map[string]int, len(truthPatterns))
	for _, p := range truthPatterns {
		truthCount[p.Signature] = p.Count
		a.TruthInstances += p.Count
		a.FalseNegativeInstances += max(0, p.Count-inferredCount[p.Signature])
	}
	for _, p := range inferredPatterns {
		t, ok := truthCount[p.Signature]
		if !ok {
			a.FalsePositivePatterns++
		}
		a.FalsePositiveInstances += max(0, p.Count-t)
	}
	if a.TruthInstances > 0 {
		a.FalseNegativeInstanceRate = float64(a.FalseNegativeInstances) / float64(a.TruthInstances)
	}

	a.TopNFalseNegatives = make([]int, maxN)
	topInferred := make(map[string]bool, maxN)
	for N := 1; N <= maxN; N++ {
		if N <= len(inferredPatterns) {
			topInferred[inferredPatterns[N-1].Signature] = true
		}
		for _, p := range truthPatterns[:min(N, len(truthPatterns))] {
			if !topInferred[p.Signature] {
				a.TopNFalseNegatives[N-1]++
			}
		}
	}
	a.MessageAttributionError = attributionError(inferred, truth)
	return a
}

// attributionError returns the fraction of pairs (and so of messages, two per pair)
// outside exactly inferred instances.
func attributionError(inferred, truth *Nesting) float64 {
	total := len(inferred.Pairs)
	if total == 0 {
		return 0
	}
	infRoot := roots(inferred.Parent)
	truthRoot := roots(truth.Parent)
	infSize := make(map[int32]int)
	truthSize := make(map[int32]int)
	wrong := make(map[int32]bool)
	for i := range inferred.Pairs {
		r := infRoot[i]
		infSize[r]++
		truthSize[truthRoot[i]]++
		if inferred.Parent[i] != truth.Parent[i] {
			wrong[r] = true
		}
	}
	exact := 0
	for r, size := range infSize {
		if truth.Parent[r] < 0 && !wrong[r] && truthSize[r] == size {
			exact += size
		}
	}
	return 1 - float64(exact)/float64(total)
}

// roots maps every pair to the root of its path, memoising along the way.
func roots(parent []int32) []int32 {
	root := make([]int32, len(parent))
	for i := range root {
		root[i] = -1
	}
	var stack []int32
	for i := range parent {
		j := int32(i)
		for root[j] < 0 && parent[j] >= 0 {
			stack = append(stack, j)
			j = parent[j]
		}
		r := root[j]
		if r < 0 {
			r = j
			root[j] = j
		}
		for _, s := range stack {
			root[s] = r
		}
		stack = stack[:0]
	}
	return root
}
