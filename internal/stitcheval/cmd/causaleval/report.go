package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/tierscope/tierscope/internal/causal"
	"github.com/tierscope/tierscope/internal/stitch"
	se "github.com/tierscope/tierscope/internal/stitcheval"
)

// report is the JSON document: every number of a run.
type report struct {
	Name        string              `json:"name"`
	Note        string              `json:"note,omitempty"`
	Seeds       []uint64            `json:"seeds"`
	Stitcher    causal.StitchConfig `json:"stitcher_config"`
	Synthetic   se.Params           `json:"synthetic_defaults"`
	Definitions map[string]string   `json:"definitions"`
	Seconds     float64             `json:"seconds"`
	Curves      []curveOut          `json:"curves"`
	Runs        []runOut            `json:"runs"`
}

type curveOut struct {
	ID     string     `json:"id"`
	Title  string     `json:"title"`
	XLabel string     `json:"x_label"`
	X      []float64  `json:"x"`
	Labels []string   `json:"labels"`
	Points []pointOut `json:"points,omitempty"`
}

type pointOut struct {
	Series       string    `json:"series"`
	Algorithm    string    `json:"algorithm"`
	X            float64   `json:"x"`
	Label        string    `json:"label"`
	Runs         int       `json:"runs"`
	Accuracy     se.Stat   `json:"accuracy"`
	Precision    se.Stat   `json:"precision"`
	BestAccuracy se.Stat   `json:"best_accuracy"`
	Overlap      se.Stat   `json:"overlap"`
	RootOverlap  se.Stat   `json:"root_overlap"`
	Seconds      se.Stat   `json:"seconds"`
	Pooled       pooledOut `json:"pooled"`
}

// pooledOut is se.Scores summed over the point's runs; the calibration and the
// precision-coverage curve are kept for the concurrency curve only.
type pooledOut struct {
	Links         int                  `json:"links"`
	Written       int                  `json:"written"`
	Correct       int                  `json:"correct"`
	Candidates    int                  `json:"candidates"`
	BestCorrect   int                  `json:"best_correct"`
	Roots         int                  `json:"roots"`
	RootsAttached int                  `json:"roots_attached"`
	Unreachable   int                  `json:"unreachable,omitempty"`
	ByKind        map[string]se.Counts `json:"by_kind"`
	ByLocality    map[string]se.Counts `json:"by_locality"`
	Calibration   []se.Bucket          `json:"calibration,omitempty"`
	Curve         []se.CurvePoint      `json:"curve,omitempty"`
}

type runOut struct {
	Scenario     string  `json:"scenario"`
	Algorithm    string  `json:"algorithm"`
	Seed         uint64  `json:"seed"`
	Spans        int     `json:"spans"`
	Links        int     `json:"links"`
	Written      int     `json:"written"`
	Correct      int     `json:"correct"`
	BestCorrect  int     `json:"best_correct"`
	Accuracy     float64 `json:"accuracy"`
	Precision    float64 `json:"precision"`
	BestAccuracy float64 `json:"best_accuracy"`
	Overlap      float64 `json:"overlap"`
	RootOverlap  float64 `json:"root_overlap"`
	Seconds      float64 `json:"seconds"`
}

var definitions = map[string]string{
	"links":         "spans that had a true parent and lost it to Strip",
	"accuracy":      "links whose parentSpanId is the true parent after stitching, over links (parent links right)",
	"precision":     "of the links given a parentSpanId, the share given the true one",
	"best_accuracy": "links whose tierscope.inferred.parent_span_id is the true parent whatever its confidence, over links",
	"overlap":       "time-averaged number of other requests in flight in a process while one is (stitcheval package comment)",
	"root_overlap":  "mean number of other requests whose extent (first start to last end) overlaps a request's",
	"spread":        "std is the sample standard deviation over the point's runs (seeds, and both TrainTicket captures); min and max bound them",
}

func newReport(cfg config, seeds []uint64, opt stitch.Options, cs []*curve, runs []se.Run) *report {
	rep := &report{Name: cfg.name, Note: cfg.note, Seeds: seeds, Stitcher: opt.Config, Synthetic: se.DefaultParams(), Definitions: definitions}
	for _, c := range cs {
		co := curveOut{ID: c.ID, Title: c.Title, XLabel: c.XLabel, X: c.X, Labels: c.Labels}
		for _, p := range c.points {
			po := pointOut{Series: p.Series, Algorithm: p.Algorithm, X: p.X, Label: c.label(p.X), Runs: p.Runs,
				Accuracy: p.Accuracy, Precision: p.Precision, BestAccuracy: p.BestAccuracy, Overlap: p.Overlap,
				RootOverlap: p.RootOverlap, Seconds: p.Seconds}
			s := p.Pooled
			po.Pooled = pooledOut{Links: s.Links, Written: s.Written, Correct: s.Correct, Candidates: s.Candidates,
				BestCorrect: s.BestCorrect, Roots: s.Roots, RootsAttached: s.RootsAttached, Unreachable: s.Unreachable,
				ByKind: s.ByKind, ByLocality: s.ByLocality}
			if c.ID == "concurrency" {
				po.Pooled.Calibration, po.Pooled.Curve = s.Calibration, s.Curve
			}
			co.Points = append(co.Points, po)
		}
		rep.Curves = append(rep.Curves, co)
	}
	for _, r := range runs {
		s := r.Scores
		rep.Runs = append(rep.Runs, runOut{Scenario: r.Scenario, Algorithm: r.Algorithm, Seed: r.Seed, Spans: r.Spans,
			Links: s.Links, Written: s.Written, Correct: s.Correct, BestCorrect: s.BestCorrect,
			Accuracy: s.Accuracy, Precision: s.Precision, BestAccuracy: s.BestAccuracy,
			Overlap: r.Overlap, RootOverlap: r.RootOverlap, Seconds: r.Seconds})
	}
	return rep
}

// writeJSON writes the report with every number to 4 significant digits, which
// is all a run's precision warrants, one point or run per line: small, and a
// diff between two runs reads line by line.
func writeJSON(path string, rep *report) error {
	compact := func(v any) ([]byte, error) {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var doc any
		if err := dec.Decode(&doc); err != nil {
			return nil, err
		}
		return json.Marshal(round(doc))
	}
	var buf bytes.Buffer
	field := func(name string, v any, last bool) error {
		b, err := compact(v)
		if err != nil {
			return err
		}
		fmt.Fprintf(&buf, " %q: %s", name, b)
		if !last {
			buf.WriteString(",")
		}
		buf.WriteString("\n")
		return nil
	}
	buf.WriteString("{\n")
	for _, f := range []struct {
		name string
		v    any
	}{{"name", rep.Name}, {"note", rep.Note}, {"seeds", rep.Seeds}, {"stitcher_config", rep.Stitcher},
		{"synthetic_defaults", rep.Synthetic}, {"definitions", rep.Definitions}, {"seconds", rep.Seconds}} {
		if err := field(f.name, f.v, false); err != nil {
			return err
		}
	}
	buf.WriteString(" \"curves\": [\n")
	for i, c := range rep.Curves {
		points := c.Points
		c.Points = nil
		head, err := compact(c)
		if err != nil {
			return err
		}
		fmt.Fprintf(&buf, "  %s,\n  \"points\": [\n", bytes.TrimSuffix(head, []byte("}")))
		for j, p := range points {
			b, err := compact(p)
			if err != nil {
				return err
			}
			buf.WriteString("   ")
			buf.Write(b)
			if j < len(points)-1 {
				buf.WriteString(",")
			}
			buf.WriteString("\n")
		}
		buf.WriteString("  ]}")
		if i < len(rep.Curves)-1 {
			buf.WriteString(",")
		}
		buf.WriteString("\n")
	}
	buf.WriteString(" ],\n \"runs\": [\n")
	for i, r := range rep.Runs {
		b, err := compact(r)
		if err != nil {
			return err
		}
		buf.WriteString("  ")
		buf.Write(b)
		if i < len(rep.Runs)-1 {
			buf.WriteString(",")
		}
		buf.WriteString("\n")
	}
	buf.WriteString(" ]\n}\n")
	var check any
	if err := json.Unmarshal(buf.Bytes(), &check); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func round(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = round(e)
		}
	case []any:
		for i, e := range x {
			x[i] = round(e)
		}
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return x // integers (seeds, counts) as they are
		}
		if f, err := x.Float64(); err == nil {
			return json.Number(strconv.FormatFloat(f, 'g', 4, 64))
		}
	}
	return v
}

func readReport(path string) (*report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rep, nil
}

// find returns the point of a curve, series, algorithm and X, or nil.
func (r *report) find(curve, series, algo string, x float64) *pointOut {
	if r == nil {
		return nil
	}
	for i := range r.Curves {
		if r.Curves[i].ID != curve {
			continue
		}
		for j := range r.Curves[i].Points {
			p := &r.Curves[i].Points[j]
			if p.Series == series && p.Algorithm == algo && p.X == x {
				return p
			}
		}
	}
	return nil
}

func pct(s se.Stat) string {
	if s.Std == 0 {
		return fmt.Sprintf("%.1f", 100*s.Mean)
	}
	return fmt.Sprintf("%.1f ± %.1f", 100*s.Mean, 100*s.Std)
}

// seriesOf lists a curve's series in order of appearance.
func seriesOf(c curveOut) []string {
	var out []string
	for _, p := range c.Points {
		if !contains(out, p.Series) {
			out = append(out, p.Series)
		}
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// markdown is the table fragment: the concurrency curve in full, the others by
// accuracy (precision), the calibration at overlap 8.
func markdown(cfg config, rep *report, base *report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!-- Generated by `go run ./internal/stitcheval/cmd/causaleval -name %s` (make eval-causal); do not edit. -->\n\n", cfg.name)
	fmt.Fprintf(&b, "Span stitching, run `%s`", rep.Name)
	if rep.Note != "" {
		fmt.Fprintf(&b, " (%s)", rep.Note)
	}
	fmt.Fprintf(&b, ": mean over %d seeds", len(rep.Seeds))
	b.WriteString(" (TrainTicket: both captures per seed), ± the sample standard deviation, in %. ")
	b.WriteString("**Accuracy**: lost parent links right after stitching; **precision**: right among those written; " +
		"**best**: the best candidate right, whatever its confidence. **Overlap**: other requests in flight per process " +
		"(target → reached); seq is the capture's own timing (TrainTicket) or one request at a time (synthetic).\n\n")
	for _, c := range rep.Curves {
		if c.ID != "concurrency" {
			continue
		}
		fmt.Fprintf(&b, "#### %s\n\n", c.Title)
		head := "| series | overlap | accuracy | precision | best | naive accuracy | naive precision |"
		sep := "|---|---|---|---|---|---|---|"
		if base != nil {
			head += fmt.Sprintf(" accuracy in %s | Δ accuracy |", base.Name)
			sep += "---|---|"
		}
		b.WriteString(head + "\n" + sep + "\n")
		for _, s := range seriesOf(c) {
			for _, p := range c.Points {
				if p.Series != s || p.Algorithm != "stitch" {
					continue
				}
				n := rep.find(c.ID, s, "naive", p.X)
				target := p.Label
				if p.X == 0 && strings.HasPrefix(s, "TrainTicket") {
					target = "captured"
				}
				row := fmt.Sprintf("| %s | %s → %.2f | %s | %s | %s |", s, target, p.Overlap.Mean, pct(p.Accuracy), pct(p.Precision), pct(p.BestAccuracy))
				if n != nil {
					row += fmt.Sprintf(" %s | %s |", pct(n.Accuracy), pct(n.Precision))
				} else {
					row += " | |"
				}
				if base != nil {
					if bp := base.find(c.ID, s, "stitch", p.X); bp != nil {
						row += fmt.Sprintf(" %s | %+.1f |", pct(bp.Accuracy), 100*(p.Accuracy.Mean-bp.Accuracy.Mean))
					} else {
						row += " | |"
					}
				}
				b.WriteString(row + "\n")
			}
		}
		for _, p := range c.Points {
			if p.Algorithm == "stitch" && p.X > 0 && p.Overlap.Min < 0.95*p.X {
				fmt.Fprintf(&b, "\nSome runs of %s at overlap %s reached only %.2f: their requests, all at once, overlap no more.\n", p.Series, p.Label, p.Overlap.Min)
			}
		}
		b.WriteString("\n")
	}
	for _, c := range rep.Curves {
		if c.ID == "concurrency" {
			continue
		}
		fmt.Fprintf(&b, "#### %s (accuracy, precision in brackets)\n\n", c.Title)
		series := seriesOf(c)
		fmt.Fprintf(&b, "| %s | %s |\n|---|%s\n", c.XLabel, strings.Join(series, " | "), strings.Repeat("---|", len(series)))
		for i, x := range c.X {
			row := "| " + c.Labels[i] + " |"
			for _, s := range series {
				if p := rep.find(c.ID, s, "stitch", x); p != nil {
					row += fmt.Sprintf(" %s (%.1f) |", pct(p.Accuracy), 100*p.Precision.Mean)
				} else {
					row += " |"
				}
			}
			b.WriteString(row + "\n")
		}
		b.WriteString("\n")
	}
	calibrationTable(&b, rep)
	fmt.Fprintf(&b, "%d runs in %.0f s. Figures: `%s/`.\n", len(rep.Runs), math.Round(rep.Seconds), cfg.name)
	return b.String()
}

// calibrationTable writes the calibration at overlap 8, pooled over the runs.
func calibrationTable(b *strings.Builder, rep *report) {
	for _, c := range rep.Curves {
		if c.ID != "concurrency" || !containsX(c.X, 8) {
			continue
		}
		series := seriesOf(c)
		b.WriteString("#### Calibration at overlap 8 (right / inferred parents per confidence decile, pooled)\n\n")
		fmt.Fprintf(b, "| confidence | %s |\n|---|%s\n", strings.Join(series, " | "), strings.Repeat("---|", len(series)))
		for d := range 10 {
			row := fmt.Sprintf("| %.1f–%.1f |", float64(d)/10, float64(d+1)/10)
			for _, s := range series {
				p := rep.find(c.ID, s, "stitch", 8)
				if p == nil || d >= len(p.Pooled.Calibration) || p.Pooled.Calibration[d].Candidates == 0 {
					row += " |"
					continue
				}
				k := p.Pooled.Calibration[d]
				row += fmt.Sprintf(" %d/%d (%.0f%%) |", k.Correct, k.Candidates, 100*k.Accuracy)
			}
			b.WriteString(row + "\n")
		}
		b.WriteString("\n")
	}
}

func containsX(xs []float64, x float64) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
