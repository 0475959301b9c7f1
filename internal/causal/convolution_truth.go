package causal

import (
	"slices"
	"strings"
)

// TrueChain is a chain pattern of the ground truth with its instance count.
type TrueChain struct {
	Signature string
	Nodes     []string
	Count     int
}

// ConvolutionTruth is the ground truth of a trace as chains, the form in which
// the convolution algorithm reports paths. Within one path instance (path id),
// a message's causal predecessor is the latest earlier message of the instance
// that its sender received; the messages then form a tree, and every
// root-to-leaf chain of that tree is one instance of the chain of its nodes. A
// serial RPC path and an email's relay path are one chain each; parallel calls
// or a fan-out give one chain per branch.
type ConvolutionTruth struct {
	Chains []TrueChain // by count, largest first
	trie   *seqTrie
	prefix []int32 // per message: the chain from its instance's root to its receiver; −1 without a path id
	count  map[int32]int
}

// ChainTruth computes the ground truth of msgs from their path ids.
func ChainTruth(msgs []Message, nodes []string) *ConvolutionTruth {
	order := make([]int32, 0, len(msgs))
	for i, m := range msgs {
		if m.PathID != NoID {
			order = append(order, int32(i))
		}
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		ma, mb := msgs[a], msgs[b]
		switch {
		case ma.PathID != mb.PathID:
			return int(ma.PathID) - int(mb.PathID)
		case ma.Time < mb.Time:
			return -1
		case ma.Time > mb.Time:
			return 1
		}
		return 0
	})
	t := &ConvolutionTruth{trie: newSeqTrie(), prefix: make([]int32, len(msgs)), count: map[int32]int{}}
	for i := range t.prefix {
		t.prefix[i] = -1
	}
	hasChild := make([]bool, len(msgs))
	for start := 0; start < len(order); {
		end := start + 1
		for end < len(order) && msgs[order[end]].PathID == msgs[order[start]].PathID {
			end++
		}
		group := order[start:end]
		// last[n]: the latest message of the instance received by node n.
		last := map[NodeID]int32{}
		for _, i := range group {
			m := msgs[i]
			if p, ok := last[m.Sender]; ok {
				t.prefix[i] = t.trie.child(t.prefix[p], m.Receiver, true)
				hasChild[p] = true
			} else {
				t.prefix[i] = t.trie.child(t.trie.child(0, m.Sender, true), m.Receiver, true)
			}
			last[m.Receiver] = i
		}
		for _, i := range group {
			if !hasChild[i] {
				t.count[t.prefix[i]]++
			}
		}
		start = end
	}
	for s, n := range t.count {
		names := namesOf(t.trie.sequence(s), nodes)
		t.Chains = append(t.Chains, TrueChain{Signature: chainSignature(names), Nodes: names, Count: n})
	}
	slices.SortFunc(t.Chains, func(a, b TrueChain) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Signature, b.Signature)
	})
	return t
}

func namesOf(ids []NodeID, nodes []string) []string {
	out := make([]string, len(ids))
	for i, n := range ids {
		out[i] = nodes[n]
	}
	return out
}

// ConvolutionAccuracy scores convolution patterns against the truth with the
// metrics of §7.5.1, counting chain patterns and their instances, plus the
// frequent-path view of §7.5.7.
type ConvolutionAccuracy struct {
	// TopNFalseNegatives[N-1]: how many of the N most frequent true chains are
	// not among the N most frequent inferred patterns.
	TopNFalseNegatives []int `json:"top_n_false_negatives"`
	// FalsePositivePatterns counts inferred patterns that are no true chain.
	FalsePositivePatterns int `json:"false_positive_patterns"`
	// FalseNegativeInstances is Σ over true chains of max(0, true − inferred
	// count), FalsePositiveInstances the converse.
	FalseNegativeInstances    int     `json:"false_negative_instances"`
	FalsePositiveInstances    int     `json:"false_positive_instances"`
	TruthInstances            int     `json:"truth_instances"`
	TruthPatterns             int     `json:"truth_patterns"`
	FalseNegativeInstanceRate float64 `json:"false_negative_instance_rate"`
	// MessageAttributionError is the fraction of messages with a path id that no
	// reported vertex carries with the message's true chain, from the root of its
	// instance to its receiver. −1 when the result lacks its vertices' messages.
	MessageAttributionError float64 `json:"message_attribution_error"`
	// Frequent is the threshold of §7.5.7 (100 there). FrequentFalsePositives
	// counts inferred patterns with at least Frequent instances that are no true
	// chain; FrequentFalseNegatives true chains with at least Frequent instances
	// that no inferred pattern reports.
	Frequent               int `json:"frequent"`
	FrequentFalsePositives int `json:"frequent_false_positives"`
	FrequentFalseNegatives int `json:"frequent_false_negatives"`
	// FrequentTruth counts the true chains with at least Frequent instances.
	FrequentTruth int `json:"frequent_truth"`
}

// Score compares res with the truth for top-N ranks 1..maxN, with frequent as
// the threshold of frequent paths.
func (t *ConvolutionTruth) Score(res *ConvolutionResult, maxN, frequent int) ConvolutionAccuracy {
	a := ConvolutionAccuracy{Frequent: frequent, TruthPatterns: len(t.Chains)}
	inferred := make(map[string]int, len(res.Patterns))
	for _, p := range res.Patterns {
		inferred[p.Signature] = p.Count
	}
	truth := make(map[string]int, len(t.Chains))
	for _, c := range t.Chains {
		truth[c.Signature] = c.Count
		a.TruthInstances += c.Count
		a.FalseNegativeInstances += max(0, c.Count-inferred[c.Signature])
		if c.Count >= frequent {
			a.FrequentTruth++
			if _, ok := inferred[c.Signature]; !ok {
				a.FrequentFalseNegatives++
			}
		}
	}
	for _, p := range res.Patterns {
		n, ok := truth[p.Signature]
		if !ok {
			a.FalsePositivePatterns++
			if p.Count >= frequent {
				a.FrequentFalsePositives++
			}
		}
		a.FalsePositiveInstances += max(0, p.Count-n)
	}
	if a.TruthInstances > 0 {
		a.FalseNegativeInstanceRate = float64(a.FalseNegativeInstances) / float64(a.TruthInstances)
	}
	a.TopNFalseNegatives = make([]int, maxN)
	top := make(map[string]bool, maxN)
	for N := 1; N <= maxN; N++ {
		if N <= len(res.Patterns) {
			top[res.Patterns[N-1].Signature] = true
		}
		for _, c := range t.Chains[:min(N, len(t.Chains))] {
			if !top[c.Signature] {
				a.TopNFalseNegatives[N-1]++
			}
		}
	}
	a.MessageAttributionError = t.attributionError(res)
	return a
}

// attributionError is the fraction of messages with a path id that no reported
// vertex (one on the chain of a reported pattern) carries with its true chain.
func (t *ConvolutionTruth) attributionError(res *ConvolutionResult) float64 {
	if res.VertexMessages == nil {
		return -1
	}
	vs := res.Vertices
	// Map the node ids of the result's table onto the truth's: both come from the
	// same trace, so they are the same ids.
	seq := vertexSeqs(vs, t.trie, false)
	reported := make([]bool, len(vs))
	for _, p := range res.Patterns {
		for _, x := range p.Vertices {
			for v := x; v >= 0 && !reported[v]; v = vs[v].Parent {
				reported[v] = true
			}
		}
	}
	ok := make([]bool, len(t.prefix))
	for v, msgs := range res.VertexMessages {
		if !reported[v] || seq[v] < 0 {
			continue
		}
		for _, i := range msgs {
			if t.prefix[i] == seq[v] {
				ok[i] = true
			}
		}
	}
	total, right := 0, 0
	for i, p := range t.prefix {
		if p < 0 {
			continue
		}
		total++
		if ok[i] {
			right++
		}
	}
	if total == 0 {
		return 0
	}
	return 1 - float64(right)/float64(total)
}
