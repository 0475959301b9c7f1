package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/apierror"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/leaseapi"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/span"
	"github.com/tierscope/tierscope/internal/span/spantest"
	"github.com/tierscope/tierscope/internal/store"
)

// fakeTraffic stands for the ingest side: the link book's answers as
// given, and CPU readings added to real model windows.
type fakeTraffic struct {
	addresses map[string][]string           // by "caller->callee"
	calls     map[string]map[string]float64 // by address, else by "caller->callee"
	windows   []*model.Window
}

func (f *fakeTraffic) Links(caller, callee string) (addresses, known []string) {
	for k := range f.addresses {
		known = append(known, k)
	}
	return f.addresses[caller+"->"+callee], known
}

func (f *fakeTraffic) CallsPerRequest(caller, callee, address string) map[string]float64 {
	if c := f.calls[address]; len(c) > 0 {
		return c
	}
	return f.calls[caller+"->"+callee]
}

func (f *fakeTraffic) CPU(machine, process string) (share, host model.CPUStats) {
	for _, w := range f.windows {
		if c, ok := w.CPU[model.ProcessKey(machine, process)]; ok {
			share.Merge(c)
		}
		if c, ok := w.CPU[machine]; ok {
			host.Merge(c)
		}
	}
	return share, host
}

// addCPU adds a utilization reading of key to the traffic's one window.
func (f *fakeTraffic) addCPU(key string, u float64) {
	if len(f.windows) == 0 {
		f.windows = []*model.Window{model.NewWindow(0, model.DefaultLimits())}
	}
	f.windows[0].AddCPU(key, u, 0, 0)
}

// newTestCoordinator is a coordinator on the real clock whose machines
// have capacityMHz 4000 (2 CPUs of 2000 MHz) and cores core_mhz 2000.
func newTestCoordinator(cfg Config, traffic Traffic) *Coordinator {
	return New(Settings{
		Experiments: cfg, TraceWait: 15 * time.Second, CoreMHz: 2000,
		Capacity: func(string, *model.CPUStats) float64 { return 4000 },
		Shard:    "test", Window: 60, Logger: zap.NewNop(), Now: time.Now, Traffic: traffic,
	})
}

// statusOf is the HTTP status an error is answered with.
func statusOf(t *testing.T, err error) int {
	t.Helper()
	require.Error(t, err)
	st, ok := apierror.Status(err)
	require.True(t, ok, "%v carries no status", err)
	return st.Code
}

// A capacity element needs its cgroup configured and its process's CPU
// readings: without them the request is refused with the reason, and with
// them the basis is 1/(c·f − α·w) with α·w = the process's share of the
// machine times the machine's capacity.
func TestCapacityElementBasis(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Injector = "http://127.0.0.1:1"
	cfg.Capacities = map[string]Capacity{"db": {Cgroup: "tierscope/db", Cores: 0.5, CPU: CPU{Machine: "m1", Process: "tbdb"}}}
	traffic := &fakeTraffic{}
	x := newTestCoordinator(cfg, traffic)
	ctx := context.Background()
	_, err := x.Begin(ctx, api.ExperimentRequest{Element: "capacity:nope"})
	require.Equal(t, http.StatusBadRequest, statusOf(t, err))
	_, err = x.Begin(ctx, api.ExperimentRequest{Element: "capacity:db"})
	require.Equal(t, http.StatusUnprocessableEntity, statusOf(t, err))
	_, err = x.Begin(ctx, api.ExperimentRequest{Element: "frequency:m1"})
	require.Equal(t, http.StatusBadRequest, statusOf(t, err))

	traffic.addCPU(model.ProcessKey("m1", "tbdb"), 0.1) // 0.1 of 4000 MHz
	traffic.addCPU(model.ProcessKey("m1", "tbdb"), 0.2)
	b, err := x.capacityBasis(cfg.Capacities["db"])
	require.NoError(t, err)
	require.InDelta(t, 600, b.Alpha*b.Workload, 1e-9) // 0.15 · 4000 MHz
	require.InDelta(t, 0.5, b.Operating, 0)
	require.InDelta(t, 2000, b.FrequencyMHz, 0)
	require.InDelta(t, 0.6, b.Utilization(), 1e-9) // 600 of 0.5 · 2000 MHz
	require.Equal(t, gradient.SideBelow, b.Side())
	cp := cfg.Capacities["db"]
	require.Equal(t, []gradient.Basis{b}, cp.bases(b), "one wave, below, by default")
	cp.Sides = []string{"below", "centered", "above"}
	var sides []string
	for _, s := range cp.bases(b) {
		sides = append(sides, s.Side())
		require.NoError(t, s.Validate())
	}
	require.Equal(t, cp.Sides, sides, "each configured side reaches its basis")

	// One element per side, sharing the id; a grant is capped by
	// max_grant_fraction, a cut by max_fraction.
	x.set.Experiments.Capacities["db"] = Capacity{Cgroup: "tierscope/db", Cores: 0.5, Sides: []string{"below", "above"},
		CPU: CPU{Machine: "m1", Process: "tbdb"}}
	p, err := x.planElement("capacity:db", "")
	require.NoError(t, err)
	require.Len(t, p.elements, 2)
	require.Equal(t, "capacity:db", p.elements[1].ID)
	require.Equal(t, [2]float64{0.3, 1}, [2]float64{p.elements[0].MaxAmplitude, p.elements[1].MaxAmplitude})
	require.True(t, p.elements[1].Basis.Above)
	run, err := x.newRunner(api.ExperimentRequest{Element: "capacity:db"})
	require.NoError(t, err)
	require.Len(t, run.gcfg.Elements, 2)
	// The default folds a link's adaptive cycle into its window; a CPU
	// wave, as the real cgroup runs measured it, keeps the separate phase.
	require.True(t, run.gcfg.AdaptiveInWindow)
	for _, el := range run.gcfg.Elements {
		require.True(t, el.SeparateAdaptive, el.Basis.Side())
	}
	require.Len(t, run.routes, 2, "a route per element")

	// Past saturation there is no basis.
	traffic.addCPU(model.ProcessKey("m1", "tbdb"), 0.9)
	_, err = x.capacityBasis(x.set.Experiments.Capacities["db"])
	require.ErrorContains(t, err, "saturates")
}

// Naming a configured injector (with a trailing slash) is allowed, and its
// client carries the token there; any other URL is refused (403) before a
// request reaches it.
func TestTokenGoesOnlyToConfiguredInjectors(t *testing.T) {
	var stolen, configured atomic.Int32
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen.Add(1)
		http.Error(w, "no", http.StatusTeapot)
	}))
	defer thief.Close()
	inj := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer s3cret" {
			configured.Add(1)
		}
		http.Error(w, "refused for the test", http.StatusForbidden)
	}))
	defer inj.Close()
	cfg := DefaultConfig()
	cfg.Injector = inj.URL
	cfg.Token = "s3cret"
	cfg.Links = map[string]Link{"a->b": {Address: "tcp://127.0.0.1:9"}}
	x := newTestCoordinator(cfg, &fakeTraffic{})
	for _, url := range []string{thief.URL, thief.URL + "/", "http://127.0.0.1:1"} {
		_, err := x.Begin(context.Background(), api.ExperimentRequest{Element: "link:a->b", Injector: url})
		require.Equal(t, http.StatusForbidden, statusOf(t, err), url)
	}
	r, err := x.newRunner(api.ExperimentRequest{Element: "link:a->b", Injector: inj.URL + "/"})
	require.NoError(t, err)
	err = r.plans["link:a->b"].inj.Do(context.Background(), "GET", "/v1/health", nil, nil)
	require.ErrorContains(t, err, "403")
	require.Equal(t, int32(1), configured.Load(), "the configured injector gets the token")
	require.Zero(t, stolen.Load())
}

// An experiment on a link carries the link book's calls per request as its
// element's priors: the calls to the address it delays, whichever replica's
// service answers; the link's own when none went to the address.
func TestLinkElementPriors(t *testing.T) {
	traffic := &fakeTraffic{
		addresses: map[string][]string{"web->app-1": {"10.0.0.5:8081"}},
		calls: map[string]map[string]float64{
			"10.0.0.5:8081": {"GET /txn/ViewItem": 0.5, "GET /txn/Home": 1},
			"10.0.0.6:8081": {"GET /txn/ViewItem": 0.5},
		},
	}
	cfg := DefaultConfig()
	cfg.Injector = "http://127.0.0.1:1"
	x := newTestCoordinator(cfg, traffic)
	p, err := x.planElement("link:web->app-1", "")
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"GET /txn/ViewItem": 0.5, "GET /txn/Home": 1}, p.elements[0].PriorGradients)
	// The injector holds floor + amplitude under its max_delay: the wave's
	// amplitude leaves room for the floor.
	require.InDelta(t, float64(cfg.MaxDelay-cfg.DelayFloor)/float64(time.Millisecond), p.elements[0].MaxAmplitude, 1e-9)
	x.set.Experiments.Links = map[string]Link{"web->replica-2": {Address: "10.0.0.6:8081"}}
	p, err = x.planElement("link:web->replica-2", "")
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"GET /txn/ViewItem": 0.5}, p.elements[0].PriorGradients)
}

// A link without configuration takes the discovered address; the
// configured one wins; none at all names the links seen.
func TestLinkTarget(t *testing.T) {
	var xc Config
	discovered := []string{"10.0.0.6:5432", "10.0.0.7:5432"}
	lt, err := xc.linkTarget("app->db", "db", discovered, []string{"app->db", "worker->db"})
	if err != nil || lt.host != "10.0.0.6" || lt.port != 5432 || lt.proto != "tcp" {
		t.Errorf("discovered: %+v, %v", lt, err)
	}
	xc.Links = map[string]Link{"app->db": {Address: "10.9.9.9:6543"}}
	if lt, err := xc.linkTarget("app->db", "db", discovered, nil); err != nil || lt.host != "10.9.9.9" {
		t.Errorf("configured: %+v, %v", lt, err)
	}
	if _, err := xc.linkTarget("web->nowhere", "nowhere", nil, []string{"app->db"}); err == nil || !strings.Contains(err.Error(), "links seen: app->db") {
		t.Errorf("unknown link: %v", err)
	}
	lt, err = xc.linkTarget("app->cache", "cache", []string{"[fd00::7]:6379"}, nil)
	require.NoError(t, err)
	require.Equal(t, "fd00::7", lt.host)
	require.EqualValues(t, 6379, lt.port)
}

// experiments.min_samples_per_period reaches the experiment's training: a
// capacity element answers through a queue, so its wave is kept slower.
func TestMinSamplesPerPeriodBoundsTheWave(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Links = map[string]Link{"a->b": {Address: "tcp://127.0.0.1:9", Injector: "http://127.0.0.1:9"}}
	cfg.Train.N, cfg.Train.MinSamplesPerPeriod = 128, 16
	x := newTestCoordinator(cfg, &fakeTraffic{})
	r, err := x.newRunner(api.ExperimentRequest{Element: "link:a->b", Injector: "http://127.0.0.1:9"})
	require.NoError(t, err)
	require.Equal(t, 16.0, r.gcfg.Train.MinSamplesPerPeriod)
	require.Equal(t, 8, r.gcfg.Train.MaxKd(), "periods of at least 16 of the 128 bins")

	// A request's smaller N that leaves no whole period is refused, naming why.
	_, err = x.newRunner(api.ExperimentRequest{Element: "link:a->b", Injector: "http://127.0.0.1:9", N: 8})
	require.ErrorContains(t, err, "samples per period")
}

// The on-phase delay comes from the injector's phase split when it has one,
// its probes' when they are enough: the pass-through time every packet pays
// is no part of the wave, however small the amplitude.
func TestInjectedDelayFromPhaseSplit(t *testing.T) {
	var st leaseapi.Status[*leaseapi.Stats]
	if err := json.Unmarshal([]byte(`{"id":"l","state":"ended","stats":{"count":2000,"mean_ms":0.27,"min_ms":0.02,"requested_mean_ms":0.13,
		"on":{"count":1000,"mean_ms":0.40,"std_ms":0.10,"requested_mean_ms":0.26},
		"off":{"count":1000,"mean_ms":0.14,"std_ms":0.10,"requested_mean_ms":0}}}`), &st); err != nil {
		t.Fatal(err)
	}
	mean, se, ok := injectedDelay(0.26, st)
	if !ok || math.Abs(mean-0.26) > 1e-9 || math.Abs(se-math.Hypot(0.1, 0.1)/math.Sqrt(1000)) > 1e-9 {
		t.Errorf("phase split: got %v ± %v (%v), want 0.26 ± %.4f", mean, se, ok, math.Hypot(0.1, 0.1)/math.Sqrt(1000))
	}
	// Over a floor both phases request it; the difference is still the wave.
	floored := leaseapi.Status[*leaseapi.Stats]{}
	if err := json.Unmarshal([]byte(`{"id":"l","state":"ended","stats":{"count":2000,"mean_ms":0.57,"min_ms":0.32,"requested_mean_ms":0.43,
		"on":{"count":1000,"mean_ms":0.70,"std_ms":0.10,"requested_mean_ms":0.56},
		"off":{"count":1000,"mean_ms":0.44,"std_ms":0.10,"requested_mean_ms":0.30}}}`), &floored); err != nil {
		t.Fatal(err)
	}
	if mean, _, ok := injectedDelay(0.26, floored); !ok || math.Abs(mean-0.26) > 1e-9 {
		t.Errorf("over a 0.3 ms floor: got %v (%v), want 0.26", mean, ok)
	}
	// Probes timed from send to receive win once each phase has enough of
	// them; too few, and the packets' own split is used.
	probed := leaseapi.Status[*leaseapi.Stats]{}
	if err := json.Unmarshal([]byte(`{"id":"l","state":"ended","stats":{"count":2000,"mean_ms":0.57,"min_ms":0.32,"requested_mean_ms":0.43,
		"on":{"count":1000,"mean_ms":0.70,"std_ms":0.10,"requested_mean_ms":0.56},
		"off":{"count":1000,"mean_ms":0.44,"std_ms":0.10,"requested_mean_ms":0.30},
		"probe":{"sent":900,"received":900,
			"on":{"count":400,"mean_ms":0.99,"std_ms":0.2,"requested_mean_ms":0.56},
			"off":{"count":400,"mean_ms":0.70,"std_ms":0.2,"requested_mean_ms":0.30}}}}`), &probed); err != nil {
		t.Fatal(err)
	}
	if mean, se, ok := injectedDelay(0.26, probed); !ok || math.Abs(mean-0.29) > 1e-9 || math.Abs(se-math.Hypot(0.2, 0.2)/20) > 1e-9 {
		t.Errorf("probed: got %v ± %v (%v), want 0.29 ± %.4f", mean, se, ok, math.Hypot(0.2, 0.2)/20)
	}
	probed.Stats.Probe.On.Count = minProbesPerPhase - 1
	if mean, _, ok := injectedDelay(0.26, probed); !ok || math.Abs(mean-0.26) > 1e-9 {
		t.Errorf("too few probes: got %v (%v), want the packets' 0.26", mean, ok)
	}
	// Without the split the old ratio counts the pass-through time as delay.
	st.Stats.On, st.Stats.Off = nil, nil
	mean, _, ok = injectedDelay(0.26, st)
	if !ok || math.Abs(mean-0.26*0.25/0.13) > 1e-9 {
		t.Errorf("no split: got %v (%v)", mean, ok)
	}
}

// A link lease carries experiments.delay_floor as the injector's wave.floor;
// a capacity lease carries its action's floor, a centered wave's grant, and
// none otherwise.
func TestLeaseRequestCarriesDelayFloor(t *testing.T) {
	var got []leaseapi.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req leaseapi.Request
		require.NoError(t, json.NewDecoder(r.Body).Decode(&req))
		got = append(got, req)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"lease-1"}`))
	}))
	defer srv.Close()
	inj := leaseapi.NewClient(srv.URL, "", &http.Client{Timeout: time.Second})
	r := &runner{x: newTestCoordinator(DefaultConfig(), &fakeTraffic{}), leases: map[string]*leaseRef{}, plans: map[string]elementPlan{
		"link":     {inj: inj, target: leaseapi.Target{Link: &leaseapi.Link{Proto: "tcp", Dst: "10.0.0.2", DstPort: 5432, Direction: "out"}}},
		"capacity": {inj: inj, target: leaseapi.Target{Cgroup: "db"}}}}
	start := time.Now()
	for _, kind := range []gradient.Kind{gradient.KindLink, gradient.KindCapacity} {
		require.NoError(t, r.startLease(gradient.Action{Kind: gradient.ActionStartLease, Lease: string(kind), Element: string(kind), LeaseKind: kind.LeaseKind(),
			Amplitude: 0.2, Period: time.Second, Cycles: 4, Start: start, Duration: time.Minute}))
	}
	centered := gradient.Basis{Kind: gradient.KindCapacity, Operating: 0.5, FrequencyMHz: 1000, Centered: true}
	require.NoError(t, r.startLease(gradient.Action{Kind: gradient.ActionStartLease, Lease: "centered", Element: "capacity", LeaseKind: "capacity",
		Amplitude: 0.2, Floor: centered.OffKnob(0.2), Period: time.Second, Cycles: 4, Start: start, Duration: time.Minute}))
	require.Len(t, got, 3)
	require.Equal(t, 0.3, got[0].Wave.Floor, "link lease")
	require.Zero(t, got[1].Wave.Floor, "capacity lease")
	require.Equal(t, -0.1, got[2].Wave.Floor, "centered capacity lease: grants a/2 in its off-phases")
	above := gradient.Basis{Kind: gradient.KindCapacity, Operating: 0.5, FrequencyMHz: 1000, Above: true}
	require.NoError(t, r.startLease(gradient.Action{Kind: gradient.ActionStartLease, Lease: "above", Element: "capacity", LeaseKind: "capacity",
		Amplitude: 0.2, Floor: above.OffKnob(0.2), Period: time.Second, Cycles: 4, Start: start, Duration: time.Minute}))
	require.Len(t, got, 4)
	require.Equal(t, -0.2, got[3].Wave.Floor, "capacity lease above: grants a in its off-phases")
}

// TestFailedLeaseMeasurementIsDiscarded: a lease the injector reports as
// failed when it is released (its rule was deleted while it ran) yields no
// injected amplitude, but the failure, which the runner turns into
// LeaseFailed: the element's window is not measured.
func TestFailedLeaseMeasurementIsDiscarded(t *testing.T) {
	state := "completed"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"lease-1"}`))
			return
		}
		_, _ = fmt.Fprintf(w, `{"id":"lease-1","state":%q,"error":"delay backend stopped by itself: nfqdelay: the rule was deleted by another process",`+
			`"stats":{"count":100,"mean_ms":5,"on":{"count":50,"mean_ms":10,"std_ms":1,"requested_mean_ms":10},"off":{"count":50,"mean_ms":0.1,"std_ms":0.1,"requested_mean_ms":0}}}`, state)
	}))
	defer srv.Close()
	inj := leaseapi.NewClient(srv.URL, "", &http.Client{Timeout: time.Second})
	r := &runner{x: newTestCoordinator(DefaultConfig(), &fakeTraffic{}), leases: map[string]*leaseRef{}, plans: map[string]elementPlan{
		"link": {inj: inj, target: leaseapi.Target{Link: &leaseapi.Link{Proto: "tcp", Dst: "10.0.0.2", DstPort: 5432, Direction: "out"}}}}}
	start := func() {
		require.NoError(t, r.startLease(gradient.Action{Kind: gradient.ActionStartLease, Lease: "L", Element: "link", LeaseKind: "delay",
			Amplitude: 10, Period: time.Second, Cycles: 4, Start: time.Now(), Duration: time.Minute}))
	}
	start()
	_, _, ok, failed := r.stopLease("L")
	require.NoError(t, failed)
	require.True(t, ok, "a completed lease reports its injected delay")

	state = "failed"
	start()
	mean, _, ok, failed := r.stopLease("L")
	require.ErrorContains(t, failed, "deleted by another process")
	require.False(t, ok)
	require.Zero(t, mean)
}

// A request is a reference of a link only when its trace proves it did
// not cross: the caller called, every call at a known address, none at
// the delayed one, which other traces have shown. Anything less counts as
// crossed.
func TestElementRouteCrossedBy(t *testing.T) {
	names := span.NewNames()
	app1 := elementRoute{caller: "web", address: "10.0.0.2:8081"}
	front := spantest.Named{ID: 1, Service: "web", Kind: span.KindServer, Transaction: "Home"}
	call := func(id uint64, service, address string) spantest.Named {
		return spantest.Named{ID: id, ParentID: 1, Service: service, Kind: span.KindClient, Endpoint: address}
	}
	trace := func(named ...spantest.Named) []span.Span { return spantest.Spans(names, named...) }
	other := trace(front, call(2, "web", "10.0.0.3:8082"))
	require.True(t, app1.crossedBy(other, names), "before any trace has shown the delayed address, the spans may name it otherwise")
	require.True(t, app1.crossedBy(trace(front, call(2, "web", "10.0.0.2:8081")), names))
	require.True(t, app1.seen)
	for name, tc := range map[string]struct {
		spans   []span.Span
		crossed bool
	}{
		"called the delayed address":            {trace(front, call(2, "web", "10.0.0.2:8081")), true},
		"called the other replica only":         {trace(front, call(2, "web", "10.0.0.3:8082")), false},
		"both replicas":                         {trace(front, call(2, "web", "10.0.0.3:8082"), call(3, "web", "10.0.0.2:8081")), true},
		"another caller at the delayed address": {trace(front, call(2, "web", "10.0.0.3:8082"), call(3, "app", "10.0.0.2:8081")), true},
		"a call at an unknown address":          {trace(front, call(2, "web", "10.0.0.3:8082"), call(3, "web", "")), true},
		"no call from the caller":               {trace(front, call(2, "app", "10.0.0.9:5432")), true},
		"the front alone":                       {trace(front), true},
	} {
		require.Equal(t, tc.crossed, app1.crossedBy(tc.spans, names), name)
	}
	notLink := elementRoute{}
	require.True(t, notLink.crossedBy(other, names), "not a link: never a reference")

	r := &runner{routes: []elementRoute{app1, {caller: "web", address: "10.0.0.3:8082", seen: true}, {}}}
	require.Equal(t, gradient.Crossings(0b101), r.crossings(trace(front, call(2, "web", "10.0.0.2:8081")), names),
		"crossed app-1, not app-2; the non-link element counts as crossed")
}

// BenchmarkCrossings is the per-trace cost reference_requests adds while an
// experiment runs: a 20-span trace against four link elements.
func BenchmarkCrossings(b *testing.B) {
	names := span.NewNames()
	named := []spantest.Named{{ID: 1, Service: "web", Kind: span.KindServer, Transaction: "Home"}}
	for i := range 19 {
		kind, service, address := span.KindClient, "app", "10.0.0.9:5432"
		if i%4 == 0 {
			service, address = "web", "10.0.0.3:8082"
		}
		if i%2 == 1 {
			kind, address = span.KindServer, ""
		}
		named = append(named, spantest.Named{ID: uint64(i + 2), ParentID: 1, Service: service, Kind: kind, Endpoint: address})
	}
	spans := spantest.Spans(names, named...)
	r := &runner{routes: []elementRoute{
		{caller: "web", address: "10.0.0.2:8081", seen: true}, {caller: "web", address: "10.0.0.3:8082", seen: true},
		{caller: "app", address: "10.0.0.9:5432", seen: true}, {caller: "worker", address: "10.0.0.9:5432", seen: true},
	}}
	b.ReportAllocs()
	var c gradient.Crossings
	for b.Loop() {
		c |= r.crossings(spans, names)
	}
	if c == 0 {
		b.Fatal("no crossing")
	}
}

// The coordinator reads time from its Settings.Now only: an experiment
// started on a fixed clock carries that clock's time, and its record is
// stored in that clock's window.
func TestCoordinatorRunsOnItsClock(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	cfg := DefaultConfig()
	cfg.Links = map[string]Link{"a->b": {Address: "tcp://127.0.0.1:9", Injector: "http://127.0.0.1:9"}}
	x := newTestCoordinator(cfg, &fakeTraffic{})
	x.set.Now = func() time.Time { return at }
	run, err := x.newRunner(api.ExperimentRequest{Element: "link:a->b"})
	require.NoError(t, err)
	require.Equal(t, at, run.started)
	require.Equal(t, at.Unix(), run.snapshot().Started)
	run.fail("stopped by the test")
	require.Equal(t, at.Unix(), run.snapshot().Finished)
}

// heldStore holds every Put that carries a gradient until release closes.
type heldStore struct {
	store.Store
	putting chan struct{}
	release chan struct{}
	stored  []store.Record
}

func (h *heldStore) Put(_ context.Context, recs []store.Record) error {
	for _, rec := range recs {
		if rec.Kind == model.KindGradient {
			close(h.putting)
			<-h.release
			break
		}
	}
	h.stored = append(h.stored, recs...)
	return nil
}

// A client that sees an experiment finished finds its gradients stored: the
// snapshot the API serves says finished only once they are written.
func TestFinishedOnlyOnceGradientsAreStored(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Links = map[string]Link{"a->b": {Address: "tcp://127.0.0.1:9", Injector: "http://127.0.0.1:9"}}
	x := newTestCoordinator(cfg, &fakeTraffic{})
	held := &heldStore{putting: make(chan struct{}), release: make(chan struct{})}
	x.st = held
	run, err := x.newRunner(api.ExperimentRequest{Element: "link:a->b"})
	require.NoError(t, err)

	ex := run.snapshot()
	ex.Phase, ex.Finished = "done", time.Now().Unix()
	ex.Gradients = []api.Gradient{{Element: "link:a->b", Transaction: "GET /", Gradient: 1.5, Measured: ex.Finished}}
	committed := make(chan struct{})
	go func() { run.commit(ex, false); close(committed) }()
	<-held.putting
	require.Zero(t, run.snapshot().Finished, "served as finished before its gradients are stored")
	close(held.release)
	<-committed
	require.Equal(t, ex.Finished, run.snapshot().Finished)
	require.True(t, slices.ContainsFunc(held.stored, func(r store.Record) bool { return r.Kind == model.KindGradient }))
}
