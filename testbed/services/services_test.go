package services

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sys/unix"

	"github.com/tierscope/tierscope/testbed/config"
)

// testStack runs every tier on loopback ephemeral ports, each tier with its own
// TracerProvider feeding one recorder.
type testStack struct {
	*Stack
	rec *tracetest.SpanRecorder
	cfg *config.Config
}

func startTestStack(t *testing.T, cfg *config.Config, version string) *testStack {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	var tps []*sdktrace.TracerProvider
	st, err := StartStack(StackOptions{
		Config: cfg, Version: version, DataDir: t.TempDir(),
		TracerProvider: func(service, instance string) trace.TracerProvider {
			tp := sdktrace.NewTracerProvider(
				sdktrace.WithSpanProcessor(rec),
				sdktrace.WithResource(resource.NewSchemaless(
					attribute.String("service.name", service),
					attribute.String("service.instance.id", instance),
					attribute.String("service.version", version))))
			tps = append(tps, tp)
			return tp
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := st.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
		for _, tp := range tps {
			_ = tp.Shutdown(ctx)
		}
	})
	return &testStack{Stack: st, rec: rec, cfg: cfg}
}

// testConfig is the default configuration at a fixed capacity, so busy times do
// not depend on the machine.
func testConfig(t *testing.T, edit func(*config.Config)) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.CPUMHz = 2000
	if edit != nil {
		edit(cfg)
	}
	return cfg
}

var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}

func (s *testStack) get(t *testing.T, txn string) {
	t.Helper()
	resp, err := client.Get(s.WebURL + "/txn/" + txn)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /txn/%s: %s: %s", txn, resp.Status, body)
	}
}

// waitSpans polls until n spans have ended (async work ends after the response).
func waitSpans(t *testing.T, rec *tracetest.SpanRecorder, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		spans := rec.Ended()
		if len(spans) >= n || time.Now().After(deadline) {
			if len(spans) < n {
				t.Fatalf("%d spans ended, want %d", len(spans), n)
			}
			return spans
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func service(s sdktrace.ReadOnlySpan) string { return resAttr(s, "service.name") }

func resAttr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Resource().Attributes() {
		if string(kv.Key) == key {
			return kv.Value.AsString()
		}
	}
	return ""
}

func attr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func label(kind trace.SpanKind, svc, name string, kids []string) string {
	sort.Strings(kids)
	return fmt.Sprintf("%s %s %q(%s)", kind, svc, name, strings.Join(kids, ", "))
}

// expected returns the span tree of a call-tree node as a canonical string,
// appending to detached the trees that lose context and so start their own trace.
func expected(cfg *config.Config, n config.Node, detached *[]string, spans *int) string {
	var kids []string
	entry, name := trace.SpanKindServer, ""
	switch n.Service {
	case config.Web:
		name = "GET /txn/" + n.Name
	case config.App:
		name = "POST /op/" + n.Name
	case config.Worker:
		entry, name = trace.SpanKindConsumer, "process "+n.Name
	case config.DB:
		name = "POST /query/" + n.Name
		op, table := summarize(cfg.Queries[n.Name].SQL)
		kids = append(kids, label(trace.SpanKindInternal, config.DB, op+" "+table, nil))
		*spans++
	}
	*spans++
	for _, c := range n.Calls {
		kind, call := trace.SpanKindClient, "POST /op/"+c.Callee.Name
		switch c.Callee.Service {
		case config.Worker:
			kind, call = trace.SpanKindProducer, "publish "+c.Callee.Name
		case config.DB:
			call = "POST /query/" + c.Callee.Name
		}
		for i := 0; i < c.Count; i++ {
			*spans++
			callee := expected(cfg, c.Callee, detached, spans)
			if c.ContextDropped {
				*detached = append(*detached, callee)
				kids = append(kids, label(kind, n.Service, call, nil))
			} else {
				kids = append(kids, label(kind, n.Service, call, []string{callee}))
			}
		}
	}
	return label(entry, n.Service, name, kids)
}

// forest builds the canonical tree of every trace root in spans and fails on a
// span whose parent is missing.
func forest(t *testing.T, spans []sdktrace.ReadOnlySpan) []string {
	t.Helper()
	type key struct {
		tid trace.TraceID
		sid trace.SpanID
	}
	byID := map[key]sdktrace.ReadOnlySpan{}
	children := map[key][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[key{s.SpanContext().TraceID(), s.SpanContext().SpanID()}] = s
	}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if !s.Parent().IsValid() {
			roots = append(roots, s)
			continue
		}
		if s.Parent().TraceID() != s.SpanContext().TraceID() {
			t.Errorf("span %q: parent in another trace", s.Name())
		}
		p := key{s.Parent().TraceID(), s.Parent().SpanID()}
		if _, ok := byID[p]; !ok {
			t.Errorf("span %q (%s): parent %s not recorded", s.Name(), service(s), p.sid)
			continue
		}
		children[p] = append(children[p], s)
	}
	var canon func(s sdktrace.ReadOnlySpan) string
	canon = func(s sdktrace.ReadOnlySpan) string {
		var kids []string
		for _, c := range children[key{s.SpanContext().TraceID(), s.SpanContext().SpanID()}] {
			kids = append(kids, canon(c))
		}
		return label(s.SpanKind(), service(s), s.Name(), kids)
	}
	var out []string
	for _, r := range roots {
		out = append(out, canon(r))
	}
	sort.Strings(out)
	return out
}

// checkAttributes asserts the semantic conventions of every span.
func checkAttributes(t *testing.T, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, s := range spans {
		for _, k := range []string{"service.name", "service.instance.id", "service.version"} {
			if resAttr(s, k) == "" {
				t.Errorf("span %q: no resource %s", s.Name(), k)
			}
		}
		var want []string
		switch s.SpanKind() {
		case trace.SpanKindServer:
			want = []string{"http.route", "http.request.method", "http.response.status_code"}
		case trace.SpanKindClient:
			want = []string{"server.address", "server.port", "url.full", "http.request.method", "http.response.status_code"}
		case trace.SpanKindProducer:
			want = []string{"server.address", "server.port", "url.full", "messaging.system", "messaging.destination.name"}
		case trace.SpanKindConsumer:
			want = []string{"messaging.system", "messaging.destination.name"}
		case trace.SpanKindInternal:
			want = []string{"db.system.name", "db.query.summary"}
			if v, _ := attr(s, "db.system.name"); v.AsString() != "sqlite" {
				t.Errorf("span %q: db.system.name %q", s.Name(), v.AsString())
			}
		}
		for _, k := range want {
			if _, ok := attr(s, k); !ok {
				t.Errorf("%s span %q (%s): no %s", s.SpanKind(), s.Name(), service(s), k)
			}
		}
		if s.SpanKind() == trace.SpanKindClient || s.SpanKind() == trace.SpanKindProducer {
			if v, _ := attr(s, "server.address"); v.AsString() != "127.0.0.1" {
				t.Errorf("span %q: server.address %q", s.Name(), v.AsString())
			}
		}
		if v, ok := attr(s, "messaging.system"); ok && v.AsString() != MessagingSystem {
			t.Errorf("span %q: messaging.system %q", s.Name(), v.AsString())
		}
	}
}

// runAndCompare runs each transaction n times and asserts that the recorded
// spans are exactly the ground truth's trees, n times over.
func runAndCompare(t *testing.T, s *testStack, txns []string, n int) map[string][]sdktrace.ReadOnlySpan {
	t.Helper()
	out := map[string][]sdktrace.ReadOnlySpan{}
	for _, name := range txns {
		txn, ok := s.cfg.Transaction(name)
		if !ok {
			t.Fatalf("no transaction %s", name)
		}
		var detached []string
		count := 0
		root := expected(s.cfg, s.cfg.Tree(txn), &detached, &count)
		var want []string
		for i := 0; i < n; i++ {
			want = append(want, root)
			want = append(want, detached...)
		}
		sort.Strings(want)

		s.rec.Reset()
		for i := 0; i < n; i++ {
			s.get(t, name)
		}
		spans := waitSpans(t, s.rec, n*count)
		got := forest(t, spans)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: span trees differ from the ground truth\ngot:\n  %s\nwant:\n  %s",
				name, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		checkAttributes(t, spans)
		out[name] = spans
	}
	return out
}

func allTransactions(cfg *config.Config) []string {
	var names []string
	for _, t := range cfg.Transactions {
		names = append(names, t.Name)
	}
	return names
}

func TestSpansMatchGroundTruth(t *testing.T) {
	s := startTestStack(t, testConfig(t, nil), "v1")
	got := runAndCompare(t, s, allTransactions(s.cfg), 3)

	// Round-robin over the two app replicas.
	instances := map[string]int{}
	for _, sp := range got["ViewItem"] {
		if service(sp) == config.App && sp.SpanKind() == trace.SpanKindServer {
			instances[resAttr(sp, "service.instance.id")]++
		}
	}
	if instances["app-1"] == 0 || instances["app-2"] == 0 {
		t.Errorf("app replicas served %v, want both", instances)
	}
	// Parallel calls overlap in time.
	var clients []sdktrace.ReadOnlySpan
	for _, sp := range got["Search"] {
		if service(sp) == config.Web && sp.SpanKind() == trace.SpanKindClient {
			clients = append(clients, sp)
		}
	}
	overlapping := false
	for i := 0; i+1 < len(clients); i += 2 {
		a, b := clients[i], clients[i+1]
		if a.SpanContext().TraceID() == b.SpanContext().TraceID() && a.StartTime().Before(b.EndTime()) && b.StartTime().Before(a.EndTime()) {
			overlapping = true
		}
	}
	if !overlapping {
		t.Errorf("Search: parallel CLIENT spans never overlap")
	}
}

func TestDropContextWebApp(t *testing.T) {
	s := startTestStack(t, testConfig(t, func(c *config.Config) { c.DropContext = []string{"web->app"} }), "v1")
	got := runAndCompare(t, s, []string{"Home", "ViewItem", "PutBid"}, 2)
	for name, spans := range got {
		webTraces := map[trace.TraceID]bool{}
		for _, sp := range spans {
			if service(sp) == config.Web {
				webTraces[sp.SpanContext().TraceID()] = true
			}
		}
		for _, sp := range spans {
			if service(sp) != config.App || sp.SpanKind() != trace.SpanKindServer {
				continue
			}
			if sp.Parent().IsValid() || webTraces[sp.SpanContext().TraceID()] {
				t.Errorf("%s: app SERVER span kept the caller's context", name)
			}
		}
	}
}

// The other hops: each callee's entry span becomes a root, as the truth says.
func TestDropContextOtherHops(t *testing.T) {
	s := startTestStack(t, testConfig(t, func(c *config.Config) {
		c.DropContext = []string{"app->db", "web->worker", "worker->db", "db->db"}
	}), "v1")
	got := runAndCompare(t, s, []string{"PutBid"}, 2)
	for _, sp := range got["PutBid"] {
		root := !sp.Parent().IsValid()
		entry := sp.SpanKind() == trace.SpanKindServer || sp.SpanKind() == trace.SpanKindConsumer
		if entry && service(sp) != config.Web && service(sp) != config.App && !root {
			t.Errorf("%s %q kept its caller's context", service(sp), sp.Name())
		}
	}
}

func TestReplicationNesting(t *testing.T) {
	for _, mode := range []string{config.ReplSync, config.ReplAsync} {
		t.Run(mode, func(t *testing.T) {
			s := startTestStack(t, testConfig(t, func(c *config.Config) { c.Replication = mode }), "v1")
			got := runAndCompare(t, s, []string{"StoreBid", "PutBid"}, 3)
			for _, spans := range got {
				primary := map[trace.TraceID]sdktrace.ReadOnlySpan{}
				var backups []sdktrace.ReadOnlySpan
				for _, sp := range spans {
					if service(sp) != config.DB || sp.SpanKind() != trace.SpanKindServer || sp.Name() != "POST /query/insert_bid" {
						continue
					}
					if resAttr(sp, "service.instance.id") == "db-backup" {
						backups = append(backups, sp)
					} else {
						primary[sp.SpanContext().TraceID()] = sp
					}
				}
				if len(backups) == 0 {
					t.Fatal("no backup SERVER spans")
				}
				for _, b := range backups {
					p, ok := primary[b.SpanContext().TraceID()]
					if !ok {
						t.Fatal("backup span without its primary in the trace")
					}
					nested := !b.StartTime().Before(p.StartTime()) && !b.EndTime().After(p.EndTime())
					if nested != (mode == config.ReplSync) {
						t.Errorf("%s: backup [%v, %v] nested=%v in primary [%v, %v]", mode,
							b.StartTime().Sub(p.StartTime()), b.EndTime().Sub(p.StartTime()), nested, 0, p.EndTime().Sub(p.StartTime()))
					}
				}
			}
		})
	}
}

func TestVersionAddsServiceTime(t *testing.T) {
	cfg := testConfig(t, nil)
	v1 := startTestStack(t, cfg, "v1")
	v2 := startTestStack(t, cfg, "v2")
	const n = 30
	// Interleaved, so both versions see the same machine load. The probe is
	// what 2 ms of CPU costs in wall time right now: on a contended machine the
	// extra time stretches with it, as it would on a real server.
	var probe time.Duration
	for i := 0; i < n; i++ {
		v1.get(t, "Home")
		v2.get(t, "Home")
		start := time.Now()
		Burn(2 * time.Millisecond)
		probe += time.Since(start)
	}
	probe /= n
	mean := func(s *testStack) time.Duration {
		spans := waitSpans(t, s.rec, n*6)
		var ds []time.Duration
		for _, sp := range spans {
			if service(sp) == config.Web && sp.SpanKind() == trace.SpanKindServer {
				ds = append(ds, sp.EndTime().Sub(sp.StartTime()))
			}
		}
		if len(ds) != n {
			t.Fatalf("%d web SERVER spans, want %d", len(ds), n)
		}
		// The mean without the slowest tenth, which a loaded machine inflates.
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		ds = ds[:n-n/10]
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		return sum / time.Duration(len(ds))
	}
	m1, m2 := mean(v1), mean(v2)
	diff := m2 - m1
	upper := max(6*time.Millisecond, probe*5/2)
	t.Logf("web SERVER mean: v1 %v, v2 %v, difference %v (truth 2ms of CPU, %v of wall time now)", m1, m2, diff, probe)
	if diff < time.Millisecond || diff > upper {
		t.Errorf("v2 adds %v to Home at web, want 2ms of CPU (between 1ms and %v)", diff, upper)
	}
}

func TestBurnCalibration(t *testing.T) {
	cfg := testConfig(t, nil)
	for _, mc := range []float64{10, 100} {
		want := cfg.BusyTime(mc)
		if want != time.Duration(mc/2000*float64(time.Second)) {
			t.Fatalf("BusyTime(%g) = %v", mc, want)
		}
		runtime.LockOSThread()
		before, ruBefore := ThreadCPU(), threadRusage(t)
		Burn(want)
		got, ru := ThreadCPU()-before, threadRusage(t)-ruBefore
		runtime.UnlockOSThread()
		if got < want*8/10 || got > want*12/10 {
			t.Errorf("%g megacycles at 2000 MHz: %v of thread CPU, want %v ±20%%", mc, got, want)
		}
		// rusage is a second clock, but it can lag by a scheduler tick, so it
		// only checks the longer burn.
		if want >= 50*time.Millisecond && (ru < want*8/10 || ru > want*12/10) {
			t.Errorf("%g megacycles at 2000 MHz: %v of thread CPU by rusage, want %v ±20%%", mc, ru, want)
		}
	}
}

func threadRusage(t *testing.T) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestConnectionPooledVsNew(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	tr := Tier{}.tracer()
	pooled := newPooledClient(dialer().DialContext)
	for _, tc := range []struct {
		client *http.Client
		want   int64
	}{{pooled, 1}, {nil, 3}} {
		conns.Store(0)
		for i := 0; i < 3; i++ {
			c := outCall{tracer: tr, kind: trace.SpanKindClient, name: "x", url: srv.URL + "/x", pooled: tc.client}
			if _, err := c.do(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if got := conns.Load(); got != tc.want {
			t.Errorf("pooled=%v: %d connections for 3 calls, want %d", tc.client != nil, got, tc.want)
		}
	}
}

func TestQueueBoundedAndLongPoll(t *testing.T) {
	q := NewQueue(2)
	srv := httptest.NewServer(q.Handler())
	defer srv.Close()
	post := func(path string) int {
		resp, err := client.Post(srv.URL+path, "application/json", strings.NewReader(`{"topic":"t"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	codes := []int{post("/publish/t"), post("/publish/t"), post("/publish/t")}
	if codes[0] != http.StatusAccepted || codes[1] != http.StatusAccepted || codes[2] != http.StatusServiceUnavailable {
		t.Errorf("publish codes %v, want 202 202 503", codes)
	}
	if st := q.Stats()["t"]; st.Dropped != 1 || st.Depth != 2 {
		t.Errorf("stats %+v, want 1 dropped, depth 2", st)
	}
	if c := post("/consume/t"); c != http.StatusOK {
		t.Errorf("consume: %d", c)
	}
	if c := post("/consume/t"); c != http.StatusOK {
		t.Errorf("consume: %d", c)
	}
	// A consumer waiting on an empty topic gets a message published meanwhile
	// (or, if it starts late, finds it there).
	done := make(chan int, 1)
	go func() { done <- post("/consume/t") }()
	if c := post("/publish/t"); c != http.StatusAccepted {
		t.Errorf("publish: %d", c)
	}
	if c := <-done; c != http.StatusOK {
		t.Errorf("long poll: %d", c)
	}
	start := time.Now()
	if c := post("/consume/empty"); c != http.StatusNoContent {
		t.Errorf("consume on an empty topic: %d, want 204", c)
	}
	if d := time.Since(start); d < ConsumeWait*9/10 {
		t.Errorf("empty long poll returned after %v, want %v", d, ConsumeWait)
	}
}
