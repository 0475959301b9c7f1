package stitcheval

import (
	"fmt"
	"math"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/nezha"
)

// Scenario is a data set with a strip mode. Build returns complete traces (full
// context) for a seed, the same each time, and must be safe to call from
// several goroutines.
type Scenario struct {
	Name string `json:"name"` // unique
	// Series and X place the scenario on a curve: runs of one series and X are
	// averaged together (two captures of one application, say).
	Series string                                   `json:"series"`
	X      float64                                  `json:"x"`
	Strip  StripMode                                `json:"-"`
	Build  func(seed uint64) (ptrace.Traces, error) `json:"-"`
}

// Algorithm is a named stitcher.
type Algorithm struct {
	Name   string
	Stitch StitchFunc
}

// Run is the outcome of one algorithm on one scenario and seed.
type Run struct {
	Scenario  string  `json:"scenario"`
	Series    string  `json:"series"`
	X         float64 `json:"x"`
	Strip     string  `json:"strip"`
	Algorithm string  `json:"algorithm"`
	Seed      uint64  `json:"seed"`
	Spans     int     `json:"spans"`
	Broken    int     `json:"broken"` // links Strip removed
	// Overlap is MeasureOverlap of the data as built; RootOverlap the mean number
	// of other requests whose extent (first start to last end) overlaps a
	// request's, the coarser measure.
	Overlap     float64 `json:"overlap"`
	RootOverlap float64 `json:"root_overlap"`
	Seconds     float64 `json:"seconds"` // the stitch call alone
	Scores      Scores  `json:"scores"`
}

// SweepOptions configure Sweep.
type SweepOptions struct {
	Seeds []uint64
	// Workers run (scenario, seed) pairs in parallel; the runs are the same and
	// in the same order whatever their number. At least 1.
	Workers int
	// Progress, when set, is called after each (scenario, seed) pair, from one
	// goroutine at a time.
	Progress func(done, total int, runs []Run)
}

// Sweep runs every algorithm on every scenario and seed: build, strip, then
// per algorithm a copy split into export requests, stitched and scored. Runs
// are ordered by scenario, seed, algorithm.
func Sweep(scenarios []Scenario, algos []Algorithm, opt SweepOptions) ([]Run, error) {
	type job struct {
		sc   int
		seed uint64
	}
	var jobs []job
	for i := range scenarios {
		for _, s := range opt.Seeds {
			jobs = append(jobs, job{i, s})
		}
	}
	results := make([][]Run, len(jobs))
	errs := make([]error, len(jobs))
	var (
		mu   sync.Mutex
		done int
		wg   sync.WaitGroup
	)
	next := make(chan int)
	for range max(1, opt.Workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				results[j], errs[j] = RunOne(scenarios[jobs[j].sc], algos, jobs[j].seed)
				mu.Lock()
				done++
				if opt.Progress != nil {
					opt.Progress(done, len(jobs), results[j])
				}
				mu.Unlock()
			}
		}()
	}
	for j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	var out []Run
	for j, rs := range results {
		if errs[j] != nil {
			return nil, errs[j]
		}
		out = append(out, rs...)
	}
	return out, nil
}

// RunOne runs every algorithm on one scenario and seed.
func RunOne(sc Scenario, algos []Algorithm, seed uint64) ([]Run, error) {
	td, err := sc.Build(seed)
	if err != nil {
		return nil, fmt.Errorf("%s seed %d: %w", sc.Name, seed, err)
	}
	overlap, root := MeasureOverlap(td), rootOverlap(td)
	broken := Strip(td, sc.Strip)
	var out []Run
	for _, a := range algos {
		cp := ptrace.NewTraces()
		td.CopyTo(cp)
		reqs := Requests(cp)
		began := time.Now()
		if err := a.Stitch(reqs); err != nil {
			return nil, fmt.Errorf("%s seed %d, %s: %w", sc.Name, seed, a.Name, err)
		}
		secs := time.Since(began).Seconds()
		out = append(out, Run{
			Scenario: sc.Name, Series: sc.Series, X: sc.X, Strip: sc.Strip.String(), Algorithm: a.Name, Seed: seed,
			Spans: td.SpanCount(), Broken: broken, Overlap: overlap, RootOverlap: root, Seconds: secs, Scores: Score(reqs...),
		})
	}
	return out, nil
}

// rootOverlap is the mean number of other requests whose extent overlaps a
// request's extent.
func rootOverlap(td ptrace.Traces) float64 {
	rs := requestsOf(collect(td))
	n := len(rs.start)
	if n == 0 {
		return 0
	}
	pairs := 0
	// Requests are in start order: those after t that start before t ends.
	for t := range n {
		for u := t + 1; u < n && rs.start[u] < rs.end[t]; u++ {
			pairs++
		}
	}
	// A pair (t, u) overlaps whenever u starts before t ends, t starting first;
	// each counts for both requests.
	return 2 * float64(pairs) / float64(n)
}

// Stat summarises a number over runs.
type Stat struct {
	Mean float64 `json:"mean"`
	Std  float64 `json:"std"` // sample standard deviation, 0 for one run
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

func statOf(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	s := Stat{Min: math.Inf(1), Max: math.Inf(-1)}
	for _, x := range xs {
		s.Mean += x / float64(len(xs))
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
	}
	if len(xs) > 1 {
		var v float64
		for _, x := range xs {
			v += (x - s.Mean) * (x - s.Mean)
		}
		s.Std = math.Sqrt(v / float64(len(xs)-1))
	}
	return s
}

// Point is the runs of one series, X and algorithm taken together.
type Point struct {
	Series       string  `json:"series"`
	Algorithm    string  `json:"algorithm"`
	X            float64 `json:"x"`
	Runs         int     `json:"runs"`
	Accuracy     Stat    `json:"accuracy"`
	Precision    Stat    `json:"precision"`
	BestAccuracy Stat    `json:"best_accuracy"`
	Overlap      Stat    `json:"overlap"`
	RootOverlap  Stat    `json:"root_overlap"`
	Seconds      Stat    `json:"seconds"`
	// Pooled sums the counts of all the runs (Merge).
	Pooled Scores `json:"pooled"`
}

// Aggregate groups runs by series, algorithm and X, in order of first
// appearance.
func Aggregate(runs []Run) []Point {
	type key struct {
		series, algo string
		x            float64
	}
	var order []key
	groups := map[key][]Run{}
	for _, r := range runs {
		k := key{r.Series, r.Algorithm, r.X}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var out []Point
	for _, k := range order {
		g := groups[k]
		get := func(f func(Run) float64) Stat {
			xs := make([]float64, len(g))
			for i, r := range g {
				xs[i] = f(r)
			}
			return statOf(xs)
		}
		scores := make([]Scores, len(g))
		for i, r := range g {
			scores[i] = r.Scores
		}
		out = append(out, Point{
			Series: k.series, Algorithm: k.algo, X: k.x, Runs: len(g),
			Accuracy:     get(func(r Run) float64 { return r.Scores.Accuracy }),
			Precision:    get(func(r Run) float64 { return r.Scores.Precision }),
			BestAccuracy: get(func(r Run) float64 { return r.Scores.BestAccuracy }),
			Overlap:      get(func(r Run) float64 { return r.Overlap }),
			RootOverlap:  get(func(r Run) float64 { return r.RootOverlap }),
			Seconds:      get(func(r Run) float64 { return r.Seconds }),
			Pooled:       Merge(scores...),
		})
	}
	return out
}

// Merge adds up the counts of several scores and recomputes their ratios: the
// pooled calibration and curve of several runs.
func Merge(scores ...Scores) Scores {
	m := Scores{ByKind: map[string]Counts{}, ByLocality: map[string]Counts{}}
	var confSum []float64
	for _, s := range scores {
		m.Spans += s.Spans
		m.Kept += s.Kept
		m.Links += s.Links
		m.Unreachable += s.Unreachable
		m.Written += s.Written
		m.Correct += s.Correct
		m.Candidates += s.Candidates
		m.BestCorrect += s.BestCorrect
		m.Roots += s.Roots
		m.RootsAttached += s.RootsAttached
		m.RootsCandidates += s.RootsCandidates
		if m.Calibration == nil && s.Calibration != nil {
			m.Calibration = make([]Bucket, len(s.Calibration))
			confSum = make([]float64, len(s.Calibration))
			for d, b := range s.Calibration {
				m.Calibration[d].Low, m.Calibration[d].High = b.Low, b.High
			}
		}
		for d, b := range s.Calibration {
			m.Calibration[d].Candidates += b.Candidates
			m.Calibration[d].Correct += b.Correct
			confSum[d] += b.MeanConfidence * float64(b.Candidates)
		}
		if m.Curve == nil && s.Curve != nil {
			m.Curve = make([]CurvePoint, len(s.Curve))
			for i, c := range s.Curve {
				m.Curve[i].Threshold = c.Threshold
			}
		}
		for i, c := range s.Curve {
			m.Curve[i].Written += c.Written
			m.Curve[i].Correct += c.Correct
			m.Curve[i].RootsAttached += c.RootsAttached
		}
		for k, c := range s.ByKind {
			m.ByKind[k] = m.ByKind[k].add(c)
		}
		for k, c := range s.ByLocality {
			m.ByLocality[k] = m.ByLocality[k].add(c)
		}
	}
	m.finish(confSum)
	for i := range m.Curve {
		c := &m.Curve[i]
		c.Precision, c.Coverage, c.Accuracy = ratio(c.Correct, c.Written), ratio(c.Written, m.Links), ratio(c.Correct, m.Links)
	}
	return m
}

// LoadNezha reads a Nezha capture (gzipped when its name ends in .gz) as
// complete traces, batched as `tierscope convert` batches them (8192 spans per
// request, one ResourceSpans per pod).
func LoadNezha(path string) (ptrace.Traces, error) {
	d, err := nezha.ReadFile(path)
	if err != nil {
		return ptrace.Traces{}, err
	}
	return d.Traces(8192)
}

// NezhaScenario is a capture as a scenario: its own timing when overlap < 0,
// else superimposed to that overlap with the seed. The capture is read once,
// by the caller, and only copied here.
func NezhaScenario(name, series string, capture ptrace.Traces, overlap float64, strip StripMode) Scenario {
	return Scenario{Name: name, Series: series, X: max(overlap, 0), Strip: strip, Build: func(seed uint64) (ptrace.Traces, error) {
		if overlap < 0 {
			td := ptrace.NewTraces()
			capture.CopyTo(td)
			return td, nil
		}
		return Superimpose(capture, overlap, seed), nil
	}}
}

// SyntheticScenario is a generated application as a scenario.
func SyntheticScenario(name, series string, x float64, p Params, strip StripMode) Scenario {
	return Scenario{Name: name, Series: series, X: x, Strip: strip, Build: func(seed uint64) (ptrace.Traces, error) {
		return Generate(p, seed)
	}}
}
