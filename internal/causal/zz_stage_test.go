package causal

import (
	"os"
	"testing"
	"time"
)

func TestZZStages(t *testing.T) {
	path := os.Getenv("ZZPAIRS")
	if path == "" {
		t.Skip()
	}
	tr := zzRead(t, path)
	pairs, _ := FindCallPairs(tr.Messages, 0)
	cfg := DefaultNestingConfig()
	for range 5 {
		t0 := time.Now()
		byCall := orderByCall(pairs)
		t1 := time.Now()
		cands, start := collectCandidates(pairs, byCall, 0, false)
		t2 := time.Now()
		board := scoreNestings(pairs, cands, start, cfg)
		t3 := time.Now()
		var withC []int32
		for _, c := range byCall {
			if start[c+1] > start[c] {
				withC = append(withC, c)
			}
		}
		order := board.certaintyOrder(withC, start)
		t4 := time.Now()
		n := &Nesting{Pairs: pairs}
		n.findNestedPairs(order, cands, start, board, cfg)
		t5 := time.Now()
		n.Patterns(tr.Nodes)
		t6 := time.Now()
		t.Logf("order %v cands %v score %v certainty %v find %v patterns %v", t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3), t5.Sub(t4), t6.Sub(t5))
	}
}
