package model

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/tierscope/tierscope/internal/api"
)

// Record kinds of the store. Each kind's payload is the JSON of one mergeable
// statistic; Merge combines two payloads of one kind and key.
const (
	KindGraphNode = "graph.node"  // key: service; payload CallStats
	KindGraphEdge = "graph.edge"  // key: EdgeKey.String(); payload CallStats
	KindPath      = "path"        // key: signature; payload PatternStats
	KindTraces    = "traces"      // key: ""; payload TraceCount
	KindCPU       = "cpu"         // key: machine; payload CPUStats
	KindSpanRates = "span.rates"  // key: machine; payload FlowCounts
	KindSigWindow = "signature.w" // key: service\x1fversion\x1ftransaction; payload SignatureWindow
	KindGradient  = "gradient"    // key: element\x1ftransaction; payload api.Gradient (latest wins)
	KindExperimnt = "experiment"  // key: id; payload api.Experiment (latest wins)
)

// TraceCount is the number of traces (path instances) in a window.
type TraceCount struct {
	Traces int64 `json:"traces"`
}

// Record is one statistic of a window, ready for the store.
type Record struct {
	Kind, Key string
	Payload   []byte
}

// Records encodes the window's statistics.
func (w *Window) Records() ([]Record, error) {
	out := make([]Record, 0, len(w.Nodes)+len(w.Edges)+len(w.Patterns)+1)
	add := func(kind, key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("model: encoding %s %q: %w", kind, key, err)
		}
		out = append(out, Record{kind, key, b})
		return nil
	}
	for k, v := range w.Nodes {
		out = append(out, Record{KindGraphNode, k, EncodeCallStats(v)})
	}
	for k, v := range w.Edges {
		out = append(out, Record{KindGraphEdge, k.String(), EncodeCallStats(v)})
	}
	for k, v := range w.Patterns {
		out = append(out, Record{KindPath, k, EncodePattern(v)})
	}
	for k, v := range w.Flows {
		if err := add(KindSpanRates, k, v); err != nil {
			return nil, err
		}
	}
	for k, v := range w.Sigs {
		if err := add(KindSigWindow, k, v); err != nil {
			return nil, err
		}
	}
	for k, v := range w.CPU {
		if err := add(KindCPU, k, v); err != nil {
			return nil, err
		}
	}
	if err := add(KindTraces, "", TraceCount{w.Traces}); err != nil {
		return nil, err
	}
	return out, nil
}

// Merge combines two payloads of one kind (associative and commutative for the
// statistics; for gradients and experiments the later measurement wins).
func Merge(kind string, dst, src []byte) ([]byte, error) {
	if len(dst) == 0 {
		return src, nil
	}
	switch kind {
	case KindGraphNode, KindGraphEdge:
		var a, b CallStats
		if err := DecodeCallStats(dst, &a); err != nil {
			return nil, err
		}
		if err := DecodeCallStats(src, &b); err != nil {
			return nil, err
		}
		a.Merge(&b)
		return EncodeCallStats(&a), nil
	case KindPath:
		var a, b PatternStats
		if err := DecodePattern(dst, &a); err != nil {
			return nil, err
		}
		if err := DecodePattern(src, &b); err != nil {
			return nil, err
		}
		if !a.Merge(&b) {
			return nil, fmt.Errorf("model: pattern node lists differ (%d vs %d nodes)", len(a.Nodes), len(b.Nodes))
		}
		return EncodePattern(&a), nil
	case KindTraces:
		return mergeJSON(dst, src, func(a, b *TraceCount) error { a.Traces += b.Traces; return nil })
	case KindCPU:
		return mergeJSON(dst, src, func(a, b *CPUStats) error { a.Merge(b); return nil })
	case KindSpanRates:
		return mergeJSON(dst, src, func(a, b *FlowCounts) error { a.Merge(b); return nil })
	case KindSigWindow:
		return mergeJSON(dst, src, func(a, b *SignatureWindow) error { a.Merge(b); return nil })
	case KindGradient:
		return latest(dst, src, func(g api.Gradient) int64 { return g.Measured })
	case KindExperimnt:
		return latest(dst, src, func(e api.Experiment) int64 { return max(e.Started, e.Finished) })
	}
	return nil, fmt.Errorf("model: no merge for kind %q", kind)
}

func mergeJSON[T any](dst, src []byte, merge func(a, b *T) error) ([]byte, error) {
	var a, b T
	if err := json.Unmarshal(dst, &a); err != nil {
		return nil, fmt.Errorf("model: decoding: %w", err)
	}
	if err := json.Unmarshal(src, &b); err != nil {
		return nil, fmt.Errorf("model: decoding: %w", err)
	}
	if err := merge(&a, &b); err != nil {
		return nil, err
	}
	return json.Marshal(&a)
}

func latest[T any](dst, src []byte, at func(T) int64) ([]byte, error) {
	var a, b T
	if err := json.Unmarshal(dst, &a); err != nil {
		return nil, fmt.Errorf("model: decoding: %w", err)
	}
	if err := json.Unmarshal(src, &b); err != nil {
		return nil, fmt.Errorf("model: decoding: %w", err)
	}
	if at(b) > at(a) {
		return src, nil
	}
	return dst, nil
}

// PathPattern converts merged pattern statistics to the API form.
func PathPattern(signature string, p *PatternStats) api.PathPattern {
	out := api.PathPattern{Signature: signature, Count: int(p.Count), TotalLatencyMs: float64(p.TotalLatencyNs) / 1e6}
	if len(p.Nodes) == 0 {
		return out
	}
	nodes := make([]api.PathNode, len(p.Nodes))
	for i := range p.Nodes {
		nodes[i] = api.PathNode{Node: p.Nodes[i].Node, LatencyMs: p.Nodes[i].Latency.Quantiles(), CallDelayMs: p.Nodes[i].CallDelay.Quantiles(), Children: []api.PathNode{}}
	}
	// Pre-order: every parent precedes its children, so building bottom-up
	// from the end attaches complete subtrees.
	// Children are appended last first, so each list is reversed once it is
	// complete, before its node is copied into its parent.
	for i := len(nodes) - 1; i > 0; i-- {
		slices.Reverse(nodes[i].Children)
		par := p.Nodes[i].Parent
		nodes[par].Children = append(nodes[par].Children, nodes[i])
	}
	slices.Reverse(nodes[0].Children)
	out.Root = nodes[0]
	return out
}

// SortPatterns orders patterns by count, largest first, then by signature.
func SortPatterns(ps []api.PathPattern) {
	slices.SortFunc(ps, func(a, b api.PathPattern) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Signature, b.Signature)
	})
}

func jsonUnmarshal(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("model: decoding: %w", err)
	}
	return nil
}

// Decode decodes one payload of a windowed statistics kind into its type
// (*CallStats, *PatternStats, *TraceCount, *CPUStats, *FlowCounts or
// *SignatureWindow).
func Decode(kind string, b []byte) (any, error) {
	switch kind {
	case KindGraphNode, KindGraphEdge:
		v := new(CallStats)
		return v, DecodeCallStats(b, v)
	case KindPath:
		v := new(PatternStats)
		return v, DecodePattern(b, v)
	case KindTraces:
		v := new(TraceCount)
		return v, jsonUnmarshal(b, v)
	case KindCPU:
		v := new(CPUStats)
		return v, jsonUnmarshal(b, v)
	case KindSpanRates:
		v := new(FlowCounts)
		return v, jsonUnmarshal(b, v)
	case KindSigWindow:
		v := new(SignatureWindow)
		return v, jsonUnmarshal(b, v)
	}
	return nil, fmt.Errorf("model: no decoder for kind %q", kind)
}

// Encode encodes a decoded windowed statistic of kind (the inverse of Decode).
func Encode(kind string, v any) ([]byte, error) {
	switch kind {
	case KindGraphNode, KindGraphEdge:
		return EncodeCallStats(v.(*CallStats)), nil
	case KindPath:
		return EncodePattern(v.(*PatternStats)), nil
	}
	return json.Marshal(v)
}
