package maketrace

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/causal"
)

func mustParse(t testing.TB, src string) *Config {
	t.Helper()
	cfg, err := ParseConfig([]byte(src), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func mustGenerate(t testing.TB, cfg *Config, opt Options) (*causal.Trace, Stats) {
	t.Helper()
	tr, st, err := Generate(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	return tr, st
}

func loadTestdata(t testing.TB, name string) *Config {
	t.Helper()
	file := filepath.Join("..", "..", "testdata", name)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(data, file)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// rpc is one call as recovered from a trace.
type rpc struct {
	num              int // the N of its call id cN: calls are numbered in depth-first order
	from, to         string
	call, ret        int64
	called, returned bool
}

// runsOf groups a trace with call ids into runs, each a list of RPCs in call-id order,
// checking that every call has exactly one matching return.
func runsOf(t *testing.T, tr *causal.Trace) map[string][]*rpc {
	t.Helper()
	byID := map[uint32]*rpc{}
	runs := map[string][]*rpc{}
	for _, m := range tr.Messages {
		if m.CallID == causal.NoID || m.PathID == causal.NoID {
			t.Fatalf("message without ids: %+v", m)
		}
		r := byID[m.CallID]
		if r == nil {
			n, err := strconv.Atoi(strings.TrimPrefix(tr.CallIDs[m.CallID], "c"))
			if err != nil {
				t.Fatalf("call id %q", tr.CallIDs[m.CallID])
			}
			r = &rpc{num: n}
			byID[m.CallID] = r
			p := tr.PathIDs[m.PathID]
			runs[p] = append(runs[p], r)
		}
		from, to := tr.Nodes[m.Sender], tr.Nodes[m.Receiver]
		switch m.Op {
		case causal.OpCall:
			if r.called {
				t.Fatalf("call id %s called twice", tr.CallIDs[m.CallID])
			}
			r.called, r.from, r.to, r.call = true, from, to, m.Time
		case causal.OpReturn:
			if r.returned {
				t.Fatalf("call id %s returned twice", tr.CallIDs[m.CallID])
			}
			r.returned, r.ret = true, m.Time
			if r.called && (r.from != to || r.to != from) {
				t.Fatalf("return %s %s->%s does not mirror its call %s->%s", tr.CallIDs[m.CallID], from, to, r.from, r.to)
			}
		}
	}
	for _, rs := range runs {
		for _, r := range rs {
			if !r.called || !r.returned {
				t.Fatalf("call c%d lacks its call or its return", r.num)
			}
			if r.ret < r.call {
				t.Fatalf("call c%d returns before it is called", r.num)
			}
		}
		slices.SortFunc(rs, func(a, b *rpc) int { return a.num - b.num })
	}
	return runs
}

// checkTree matches a run's RPCs, in depth-first order, against the tracelet's call
// tree and checks nesting and the serial/parallel timing rules. exact, when set, also
// checks the times exactly (for configs whose std are all zero).
func checkTree(t *testing.T, root *Call, rs []*rpc, exact bool) {
	t.Helper()
	i := 0
	var walk func(c *Call, caller string) *rpc
	walk = func(c *Call, caller string) *rpc {
		if i >= len(rs) {
			t.Fatalf("run has %d calls, fewer than its tracelet", len(rs))
		}
		r := rs[i]
		i++
		if r.from != caller || !slices.Contains(c.To, r.to) {
			t.Fatalf("call c%d %s->%s, want %s->%v", r.num, r.from, r.to, caller, c.To)
		}
		cursor, end := r.call, r.call
		for _, ch := range c.Calls {
			k := walk(ch, r.to)
			if k.call < r.call || k.ret > r.ret {
				t.Fatalf("child c%d [%d,%d] is not within its parent c%d [%d,%d]", k.num, k.call, k.ret, r.num, r.call, r.ret)
			}
			d := ch.Delay
			if g, ok := ch.DelayByCaller[r.to]; ok {
				d = g
			}
			if c.Parallel {
				if exact && k.call != r.call+int64(d.Mean) {
					t.Fatalf("parallel child c%d called at %d, want arrival %d + %v", k.num, k.call, r.call, d.Mean)
				}
				end = max(end, k.ret)
			} else {
				if k.call < cursor {
					t.Fatalf("serial child c%d called at %d, before its previous sibling returned at %d", k.num, k.call, cursor)
				}
				if exact && k.call != cursor+int64(d.Mean) {
					t.Fatalf("serial child c%d called at %d, want %d + %v", k.num, k.call, cursor, d.Mean)
				}
				cursor, end = k.ret, k.ret
			}
		}
		if r.ret < end {
			t.Fatalf("c%d returns at %d before its last child at %d", r.num, r.ret, end)
		}
		if exact && r.ret != end+int64(c.Reply.Mean) {
			t.Fatalf("c%d returns at %d, want %d + %v", r.num, r.ret, end, c.Reply.Mean)
		}
		return r
	}
	walk(root, root.From)
	if i != len(rs) {
		t.Fatalf("run has %d calls, more than its tracelet's %d", len(rs), i)
	}
}

// traceletOf finds a run's tracelet by its size, root caller and first child's callee,
// which tells apart the tracelets of every config in these tests; checkTree then
// verifies the match in full.
func traceletOf(cfg *Config, rs []*rpc) *Tracelet {
	for i := range cfg.Tracelets {
		tl := &cfg.Tracelets[i]
		if size(tl.Root) == len(rs) && rs[0].from == tl.Root.From && (len(rs) == 1 || slices.Contains(tl.Root.Calls[0].To, rs[1].to)) {
			return tl
		}
	}
	return nil
}

func size(c *Call) int {
	n := 1
	for _, ch := range c.Calls {
		n += size(ch)
	}
	return n
}

const structureConfig = `
duration: 200s
tracelets:
  - name: serial
    instances: 4
    think: {min: 100ms, max: 300ms}
    root:
      from: A
      to: [B1, B2]
      reply: {mean: 5ms, std: 2ms}
      calls:
        - to: C
          delay: {mean: 10ms, std: 4ms}
          reply: {mean: 3ms, std: 1ms}
          calls:
            - {to: D, delay: {mean: 2ms, std: 1ms}, reply: {mean: 1ms, std: 1ms}}
        - {to: E, delay: {mean: 1ms, std: 2ms}}
  - name: parallel
    instances: 3
    think: {min: 50ms, max: 150ms}
    root:
      from: X
      to: B1
      parallel: true
      reply: {mean: 5ms, std: 2ms}
      calls:
        - {to: C, delay: {mean: 10ms, std: 4ms}, reply: {mean: 30ms, std: 10ms}}
        - {to: D, delay: {mean: 1ms, std: 1ms}}
        - to: E
          delay: {mean: 5ms, std: 1ms}
          parallel: true
          calls:
            - {to: F, delay: {mean: 5ms, std: 1ms}}
            - {to: F, delay: {mean: 5ms, std: 1ms}}
`

func TestStructure(t *testing.T) {
	cfg := mustParse(t, structureConfig)
	tr, st := mustGenerate(t, cfg, Options{Seed: 7})
	if !slices.IsSortedFunc(tr.Messages, func(a, b causal.Message) int { return int(a.Time - b.Time) }) {
		t.Fatal("trace is not sorted by time")
	}
	runs := runsOf(t, tr)
	if len(runs) != st.Runs {
		t.Fatalf("%d path ids, Stats.Runs %d", len(runs), st.Runs)
	}
	counts := map[string]int{}
	for p, rs := range runs {
		tl := traceletOf(cfg, rs)
		if tl == nil {
			t.Fatalf("run %s matches no tracelet", p)
		}
		counts[tl.Name]++
		checkTree(t, tl.Root, rs, false)
	}
	for name, n := range st.RunsPerTracelet {
		if counts[name] != n || n == 0 {
			t.Errorf("tracelet %s: %d runs in the trace, Stats says %d", name, counts[name], n)
		}
	}
	if st.Messages != len(tr.Messages) || st.Dropped != 0 || st.CaptureRate != 0 {
		t.Errorf("stats %+v for %d messages", st, len(tr.Messages))
	}
}

// With zero deviations every time is determined, so the semantics can be checked exactly.
func TestExactTiming(t *testing.T) {
	src := strings.NewReplacer("std: 4ms", "std: 0s", "std: 2ms", "std: 0s", "std: 1ms", "std: 0s", "std: 10ms", "std: 0s").Replace(structureConfig)
	cfg := mustParse(t, src)
	tr, _ := mustGenerate(t, cfg, Options{Seed: 3, Duration: 20 * time.Second})
	for _, rs := range runsOf(t, tr) {
		checkTree(t, traceletOf(cfg, rs).Root, rs, true)
	}
}

func TestDeterminism(t *testing.T) {
	cfg := loadTestdata(t, "multitier.yaml")
	opt := Options{Seed: 1, Duration: 60 * time.Second}
	a, _ := mustGenerate(t, cfg, opt)
	b, _ := mustGenerate(t, cfg, opt)
	if !slices.Equal(a.Messages, b.Messages) || !slices.Equal(a.Nodes, b.Nodes) ||
		!slices.Equal(a.CallIDs, b.CallIDs) || !slices.Equal(a.PathIDs, b.PathIDs) {
		t.Fatal("same seed, different traces")
	}
	opt.Seed = 2
	c, _ := mustGenerate(t, cfg, opt)
	if slices.Equal(a.Messages, c.Messages) {
		t.Fatal("different seeds, identical traces")
	}
}

func meanStd(xs []float64) (mean, std float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(xs)-1))
}

// within3SE checks a sample's mean and standard deviation against a Gaussian's, each
// within three standard errors (σ/√n for the mean, σ/√(2n) for the deviation).
func within3SE(t *testing.T, what string, xs []float64, g Gaussian) {
	t.Helper()
	m, s := meanStd(xs)
	n := float64(len(xs))
	wm, ws := float64(g.Mean), float64(g.Std)
	t.Logf("%s: n=%d mean %.3fms (want %v) std %.3fms (want %v)", what, len(xs), m/1e6, g.Mean, s/1e6, g.Std)
	if math.Abs(m-wm) > 3*ws/math.Sqrt(n) {
		t.Errorf("%s: mean %.4fms, want %v ± %.4fms", what, m/1e6, g.Mean, 3*ws/math.Sqrt(n)/1e6)
	}
	if math.Abs(s-ws) > 3*ws/math.Sqrt(2*n) {
		t.Errorf("%s: std %.4fms, want %v ± %.4fms", what, s/1e6, g.Std, 3*ws/math.Sqrt(2*n)/1e6)
	}
}

func TestGaussianDelays(t *testing.T) {
	cfg := mustParse(t, `
duration: 1000s
tracelets:
  - instances: 10
    think: {min: 0s, max: 1s}
    root:
      from: A
      to: B
      reply: {mean: 5ms, std: 1ms}
      calls:
        - {to: C, delay: {mean: 20ms, std: 4ms}, reply: {mean: 7ms, std: 2ms}}
`)
	tr, _ := mustGenerate(t, cfg, Options{Seed: 11})
	var delay, callee, reply []float64
	for _, rs := range runsOf(t, tr) {
		delay = append(delay, float64(rs[1].call-rs[0].call))
		callee = append(callee, float64(rs[1].ret-rs[1].call))
		reply = append(reply, float64(rs[0].ret-rs[1].ret))
	}
	within3SE(t, "B->C call delay", delay, cfg.Tracelets[0].Root.Calls[0].Delay)
	within3SE(t, "C reply", callee, cfg.Tracelets[0].Root.Calls[0].Reply)
	within3SE(t, "B reply", reply, cfg.Tracelets[0].Root.Reply)
}

// binomialOK checks k successes of n against probability p within 4 standard deviations.
func binomialOK(t *testing.T, what string, k, n int, p float64) {
	t.Helper()
	sd := math.Sqrt(float64(n) * p * (1 - p))
	t.Logf("%s: %d of %d, want %.0f ± %.0f", what, k, n, float64(n)*p, 4*sd)
	if math.Abs(float64(k)-float64(n)*p) > 4*sd {
		t.Errorf("%s: %d of %d, want %.1f ± %.1f", what, k, n, float64(n)*p, 4*sd)
	}
}

func TestLoadBalancing(t *testing.T) {
	cfg := mustParse(t, `
duration: 500s
tracelets:
  - instances: 4
    think: {min: 100ms, max: 300ms}
    root:
      from: client
      to: [WS1, WS2]
      weights: [0.6, 0.4]
      calls:
        - to: [AP1, AP2, AP3]
          delay: {mean: 1ms, std: 1ms}
`)
	tr, _ := mustGenerate(t, cfg, Options{Seed: 5})
	count := map[string]int{}
	n := 0
	for _, rs := range runsOf(t, tr) {
		n++
		count[rs[0].to]++
		count[rs[1].to]++
	}
	binomialOK(t, "WS1 (weight 0.6)", count["WS1"], n, 0.6)
	for _, ap := range []string{"AP1", "AP2", "AP3"} {
		binomialOK(t, ap+" (uniform)", count[ap], n, 1.0/3)
	}
}

func TestDelayByCaller(t *testing.T) {
	cfg := mustParse(t, `
duration: 500s
tracelets:
  - instances: 4
    think: {min: 100ms, max: 300ms}
    root:
      from: client
      to: [WS1, WS2]
      calls:
        - {to: AUTH, delay: {mean: 15ms, std: 3ms}, reply: {mean: 5ms, std: 1ms}}
        - to: AP
          delay: {mean: 15ms, std: 3ms}
          delay_by_caller: {WS2: {mean: 215ms, std: 3ms}}
`)
	tr, _ := mustGenerate(t, cfg, Options{Seed: 9})
	byCaller := map[string][]float64{}
	auth := map[string][]float64{}
	for _, rs := range runsOf(t, tr) {
		ws := rs[0].to
		auth[ws] = append(auth[ws], float64(rs[1].call-rs[0].call))
		byCaller[ws] = append(byCaller[ws], float64(rs[2].call-rs[1].ret))
	}
	ap := cfg.Tracelets[0].Root.Calls[1]
	within3SE(t, "WS1 -> AP delay", byCaller["WS1"], ap.Delay)
	within3SE(t, "WS2 -> AP delay", byCaller["WS2"], ap.DelayByCaller["WS2"])
	within3SE(t, "WS1 -> AUTH delay", auth["WS1"], cfg.Tracelets[0].Root.Calls[0].Delay)
	within3SE(t, "WS2 -> AUTH delay", auth["WS2"], cfg.Tracelets[0].Root.Calls[0].Delay)
}

func TestThinkAndInstances(t *testing.T) {
	cfg := mustParse(t, `
duration: 1000s
tracelets:
  - name: slow
    instances: 5
    think: {min: 1s, max: 3s}
    root: {from: A, to: B, reply: {mean: 100ms, std: 10ms}}
  - name: fast
    instances: 2
    think: {min: 200ms, max: 200ms}
    root:
      from: A
      to: B
      calls: [{to: C, delay: {mean: 50ms, std: 5ms}, reply: {mean: 50ms, std: 5ms}}]
`)
	_, st := mustGenerate(t, cfg, Options{Seed: 4})
	for name, want := range map[string]float64{
		"slow": 1000 / (2 + 0.1) * 5,
		"fast": 1000 / (0.2 + 0.1) * 2,
	} {
		got := float64(st.RunsPerTracelet[name])
		t.Logf("%s: %v runs, want about %.0f", name, got, want)
		if math.Abs(got-want) > 0.03*want {
			t.Errorf("%s: %v runs, want %.0f ± 3%%", name, got, want)
		}
	}
	// A run that starts before the duration is emitted whole; none starts after it.
	tr, st := mustGenerate(t, cfg, Options{Seed: 4, Duration: 10 * time.Second})
	start := cfg.Start * int64(time.Second)
	for _, rs := range runsOf(t, tr) {
		if rs[0].call-start >= int64(10*time.Second) || rs[0].call-start <= 0 {
			t.Errorf("run starts at %v", time.Duration(rs[0].call-start))
		}
	}
	if st.Runs == 0 {
		t.Error("no runs in 10s")
	}
}

func TestNoCallIDs(t *testing.T) {
	cfg := mustParse(t, "call_ids: false\n"+structureConfig)
	tr, st := mustGenerate(t, cfg, Options{Seed: 1, Duration: 20 * time.Second})
	if len(tr.CallIDs) != 1 {
		t.Errorf("%d call ids interned", len(tr.CallIDs)-1)
	}
	for _, m := range tr.Messages {
		if m.CallID != causal.NoID || m.PathID == causal.NoID {
			t.Fatalf("message %+v", m)
		}
	}
	if len(tr.PathIDs)-1 != st.Runs {
		t.Errorf("%d path ids for %d runs", len(tr.PathIDs)-1, st.Runs)
	}
}

func TestSnifferQueue(t *testing.T) {
	// Rate 1/s, queue 2: a hand-computed FIFO with deterministic service.
	var msgs []causal.Message
	for _, s := range []float64{0, 0.1, 0.2, 1.5, 1.6, 2.0} {
		msgs = append(msgs, causal.Message{Time: int64(s * 1e9)})
	}
	kept, dropped := ApplySniffer(slices.Clone(msgs), 1, 2)
	var got []float64
	for _, m := range kept {
		got = append(got, float64(m.Time)/1e9)
	}
	if want := []float64{0, 0.1, 1.5, 2.0}; !slices.Equal(got, want) || dropped != 2 {
		t.Errorf("kept %v dropped %d, want %v and 2", got, dropped, want)
	}
}

func TestSniffer(t *testing.T) {
	cfg := loadTestdata(t, "multitier.yaml")
	tr, _ := mustGenerate(t, cfg, Options{Seed: 1})
	msgs := tr.Messages
	n := len(msgs)

	if _, d := ApplySniffer(slices.Clone(msgs), 1e12, DefaultQueue); d != 0 {
		t.Errorf("%d drops at 1e12 messages/s", d)
	}
	prev := 2.0
	for _, r := range []float64{100, 200, 300, 400, 600, 1000, 2000, 5000} {
		f := dropFraction(msgs, r, DefaultQueue)
		t.Logf("rate %5.0f/s: drop fraction %.4f", r, f)
		if f > prev {
			t.Errorf("drop fraction rose from %.4f to %.4f at rate %v", prev, f, r)
		}
		prev = f
	}
	if first := dropFraction(msgs, 100, DefaultQueue); !(first > prev && first > 0.3) {
		t.Errorf("drop fraction %.3f at 100/s vs %.3f at 5000/s", first, prev)
	}

	r := CaptureRateForDropRate(msgs, 0.01, DefaultQueue)
	_, d := ApplySniffer(slices.Clone(msgs), r, DefaultQueue)
	got := float64(d) / float64(n)
	t.Logf("capture rate for 1%% drops: %.2f messages/s, drops %.4f (mean rate %.0f/s)", r, got, float64(n)/500)
	if math.Abs(got-0.01) > 0.001 {
		t.Errorf("capture rate %.2f drops %.4f, want 0.01 ± 0.001", r, got)
	}
	r0 := CaptureRateForDropRate(msgs, 0, DefaultQueue)
	if _, d := ApplySniffer(slices.Clone(msgs), r0, DefaultQueue); d != 0 {
		t.Errorf("target 0: rate %v drops %d", r0, d)
	}
	if _, d := ApplySniffer(slices.Clone(msgs), r0*0.99, DefaultQueue); d == 0 {
		t.Errorf("target 0: rate %v is not close to the slowest drop-free rate", r0)
	}

	// Through Generate: the drop fraction and the Stats.
	tr2, st := mustGenerate(t, cfg, Options{Seed: 1, DropRate: 0.01})
	frac := float64(st.Dropped) / float64(st.Dropped+st.Messages)
	if st.Messages != len(tr2.Messages) || st.Dropped+st.Messages != n || math.Abs(frac-0.01) > 0.001 || st.CaptureRate != r {
		t.Errorf("drop rate 0.01: %+v, fraction %.4f", st, frac)
	}
	_, st = mustGenerate(t, cfg, Options{Seed: 1, CaptureRate: 300, DropRate: 0.5, Queue: 8})
	if want := dropFraction(msgs, 300, 8); st.CaptureRate != 300 || math.Abs(float64(st.Dropped)/float64(n)-want) > 1e-12 {
		t.Errorf("explicit capture rate: %+v, want drop fraction %v", st, want)
	}
}

func TestSkew(t *testing.T) {
	cfg := loadTestdata(t, "multitier.yaml")
	opt := Options{Seed: 3, Duration: 30 * time.Second}
	base, _ := mustGenerate(t, cfg, opt)
	var skews []Skew
	for _, s := range []string{"WS2=+30ms", "AUTH=-5ms"} {
		sk, err := ParseSkew(s)
		if err != nil {
			t.Fatal(err)
		}
		skews = append(skews, sk)
	}
	opt.Skews = skews
	sk, _ := mustGenerate(t, cfg, opt)
	type key struct {
		call uint32
		op   causal.Op
	}
	times := map[key]int64{}
	for _, m := range base.Messages {
		times[key{m.CallID, m.Op}] = m.Time
	}
	shifted := map[string]int{}
	for _, m := range sk.Messages {
		want := times[key{m.CallID, m.Op}]
		switch sk.Nodes[m.Sender] {
		case "WS2":
			want += int64(30 * time.Millisecond)
		case "AUTH":
			want -= int64(5 * time.Millisecond)
		}
		if m.Time != want {
			t.Fatalf("%s %s->%s at %d, want %d", m.Op, sk.Nodes[m.Sender], sk.Nodes[m.Receiver], m.Time, want)
		}
		shifted[sk.Nodes[m.Sender]]++
	}
	if len(sk.Messages) != len(base.Messages) || shifted["WS2"] == 0 || shifted["AUTH"] == 0 {
		t.Errorf("%d vs %d messages; senders %v", len(sk.Messages), len(base.Messages), shifted)
	}
	if !slices.IsSortedFunc(sk.Messages, func(a, b causal.Message) int { return int(a.Time - b.Time) }) {
		t.Error("skewed trace is not re-sorted")
	}

	opt.Skews = []Skew{{Node: "WS9", Offset: time.Millisecond}}
	if _, _, err := Generate(cfg, opt); err == nil || !strings.Contains(err.Error(), `"WS9"`) {
		t.Errorf("unknown node: %v", err)
	}
	opt.Skews = []Skew{{Node: "WS1"}, {Node: "WS1"}}
	if _, _, err := Generate(cfg, opt); err == nil {
		t.Error("a node skewed twice: no error")
	}
}

func TestParseSkew(t *testing.T) {
	for in, want := range map[string]Skew{
		"WS2=+20ms":  {"WS2", 20 * time.Millisecond},
		"WS2=-5ms":   {"WS2", -5 * time.Millisecond},
		"a=b=1.5s":   {"a=b", 1500 * time.Millisecond},
		"node 1=0s":  {"node 1", 0},
		"WS2=+1m30s": {"WS2", 90 * time.Second},
	} {
		got, err := ParseSkew(in)
		if err != nil || got != want {
			t.Errorf("ParseSkew(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"WS2", "=5ms", "WS2=5", "WS2=fast", "A\tB=1ms"} {
		if _, err := ParseSkew(in); err == nil {
			t.Errorf("ParseSkew(%q): no error", in)
		}
	}
}

// parallelism is the time-averaged number of open root calls.
func parallelism(tr *causal.Trace, rs map[string][]*rpc) float64 {
	var busy int64
	for _, r := range rs {
		busy += r[0].ret - r[0].call
	}
	return float64(busy) / float64(tr.Messages[len(tr.Messages)-1].Time-tr.Messages[0].Time)
}

func TestTestdata(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "*.yaml"))
	if err != nil || len(files) < 6 {
		t.Fatalf("testdata configs: %v %v", files, err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			cfg := loadTestdata(t, name)
			tr, st := mustGenerate(t, cfg, Options{Seed: 1})
			if hasOneWay(cfg) {
				// One-way configs (the relay traces of the convolution algorithm):
				// every run is one chain of MSG_SENT messages from its tracelet.
				chains := onewayChains(t, tr)
				for _, c := range chains {
					checkChain(t, cfg, tr.Nodes, c)
				}
				t.Logf("%s: %d messages in %d runs %v", name, st.Messages, st.Runs, st.RunsPerTracelet)
				if len(chains) != st.Runs || st.Messages < 60_000 || st.Messages > 100_000 {
					t.Errorf("%d messages in %d chains (%d runs), want about 80,000", st.Messages, len(chains), st.Runs)
				}
				return
			}
			rs := runsOf(t, tr)
			for _, r := range rs {
				checkTree(t, traceletOf(cfg, r).Root, r, false)
			}
			par := parallelism(tr, rs)
			t.Logf("%s: %d messages, %d runs %v, mean parallelism %.1f", name, st.Messages, st.Runs, st.RunsPerTracelet, par)
			lo, hi := 40_000, 60_000
			if strings.HasPrefix(name, "multitier") {
				lo, hi = 180_000, 220_000
			} else if par < 0.5 {
				// The pathological cases only test something when runs overlap on B.
				t.Errorf("mean runs open %.1f, want runs to overlap often", par)
			}
			if st.Messages < lo || st.Messages > hi {
				t.Errorf("%d messages, want %d..%d", st.Messages, lo, hi)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	const head = "tracelets:\n  - name: x\n    root:\n      from: A\n"
	for _, tc := range []struct {
		name, src string
		want      []string // substrings of the error
	}{
		{"unknown top", "duration: 1s\nfoo: 1\n" + head + "      to: B\n", []string{"test.yaml:2:", `unknown field "foo"`}},
		{"unknown call field", head + "      to: B\n      dealy: {mean: 1ms}\n", []string{"test.yaml:6:", `"dealy"`}},
		{"unknown gaussian field", head + "      to: B\n      reply: {mean: 1ms, sd: 1ms}\n", []string{"test.yaml:6:", `"sd"`}},
		{"weights length", head + "      to: [B, C]\n      weights: [1]\n", []string{"test.yaml:6:", "tracelets[0].root.weights", "1 entries but to has 2"}},
		{"weights non-positive", head + "      to: [B, C]\n      weights: [1, 0]\n", []string{"test.yaml:6:", "weights[1]", "positive"}},
		{"weights not a number", head + "      to: [B, C]\n      weights: [1, x]\n", []string{"test.yaml:6:", "weights[1]"}},
		{"no tracelets", "duration: 1s\n", []string{"test.yaml:1:", "tracelets"}},
		{"empty tracelets", "tracelets: []\n", []string{"test.yaml:1:", "tracelets", "at least one"}},
		{"empty file", "", []string{"test.yaml:1:", "empty"}},
		{"instances", "tracelets:\n  - instances: 0\n    root: {from: A, to: B}\n", []string{"test.yaml:2:", "instances"}},
		{"think order", "tracelets:\n  - think: {min: 2s, max: 1s}\n    root: {from: A, to: B}\n", []string{"test.yaml:2:", "think", "greater"}},
		{"think negative", "tracelets:\n  - think: {min: -1s, max: 1s}\n    root: {from: A, to: B}\n", []string{"test.yaml:2:", "think.min", "negative"}},
		{"negative mean", head + "      to: B\n      reply: {mean: -1ms}\n", []string{"test.yaml:6:", "reply.mean", "negative"}},
		{"negative std", head + "      to: B\n      calls:\n        - to: C\n          delay: {mean: 1ms, std: -1ms}\n", []string{"test.yaml:8:", "calls[0].delay.std", "negative"}},
		{"bad duration", head + "      to: B\n      reply: {mean: 5}\n", []string{"test.yaml:6:", "reply.mean", "duration"}},
		{"from missing", "tracelets:\n  - root:\n      to: B\n", []string{"test.yaml:3:", "root.from", "required"}},
		{"from on child", head + "      to: B\n      calls:\n        - from: B\n          to: C\n", []string{"test.yaml:7:", "calls[0].from"}},
		{"tab in name", head + "      to: \"B\\tC\"\n", []string{"test.yaml:5:", "root.to", "tab"}},
		{"newline in name", "tracelets:\n  - root: {from: \"A\\nB\", to: B}\n", []string{"test.yaml:2:", "root.from"}},
		{"empty name", head + "      to: \"\"\n", []string{"test.yaml:5:", "root.to", "empty"}},
		{"to empty", head + "      to: []\n", []string{"test.yaml:5:", "root.to", "empty"}},
		{"to missing", head, []string{"test.yaml:4:", "root.to", "required"}},
		{"delay on root", head + "      to: B\n      delay: {mean: 1ms}\n", []string{"test.yaml:6:", "delay"}},
		{"by caller not a callee", head + "      to: [B, C]\n      calls:\n        - to: D\n          delay_by_caller: {E: {mean: 1ms}}\n", []string{"test.yaml:8:", "delay_by_caller.E"}},
		{"duplicate field", head + "      to: B\n      to: C\n", []string{"test.yaml:6:", "duplicate"}},
		{"duplicate tracelet", "tracelets:\n  - {name: x, think: {max: 1s}, root: {from: A, to: B}}\n  - {name: x, think: {max: 1s}, root: {from: A, to: B}}\n", []string{"test.yaml:3:", "duplicate tracelet"}},
		{"yaml syntax", "tracelets:\n  - root: {from: A\n", []string{"test.yaml:1:", "did not find"}},
		{"yaml tab", "tracelets:\n\t- root: {}\n", []string{"test.yaml:2:", "cannot start"}},
		{"frozen", "tracelets:\n  - root: {from: A, to: B}\n", []string{"test.yaml:2:", "never advance"}},
		{"call_ids type", "call_ids: 1\n" + head + "      to: B\n", []string{"test.yaml:1:", "call_ids"}},
	} {
		_, err := ParseConfig([]byte(tc.src), "test.yaml")
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tc.name, err, w)
			}
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	cfg := mustParse(t, `
tracelets:
  - root:
      from: A
      to: [B, C]
      calls: [{to: D}]
    think: {max: 1s}
`)
	tl := cfg.Tracelets[0]
	if cfg.Start != DefaultStart || !cfg.CallIDs || cfg.Duration != 0 || tl.Instances != 1 || tl.Name != "tracelet1" ||
		tl.ThinkMin != 0 || tl.ThinkMax != time.Second || tl.Root.Weights != nil || tl.Root.Calls[0].Delay != (Gaussian{}) {
		t.Errorf("defaults: %+v %+v", cfg, tl)
	}
	if _, _, err := Generate(cfg, Options{}); err == nil || !strings.Contains(err.Error(), "duration") {
		t.Errorf("no duration: %v", err)
	}
	tr, _ := mustGenerate(t, cfg, Options{Duration: 10 * time.Second})
	if first := tr.Messages[0].Time; first < DefaultStart*1e9 || first > DefaultStart*1e9+1e9 {
		t.Errorf("first message at %d", first)
	}
	for _, o := range []Options{{Duration: 1, DropRate: 1}, {Duration: 1, DropRate: -0.1}, {Duration: 1, CaptureRate: -1}, {Duration: 1, Queue: -1}, {Duration: -1}} {
		if _, _, err := Generate(cfg, o); err == nil {
			t.Errorf("options %+v: no error", o)
		}
	}
}

// TestLarge generates a 2,000,000-message multi-tier trace and reports the cost.
func TestLarge(t *testing.T) {
	cfg := loadTestdata(t, "multitier.yaml")
	start, cpu0 := time.Now(), cpuTime()
	_, st := mustGenerate(t, cfg, Options{Seed: 1, Duration: 5050 * time.Second})
	el, cpu := time.Since(start), cpuTime()-cpu0
	t.Logf("%d messages in %v wall, %v CPU (all threads, GC included; GOMAXPROCS=%d)",
		st.Messages, el.Round(time.Millisecond), cpu.Round(time.Millisecond), runtime.GOMAXPROCS(0))
	if st.Messages < 1_800_000 {
		t.Errorf("only %d messages", st.Messages)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkGenerate(b *testing.B) {
	cfg := loadTestdata(b, "multitier.yaml")
	b.ReportAllocs()
	msgs := 0
	for i := 0; b.Loop(); i++ {
		_, st := mustGenerate(b, cfg, Options{Seed: uint64(i)})
		msgs += st.Messages
	}
	b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(msgs)/float64(b.N), "msgs/op")
}

func ExampleParseSkew() {
	s, _ := ParseSkew("WS2=+30ms")
	fmt.Println(s.Node, s.Offset)
	// Output: WS2 30ms
}
