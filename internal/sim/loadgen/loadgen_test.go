package loadgen

import (
	"reflect"
	"sort"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

func mustGenerate(t *testing.T, cfg Config, n int) []Trace {
	t.Helper()
	traces, err := Generate(cfg, n)
	if err != nil {
		t.Fatal(err)
	}
	return traces
}

func TestDeterministic(t *testing.T) {
	a := mustGenerate(t, DefaultConfig(), 300)
	b := mustGenerate(t, DefaultConfig(), 300)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same config gave different traces")
	}
	cfg := DefaultConfig()
	cfg.Seed = 2
	if reflect.DeepEqual(a, mustGenerate(t, cfg, 300)) {
		t.Fatal("different seeds gave the same traces")
	}
}

func TestNextContinuesTheTimeline(t *testing.T) {
	g, err := NewGenerator(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	chunks := append(g.Next(100), g.Next(100)...)
	if !reflect.DeepEqual(chunks, mustGenerate(t, DefaultConfig(), 200)) {
		t.Fatal("two chunks of 100 differ from one run of 200")
	}
}

func TestChildrenNestInParents(t *testing.T) {
	for i, tr := range mustGenerate(t, DefaultConfig(), 2000) {
		if len(tr.Spans) < DBFirst+1 {
			t.Fatalf("trace %d has %d spans", i, len(tr.Spans))
		}
		for j, s := range tr.Spans {
			if !s.End.After(s.Start) {
				t.Fatalf("trace %d span %d: end %v not after start %v", i, j, s.End, s.Start)
			}
			if j == 0 {
				if s.Parent != -1 {
					t.Fatalf("trace %d: first span is not the root", i)
				}
				continue
			}
			if s.Parent < 0 || s.Parent >= j {
				t.Fatalf("trace %d span %d: parent %d does not precede it", i, j, s.Parent)
			}
			p := tr.Spans[s.Parent]
			if !p.Start.Before(s.Start) || !s.End.Before(p.End) {
				t.Fatalf("trace %d span %d (%s) [%v,%v] not strictly inside parent %s [%v,%v]",
					i, j, s.Name, s.Start, s.End, p.Name, p.Start, p.End)
			}
		}
		// Database calls are sequential.
		for j := DBFirst + 1; j < len(tr.Spans); j++ {
			if tr.Spans[j].Start.Before(tr.Spans[j-1].End) {
				t.Fatalf("trace %d: database calls %d and %d overlap", i, j-1, j)
			}
		}
	}
}

// The scenario promises that the true web CLIENT span is the only one that
// contains an app SERVER span, even with a 10 ms skew allowance either way, while
// requests still overlap heavily.
func TestTruthIsTheOnlyContainingCall(t *testing.T) {
	const skew = 10 * time.Millisecond
	traces := mustGenerate(t, DefaultConfig(), 3000)
	maxInFlight := 0
	for i, tr := range traces {
		srv := tr.Spans[AppServer]
		inFlight := 0
		for j := max(0, i-50); j < min(len(traces), i+50); j++ {
			call := traces[j].Spans[WebClient]
			if call.Start.Before(srv.End) && srv.Start.Before(call.End) {
				inFlight++
			}
			contains := !call.Start.Add(-skew).After(srv.Start) && !srv.End.After(call.End.Add(skew))
			if contains != (i == j) {
				t.Fatalf("app SERVER span of request %d: containment by call %d is %v", i, j, contains)
			}
		}
		maxInFlight = max(maxInFlight, inFlight)
	}
	if maxInFlight < 3 {
		t.Fatalf("at most %d calls in flight: the requests hardly overlap", maxInFlight)
	}
}

func TestDropFraction(t *testing.T) {
	for _, f := range []float64{0, 0.5, 1} {
		cfg := DefaultConfig()
		cfg.DropFraction = f
		dropped := 0
		traces := mustGenerate(t, cfg, 1000)
		for _, tr := range traces {
			for j, s := range tr.Spans {
				if s.ContextDropped {
					if j != AppServer {
						t.Fatalf("span %d (%s) dropped context; only the app SERVER span may", j, s.Name)
					}
					dropped++
				}
			}
		}
		got := float64(dropped) / float64(len(traces))
		if got < f-0.06 || got > f+0.06 {
			t.Errorf("DropFraction %v: %v of requests dropped context", f, got)
		}
	}
}

func TestValidate(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.DropFraction = 1.5 },
		func(c *Config) { c.WebInstances = 0 },
		func(c *Config) { c.MaxGap = c.MinGap - 1 },
		func(c *Config) { c.MinCall = time.Millisecond },
		func(c *Config) { c.Separation = 0 },
	}
	for i, mutate := range bad {
		cfg := DefaultConfig()
		mutate(&cfg)
		if _, err := NewGenerator(cfg); err == nil {
			t.Errorf("case %d: invalid config accepted", i)
		}
	}
}

func TestAppendOTLP(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DropFraction = 0.5
	traces := mustGenerate(t, cfg, 500)
	td := ptrace.NewTraces()
	ids := AppendOTLP(td, traces, NewIDs(7))

	want := 0
	for _, tr := range traces {
		want += len(tr.Spans)
	}
	if td.SpanCount() != want {
		t.Fatalf("%d spans in OTLP, want %d", td.SpanCount(), want)
	}
	instances := []string{}
	seen := map[[8]byte]bool{}
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		inst, _ := rs.Resource().Attributes().Get("service.instance.id")
		instances = append(instances, inst.Str())
		spans := rs.ScopeSpans().At(0).Spans()
		for k := 0; k < spans.Len(); k++ {
			id := spans.At(k).SpanID()
			if seen[id] {
				t.Fatalf("span ID %v used twice", id)
			}
			seen[id] = true
		}
	}
	sort.Strings(instances)
	if !reflect.DeepEqual(instances, []string{"app-1", "app-2", "web-1", "web-2"}) {
		t.Fatalf("resources %v", instances)
	}
	for i, tr := range traces {
		got := ids[i]
		for j, s := range tr.Spans {
			switch {
			case s.Parent < 0 || s.ContextDropped:
				if !got[j].ParentSpanID.IsEmpty() {
					t.Fatalf("trace %d span %d: root has a parent", i, j)
				}
				if s.ContextDropped && got[j].TraceID == got[s.Parent].TraceID {
					t.Fatalf("trace %d span %d: dropped context but kept the trace ID", i, j)
				}
			default:
				if got[j].ParentSpanID != got[s.Parent].SpanID || got[j].TraceID != got[s.Parent].TraceID {
					t.Fatalf("trace %d span %d: not linked to its parent", i, j)
				}
			}
		}
	}
}

func BenchmarkAppendOTLP(b *testing.B) {
	g, _ := NewGenerator(DefaultConfig())
	ids := NewIDs(1)
	spans := 0
	for b.Loop() {
		td := ptrace.NewTraces()
		AppendOTLP(td, g.Next(64), ids)
		spans += td.SpanCount()
	}
	b.ReportMetric(float64(spans)/b.Elapsed().Seconds(), "spans/s")
}
