package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/sim/loadgen"
)

// The attributes docs/formats.md §4 puts on a span whose parent was inferred.
const (
	attrInferredParent     = "tierscope.inferred.parent_span_id"
	attrInferredConfidence = "tierscope.inferred.confidence"
)

const (
	requests = 200
	// dropFraction of the requests lose their context on the web → app hop; the
	// others still carry it, which is where the processor can learn that
	// app:8080 is served by service "app" (docs/design.md, endpoint resolution).
	dropFraction = 0.8
)

// scenario is 200 overlapping web → app → db requests (see internal/sim/loadgen)
// timed so that the last span ends just now: they arrive as live traffic would.
func scenario(t *testing.T) []loadgen.Trace {
	t.Helper()
	cfg := loadgen.DefaultConfig()
	cfg.Seed = 42
	cfg.DropFraction = dropFraction
	probe, err := loadgen.Generate(cfg, requests)
	if err != nil {
		t.Fatal(err)
	}
	var end time.Time
	for _, tr := range probe {
		if e := tr.End(); e.After(end) {
			end = e
		}
	}
	cfg.Start = time.Now().Add(-end.Sub(cfg.Start) - 50*time.Millisecond)
	plan, err := loadgen.Generate(cfg, requests)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// problems collects assertion failures by kind and reports each kind once,
// with a count and the first few examples.
type problems map[string][]string

func (p problems) add(kind, format string, args ...any) {
	p[kind] = append(p[kind], fmt.Sprintf(format, args...))
}

func (p problems) report(t *testing.T) {
	t.Helper()
	for kind, list := range p {
		ex := list
		if len(ex) > 5 {
			ex = ex[:5]
		}
		t.Errorf("%s: %d span(s), e.g.\n    %s", kind, len(list), strings.Join(ex, "\n    "))
	}
}

// indexOutput checks that every emitted span is in the output exactly once,
// with its resource, name and kind, and nothing else is; it returns the output
// by span ID.
func indexOutput(t *testing.T, truth *Truth, out []OutSpan) map[string]OutSpan {
	t.Helper()
	p := problems{}
	by := map[string]OutSpan{}
	for _, o := range out {
		id := o.Span.SpanID().String()
		if _, dup := by[id]; dup {
			p.add("span written more than once", "%s %q", id, o.Span.Name())
			continue
		}
		by[id] = o
		if _, ok := truth.BySpan[id]; !ok {
			p.add("span that was never sent", "%s %q", id, o.Span.Name())
		}
	}
	for _, e := range truth.Spans {
		o, ok := by[e.SpanID]
		if !ok {
			p.add("span missing from the output", "request %d span %d %s %q", e.Request, e.Index, e.SpanID, e.Plan.Name)
			continue
		}
		wantKind := ptrace.SpanKindServer
		if e.Plan.Kind == loadgen.KindClient {
			wantKind = ptrace.SpanKindClient
		}
		if o.Service != e.Plan.Service || o.Instance != e.Plan.Instance || o.Span.Name() != e.Plan.Name || o.Span.Kind() != wantKind {
			p.add("span changed resource, name or kind", "%s: got %s/%s %q %v, want %s/%s %q %v", e.SpanID,
				o.Service, o.Instance, o.Span.Name(), o.Span.Kind(), e.Plan.Service, e.Plan.Instance, e.Plan.Name, wantKind)
		}
	}
	p.report(t)
	if t.Failed() {
		t.FailNow()
	}
	return by
}

// TestHarnessWithoutStitching proves the harness on a pipeline without
// causalpath: every span arrives exactly once and the context is broken
// exactly where the plan broke it.
func TestHarnessWithoutStitching(t *testing.T) {
	t.Parallel()
	plan := scenario(t)
	c := StartCollector(t, Batch())
	truth := Emit(t, c.Endpoint, plan)
	out := c.WaitForSpans(t, len(truth.Spans), 30*time.Second)
	by := indexOutput(t, truth, out)

	p := problems{}
	traces := map[string]bool{}
	dropped := 0
	for _, e := range truth.Spans {
		sp := by[e.SpanID].Span
		traces[sp.TraceID().String()] = true
		if got := parentOf(sp); got != e.Parent {
			p.add("parent differs from what was sent", "%s %q: %s, sent %s", e.SpanID, e.Plan.Name, hexOr(got), hexOr(e.Parent))
		}
		if got := sp.TraceID().String(); got != e.TraceID {
			p.add("trace differs from what was sent", "%s %q: %s, sent %s", e.SpanID, e.Plan.Name, got, e.TraceID)
		}
		if _, ok := sp.Attributes().Get(attrInferredParent); ok {
			p.add("inferred parent without causalpath", "%s", e.SpanID)
		}
		if e.Plan.ContextDropped {
			dropped++
			if e.Index != loadgen.AppServer || e.TraceID == e.TrueTraceID || e.Parent != "" {
				p.add("context dropped in the wrong place", "request %d span %d", e.Request, e.Index)
			}
		}
	}
	p.report(t)
	if dropped < requests/2 || dropped == requests {
		t.Errorf("%d of %d requests lost their context; the scenario wants about %.0f%%", dropped, requests, 100*dropFraction)
	}
	if len(traces) != requests+dropped {
		t.Errorf("%d traces in the output, want %d requests + %d broken off", len(traces), requests, dropped)
	}
	t.Logf("%d spans of %d requests arrived once each; %d app SERVER spans started new traces (%d traces in all)",
		len(truth.Spans), requests, dropped, len(traces))
}

// TestCausalpathStitching runs the causalpath processor in each mode and
// compares the output with the truth (docs/formats.md §4):
//   - every span appears exactly once;
//   - every app SERVER span that lost its context carries
//     tierscope.inferred.parent_span_id = its web CLIENT span and
//     tierscope.inferred.confidence in (0,1]; no other span carries them;
//   - reparent: the stitched trees equal the true trees: each request's spans,
//     including the orphan's own descendants, share the request's trace ID and
//     every parentSpanId is the true parent;
//   - link: the orphan keeps its trace and has a span link to its web CLIENT span;
//   - annotate: only the attributes change.
func TestCausalpathStitching(t *testing.T) {
	bin := collectorBinary(t)
	requireComponent(t, bin, "processors", "causalpath")
	for _, mode := range []string{"reparent", "link", "annotate"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			plan := scenario(t)
			c := StartCollector(t, Causalpath(mode), Batch())
			truth := Emit(t, c.Endpoint, plan)
			out := c.WaitForSpans(t, len(truth.Spans), 40*time.Second)
			by := indexOutput(t, truth, out)
			checkStitched(t, mode, truth, by)
		})
	}
}

func parentOf(sp ptrace.Span) string {
	if sp.ParentSpanID().IsEmpty() {
		return ""
	}
	return sp.ParentSpanID().String()
}

func checkStitched(t *testing.T, mode string, truth *Truth, by map[string]OutSpan) {
	p := problems{}
	orphans, right := 0, 0
	var confSum float64
	for _, e := range truth.Spans {
		sp := by[e.SpanID].Span
		gotParent, gotTrace := parentOf(sp), sp.TraceID().String()
		inferred, hasInferred := attrString(sp, attrInferredParent)
		conf, hasConf := attrNumber(sp, attrInferredConfidence)

		if !e.Plan.ContextDropped {
			if hasInferred || hasConf {
				p.add("span with intact context got an inferred parent", "request %d %q %s: %s=%s",
					e.Request, e.Plan.Name, e.SpanID, attrInferredParent, inferred)
			}
			if gotParent != e.Parent {
				p.add("parent of a span with intact context changed", "request %d %q %s: %s, sent %s",
					e.Request, e.Plan.Name, e.SpanID, hexOr(gotParent), hexOr(e.Parent))
			}
			wantTrace := e.TraceID
			if mode == "reparent" {
				wantTrace = e.TrueTraceID // descendants of an orphan follow it
			}
			if gotTrace != wantTrace {
				p.add(mode+": wrong trace ID for a span with intact context (in reparent mode an orphan's descendants follow it)", "request %d %q %s: %s, want %s (sent %s)",
					e.Request, e.Plan.Name, e.SpanID, gotTrace, wantTrace, e.TraceID)
			}
			continue
		}

		orphans++
		switch {
		case !hasInferred:
			p.add("orphan without "+attrInferredParent, "request %d %q %s (true parent %s)", e.Request, e.Plan.Name, e.SpanID, e.TrueParent)
		case !strings.EqualFold(inferred, e.TrueParent):
			p.add("orphan with the wrong inferred parent", "request %d %s: inferred %s, true parent %s",
				e.Request, e.SpanID, inferred, e.TrueParent)
		default:
			right++
		}
		if !hasConf || conf <= 0 || conf > 1 {
			p.add("orphan without a numeric "+attrInferredConfidence+" in (0,1]", "request %d %s: %v",
				e.Request, e.SpanID, sp.Attributes().AsRaw()[attrInferredConfidence])
		} else {
			confSum += conf
		}

		switch mode {
		case "reparent":
			if gotParent != e.TrueParent || gotTrace != e.TrueTraceID {
				p.add("reparent: orphan not moved under its true parent", "request %d %s: parent %s trace %s, want parent %s trace %s",
					e.Request, e.SpanID, hexOr(gotParent), gotTrace, e.TrueParent, e.TrueTraceID)
			}
		case "link":
			if gotParent != "" || gotTrace != e.TraceID {
				p.add("link: orphan's own parent or trace changed", "request %d %s: parent %s trace %s",
					e.Request, e.SpanID, hexOr(gotParent), gotTrace)
			}
			linked := false
			for i := 0; i < sp.Links().Len(); i++ {
				l := sp.Links().At(i)
				if l.SpanID().String() == e.TrueParent && l.TraceID().String() == e.TrueTraceID {
					linked = true
				}
			}
			if !linked {
				p.add("link: orphan has no span link to its true parent", "request %d %s: %d links, want %s/%s",
					e.Request, e.SpanID, sp.Links().Len(), e.TrueTraceID, e.TrueParent)
			}
		case "annotate":
			if gotParent != "" || gotTrace != e.TraceID {
				p.add("annotate: orphan's parent or trace changed", "request %d %s: parent %s trace %s",
					e.Request, e.SpanID, hexOr(gotParent), gotTrace)
			}
		}
	}
	p.report(t)
	mean := 0.0
	if orphans > 0 {
		mean = confSum / float64(orphans)
	}
	t.Logf("mode %s: %d of %d orphan app SERVER spans got their true parent (mean confidence %.3f)", mode, right, orphans, mean)
}
