package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierscope/tierscope/internal/otlpjsonl"
	"github.com/tierscope/tierscope/internal/stitch"
	"github.com/tierscope/tierscope/internal/stitcheval"
	"github.com/tierscope/tierscope/testbed/config"
	"github.com/tierscope/tierscope/testbed/load"
	"github.com/tierscope/tierscope/testbed/services"
)

// The stitching data set: the testbed with testbed/stitch.yaml (parallel
// fan-out, async tasks that outlive their request, in-process redis and
// postgresql clients under their own service.name, gRPC beside HTTP, current
// and legacy semantic conventions) under high load, recorded by the real SDK
// with full trace context and written as OTLP/JSON lines, the collector's file
// exporter format. The test checks that the data has what the evaluation needs
// and logs what the stitchers make of it (stitchTestbedScore).
//
//	TESTBED_SPANS_OUT=out/stitch/spans.jsonl go test -count=1 -run TestStitchTestbedSpans -v ./e2e/
//
// A relative TESTBED_SPANS_OUT is relative to the repository root; without it
// the file goes to a temporary directory. TESTBED_STITCH_DURATION (default 10s,
// at most 60s) and TESTBED_STITCH_USERS (default 16) set the load.
func TestStitchTestbedSpans(t *testing.T) {
	duration := 10 * time.Second
	if s := os.Getenv("TESTBED_STITCH_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > time.Minute {
			t.Fatalf("TESTBED_STITCH_DURATION=%q: want a duration in (0, 60s]", s)
		}
		duration = d
	}
	users := 16
	if s := os.Getenv("TESTBED_STITCH_USERS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			t.Fatalf("TESTBED_STITCH_USERS=%q: want 1 to 1000", s)
		}
		users = n
	}
	out := os.Getenv("TESTBED_SPANS_OUT")
	switch {
	case out == "":
		out = filepath.Join(t.TempDir(), "spans.jsonl")
	case !filepath.IsAbs(out):
		abs, err := filepath.Abs(filepath.Join("..", out)) // go test runs in e2e/
		if err != nil {
			t.Fatal(err)
		}
		out = abs
	}

	cfg := config.Stitch()
	rec := &stitchRecorder{}
	st, err := services.StartStack(services.StackOptions{
		Config: cfg, Version: "v1", Reporter: rec.provider,
		// More consumers than messages in flight, so that the worker's own
		// limit never caps its concurrency.
		WorkerConcurrency: 64,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	loadStart := time.Now()
	stats, err := load.Run(ctx, load.Options{
		Target: st.WebURL, Mode: "closed", Mix: "shopping", Users: users, Duration: duration,
		Seed: 1, Classes: cfg.Classes(), ThinkMean: 10 * time.Millisecond,
	})
	loadEnd := time.Now()
	closeCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if cerr := st.Close(closeCtx); cerr != nil {
		t.Fatalf("stopping the testbed: %v", cerr)
	}
	if err := rec.shutdown(closeCtx); err != nil {
		t.Fatalf("flushing spans: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}

	exported := rec.spans()
	if int64(exported) != rec.ended.n.Load() {
		t.Fatalf("%d spans ended, %d exported: the batcher dropped some", rec.ended.n.Load(), exported)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeStitchSpans(out, rec.requests); err != nil {
		t.Fatal(err)
	}
	// Everything below reads the file back, so it checks what the evaluation
	// will read.
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	batches, err := otlpjsonl.ReadBatches(f, out)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(out)
	t.Logf("spans: %d in %d export requests, %s (%.1f MB)", exported, len(batches), out, float64(info.Size())/1e6)
	t.Logf("load: %d users for %v: %d requests (%.0f/s), %d errors", users, duration, stats.Requests, stats.Rate, stats.Errors)
	if stats.Requests < 100 || stats.Errors > 0 {
		t.Fatalf("the load did not run cleanly: %+v", stats)
	}

	ix := indexStitchSpans(batches)
	if len(ix.spans) != exported {
		t.Fatalf("%d spans written, %d read back", exported, len(ix.spans))
	}
	checkStitchFeatures(t, ix, loadStart, loadEnd)
	stitchTestbedScore(t, batches)
}

// stitchTestbedScore logs, without asserting, how well stitching recovers the
// links once context is stripped: all of it, and only across processes, for
// the product's stitcher (internal/stitch defaults), on the same pipeline as the evaluation (stitcheval.RunOne: strip, split into
// export requests, stitch, score). The accuracy assertions belong here.
func stitchTestbedScore(t *testing.T, full []ptrace.Traces) {
	t.Helper()
	all := ptrace.NewTraces()
	for _, td := range full {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			td.ResourceSpans().At(i).CopyTo(all.ResourceSpans().AppendEmpty())
		}
	}
	// The naive baseline (stitcheval.Naive) would double the time.
	algos := []stitcheval.Algorithm{{Name: "stitch", Stitch: stitcheval.Stitcher(stitch.DefaultOptions())}}
	for _, mode := range []stitcheval.StripMode{stitcheval.StripAll, stitcheval.StripCrossProcess} {
		sc := stitcheval.Scenario{Name: "testbed-" + mode.String(), Series: "testbed", Strip: mode,
			Build: func(uint64) (ptrace.Traces, error) {
				cp := ptrace.NewTraces()
				all.CopyTo(cp)
				return cp, nil
			}}
		runs, err := stitcheval.RunOne(sc, algos, 0)
		if err != nil {
			t.Errorf("stitcheval %s: %v", mode, err)
			continue
		}
		for _, r := range runs {
			s := r.Scores
			t.Logf("stitching, strip %s, %s: %d spans, %d links cut, overlap %.1f; accuracy %.4f (precision %.4f, %d written), best %.4f; %.1f s",
				r.Strip, r.Algorithm, r.Spans, r.Broken, r.Overlap, s.Accuracy, s.Precision, s.Written, s.BestAccuracy, r.Seconds)
			for _, k := range stitchSortedKeys(s.ByKind) {
				c := s.ByKind[k]
				t.Logf("    %-8s %6d links: accuracy %.4f, best %.4f", k, c.Links, c.Accuracy, c.BestAccuracy)
			}
		}
	}
}

func stitchSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// stitchRecorder gives every reporter of the stack its own TracerProvider (its
// resource from the reporter's Identity, on top of the SDK's default: the
// telemetry.sdk.* attributes real SDK output carries) with a batch processor at
// the SDK's defaults, and keeps every export request as it was sent.
type stitchRecorder struct {
	ended    spanCounter
	mu       sync.Mutex
	tps      []*sdktrace.TracerProvider
	requests []tracetest.SpanStubs
}

// ExportSpans keeps one export request; the recorder is every provider's exporter.
func (r *stitchRecorder) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	stubs := tracetest.SpanStubsFromReadOnlySpans(spans)
	r.mu.Lock()
	r.requests = append(r.requests, stubs)
	r.mu.Unlock()
	return nil
}

// Shutdown is a provider's; the requests stay.
func (r *stitchRecorder) Shutdown(context.Context) error { return nil }

func (r *stitchRecorder) spans() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, req := range r.requests {
		n += len(req)
	}
	return n
}

func (r *stitchRecorder) provider(id services.Identity) trace.TracerProvider {
	// The process a span really ran in, for the evaluation (stitcheval's
	// contract: stitchers never read tierscope.truth.*), since the postgresql
	// client's resource does not say.
	attrs := append(id.Attributes(), attribute.String(stitcheval.AttrTruthProcess, id.Process))
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		panic(err) // only a schema URL conflict, and ours has none
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res),
		// A queue no load of this test fills: a dropped span would be a hole in
		// the ground truth.
		sdktrace.WithBatcher(r, sdktrace.WithMaxQueueSize(1<<20)),
		sdktrace.WithSpanProcessor(&r.ended))
	r.mu.Lock()
	r.tps = append(r.tps, tp)
	r.mu.Unlock()
	return tp
}

func (r *stitchRecorder) shutdown(ctx context.Context) error {
	r.mu.Lock()
	tps := r.tps
	r.mu.Unlock() // a provider's Shutdown exports, which locks
	for _, tp := range tps {
		if err := tp.Shutdown(ctx); err != nil {
			return err
		}
	}
	return nil
}

// writeStitchSpans writes one export request per line, in the order they were
// sent, as the collector's file exporter writes what it receives.
func writeStitchSpans(path string, requests []tracetest.SpanStubs) error {
	batches := make([]ptrace.Traces, len(requests))
	for i, req := range requests {
		batches[i] = stubsToTraces(req)
	}
	return otlpjsonl.WriteFile(path, batches...)
}

// stubsToTraces converts SDK spans as the OTLP exporter does
// (otlptrace/internal/tracetransform): one ResourceSpans per resource, one
// ScopeSpans per scope, flags with the W3C trace flags and the
// parent-is-remote bits.
func stubsToTraces(stubs tracetest.SpanStubs) ptrace.Traces {
	td := ptrace.NewTraces()
	type scopeKey struct {
		res   attribute.Distinct
		scope string
	}
	rss := map[attribute.Distinct]ptrace.ResourceSpans{}
	sss := map[scopeKey]ptrace.ScopeSpans{}
	for _, s := range stubs {
		rk := s.Resource.Equivalent()
		rs, ok := rss[rk]
		if !ok {
			rs = td.ResourceSpans().AppendEmpty()
			rs.SetSchemaUrl(s.Resource.SchemaURL())
			putAttrs(rs.Resource().Attributes(), s.Resource.Attributes())
			rss[rk] = rs
		}
		sc := s.InstrumentationScope
		sk := scopeKey{rk, sc.Name + "\x00" + sc.Version + "\x00" + sc.SchemaURL}
		ss, ok := sss[sk]
		if !ok {
			ss = rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName(sc.Name)
			ss.Scope().SetVersion(sc.Version)
			ss.SetSchemaUrl(sc.SchemaURL)
			putAttrs(ss.Scope().Attributes(), sc.Attributes.ToSlice())
			sss[sk] = ss
		}
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID(pcommon.TraceID(s.SpanContext.TraceID()))
		sp.SetSpanID(pcommon.SpanID(s.SpanContext.SpanID()))
		sp.TraceState().FromRaw(s.SpanContext.TraceState().String())
		if s.Parent.SpanID().IsValid() {
			sp.SetParentSpanID(pcommon.SpanID(s.Parent.SpanID()))
		}
		flags := uint32(s.SpanContext.TraceFlags()) | 0x100 // the is-remote bit is known
		if s.Parent.IsRemote() {
			flags |= 0x200
		}
		sp.SetFlags(flags)
		sp.SetName(s.Name)
		sp.SetKind(ptrace.SpanKind(s.SpanKind)) // same numbering: unspecified 0 … consumer 5
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(s.StartTime))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(s.EndTime))
		putAttrs(sp.Attributes(), s.Attributes)
		sp.SetDroppedAttributesCount(uint32(s.DroppedAttributes))
		for _, e := range s.Events {
			ev := sp.Events().AppendEmpty()
			ev.SetName(e.Name)
			ev.SetTimestamp(pcommon.NewTimestampFromTime(e.Time))
			putAttrs(ev.Attributes(), e.Attributes)
			ev.SetDroppedAttributesCount(uint32(e.DroppedAttributeCount))
		}
		sp.SetDroppedEventsCount(uint32(s.DroppedEvents))
		for _, l := range s.Links {
			ln := sp.Links().AppendEmpty()
			ln.SetTraceID(pcommon.TraceID(l.SpanContext.TraceID()))
			ln.SetSpanID(pcommon.SpanID(l.SpanContext.SpanID()))
			putAttrs(ln.Attributes(), l.Attributes)
		}
		sp.SetDroppedLinksCount(uint32(s.DroppedLinks))
		switch s.Status.Code {
		case 1: // codes.Error
			sp.Status().SetCode(ptrace.StatusCodeError)
		case 2: // codes.Ok
			sp.Status().SetCode(ptrace.StatusCodeOk)
		}
		sp.Status().SetMessage(s.Status.Description)
	}
	return td
}

func putAttrs(m pcommon.Map, kvs []attribute.KeyValue) {
	for _, kv := range kvs {
		k := string(kv.Key)
		switch kv.Value.Type() {
		case attribute.BOOL:
			m.PutBool(k, kv.Value.AsBool())
		case attribute.INT64:
			m.PutInt(k, kv.Value.AsInt64())
		case attribute.FLOAT64:
			m.PutDouble(k, kv.Value.AsFloat64())
		case attribute.STRING:
			m.PutStr(k, kv.Value.AsString())
		case attribute.BOOLSLICE:
			s := m.PutEmptySlice(k)
			for _, v := range kv.Value.AsBoolSlice() {
				s.AppendEmpty().SetBool(v)
			}
		case attribute.INT64SLICE:
			s := m.PutEmptySlice(k)
			for _, v := range kv.Value.AsInt64Slice() {
				s.AppendEmpty().SetInt(v)
			}
		case attribute.FLOAT64SLICE:
			s := m.PutEmptySlice(k)
			for _, v := range kv.Value.AsFloat64Slice() {
				s.AppendEmpty().SetDouble(v)
			}
		case attribute.STRINGSLICE:
			s := m.PutEmptySlice(k)
			for _, v := range kv.Value.AsStringSlice() {
				s.AppendEmpty().SetStr(v)
			}
		default:
			m.PutStr(k, kv.Value.Emit())
		}
	}
}

// stitchSpan is a span with its resource.
type stitchSpan struct {
	span ptrace.Span
	res  pcommon.Map
}

func (s stitchSpan) resStr(key string) string {
	if v, ok := s.res.Get(key); ok {
		return v.AsString()
	}
	return ""
}

// process is the process the span was reported from, as its resource says:
// host.name and process.pid when present (a client library sharing only the
// host is then "host/?").
func (s stitchSpan) process() string {
	pid := s.resStr("process.pid")
	if pid == "" {
		pid = "?"
	}
	return s.resStr("host.name") + "/" + pid
}

type stitchIndex struct {
	spans map[pcommon.SpanID]stitchSpan
	order []pcommon.SpanID
}

func indexStitchSpans(batches []ptrace.Traces) stitchIndex {
	ix := stitchIndex{spans: map[pcommon.SpanID]stitchSpan{}}
	for _, td := range batches {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				ss := rs.ScopeSpans().At(j).Spans()
				for k := 0; k < ss.Len(); k++ {
					sp := ss.At(k)
					ix.spans[sp.SpanID()] = stitchSpan{span: sp, res: rs.Resource().Attributes()}
					ix.order = append(ix.order, sp.SpanID())
				}
			}
		}
	}
	return ix
}

func (ix stitchIndex) parent(s stitchSpan) (stitchSpan, bool) {
	if s.span.ParentSpanID().IsEmpty() {
		return stitchSpan{}, false
	}
	p, ok := ix.spans[s.span.ParentSpanID()]
	return p, ok
}

// stitchFeatures is how much of each feature the data has.
type stitchFeatures struct {
	spans, roots, orphans int
	// inFlight is per process (service.instance.id) the time-averaged number of
	// SERVER spans (CONSUMER at the worker) in flight during the load.
	inFlight map[string]float64
	process  map[string]string // service.instance.id -> host.name/process.pid
	// Parallel fan-out: SERVER spans with ≥ 3 CLIENT children in flight at
	// once, and the most at once.
	fanOut, servers, maxFanOut int
	// Async children (INTERNAL, PRODUCER) of the app's SERVER spans, and those
	// ending after their parent, by kind.
	async    int
	outlived map[string]int
	// In-process client spans under their own service.name, by "svc under
	// parent's service"; how many share the parent's process.pid, how many only
	// its host.name, how many carry a service.instance.id, and what is wrong.
	clients                     map[string]int
	sharePID, shareHost, withID int
	misplaced                   []string
	// gRPC CLIENT and SERVER spans, and SERVER spans whose parent is web's
	// gRPC CLIENT span.
	grpcClient, grpcServer, grpcPairs int
	// CLIENT and SERVER spans named in the legacy and the current conventions.
	legacy, current int
}

func measureStitchFeatures(ix stitchIndex, from, to time.Time) stitchFeatures {
	f := stitchFeatures{inFlight: map[string]float64{}, process: map[string]string{},
		outlived: map[string]int{}, clients: map[string]int{}, spans: len(ix.order)}
	children := map[pcommon.SpanID][]stitchSpan{}
	busy := map[string]time.Duration{}
	lo, hi := pcommon.NewTimestampFromTime(from), pcommon.NewTimestampFromTime(to)
	has := func(s stitchSpan, keys ...string) bool {
		for _, k := range keys {
			if _, ok := s.span.Attributes().Get(k); ok {
				return true
			}
		}
		return false
	}
	for _, id := range ix.order {
		s := ix.spans[id]
		sp, svc := s.span, s.resStr("service.name")
		if p := sp.ParentSpanID(); p.IsEmpty() {
			f.roots++
		} else if _, ok := ix.spans[p]; !ok {
			f.orphans++
		} else {
			children[p] = append(children[p], s)
		}
		kind := sp.Kind()
		if kind == ptrace.SpanKindClient || kind == ptrace.SpanKindServer {
			switch {
			case has(s, "http.method", "net.peer.name", "net.host.name"):
				f.legacy++
			case has(s, "http.request.method", "server.address"):
				f.current++
			}
		}
		if rpc, ok := sp.Attributes().Get("rpc.system"); ok && rpc.AsString() == "grpc" {
			switch kind {
			case ptrace.SpanKindClient:
				f.grpcClient++
			case ptrace.SpanKindServer:
				f.grpcServer++
				if p, ok := ix.parent(s); ok && p.span.Kind() == ptrace.SpanKindClient && p.resStr("service.name") == config.Web {
					f.grpcPairs++
				}
			}
		}
		if kind == ptrace.SpanKindServer || (kind == ptrace.SpanKindConsumer && svc == config.Worker) {
			proc := s.resStr("service.instance.id")
			f.process[proc] = s.process()
			if a, b := max(sp.StartTimestamp(), lo), min(sp.EndTimestamp(), hi); b > a {
				busy[proc] += time.Duration(b - a)
			}
		}
		if (svc == "redis" || svc == "postgresql") && kind == ptrace.SpanKindClient {
			if s.resStr("service.instance.id") != "" {
				f.withID++
			}
			p, ok := ix.parent(s)
			if !ok {
				f.misplaced = append(f.misplaced, fmt.Sprintf("%s %q has no parent", svc, sp.Name()))
				continue
			}
			f.clients[svc+" under "+p.resStr("service.name")]++
			switch {
			case s.resStr("host.name") != p.resStr("host.name"):
				f.misplaced = append(f.misplaced, fmt.Sprintf("%s %q on host %s, its parent on %s", svc, sp.Name(), s.resStr("host.name"), p.resStr("host.name")))
			case s.resStr("process.pid") == "":
				f.shareHost++
			case s.resStr("process.pid") == p.resStr("process.pid"):
				f.sharePID++
			default:
				f.misplaced = append(f.misplaced, fmt.Sprintf("%s %q in pid %s, its parent in %s", svc, sp.Name(), s.resStr("process.pid"), p.resStr("process.pid")))
			}
		}
	}
	for proc, d := range busy {
		f.inFlight[proc] = d.Seconds() / to.Sub(from).Seconds()
	}
	type edge struct {
		t pcommon.Timestamp
		d int
	}
	for _, id := range ix.order {
		s := ix.spans[id]
		if s.span.Kind() != ptrace.SpanKindServer {
			continue
		}
		f.servers++
		var edges []edge
		for _, c := range children[id] {
			switch k := c.span.Kind(); {
			case k == ptrace.SpanKindClient:
				edges = append(edges, edge{c.span.StartTimestamp(), 1}, edge{c.span.EndTimestamp(), -1})
			case (k == ptrace.SpanKindInternal || k == ptrace.SpanKindProducer) && s.resStr("service.name") == config.App:
				f.async++
				if c.span.EndTimestamp() > s.span.EndTimestamp() {
					f.outlived[k.String()]++
				}
			}
		}
		sort.Slice(edges, func(i, j int) bool {
			if edges[i].t != edges[j].t {
				return edges[i].t < edges[j].t
			}
			return edges[i].d < edges[j].d // an end before a start at the same instant
		})
		n, peak := 0, 0
		for _, e := range edges {
			n += e.d
			peak = max(peak, n)
		}
		if peak >= 3 {
			f.fanOut++
		}
		f.maxFanOut = max(f.maxFanOut, peak)
	}
	return f
}

// checkStitchFeatures asserts that the data has every feature the evaluation
// needs, and logs how much of each.
func checkStitchFeatures(t *testing.T, ix stitchIndex, from, to time.Time) {
	t.Helper()
	f := measureStitchFeatures(ix, from, to)
	procs := make([]string, 0, len(f.inFlight))
	for p := range f.inFlight {
		procs = append(procs, p)
	}
	sort.Strings(procs)
	var lines []string
	for _, p := range procs {
		lines = append(lines, fmt.Sprintf("%s (%s) %.1f", p, f.process[p], f.inFlight[p]))
	}
	t.Logf("spans: %d, %d roots, %d orphans", f.spans, f.roots, f.orphans)
	t.Logf("requests in flight per process, time-averaged over the load (SERVER spans; CONSUMER at the worker): %s", strings.Join(lines, ", "))
	t.Logf("parallel fan-out: %d of %d SERVER spans had ≥ 3 CLIENT children in flight at once (at most %d)", f.fanOut, f.servers, f.maxFanOut)
	t.Logf("async children of app SERVER spans: %d; ending after their parent: %v", f.async, f.outlived)
	t.Logf("in-process client spans under their own service.name: %v; %d share the parent's process.pid, %d only its host.name",
		f.clients, f.sharePID, f.shareHost)
	t.Logf("gRPC: %d CLIENT, %d SERVER spans, %d SERVER under web's gRPC CLIENT", f.grpcClient, f.grpcServer, f.grpcPairs)
	t.Logf("CLIENT and SERVER spans in the legacy conventions: %d, in the current: %d", f.legacy, f.current)

	if f.orphans > 0 {
		t.Errorf("%d spans have a parent that is not in the data", f.orphans)
	}
	// Every process that serves (the worker consumes) has ≥ 4 in flight.
	for _, p := range procs {
		if f.inFlight[p] < 4 {
			t.Errorf("%s has %.1f requests in flight on average, want ≥ 4", p, f.inFlight[p])
		}
	}
	if len(procs) < 5 {
		t.Errorf("%d processes served requests (%v), want web-1, app-1, app-2, db-primary and worker-1", len(procs), procs)
	}
	if f.fanOut == 0 {
		t.Error("no SERVER span had ≥ 3 parallel CLIENT children")
	}
	if f.outlived[ptrace.SpanKindInternal.String()] == 0 || f.outlived[ptrace.SpanKindProducer.String()] == 0 {
		t.Errorf("async children ending after their SERVER parent: %v, want INTERNAL and PRODUCER ones", f.outlived)
	}
	if f.clients["redis under app"] == 0 || f.clients["postgresql under app"] == 0 {
		t.Errorf("in-process client spans by parent: %v, want redis and postgresql under app", f.clients)
	}
	if f.sharePID == 0 || f.shareHost == 0 || f.withID > 0 || len(f.misplaced) > 0 {
		t.Errorf("in-process client spans: %d share the pid (redis), %d only the host (postgresql), %d have a service.instance.id (want none), %d misplaced %v",
			f.sharePID, f.shareHost, f.withID, len(f.misplaced), f.misplaced[:min(3, len(f.misplaced))])
	}
	if f.grpcClient == 0 || f.grpcPairs == 0 {
		t.Errorf("gRPC: %d CLIENT spans, %d SERVER spans under them", f.grpcClient, f.grpcPairs)
	}
	if f.legacy == 0 || f.current == 0 {
		t.Errorf("semantic conventions: %d legacy, %d current CLIENT and SERVER spans; want both", f.legacy, f.current)
	}
}
