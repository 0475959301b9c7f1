package causal_test

// These tests reproduce the accuracy experiments of paper 001 §7.2 and §7.5 on
// traces from the tracelet generator, scored against the ground truth it writes.

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/causal"
	"github.com/tierscope/tierscope/internal/maketrace"
	"github.com/tierscope/tierscope/internal/stats"
)

type run struct {
	trace    *causal.Trace
	nesting  *causal.Nesting
	patterns []*causal.Pattern
	acc      causal.Accuracy
}

func readTestdata(t testing.TB, config string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", config))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func generate(t testing.TB, config string, opt maketrace.Options) *causal.Trace {
	t.Helper()
	cfg, err := maketrace.ParseConfig(readTestdata(t, config), config)
	if err != nil {
		t.Fatal(err)
	}
	tr, _, err := maketrace.Generate(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// infer runs the nesting algorithm and scores it against the cheat-mode truth.
func infer(t testing.TB, tr *causal.Trace, cfg causal.NestingConfig) run {
	t.Helper()
	pairs, _ := causal.FindCallPairs(tr.Messages, cfg.SkewWindow)
	n, err := causal.Nest(pairs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cheat := cfg
	cheat.UsePathIDs = true
	truth, err := causal.Nest(pairs, cheat)
	if err != nil {
		t.Fatal(err)
	}
	ps := n.Patterns(tr.Nodes)
	return run{tr, n, ps, causal.Compare(n, truth, ps, truth.Patterns(tr.Nodes), 20)}
}

func logAccuracy(t *testing.T, name string, r run) {
	t.Helper()
	a := r.acc
	t.Logf("%s: %d messages, parallelism %.3f, %d patterns; top-N FN (N=1..20) %v; FP patterns %d; FN instances %d/%d = %.2f%%; message attribution error %.2f%%",
		name, len(r.trace.Messages), r.nesting.MeanParallelism(), len(r.patterns), a.TopNFalseNegatives, a.FalsePositivePatterns,
		a.FalseNegativeInstances, a.TruthInstances, 100*a.FalseNegativeInstanceRate, 100*a.MessageAttributionError)
}

// §7.2 and figure 17: the multi-tier trace of about 200,000 messages.
func TestPaperMultiTier(t *testing.T) {
	r := infer(t, generate(t, "multitier.yaml", maketrace.Options{Seed: 1}), causal.DefaultNestingConfig())
	logAccuracy(t, "multitier", r)
	if n := len(r.trace.Messages); n < 180_000 || n > 220_000 {
		t.Errorf("%d messages, want about 200,000", n)
	}
	if p := r.nesting.MeanParallelism(); p < 1.6 || p > 1.8 {
		t.Errorf("mean parallelism %.3f, want 1.6–1.8 (table 1: 1.641)", p)
	}
	if fn := r.acc.TopNFalseNegatives[9]; fn != 0 {
		t.Errorf("top-10 false-negative patterns = %d, want 0", fn)
	}
	if rate := r.acc.FalseNegativeInstanceRate; rate > 0.01 {
		t.Errorf("false-negative instances %.2f%%, want ≤ 1%%", 100*rate)
	}
}

// The multi-tier trace at 1/100 of its time scale (testdata/multitier-subms.yaml):
// every per-hop delay between 0.1 and 1 ms. The default scoreboard's bins below
// 1 ms must find the patterns as well as the paper's finds those of the ms-scale
// trace; the paper's layout, which puts all these delays in one bin, must not, or
// this test would not show what the finer bins are for.
func TestSubMillisecondHops(t *testing.T) {
	tr := generate(t, "multitier-subms.yaml", maketrace.Options{Seed: 1})
	r := infer(t, tr, causal.DefaultNestingConfig())
	logAccuracy(t, "multitier-subms", r)
	if p := r.nesting.MeanParallelism(); p < 1.6 || p > 1.8 {
		t.Errorf("mean parallelism %.3f, want 1.6–1.8 like the ms-scale trace", p)
	}
	if fn := r.acc.TopNFalseNegatives[9]; fn != 0 {
		t.Errorf("top-10 false-negative patterns = %d, want 0", fn)
	}
	if rate := r.acc.FalseNegativeInstanceRate; rate > 0.01 {
		t.Errorf("false-negative instances %.2f%%, want ≤ 1%%", 100*rate)
	}
	paper := causal.DefaultNestingConfig()
	paper.Bins.Count, paper.Bins.Below = 340, 0
	blind := infer(t, tr, paper)
	logAccuracy(t, "multitier-subms, paper's bins from 1 ms", blind)
	if blind.acc.TopNFalseNegatives[9] == 0 || blind.acc.FalseNegativeInstanceRate < 3*r.acc.FalseNegativeInstanceRate {
		t.Errorf("with every delay in one bin: top-10 false negatives %d, false-negative instances %.2f%%; want the collapse to show",
			blind.acc.TopNFalseNegatives[9], 100*blind.acc.FalseNegativeInstanceRate)
	}
	// The patterns' histograms resolve the delays too: the AP's call delay is
	// 0.5 ms and the DB's latency 0.1 ms, read from bins within 5%.
	for _, p := range r.patterns {
		if p.Signature != "client(WS1(AP1(DB)))" {
			continue
		}
		ap := p.Root.Children[0].Children[0]
		db := ap.Children[0]
		for _, c := range []struct {
			what      string
			got, want float64
			mean, rel float64
		}{
			{"AP call delay p50", ap.CallDelay.Quantile(0.5), 0.5, ap.CallDelay.Mean(), 0.05},
			{"DB latency p50", db.Latency.Quantile(0.5), 0.1, db.Latency.Mean(), 0.05},
		} {
			if math.Abs(c.got-c.want)/c.want > c.rel || math.Abs(c.mean-c.want)/c.want > c.rel {
				t.Errorf("%s: %.4f ms (mean %.4f ms), want %.2f ms ± 5%%", c.what, c.got, c.mean, c.want)
			}
		}
		return
	}
	t.Fatal("pattern client(WS1(AP1(DB))) not found")
}

// §7.5.2 and figure 18: the pathological cases. Children-0/2 must be right, and the
// scoreboard must be what makes it right: without it (every delay in one bin, so
// only the penalties and the earliest-parent rule decide) it goes wrong.
func TestPaperPathologicalCases(t *testing.T) {
	noScoreboard := causal.DefaultNestingConfig()
	noScoreboard.Bins = stats.LogBins{Base: 1.05, Min: float64(time.Hour), Count: 2}
	for _, name := range []string{"children-parallel", "children-0-2", "children-d-cc", "penalty-breaker"} {
		tr := generate(t, name+".yaml", maketrace.Options{Seed: 1})
		r := infer(t, tr, causal.DefaultNestingConfig())
		logAccuracy(t, name, r)
		blind := infer(t, tr, noScoreboard)
		logAccuracy(t, name+" without scoreboard", blind)
		truePatterns := len(r.patterns) - r.acc.FalsePositivePatterns
		if fn := r.acc.TopNFalseNegatives[truePatterns-1]; fn != 0 {
			t.Errorf("%s: %d of the top %d true patterns missing", name, fn, truePatterns)
		}
		if name == "children-0-2" {
			if rate := r.acc.FalseNegativeInstanceRate; rate > 0.05 {
				t.Errorf("children-0/2: false-negative instances %.2f%%, want ≤ 5%%", 100*rate)
			}
			if blind.acc.FalseNegativeInstanceRate < 3*r.acc.FalseNegativeInstanceRate {
				t.Errorf("children-0/2: without the scoreboard %.2f%%, with %.2f%%: the scoreboard should fix it",
					100*blind.acc.FalseNegativeInstanceRate, 100*r.acc.FalseNegativeInstanceRate)
			}
		}
	}
}

// §7.2 and figure 12: 200 ms added at WS2 between its calls to AUTH and to AP shows
// up on the WS2→AP edge (the AP node's call delay) and nowhere on WS1.
func TestPaperAddedDelay(t *testing.T) {
	normal := infer(t, generate(t, "multitier.yaml", maketrace.Options{Seed: 1}), causal.DefaultNestingConfig())
	added := infer(t, generate(t, "multitier-added-delay.yaml", maketrace.Options{Seed: 1}), causal.DefaultNestingConfig())
	logAccuracy(t, "added-delay", added)
	for _, sig := range []string{
		"client(WS2(AP1(DB),AUTH(DB)))", "client(WS2(AP2(DB),AUTH(DB)))", "client(WS2(AP1(DB),AUTH))",
		"client(WS1(AP1(DB),AUTH(DB)))",
	} {
		before, after := apCallDelay(t, normal.patterns, sig), apCallDelay(t, added.patterns, sig)
		diff := after - before
		t.Logf("%s: AP call delay %.1f ms → %.1f ms (%+.1f ms)", sig, before, after, diff)
		want := 200.0
		if strings.Contains(sig, "WS1") {
			want = 0
		}
		if math.Abs(diff-want) > 20 {
			t.Errorf("%s: AP call delay changed by %.1f ms, want %.0f ms ± 20 ms (10%% of 200)", sig, diff, want)
		}
	}
}

// apCallDelay is the mean call delay of the AP child of the web server in pattern sig.
func apCallDelay(t *testing.T, ps []*causal.Pattern, sig string) float64 {
	t.Helper()
	for _, p := range ps {
		if p.Signature != sig {
			continue
		}
		for _, c := range p.Root.Children[0].Children {
			if strings.HasPrefix(c.Node, "AP") {
				return c.CallDelay.Mean()
			}
		}
	}
	t.Fatalf("pattern %s not found", sig)
	return 0
}

// §7.5.5 and figure 21: a 1% drop rate from a sniffer with a finite queue leaves
// the false-negative instances at or below 1%.
func TestPaperMessageLoss(t *testing.T) {
	r := infer(t, generate(t, "multitier.yaml", maketrace.Options{Seed: 1, DropRate: 0.01}), causal.DefaultNestingConfig())
	logAccuracy(t, "1% drops", r)
	if rate := r.acc.FalseNegativeInstanceRate; rate > 0.01 {
		t.Errorf("false-negative instances %.2f%% at a 1%% drop rate, want ≤ 1%%", 100*rate)
	}
}

// §7.5.6 and figure 22: WS2's clock 20 ms fast; a 30 ms skew window with smoothing
// keeps false-negative instances at or below 5%.
func TestPaperClockSkew(t *testing.T) {
	tr := generate(t, "multitier.yaml", maketrace.Options{Seed: 1, Skews: []maketrace.Skew{{Node: "WS2", Offset: 20 * time.Millisecond}}})
	for _, c := range []struct {
		name   string
		window time.Duration
		smooth float64
	}{{"no compensation", 0, 0}, {"window", 30 * time.Millisecond, 0}, {"window+smoothing", 30 * time.Millisecond, 2}} {
		cfg := causal.DefaultNestingConfig()
		cfg.SkewWindow, cfg.SmoothSigma = c.window, c.smooth
		r := infer(t, tr, cfg)
		logAccuracy(t, "skew 20 ms, "+c.name, r)
		if c.name == "window+smoothing" && r.acc.FalseNegativeInstanceRate > 0.05 {
			t.Errorf("false-negative instances %.2f%%, want ≤ 5%%", 100*r.acc.FalseNegativeInstanceRate)
		}
	}
}

// BenchmarkNestingStages times each stage of `tierscope paths` on the multi-tier
// trace (about 200,000 messages) as the command runs it: matching as a reader
// streams, nesting in the pairer's call order, then the patterns.
func BenchmarkNestingStages(b *testing.B) {
	tr := generate(b, "multitier.yaml", maketrace.Options{Seed: 1})
	cfg := causal.DefaultNestingConfig()
	match := func() (*causal.CallPairer, []causal.CallPair) {
		p := causal.NewCallPairer(0, len(tr.Messages)/2)
		for _, m := range tr.Messages {
			p.Add(m.Time, m.Op, m.Sender, m.Receiver, []byte(tr.CallIDs[m.CallID]), m.PathID)
		}
		pairs, _ := p.Finish()
		return p, pairs
	}
	pairer, pairs := match()
	order := pairer.CallOrder()
	n, err := causal.NestInCallOrder(pairs, order, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("match", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			match()
		}
	})
	b.Run("nest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := causal.NestInCallOrder(pairs, order, cfg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("patterns", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n.Patterns(tr.Nodes)
		}
	})
}

func BenchmarkNestingMultiTier(b *testing.B) {
	tr := generate(b, "multitier.yaml", maketrace.Options{Seed: 1})
	cfg := causal.DefaultNestingConfig()
	b.ReportAllocs()
	for b.Loop() {
		pairs, _ := causal.FindCallPairs(tr.Messages, 0)
		n, err := causal.Nest(pairs, cfg)
		if err != nil {
			b.Fatal(err)
		}
		n.Patterns(tr.Nodes)
	}
	perOp := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(len(tr.Messages))/perOp, "messages/s")
}
