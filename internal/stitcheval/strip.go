package stitcheval

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// StripMode says which parent links Strip removes.
type StripMode uint8

const (
	// StripAll removes every parent link: no span carries context.
	StripAll StripMode = iota
	// StripCrossProcess removes only the links whose parent ran in another
	// process, where context must cross the network and is lost when an SDK or a
	// proxy does not propagate it.
	StripCrossProcess
)

func (m StripMode) String() string {
	switch m {
	case StripAll:
		return "all"
	case StripCrossProcess:
		return "cross-process"
	}
	return fmt.Sprintf("StripMode(%d)", uint8(m))
}

// Strip removes context in place and returns how many parent links it removed.
// It first records the truth on every span (AttrTruthParent, AttrTruthTrace),
// then clears the parent of every cut span and gives it a fresh trace id derived
// from its span id; the spans below it through kept links take the same trace
// id, so that each piece is a trace of its own, as the SDKs would have made it.
// A parent that is not among the spans keeps its link in StripCrossProcess,
// since where it ran is unknown. Spans are matched by span id, which must be
// unique.
func Strip(td ptrace.Traces, mode StripMode) (broken int) {
	recs := collect(td)
	index := make(map[pcommon.SpanID]int, len(recs))
	for i, r := range recs {
		index[r.span.SpanID()] = i
	}
	parent := make([]int, len(recs)) // index of the parent in recs, -1 if none or unknown
	for i, r := range recs {
		sp := r.span
		truth := ""
		if !sp.ParentSpanID().IsEmpty() {
			truth = sp.ParentSpanID().String()
		}
		sp.Attributes().PutStr(AttrTruthParent, truth)
		sp.Attributes().PutStr(AttrTruthTrace, sp.TraceID().String())
		parent[i] = -1
		if p, ok := index[sp.ParentSpanID()]; ok && !sp.ParentSpanID().IsEmpty() {
			parent[i] = p
		}
	}
	cut := make([]bool, len(recs))
	for i, r := range recs {
		switch {
		case r.span.ParentSpanID().IsEmpty():
		case mode == StripAll:
			cut[i] = true
		case parent[i] >= 0 && recs[parent[i]].process != r.process:
			cut[i] = true
		}
		if cut[i] {
			broken++
		}
	}
	// New trace ids: a cut span's own, else its parent's. Each walk climbs to the
	// first span that is cut, a root or resolved, then resolves down the path; a
	// parent cycle (invalid data) keeps the trace id it has.
	traces := make([]pcommon.TraceID, len(recs))
	done := make([]bool, len(recs))
	onPath := make([]bool, len(recs))
	var path []int
	for i := range recs {
		if done[i] {
			continue
		}
		path = append(path[:0], i)
		onPath[i] = true
		for j := i; !cut[j] && parent[j] >= 0 && !done[parent[j]] && !onPath[parent[j]]; j = parent[j] {
			path = append(path, parent[j])
			onPath[parent[j]] = true
		}
		for k := len(path) - 1; k >= 0; k-- {
			j := path[k]
			switch p := parent[j]; {
			case cut[j]:
				traces[j] = derivedTraceID(recs[j].span.SpanID())
			case p >= 0 && done[p]:
				traces[j] = traces[p]
			default: // a root, an unknown parent or a cycle
				traces[j] = recs[j].span.TraceID()
			}
			done[j], onPath[j] = true, false
		}
	}
	for i, r := range recs {
		if cut[i] {
			r.span.SetParentSpanID(pcommon.SpanID{})
		}
		r.span.SetTraceID(traces[i])
	}
	return broken
}
