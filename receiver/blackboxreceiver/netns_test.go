package blackboxreceiver

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/tierscope/tierscope/processor/causalpathprocessor"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/metadata"
	"github.com/tierscope/tierscope/testbed/config"
	"github.com/tierscope/tierscope/testbed/netns"
	tbservices "github.com/tierscope/tierscope/testbed/services"
)

// requireRoot fails (never skips): CI runs as root, and a skipped namespace
// test would hide that the capture was never exercised.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the blackbox namespace tests need root (network namespaces, AF_PACKET); run them as root, e.g. `sudo -E env PATH=$PATH go test ./receiver/blackboxreceiver/` (CI runs as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		if _, err := os.Stat("/usr/sbin/ip"); err != nil {
			t.Fatal("the blackbox namespace tests need iproute2 (`ip`): apt-get install -y iproute2")
		}
	}
}

// testbedLab is the testbed's web → app → db tiers in namespaces of their
// own, with a client namespace in front of web. No tier has a tracer provider:
// no span comes from an SDK, every span from the capture.
type testbedLab struct {
	lab                      *netns.Lab
	client, web, app, db     *netns.Host
	clientWeb, webApp, appDB *netns.Link
	webURL                   string
	webPort, appPort, dbPort int
	cfg                      *config.Config
	services                 map[string]string
}

func newTestbedLab(t *testing.T) *testbedLab {
	t.Helper()
	requireRoot(t)
	lab, err := netns.New(t)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	l := &testbedLab{lab: lab}
	for _, h := range []struct {
		p    **netns.Host
		name string
	}{{&l.client, "client"}, {&l.web, "web"}, {&l.app, "app"}, {&l.db, "db"}} {
		*h.p, err = lab.Host(h.name)
		must(err)
	}
	l.clientWeb, err = lab.Link(l.client, l.web)
	must(err)
	l.webApp, err = lab.Link(l.web, l.app)
	must(err)
	l.appDB, err = lab.Link(l.app, l.db)
	must(err)

	l.cfg, err = config.Load("")
	must(err)
	// Small fixed busy times: the tiers' work is not under test.
	l.cfg.CPUMHz = 20000

	listen := func(h *netns.Host, a netip.Addr) net.Listener {
		ln, err := h.Listen("tcp4", netip.AddrPortFrom(a, 0).String())
		must(err)
		return ln
	}
	dbLn := listen(l.db, l.appDB.BAddr)
	appLn := listen(l.app, l.webApp.BAddr)
	webLn := listen(l.web, l.clientWeb.BAddr)
	l.dbPort, l.appPort, l.webPort = port(dbLn), port(appLn), port(webLn)
	url := func(ln net.Listener) string { return "http://" + ln.Addr().String() }
	tier := func(h *netns.Host, instance string) tbservices.Tier {
		return tbservices.Tier{Config: l.cfg, Version: "v1", Instance: instance, Dial: h.DialContext}
	}
	serve := func(ln net.Listener, h http.Handler) {
		s := tbservices.Serve(ln, h)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.Shutdown(ctx)
		})
	}
	db, err := tbservices.NewDB(tier(l.db, "db-primary"), t.TempDir(), "")
	must(err)
	t.Cleanup(func() { _ = db.Close() })
	serve(dbLn, db.Handler())
	app, err := tbservices.NewApp(tier(l.app, "app-1"), url(dbLn))
	must(err)
	t.Cleanup(app.Close)
	serve(appLn, app.Handler())
	web, err := tbservices.NewWeb(tier(l.web, "web-1"), []string{url(appLn)}, "")
	must(err)
	t.Cleanup(web.Close)
	serve(webLn, web.Handler())
	l.webURL = url(webLn)

	// Node names, as an operator would write them: every address of a host.
	l.services = map[string]string{
		l.clientWeb.AAddr.String(): "client/*", // independent users
		l.clientWeb.BAddr.String(): "web", l.webApp.AAddr.String(): "web",
		l.webApp.BAddr.String(): "app", l.appDB.AAddr.String(): "app",
		l.appDB.BAddr.String(): "db",
	}
	t.Logf("lab %s: client %s -> web %s:%d -> app %s:%d -> db %s:%d", lab.ID(), l.clientWeb.AAddr,
		l.clientWeb.BAddr, l.webPort, l.webApp.BAddr, l.appPort, l.appDB.BAddr, l.dbPort)
	return l
}

func port(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }

// captureConfig captures at two points: in web's namespace the web port, in
// app's the app and db ports.
func (l *testbedLab) captureConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Services = l.services
	c := defaultCapture()
	c.Points = []CapturePoint{
		{NetworkNamespace: "/run/netns/" + l.web.Namespace(), Ports: []uint16{uint16(l.webPort)}},
		{NetworkNamespace: "/run/netns/" + l.app.Namespace(), Ports: []uint16{uint16(l.appPort), uint16(l.dbPort)}},
	}
	// No routes: span names keep the concrete paths (GET /txn/Home, POST
	// /op/catalog), the operations whose nesting causalpath's scoreboard learns.
	c.FlushInterval = 50 * time.Millisecond
	// Generous on a loaded CI machine: a capture point may lag behind another.
	c.ReorderWindow = time.Second
	cfg.Capture = configoptional.Some(c)
	return cfg
}

// truthSignature is the path signature (docs/formats.md §2) of a testbed call tree:
// every synchronous call repeated Count times.
func truthSignature(n config.Node) string {
	var kids []string
	for _, c := range n.Calls {
		if c.Async {
			continue
		}
		for range max(c.Count, 1) {
			kids = append(kids, truthSignature(c.Callee))
		}
	}
	if len(kids) == 0 {
		return n.Service
	}
	sort.Strings(kids)
	return n.Service + "(" + strings.Join(kids, ",") + ")"
}

// TestCaptureTestbedPaths is the acceptance test of the capture: real testbed
// traffic between namespaces (client → web → app → db), with no SDK export at
// any tier, least of all the db, is captured by a blackbox receiver at two
// points (in web's namespace the web port, in app's the app and db ports),
// and the causalpath processor, fed only by them, reconstructs the causal path
// of every request, db node included, as the testbed's ground truth has it.
//
// With one user, every request whose calls are serial (Home, Login, ViewItem)
// must get exactly its true path. Search calls app twice in parallel: which of
// the two overlapping app executions made which db call is undecidable from
// timing alone (paper 001 §7.5.3), so for Search the nodes and their counts
// must be right (client, web, 2×app, 2×db) and the exact nesting is only
// logged. With four users and think times, requests also overlap across
// tiers; the same holds statistically.
func TestCaptureTestbedPaths(t *testing.T) {
	l := newTestbedLab(t)
	txns := []string{"Home", "ViewItem", "Search", "Login"}
	want := map[string]string{}
	for _, name := range txns {
		txn, ok := l.cfg.Transaction(name)
		if !ok {
			t.Fatalf("the testbed config has no %s", name)
		}
		want["/txn/"+name] = "client(" + truthSignature(l.cfg.Tree(txn)) + ")"
		if !strings.Contains(want["/txn/"+name], "db") {
			t.Fatalf("%s's truth %s has no db node", name, want["/txn/"+name])
		}
	}
	serial := func(path string) bool { return path != "/txn/Search" }
	defer t.Run("connection inventory", l.testInventory)

	t.Run("one user", func(t *testing.T) {
		r := l.runCapture(t, txns, 1, 60, 2*time.Millisecond)
		exact, nodes := r.score(t, want)
		for path, n := range r.sent {
			if serial(path) && exact[path] < n {
				t.Errorf("%s: %d of %d requests got their true path %s", path, exact[path], n, want[path])
			}
			if nodes[path] < n {
				t.Errorf("%s: %d of %d requests got the true nodes of %s", path, nodes[path], n, want[path])
			}
		}
	})
	t.Run("four users", func(t *testing.T) {
		r := l.runCapture(t, txns, 4, 40, 15*time.Millisecond)
		r.score(t, want)
		// A request that overlaps no other in time is decidable: it must be
		// right. Overlapping ones are a matter of statistics.
		var alone, aloneRight, overlapped, overlappedRight int
		for _, q := range r.requests {
			ok := q.sig == want[q.path] || (!serial(q.path) && nodeMultiset(q.sig) == nodeMultiset(want[q.path]))
			if q.overlaps == 0 {
				alone++
				if ok {
					aloneRight++
				} else {
					t.Errorf("%s overlaps no other request, but its path is %s, not %s", q.path, q.sig, want[q.path])
				}
			} else {
				overlapped++
				if ok {
					overlappedRight++
				}
			}
		}
		t.Logf("four users: requests alone in the system %d, right %d; overlapping others %d, right %d (%.0f%%)",
			alone, aloneRight, overlapped, overlappedRight, 100*float64(overlappedRight)/float64(max(overlapped, 1)))
		if alone+overlapped != 160 {
			t.Errorf("%d requests reconstructed, want 160", alone+overlapped)
		}
		if alone == 0 {
			t.Log("no request was alone in the system (a very loaded machine): only the statistics were checked")
		}
		// Measured 40-70% of the overlapping requests exactly right here (the
		// nesting scoreboard has only a few hundred calls to learn from); the
		// bound keeps the test about the capture and the stitching, not the odds.
		if overlapped > 0 && float64(overlappedRight) < 0.25*float64(overlapped) {
			t.Errorf("only %d of %d overlapping requests got their true path", overlappedRight, overlapped)
		}
	})
}

// captureRun is what one load run through the pipeline left.
type captureRun struct {
	sent     map[string]int // url path -> requests
	forest   *forest
	tel      *componenttest.Telemetry
	requests []request // filled by score
}

// request is one reconstructed request: the tree under a client's call.
type request struct {
	path, sig  string
	start, end uint64
	overlaps   int // other requests overlapping it in time
}

// runCapture runs the pipeline (receiver → causalpath → sink) under
// users closed-loop users, each sending perUser requests (cycling through
// txns) with uniform think times around think.
func (l *testbedLab) runCapture(t *testing.T, txns []string, users, perUser int, think time.Duration) *captureRun {
	t.Helper()
	sink := new(consumertest.TracesSink)
	pf := causalpathprocessor.NewFactory()
	pcfg := pf.CreateDefaultConfig().(*causalpathprocessor.Config)
	pcfg.Wait = 500 * time.Millisecond
	// Every best candidate is written: Search's parallel app calls are
	// undecidable from timing, and the test asks for their nodes, which a
	// precision-first threshold would leave detached.
	pcfg.MinConfidence = 0
	proc, err := pf.CreateTraces(context.Background(), processortest.NewNopSettings(pf.Type()), pcfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	host := componenttest.NewNopHost()
	if err := proc.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	rcv, err := newTracesReceiver(set, l.captureConfig(), proc)
	if err != nil {
		t.Fatal(err)
	}
	if err := rcv.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}

	client := l.client.HTTPClient()
	sent := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, users)
	for u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(u), 7))
			for i := range perUser {
				time.Sleep(think/2 + time.Duration(rng.Int64N(int64(think))))
				name := txns[(u+i)%len(txns)]
				resp, err := client.Get(l.webURL + "/txn/" + name)
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("GET /txn/%s: %s", name, resp.Status)
					return
				}
				mu.Lock()
				sent["/txn/"+name]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Let the last packets reach the sockets, then stop: the receivers flush
	// their calls, the processor stitches everything it holds.
	time.Sleep(200 * time.Millisecond)
	if err := rcv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := proc.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	client.CloseIdleConnections()
	t.Logf("capture: packets %d, kernel drops %d, gaps %d, calls %d, framing errors %d, unanswered %d, flows evicted %d, spans dropped %d",
		counter(t, tel, "receiver_blackbox_packets"), counter(t, tel, "receiver_blackbox_packets_dropped"),
		counter(t, tel, "receiver_blackbox_gaps"), counter(t, tel, "receiver_blackbox_calls"),
		counter(t, tel, "receiver_blackbox_framing_errors"), counter(t, tel, "receiver_blackbox_unanswered"),
		counter(t, tel, "receiver_blackbox_flows_evicted"), counter(t, tel, "receiver_blackbox_spans_dropped"))
	return &captureRun{sent: sent, forest: newForest(sink.AllTraces()), tel: tel}
}

// score counts, per url path, the requests whose reconstructed tree (rooted at
// the client's CLIENT span) has exactly the true signature, and those whose
// nodes (with multiplicity) are the true ones.
func (r *captureRun) score(t *testing.T, want map[string]string) (exact, nodes map[string]int) {
	t.Helper()
	f := r.forest
	kinds := map[string]int{}
	for _, s := range f.spans {
		kinds[s.service+"/"+s.span.Kind().String()]++
	}
	t.Logf("%d spans: %v", len(f.spans), kinds)
	got := map[string]map[string]int{}
	for _, root := range f.roots() {
		if root.service != "client" {
			t.Errorf("a tree is rooted at %s %s %q [%d,%d], not at a client's call", root.service, root.span.Kind(), root.span.Name(), root.span.StartTimestamp(), root.span.EndTimestamp())
			for _, s := range f.spans {
				if s.service == "web" && s.span.Kind() == ptrace.SpanKindServer && s.span.StartTimestamp() < root.span.EndTimestamp()+5e6 && s.span.EndTimestamp()+5e6 > root.span.StartTimestamp() {
					t.Logf("  near: web SERVER %q [%d,%d]", s.span.Name(), s.span.StartTimestamp(), s.span.EndTimestamp())
				}
			}
			continue
		}
		path, _ := root.span.Attributes().Get("url.path")
		if got[path.Str()] == nil {
			got[path.Str()] = map[string]int{}
		}
		sig := f.signature(root)
		got[path.Str()][sig]++
		r.requests = append(r.requests, request{path: path.Str(), sig: sig,
			start: uint64(root.span.StartTimestamp()), end: uint64(root.span.EndTimestamp())})
	}
	for i := range r.requests {
		for j := range r.requests {
			a, b := &r.requests[i], &r.requests[j]
			if i != j && a.start < b.end && b.start < a.end {
				a.overlaps++
			}
		}
	}
	exact, nodes = map[string]int{}, map[string]int{}
	for _, path := range sortedKeys(r.sent) {
		t.Logf("%s: sent %d, truth %s, reconstructed %v", path, r.sent[path], want[path], got[path])
		if n := sumValues(got[path]); n != r.sent[path] {
			t.Errorf("%s: %d requests sent, %d trees rooted at their client call", path, r.sent[path], n)
		}
		exact[path] = got[path][want[path]]
		for sig, n := range got[path] {
			if nodeMultiset(sig) == nodeMultiset(want[path]) {
				nodes[path] += n
			}
		}
	}
	if kinds["db/Server"] == 0 {
		t.Error("no db SERVER span was captured")
	}
	return exact, nodes
}

// nodeMultiset is the sorted list of a signature's nodes.
func nodeMultiset(sig string) string {
	f := strings.FieldsFunc(sig, func(r rune) bool { return r == '(' || r == ')' || r == ',' })
	sort.Strings(f)
	return strings.Join(f, " ")
}

// forest is the spans of a test run as the trees their parent ids make.
type forest struct {
	spans []*fspan
	byID  map[pcommon.SpanID]*fspan
}

type fspan struct {
	span     ptrace.Span
	service  string
	children []*fspan
	parent   *fspan
}

func newForest(tds []ptrace.Traces) *forest {
	f := &forest{byID: map[pcommon.SpanID]*fspan{}}
	for _, td := range tds {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			svc, _ := rss.At(i).Resource().Attributes().Get("service.name")
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				ss := sss.At(j).Spans()
				for k := 0; k < ss.Len(); k++ {
					s := &fspan{span: ss.At(k), service: svc.Str()}
					f.spans = append(f.spans, s)
					f.byID[s.span.SpanID()] = s
				}
			}
		}
	}
	for _, s := range f.spans {
		if p, ok := f.byID[s.span.ParentSpanID()]; ok && !s.span.ParentSpanID().IsEmpty() {
			s.parent = p
			p.children = append(p.children, s)
		}
	}
	return f
}

func (f *forest) roots() []*fspan {
	var out []*fspan
	for _, s := range f.spans {
		if s.parent == nil {
			out = append(out, s)
		}
	}
	return out
}

// signature is the path signature of the tree under s (docs/formats.md §2), nodes
// labelled as causalpath labels them: SERVER spans and the root by their
// service, a CLIENT span without a SERVER child by its callee, other spans
// transparent.
func (f *forest) signature(s *fspan) string {
	var kids []string
	var collect func(*fspan)
	collect = func(c *fspan) {
		for _, k := range c.children {
			if l := f.label(k); l != "" {
				kids = append(kids, f.signature(k))
			} else {
				collect(k)
			}
		}
	}
	collect(s)
	l := f.label(s)
	if len(kids) == 0 {
		return l
	}
	sort.Strings(kids)
	return l + "(" + strings.Join(kids, ",") + ")"
}

func (f *forest) label(s *fspan) string {
	switch {
	case s.parent == nil || s.span.Kind() == ptrace.SpanKindServer:
		return s.service
	case s.span.Kind() == ptrace.SpanKindClient:
		for _, k := range s.children {
			if k.span.Kind() == ptrace.SpanKindServer {
				return ""
			}
		}
		if p, ok := s.span.Attributes().Get("service.peer.name"); ok {
			return p.Str()
		}
		return "unknown"
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// testInventory runs the connections source over app's namespace, after the
// load left web's and app's pooled connections open: it must find the links
// web → app and app → db, with the client's ephemeral port zeroed, the server
// port kept, and this process (where the tiers run) as the owner of the ends
// in app's namespace.
func (l *testbedLab) testInventory(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Services = l.services
	cc := defaultConnections()
	cc.NetworkNamespace = "/run/netns/" + l.app.Namespace()
	cc.Interval = time.Hour // the first scan is at start
	cfg.Connections = configoptional.Some(cc)
	sink := new(consumertest.MetricsSink)
	r, err := newMetricsReceiver(receivertest.NewNopSettings(metadata.Type), cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(sink.AllMetrics()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(sink.AllMetrics()) == 0 {
		t.Fatal("no inventory")
	}
	md := sink.AllMetrics()[0]
	type link struct {
		src, dst       string
		srcPID, dstPID int64
		srcSvc, dstSvc string
		connections    int64
	}
	var links []link
	dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0)
	if dps.Name() != metricLinkConnections {
		t.Fatalf("metric %s", dps.Name())
	}
	for i := 0; i < dps.Gauge().DataPoints().Len(); i++ {
		dp := dps.Gauge().DataPoints().At(i)
		a := dp.Attributes().AsRaw()
		str := func(k string) string { v, _ := a[k].(string); return v }
		num := func(k string) int64 { v, _ := a[k].(int64); return v }
		lk := link{
			src:    netip.AddrPortFrom(netip.MustParseAddr(str("source.address")), uint16(num("source.port"))).String(),
			dst:    netip.AddrPortFrom(netip.MustParseAddr(str("destination.address")), uint16(num("destination.port"))).String(),
			srcPID: num(attrSourcePID), dstPID: num(attrDestPID), srcSvc: str(attrSourceService), dstSvc: str(attrDestService),
			connections: dp.IntValue(),
		}
		links = append(links, lk)
		t.Logf("link %s (%s, pid %d) -> %s (%s, pid %d): %d connections", lk.src, lk.srcSvc, lk.srcPID, lk.dst, lk.dstSvc, lk.dstPID, lk.connections)
	}
	pid := int64(os.Getpid())
	want := []link{
		{src: netip.AddrPortFrom(l.webApp.AAddr, 0).String(), dst: netip.AddrPortFrom(l.webApp.BAddr, uint16(l.appPort)).String(), dstPID: pid, srcSvc: "web", dstSvc: "app"},
		{src: netip.AddrPortFrom(l.appDB.AAddr, 0).String(), dst: netip.AddrPortFrom(l.appDB.BAddr, uint16(l.dbPort)).String(), srcPID: pid, srcSvc: "app", dstSvc: "db"},
	}
	for _, w := range want {
		found := false
		for _, lk := range links {
			if lk.src == w.src && lk.dst == w.dst && lk.srcPID == w.srcPID && lk.dstPID == w.dstPID && lk.srcSvc == w.srcSvc && lk.dstSvc == w.dstSvc && lk.connections >= 1 {
				found = true
			}
		}
		if !found {
			t.Errorf("no link %s (%s, pid %d) -> %s (%s, pid %d)", w.src, w.srcSvc, w.srcPID, w.dst, w.dstSvc, w.dstPID)
		}
	}
	if len(links) != len(want) {
		t.Errorf("%d links, want %d: every connection of app's namespace is one of the two links", len(links), len(want))
	}
}
