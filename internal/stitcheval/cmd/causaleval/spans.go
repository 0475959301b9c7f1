package main

import (
	"fmt"
	"io"
	"os"
	"slices"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/otlpjsonl"
	"github.com/tierscope/tierscope/internal/stitch"
	se "github.com/tierscope/tierscope/internal/stitcheval"
)

// scoreRecording strips a recording of spans with full context (OTLP/JSON
// lines, such as TESTBED_SPANS_OUT writes) all the way and across processes
// only, stitches each and prints the scores by span kind.
func scoreRecording(path string, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	batches, err := otlpjsonl.ReadBatches(f, path)
	f.Close()
	if err != nil {
		return err
	}
	all := ptrace.NewTraces()
	for _, td := range batches {
		td.ResourceSpans().MoveAndAppendTo(all.ResourceSpans())
	}
	algos := []se.Algorithm{{Name: "stitch", Stitch: se.Stitcher(stitch.DefaultOptions())}}
	fmt.Fprintf(out, "| strip | links | accuracy | precision | best | overlap | by child kind: accuracy / precision / best |\n|---|---|---|---|---|---|---|\n")
	for _, mode := range []se.StripMode{se.StripAll, se.StripCrossProcess} {
		sc := se.Scenario{Name: path, Strip: mode, Build: func(uint64) (ptrace.Traces, error) {
			cp := ptrace.NewTraces()
			all.CopyTo(cp)
			return cp, nil
		}}
		runs, err := se.RunOne(sc, algos, 0)
		if err != nil {
			return err
		}
		r := runs[0]
		s := r.Scores
		kinds := make([]string, 0, len(s.ByKind))
		for k := range s.ByKind {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		var byKind string
		for _, k := range kinds {
			c := s.ByKind[k]
			byKind += fmt.Sprintf("%s %d: %.1f / %.1f / %.1f; ", k, c.Links, 100*c.Accuracy, 100*c.Precision, 100*c.BestAccuracy)
		}
		fmt.Fprintf(out, "| %s | %d | %.1f%% | %.1f%% | %.1f%% | %.1f | %s|\n", mode, s.Links, 100*s.Accuracy, 100*s.Precision, 100*s.BestAccuracy, r.Overlap, byKind)
	}
	return nil
}
