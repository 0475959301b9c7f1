package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/otlpjsonl"
	"github.com/tierscope/tierscope/internal/stitch"
)

func runStitch(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("stitch", "stitch --in spans.jsonl --out stitched.jsonl [--mode reparent|link|annotate] [--report report.json]", stderr)
	def := stitch.DefaultOptions()
	var (
		in         = fs.String("in", "", "spans as OTLP/JSON lines (the file exporter's format); - for standard input")
		out        = fs.String("out", "", "stitched spans (default standard output)")
		mode       = fs.String("mode", "reparent", "how inferred parents are written: reparent, link or annotate")
		reportPath = fs.String("report", "", "write counts, path patterns and (with truth attributes) accuracy as JSON")
		skew       = fs.Duration("skew-window", def.Config.SkewWindow, "clock difference tolerated between processes")
		maxSkew    = fs.Duration("max-skew", def.Config.MaxSkew, "largest clock difference searched for between two processes")
		local      = fs.Duration("local-window", def.Config.LocalWindow, "timestamp rounding tolerated within a process")
		async      = fs.Duration("async-window", def.Config.AsyncWindow, "longest delay from a PRODUCER span to its CONSUMER span")
		noTags     = fs.Bool("no-path-tags", false, "do not write tierscope.path.signature on spans")
		minConf    = fs.Float64("min-confidence", def.MinConfidence, "in reparent mode, the confidence from which an inferred parent is written (below it the span is linked to its best candidate)")
	)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	m, err := stitch.ParseMode(*mode)
	if err != nil {
		return usagef("--mode: %v", err)
	}
	opt := def
	opt.Mode, opt.TagPaths, opt.MinConfidence = m, !*noTags, *minConf
	opt.Config.SkewWindow, opt.Config.LocalWindow, opt.Config.AsyncWindow = *skew, *local, *async
	opt.Config.MaxSkew = *maxSkew
	st, err := stitch.New(opt)
	if err != nil {
		return usageError{err.Error()}
	}

	r, name, closeIn, err := input(*in, stdin)
	if err != nil {
		return err
	}
	defer closeIn()
	batches, err := otlpjsonl.ReadBatches(r, name)
	if err != nil {
		return err
	}
	began := time.Now()
	rep := st.Stitch(batches...)
	if rep.Spans == 0 {
		return fmt.Errorf("%s: no spans", name)
	}

	o, err := openOutput(*out, stdout)
	if err != nil {
		return err
	}
	w := otlpjsonl.NewWriter(o)
	for _, td := range batches {
		if err := w.Write(td); err != nil {
			o.abort()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		o.abort()
		return err
	}
	if err := o.commit(); err != nil {
		return err
	}
	if *reportPath != "" {
		if err := writeStitchReport(*reportPath, rep); err != nil {
			return err
		}
	}
	summary := fmt.Sprintf("%d spans, %d orphans, %d inferred (%d below --min-confidence, linked), %d left orphan, %d patterns",
		rep.Spans, rep.Orphans, rep.Inferred, rep.Abstained, rep.LeftOrphan, len(rep.Patterns))
	if rep.Skipped > 0 {
		summary += fmt.Sprintf(", %d passed through untouched (empty ids or end before start)", rep.Skipped)
	}
	if t := rep.Truth; t != nil {
		summary += fmt.Sprintf("; truth: %d/%d links correct (%.2f%%), lost links %d/%d (%.2f%%), %d roots attached; "+
			"written %d at precision %.2f%%, best candidate right for %d/%d lost links (%.2f%%)",
			t.Correct, t.Links, 100*t.Accuracy, t.OrphanCorrect, t.OrphanLinks, 100*t.OrphanAccuracy, t.RootsAttached,
			t.Written, 100*t.Precision, t.BestCorrect, t.OrphanLinks, 100*float64(t.BestCorrect)/float64(max(1, t.OrphanLinks)))
	}
	fmt.Fprintf(stderr, "%s stitch: %s (%.2fs)\n", programName, summary, time.Since(began).Seconds())
	return nil
}

func writeStitchReport(path string, rep stitch.Report) error {
	doc := api.StitchReport{
		Spans: rep.Spans, Orphans: rep.Orphans, Inferred: rep.Inferred, LeftOrphan: rep.LeftOrphan,
		Unresolved: rep.Unresolved, Skipped: rep.Skipped, ZeroDuration: rep.ZeroDuration,
		UnknownKind: rep.UnknownKind, LongAttributes: rep.LongAttributes,
		Patterns: toAPIPatterns(rep.Patterns),
	}
	if t := rep.Truth; t != nil {
		doc.Truth = &api.StitchTruth{
			Links: t.Links, Correct: t.Correct, Accuracy: t.Accuracy,
			OrphanLinks: t.OrphanLinks, OrphanCorrect: t.OrphanCorrect, OrphanAccuracy: t.OrphanAccuracy,
			RootsAttached: t.RootsAttached, Written: t.Written, Precision: t.Precision, BestCorrect: t.BestCorrect,
		}
		for _, b := range t.Calibration {
			doc.Truth.Calibration = append(doc.Truth.Calibration, api.CalibrationBucket(b))
		}
	}
	o, err := openOutput(path, os.Stdout)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(o)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		o.abort()
		return err
	}
	return o.commit()
}
