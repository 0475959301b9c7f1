// Command causaleval measures span stitching on TrainTicket made concurrent and
// on generated applications, against the naive baseline, and writes figures
// (PNG), every number (JSON) and a markdown table fragment:
//
//	go run ./internal/stitcheval/cmd/causaleval [-out docs/causal] [-name current] [-seeds 3] [-baseline docs/causal/baseline.json]
//
// writes OUT/NAME.json, OUT/NAME.md and OUT/NAME/*.png. With -baseline, the
// concurrency figure and table show that earlier run beside this one. `make
// eval-causal` runs it from the repository root. With -spans FILE it scores a
// recording of spans with full context instead (the testbed's
// TESTBED_SPANS_OUT), stripped all the way and across processes, as a table on
// standard output.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/stitch"
	se "github.com/tierscope/tierscope/internal/stitcheval"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

// curve is one figure: scenarios along X, grouped into series.
type curve struct {
	ID, Title, XLabel string
	X                 []float64
	Labels            []string // the tick label of each X
	Naive             bool     // draw the naive baseline too
	scenarios         []se.Scenario
	points            []se.Point
}

func (c *curve) label(x float64) string {
	for i, v := range c.X {
		if v == x {
			return c.Labels[i]
		}
	}
	return fmt.Sprint(x)
}

type config struct {
	out, name, data, baseline, note string
	spans                           string
	seeds, workers, draws           int
	quick                           bool
	only                            string
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("causaleval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.StringVar(&cfg.out, "out", "docs/causal", "output directory")
	fs.StringVar(&cfg.name, "name", "current", "name of this run: OUT/NAME.json, OUT/NAME.md, OUT/NAME/*.png")
	fs.StringVar(&cfg.data, "data", "testdata/nezha", "directory of the TrainTicket captures (*.csv.gz)")
	fs.StringVar(&cfg.baseline, "baseline", "", "an earlier run's JSON to show beside this one (ignored when missing)")
	fs.StringVar(&cfg.note, "note", "", "free text recorded in the JSON (the algorithm's version, say)")
	fs.IntVar(&cfg.seeds, "seeds", 3, "seeds per point (1, 2, …)")
	fs.IntVar(&cfg.workers, "workers", runtime.GOMAXPROCS(0), "scenarios run in parallel")
	fs.BoolVar(&cfg.quick, "quick", false, "a smoke run: two concurrency points, one capture, small applications")
	fs.StringVar(&cfg.only, "only", "", "run only these figures (comma-separated ids: concurrency, fanout, threads, …)")
	fs.IntVar(&cfg.draws, "draws", 0, "instead of the figures, N random draws of every knob at once (stitcheval.RandomParams), both strip modes, worst precision first: OUT/NAME-draws.md")
	fs.StringVar(&cfg.spans, "spans", "", "score this recording of spans with full context (OTLP/JSON lines) instead, on standard output")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.spans != "" {
		if err := scoreRecording(cfg.spans, os.Stdout); err != nil {
			fmt.Fprintf(stderr, "causaleval: %v\n", err)
			return 1
		}
		return 0
	}
	if cfg.seeds < 1 || cfg.workers < 1 || cfg.name == "" || strings.ContainsAny(cfg.name, `/\`) || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "causaleval: want -seeds ≥ 1, -workers ≥ 1, a plain -name and no arguments")
		return 2
	}
	if cfg.draws > 0 {
		if err := evaluateDraws(cfg, stderr); err != nil {
			fmt.Fprintf(stderr, "causaleval: %v\n", err)
			return 1
		}
		return 0
	}
	if err := evaluate(cfg, stderr); err != nil {
		fmt.Fprintf(stderr, "causaleval: %v\n", err)
		return 1
	}
	return 0
}

var captures = []string{"2023-01-29_08_50_trace.csv.gz", "2023-01-30_11_39_trace.csv.gz"}

// Series names, shared by the figures, the tables and the baseline's lookup.
const (
	ttAll      = "TrainTicket, strip all"
	ttCross    = "TrainTicket, strip cross-process"
	synthAll   = "synthetic, strip all"
	synthCross = "synthetic, strip cross-process"
)

func strips() []struct {
	mode   se.StripMode
	series string
} {
	return []struct {
		mode   se.StripMode
		series string
	}{{se.StripAll, synthAll}, {se.StripCrossProcess, synthCross}}
}

// curves lays out every figure and its scenarios.
func curves(cfg config, tt map[string]ptrace.Traces) []*curve {
	def := se.DefaultParams()
	if cfg.quick {
		def.Requests = 60
	}
	out := []*curve{concurrencyCurve(cfg, tt, def)}
	if cfg.quick {
		return out
	}
	return append(out, knobCurves(def)...)
}

// concurrencyCurve is the figure against concurrency: TrainTicket superimposed
// and the generated application, every id stripped and hops broken.
func concurrencyCurve(cfg config, tt map[string]ptrace.Traces, def se.Params) *curve {
	conc := []float64{0, 1, 2, 4, 8, 16}
	if cfg.quick {
		conc = []float64{0, 8}
	}
	c := &curve{ID: "concurrency", Title: "Parent links vs concurrency", XLabel: "overlap: other requests in flight per process", Naive: true}
	for _, x := range conc {
		c.X = append(c.X, x)
		c.Labels = append(c.Labels, map[bool]string{true: "seq", false: fmt.Sprint(x)}[x == 0])
	}
	for _, x := range conc {
		for _, name := range captures {
			d, ok := tt[name]
			if !ok {
				continue
			}
			short := strings.TrimSuffix(name, "_trace.csv.gz")
			target := x
			if x == 0 {
				target = -1 // as captured
			}
			c.scenarios = append(c.scenarios,
				se.NezhaScenario(fmt.Sprintf("concurrency/tt-%s/all/%v", short, x), ttAll, d, target, se.StripAll),
				se.NezhaScenario(fmt.Sprintf("concurrency/tt-%s/cross/%v", short, x), ttCross, d, target, se.StripCrossProcess))
		}
		p := def
		p.Concurrency = x
		for _, s := range strips() {
			c.scenarios = append(c.scenarios, se.SyntheticScenario(fmt.Sprintf("concurrency/synthetic/%s/%v", s.mode, x), s.series, x, p, s.mode))
		}
	}
	return c
}

// variant is a second series of a figure: the same points with one more
// setting.
type variant struct {
	suffix string
	set    func(*se.Params)
}

// knobCurves are the figures of the generated application's other knobs, one
// at a time from the defaults.
func knobCurves(def se.Params) []*curve {
	synthetic := func(id, title, xlabel string, labels []string, xs []float64, set func(*se.Params, float64), extra ...variant) *curve {
		c := &curve{ID: id, Title: title, XLabel: xlabel, X: xs, Labels: labels}
		variants := append([]variant{{"", func(*se.Params) {}}}, extra...)
		for _, x := range xs {
			for _, v := range variants {
				p := def
				set(&p, x)
				v.set(&p)
				for _, s := range strips() {
					c.scenarios = append(c.scenarios, se.SyntheticScenario(fmt.Sprintf("%s/%s%s/%v", id, s.mode, v.suffix, x), s.series+v.suffix, x, p, s.mode))
				}
			}
		}
		return c
	}
	return []*curve{
		synthetic("mix", "Parent links vs concurrency, every knob at once", "requests overlapping (12 services, up to 4 calls per operation, 30% async, a broker, 3 ms skew, some services unkinded, on millisecond clocks, recording threads or reactive, half of the routes with identifiers)",
			[]string{"1", "2", "4", "8", "16"}, []float64{1, 2, 4, 8, 16},
			func(p *se.Params, x float64) { everyKnob(p); p.Concurrency = x },
			variant{", 5% of spans dropped", func(p *se.Params) { p.Drop = 0.05 }}),
		synthetic("fanout", "Parent links vs fan-out style", "how operations issue their calls", []string{"sequential", "parallel", "mixed"},
			[]float64{0, 1, 2}, func(p *se.Params, x float64) {
				p.FanOut = []se.FanOut{se.FanOutSequential, se.FanOutParallel, se.FanOutMixed}[int(x)]
			}),
		synthetic("fanwidth", "Parent links vs fan-out width", "most downstream calls per operation (at least 1; databases add 1–3 statements)",
			[]string{"2", "4", "8"}, []float64{2, 4, 8},
			func(p *se.Params, x float64) { p.MaxCalls = int(x) }),
		synthetic("async", "Parent links vs asynchronous work", "share of async INTERNAL spans that make a call of their own (half of the operations fire async work or publish; a broker with 4 consumer threads)",
			[]string{"0", "50%", "100%"}, []float64{0, 0.5, 1},
			func(p *se.Params, x float64) { p.Async, p.AsyncWork, p.QueueWorkers = 0.5, x, 4 }),
		synthetic("broker", "Parent links vs message queues", "consumer threads per process over a FIFO queue (0: each message after its own delay; half of the operations fire async work or publish)",
			[]string{"0", "1", "4", "16"}, []float64{0, 1, 4, 16},
			func(p *se.Params, x float64) { p.Async, p.QueueWorkers = 0.5, int(x) },
			variant{", message ids recorded", func(p *se.Params) { p.MessageIDs = 1 }}),
		synthetic("targets", "Parent links vs identifiers in request targets, overlap 8", "share of HTTP operations whose path carries an identifier (/api/cart/get0/{id}), drawn from 10,000",
			[]string{"0", "25%", "50%", "100%"}, []float64{0, 0.25, 0.5, 1},
			func(p *se.Params, x float64) { p.Concurrency, p.TargetIDs = 8, x },
			variant{", 10 identifiers per route", func(p *se.Params) { p.TargetPool = 10 }}),
		synthetic("timescale", "Parent links vs time scale", "mean hop delay (every duration scales with it)",
			[]string{"1µs", "10µs", "100µs", "1ms", "10ms", "100ms", "1s"}, []float64{1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1},
			func(p *se.Params, x float64) { p.HopDelay = time.Duration(x * float64(time.Second)) },
			variant{", no skew", func(p *se.Params) { p.Skew = 0 }}),
		synthetic("skew", "Parent links vs clock skew", "clock offset per process, uniform in ± (hops 500 µs)",
			[]string{"0", "0.1ms", "0.3ms", "1ms", "3ms", "10ms", "30ms"}, []float64{0, 0.1, 0.3, 1, 3, 10, 30},
			func(p *se.Params, x float64) { p.Skew = time.Duration(x * float64(time.Millisecond)) }),
		synthetic("drops", "Parent links vs missing spans", "fraction of spans dropped at random",
			[]string{"0", "5%", "10%", "20%", "40%"}, []float64{0, 0.05, 0.1, 0.2, 0.4},
			func(p *se.Params, x float64) { p.Drop = x },
			variant{", one uninstrumented tier", func(p *se.Params) { p.Uninstrumented = 1 }}),
		synthetic("loadshift", "Parent links vs a load shift", "overlap of the second half of the run (the first half at 1)",
			[]string{"1", "2", "4", "8", "16"}, []float64{1, 2, 4, 8, 16},
			func(p *se.Params, x float64) { p.Concurrency, p.ShiftTo = 1, x }),
		synthetic("semconv", "Parent links vs attribute style", "semantic conventions of the services",
			[]string{"current", "legacy", "mixed"}, []float64{0, 1, 2},
			func(p *se.Params, x float64) {
				p.Semconv = []se.Semconv{se.SemconvCurrent, se.SemconvLegacy, se.SemconvMixed}[int(x)]
			}),
		synthetic("kinds", "Parent links vs spans without a kind", "share of services whose spans are all INTERNAL (a manual tracer's default)",
			[]string{"0", "25%", "50%", "100%"}, []float64{0, 0.25, 0.5, 1},
			func(p *se.Params, x float64) { p.Unkinded = x }),
		synthetic("resolution", "Parent links vs millisecond clocks", "share of services that stamp spans on a whole millisecond (hops of 0.5 ms)",
			[]string{"0", "25%", "50%", "100%"}, []float64{0, 0.25, 0.5, 1},
			func(p *se.Params, x float64) { p.CoarseClock = x }),
		synthetic("threads", "Parent links vs thread ids, overlap 8", "share of services recording thread.id (thread per request)",
			[]string{"0", "25%", "50%", "75%", "100%"}, []float64{0, 0.25, 0.5, 0.75, 1},
			func(p *se.Params, x float64) { p.Concurrency, p.ThreadIDs = 8, x },
			variant{", half of them reactive", func(p *se.Params) { p.EventLoop = 0.5 }},
			variant{", all reactive", func(p *se.Params) { p.EventLoop = 1 }}),
	}
}

// everyKnob turns every knob of the generated application a little away from
// its default at once, as a real application differs from it on many axes
// together: interactions the one-knob figures cannot show.
func everyKnob(p *se.Params) {
	p.Services, p.Depth, p.MaxCalls = 12, 4, 4
	p.Async, p.QueueWorkers = 0.3, 4
	p.Skew = 3 * time.Millisecond
	p.Unkinded, p.CoarseClock = 0.1, 0.1
	p.ThreadIDs, p.EventLoop = 0.3, 0.2
	p.TargetIDs = 0.5
}

// only keeps the curves whose ids are listed ("" keeps all).
func only(cs []*curve, ids string) ([]*curve, error) {
	if ids == "" {
		return cs, nil
	}
	var out []*curve
	for _, id := range strings.Split(ids, ",") {
		i := slices.IndexFunc(cs, func(c *curve) bool { return c.ID == strings.TrimSpace(id) })
		if i < 0 {
			return nil, fmt.Errorf("-only: no figure %q", id)
		}
		out = append(out, cs[i])
	}
	return out, nil
}

func evaluate(cfg config, stderr io.Writer) error {
	began := time.Now()
	tt := map[string]ptrace.Traces{}
	names := captures
	if cfg.quick {
		names = names[:1]
	}
	for _, name := range names {
		td, err := se.LoadNezha(filepath.Join(cfg.data, name))
		if err != nil {
			return err
		}
		tt[name] = td
	}
	cs, err := only(curves(cfg, tt), cfg.only)
	if err != nil {
		return err
	}
	var all []se.Scenario
	curveOf := map[string]*curve{}
	for _, c := range cs {
		for _, s := range c.scenarios {
			curveOf[s.Name] = c
		}
		all = append(all, c.scenarios...)
	}
	seeds := make([]uint64, cfg.seeds)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	opt := stitch.DefaultOptions()
	algos := []se.Algorithm{{Name: "stitch", Stitch: se.Stitcher(opt)}, {Name: "naive", Stitch: se.Naive}}
	fmt.Fprintf(stderr, "causaleval: %d scenarios × %d seeds × %d algorithms on %d workers\n", len(all), len(seeds), len(algos), cfg.workers)
	runs, err := se.Sweep(all, algos, se.SweepOptions{Seeds: seeds, Workers: cfg.workers, Progress: func(done, total int, rs []se.Run) {
		if len(rs) == 0 {
			return
		}
		var parts []string
		for _, r := range rs {
			parts = append(parts, fmt.Sprintf("%s %.3f", r.Algorithm, r.Scores.Accuracy))
		}
		fmt.Fprintf(stderr, "causaleval: [%d/%d] %s seed %d, overlap %.2f: %s (%.0fs)\n",
			done, total, rs[0].Scenario, rs[0].Seed, rs[0].Overlap, strings.Join(parts, ", "), time.Since(began).Seconds())
	}})
	if err != nil {
		return err
	}
	byCurve := map[*curve][]se.Run{}
	for _, r := range runs {
		c := curveOf[r.Scenario]
		byCurve[c] = append(byCurve[c], r)
	}
	for _, c := range cs {
		c.points = se.Aggregate(byCurve[c])
	}
	var base *report
	if cfg.baseline != "" {
		if base, err = readReport(cfg.baseline); err != nil {
			fmt.Fprintf(stderr, "causaleval: no baseline drawn: %v\n", err)
			base = nil
		}
	}
	rep := newReport(cfg, seeds, opt, cs, runs)
	rep.Seconds = time.Since(began).Seconds()
	dir := filepath.Join(cfg.out, cfg.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeFigures(dir, cs, base); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(cfg.out, cfg.name+".json"), rep); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfg.out, cfg.name+".md"), []byte(markdown(cfg, rep, base)), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "causaleval: %d runs in %.0fs; wrote %s.json, %s.md and %s/\n", len(runs), time.Since(began).Seconds(),
		filepath.Join(cfg.out, cfg.name), filepath.Join(cfg.out, cfg.name), dir)
	return nil
}
