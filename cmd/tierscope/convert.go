package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/nezha"
	"github.com/tierscope/tierscope/internal/otlpjsonl"
)

// convert turns third-party trace datasets into OTLP/JSON lines (docs/formats.md §4) so
// that stitch can be run and scored on real traces. Package nezha reads the
// Nezha CSVs and rebuilds their spans; convert removes context (--strip) and
// writes them.

// Truth attributes written by --strip, so that stitch reports can be scored.
const (
	attrTruthParent = "tierscope.truth.parent_span_id"
	attrTruthTrace  = "tierscope.truth.trace_id"
)

// Strip modes: how much propagated context to remove, as if SDKs had not
// propagated it.
const (
	stripNone         = "none"
	stripAll          = "all"
	stripCrossService = "cross-service"
)

func runConvert(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("convert", "convert --from nezha --in trace.csv [--strip none|all|cross-service] [--batch 8192] --out spans.jsonl", stderr)
	var (
		from  = fs.String("from", "", "input dataset format: nezha (the Nezha trace CSV)")
		in    = fs.String("in", "", "input file, - for standard input")
		strip = fs.String("strip", stripNone, "context to remove: none, all (every parent link), or cross-service (links between pods); strip modes record the truth as tierscope.truth.* attributes")
		batch = fs.Int("batch", 8192, "spans per output line (request); spans are written in end-time order, as a collector would receive them")
		out   = fs.String("out", "", "output OTLP/JSON lines file (default standard output)")
	)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *from == "":
		return usagef("--from is required (supported: nezha)")
	case *from != "nezha":
		return usagef("--from %q is not supported (supported: nezha)", *from)
	case *strip != stripNone && *strip != stripAll && *strip != stripCrossService:
		return usagef("--strip must be none, all or cross-service, not %q", *strip)
	case *batch < 1:
		return usagef("--batch must be ≥ 1")
	}
	r, name, closeIn, err := input(*in, stdin)
	if err != nil {
		return err
	}
	defer closeIn()
	ds, err := nezha.Read(r, name)
	if err != nil {
		return err
	}
	o, err := openOutput(*out, stdout)
	if err != nil {
		return err
	}
	w := otlpjsonl.NewWriter(o)
	res, err := convert(ds, *strip, *batch, w.Write)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		o.abort()
		return err
	}
	if err := o.commit(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s convert %s: %s\n", programName, name, res.summary(*strip))
	return nil
}

// convertResult is the converted data and its statistics.
type convertResult struct {
	spans        int
	traces       int // distinct TraceIDs in the input
	outTraces    int // distinct trace ids written
	pods         int
	services     int
	unmatched    int // pods whose name fit no rule (service.name = pod name)
	byKind       map[ptrace.SpanKind]int
	broken       int // parent links removed
	missing      int // parents not in the file
	durMismatch  int
	crossPodEdge int // true parent in another pod
}

func (r *convertResult) summary(strip string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d spans, %d traces", r.spans, r.traces)
	if strip != stripNone {
		fmt.Fprintf(&b, " (%d after --strip %s)", r.outTraces, strip)
	}
	fmt.Fprintf(&b, ", %d services on %d pods", r.services, r.pods)
	if r.unmatched > 0 {
		fmt.Fprintf(&b, " (%d pod names fit no rule and are used as the service name)", r.unmatched)
	}
	fmt.Fprintf(&b, "; kinds server=%d client=%d producer=%d consumer=%d internal=%d",
		r.byKind[ptrace.SpanKindServer], r.byKind[ptrace.SpanKindClient], r.byKind[ptrace.SpanKindProducer],
		r.byKind[ptrace.SpanKindConsumer], r.byKind[ptrace.SpanKindInternal])
	fmt.Fprintf(&b, "; %d cross-pod links, %d links broken", r.crossPodEdge, r.broken)
	if r.missing > 0 {
		fmt.Fprintf(&b, ", %d parents not in the file", r.missing)
	}
	fmt.Fprintf(&b, "; %d duration mismatches", r.durMismatch)
	return b.String()
}

// derivedTraceID is the fresh trace id given to a span cut from its parent. It is
// a hash of the span id so that the output is reproducible.
func derivedTraceID(span pcommon.SpanID) pcommon.TraceID {
	sum := sha256.Sum256(append([]byte(nezha.Scope+"/strip\x00"), span[:]...))
	var t pcommon.TraceID
	copy(t[:], sum[:16])
	return t
}

// outIDs computes each span's output trace id and parent id for a strip mode, and
// how many parent links were removed.
func outIDs(d *nezha.Data, strip string) (traces []pcommon.TraceID, parents []pcommon.SpanID, broken int, err error) {
	n := len(d.Spans)
	traces = make([]pcommon.TraceID, n)
	parents = make([]pcommon.SpanID, n)
	switch strip {
	case stripNone:
		for i, s := range d.Spans {
			traces[i], parents[i] = s.Trace, s.Parent
		}
		return traces, parents, 0, nil
	case stripAll:
		for i, s := range d.Spans {
			traces[i] = derivedTraceID(s.ID)
			if !s.Parent.IsEmpty() {
				broken++
			}
		}
		return traces, parents, broken, nil
	}
	// cross-service: cut every link whose parent runs in another pod (process),
	// where a real SDK would have had to propagate context over the network; the
	// cut span and everything below it through same-pod links get a trace id
	// derived from the cut span. A parent missing from the file keeps its link
	// and the original trace id: we cannot tell where it ran.
	const (
		todo = iota
		visiting
		done
	)
	state := make([]uint8, n)
	var stack []int
	for i := range d.Spans {
		for j := i; state[j] != done; {
			s := d.Spans[j]
			p, ok := d.Index[s.Parent]
			switch {
			case s.Parent.IsEmpty() || !ok:
				traces[j], parents[j] = s.Trace, s.Parent
			case d.Spans[p].Pod != s.Pod:
				traces[j] = derivedTraceID(s.ID)
				broken++
			case state[p] == done:
				traces[j], parents[j] = traces[p], s.Parent
			case state[p] == visiting:
				return nil, nil, 0, fmt.Errorf("%s:%d: span %s is its own ancestor (a ParentID cycle)", d.Name, s.Line, s.ID)
			default: // resolve the parent first
				state[j] = visiting
				stack = append(stack, j)
				j = p
				continue
			}
			state[j] = done
			if len(stack) == 0 {
				break
			}
			j, stack = stack[len(stack)-1], stack[:len(stack)-1]
		}
	}
	return traces, parents, broken, nil
}

// convert builds the OTLP requests and hands them to emit one by one: the spans
// as package nezha builds them (end-time order, batch spans per request, one
// ResourceSpans per pod), with the context strip leaves and the truth it removed.
func convert(d *nezha.Data, strip string, batch int, emit func(ptrace.Traces) error) (*convertResult, error) {
	traces, parents, broken, err := outIDs(d, strip)
	if err != nil {
		return nil, err
	}
	res := &convertResult{
		spans: len(d.Spans), broken: broken, durMismatch: d.DurationMismatches,
		byKind: map[ptrace.SpanKind]int{},
	}
	inTraces, outTraces := map[pcommon.TraceID]bool{}, map[pcommon.TraceID]bool{}
	pods, services := map[string]bool{}, map[string]bool{}
	for i, s := range d.Spans {
		inTraces[s.Trace], outTraces[traces[i]] = true, true
		if !pods[s.Pod] {
			pods[s.Pod] = true
			svc, rule := nezha.ServiceFromPod(s.Pod)
			services[svc] = true
			if rule == "" {
				res.unmatched++
			}
		}
		if !s.Parent.IsEmpty() {
			if p, ok := d.Index[s.Parent]; !ok {
				res.missing++
			} else if d.Spans[p].Pod != s.Pod {
				res.crossPodEdge++
			}
		}
	}
	res.traces, res.outTraces, res.pods, res.services = len(inTraces), len(outTraces), len(pods), len(services)

	err = d.Emit(batch, func(td ptrace.Traces) error {
		rss := td.ResourceSpans()
		for r := 0; r < rss.Len(); r++ {
			spans := rss.At(r).ScopeSpans().At(0).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				i := d.Index[sp.SpanID()]
				s := d.Spans[i]
				res.byKind[sp.Kind()]++
				sp.SetTraceID(traces[i])
				sp.SetParentSpanID(parents[i])
				if strip != stripNone {
					truthParent := ""
					if !s.Parent.IsEmpty() {
						truthParent = s.Parent.String()
					}
					sp.Attributes().PutStr(attrTruthParent, truthParent)
					sp.Attributes().PutStr(attrTruthTrace, s.Trace.String())
				}
			}
		}
		return emit(td)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
