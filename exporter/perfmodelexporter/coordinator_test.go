package perfmodelexporter

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/confmap/xconfmap"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/metadata"
	"github.com/tierscope/tierscope/injector"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/freeport"
	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/model"
)

func TestExperimentsConfigLoads(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, "custom").String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	require.NoError(t, cfg.Validate())
	x := cfg.Experiments
	require.Equal(t, "http://10.0.0.4:18777", x.Injector)
	require.Equal(t, "s3cret", string(x.Token))
	require.Equal(t, ExperimentLink{Address: "tcp://10.0.0.5:5432", Injector: "http://10.0.0.6:18777"}, x.Links["app->db"])
	require.Equal(t, ExperimentFrequency{CPUs: []int{2, 3}, CPU: ExperimentCPU{FrequencyMHz: 2400, Machine: "db-host", Process: "postgres"}}, x.Frequencies["db"])
	require.Equal(t, ExperimentCapacity{Cgroup: "system.slice/db.service", Cores: 2, Sides: []string{"below", "above"}, CPU: ExperimentCPU{Machine: "db-host", Process: "postgres"}}, x.Capacities["db"])
	require.Equal(t, []string{"web"}, x.FrontServices)
	require.Equal(t, 16, x.Train.K)
	require.Equal(t, 64, x.Train.N)
	require.Equal(t, 2, x.MaxConcurrent)
	require.Equal(t, 50*time.Millisecond, x.MaxDelay)
	require.Equal(t, 5*time.Second, x.Lateness)
	require.True(t, x.StealCovariate)
	require.False(t, x.References)

	def := createDefaultConfig().(*Config)
	require.NoError(t, def.Validate())
	require.Equal(t, 1, def.Experiments.MaxConcurrent)
	require.Equal(t, 300*time.Microsecond, def.Experiments.DelayFloor)
	require.False(t, def.Experiments.StealCovariate, "opt-in")
	require.True(t, def.Experiments.References, "on by default")
	for field, mutate := range map[string]func(*ExperimentsConfig){
		"experiments: injector":             func(c *ExperimentsConfig) { c.Injector = "10.0.0.4:18777" },
		"experiments::links::a->b: address": func(c *ExperimentsConfig) { c.Links = map[string]ExperimentLink{"a->b": {Address: "sctp://x:1"}} },
		"experiments":                       func(c *ExperimentsConfig) { c.Train.N = 100 },
		"experiments: max_concurrent":       func(c *ExperimentsConfig) { c.MaxConcurrent = 0 },
		"max_delay":                         func(c *ExperimentsConfig) { c.MaxDelay = 0 },
		"experiments: delay_floor":          func(c *ExperimentsConfig) { c.DelayFloor = c.MaxDelay },
		"min_delay":                         func(c *ExperimentsConfig) { c.MinDelay = c.MaxDelay },
		"experiments: request_timeout":      func(c *ExperimentsConfig) { c.RequestTimeout = 0 },
		"experiments::frequencies::db: cpus": func(c *ExperimentsConfig) {
			c.Frequencies = map[string]ExperimentFrequency{"db": {CPU: ExperimentCPU{Machine: "m", Process: "p"}}}
		},
		"experiments::frequencies::db": func(c *ExperimentsConfig) {
			c.Frequencies = map[string]ExperimentFrequency{"db": {CPUs: []int{0}, CPU: ExperimentCPU{Machine: "m", Process: "p", MaxFraction: 1}}}
		},
		"experiments::links::a->b: injector": func(c *ExperimentsConfig) {
			c.Links = map[string]ExperimentLink{"a->b": {Address: "h:1", Injector: "ftp://x"}}
		},
		"experiments::capacities::db: max_grant_fraction": func(c *ExperimentsConfig) {
			c.Capacities = map[string]ExperimentCapacity{"db": {Cgroup: "db", Cores: 0.5, MaxGrantFraction: -1, CPU: ExperimentCPU{Machine: "m", Process: "p"}}}
		},
		"experiments::capacities::db: sides[0]": func(c *ExperimentsConfig) {
			c.Capacities = map[string]ExperimentCapacity{"db": {Cgroup: "db", Cores: 0.5, Sides: []string{"upward"}, CPU: ExperimentCPU{Machine: "m", Process: "p"}}}
		},
		"experiments::capacities::db: sides[2]": func(c *ExperimentsConfig) {
			c.Capacities = map[string]ExperimentCapacity{"db": {Cgroup: "db", Cores: 0.5, Sides: []string{"above", "below", "above"}, CPU: ExperimentCPU{Machine: "m", Process: "p"}}}
		},
	} {
		c := createDefaultConfig().(*Config)
		mutate(&c.Experiments)
		err := xconfmap.Validate(c)
		require.Error(t, err, field)
		require.Contains(t, err.Error(), field+":", field)
	}
}

// needRoot fails in CI (which runs as root) and skips elsewhere: NFQUEUE and
// iptables need root.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs as root; this test needs root for iptables and NFQUEUE")
		}
		t.Skip("needs root (iptables, NFQUEUE)")
	}
	_, err := exec.LookPath("iptables")
	require.NoError(t, err, "iptables")
}

// udpEcho answers every datagram on a test-owned loopback port: the back
// tier of the synthetic system, reached over the link under test.
func udpEcho(t *testing.T) uint16 {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
	return uint16(pc.LocalAddr().(*net.UDPAddr).Port)
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.TCP()
	require.NoError(t, err)
	return port
}

// realInjector starts the injector extension in-process with its real
// NFQUEUE delay backend, allowed to touch only the echo port.
type realInjector struct {
	t   *testing.T
	url string
	ext component.Component
}

func startInjector(t *testing.T, queueBase uint16, ports ...uint16) *realInjector {
	t.Helper()
	f := injector.NewFactory()
	cfg := f.CreateDefaultConfig().(*injector.Config)
	port := freePort(t)
	cfg.NetAddr.Endpoint = "127.0.0.1:" + strconv.Itoa(port)
	cfg.Insecure = true
	cfg.StateDir = t.TempDir()
	cfg.Allowlist = injector.Allowlist{Links: []string{"127.0.0.1/32"}, Ports: ports}
	cfg.QueueBase = queueBase
	cfg.MaxLeases = 2
	require.NoError(t, cfg.Validate())
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { _ = ext.Shutdown(context.Background()) })
	return &realInjector{t: t, url: "http://127.0.0.1:" + strconv.Itoa(port), ext: ext}
}

func (ri *realInjector) activeLeases() int {
	ri.t.Helper()
	resp, err := http.Get(ri.url + "/v1/health")
	require.NoError(ri.t, err)
	defer resp.Body.Close()
	var h struct {
		ActiveLeases int `json:"active_leases"`
	}
	require.NoError(ri.t, json.NewDecoder(resp.Body).Decode(&h))
	return h.ActiveLeases
}

// taggedRules counts the injector's tagged iptables rules matching port, in
// every iptables backend. (nfqdelay.Rules is internal to injector/; this
// reads the same iptables-save output.)
func taggedRules(t *testing.T, port uint16) int {
	t.Helper()
	n := 0
	for _, bin := range []string{"iptables-save", "iptables-legacy-save", "iptables-nft-save"} {
		if _, err := exec.LookPath(bin); err != nil {
			continue
		}
		out, err := exec.Command(bin).Output()
		if err != nil {
			continue // a backend without kernel support
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "-A ") && strings.Contains(line, "tierscope-inj-") && strings.Contains(line, "--dport "+strconv.Itoa(int(port))) {
				n++
			}
		}
	}
	return n
}

// frontService is a synthetic front tier: open-loop requests, each a base
// service time of N(10, 3) ms and one UDP round trip to the back tier over
// the link the injector delays. Its SERVER spans go to the engine as OTLP.
// A second transaction never calls the back tier. With several back ends
// (startBalancedFront) it takes them in turn, and each call is a CLIENT
// span with server.address and server.port under the SERVER span.
type frontService struct {
	t        *testing.T
	e        *engine
	backs    []string // host:port
	clients  bool     // CLIENT spans for the calls
	stop     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	batch    ptrace.Traces
	failures int
	// split, when set, ships each batch split by trace id over these
	// engines instead of to e.
	split []*engine
}

func startFront(t *testing.T, e *engine, echoPort uint16, perSecond int) *frontService {
	return startFrontTo(t, e, perSecond, false, echoPort)
}

// startBalancedFront is startFront balancing its calls over the back ends
// in turn, with a CLIENT span for each.
func startBalancedFront(t *testing.T, e *engine, perSecond int, echoPorts ...uint16) *frontService {
	return startFrontTo(t, e, perSecond, true, echoPorts...)
}

func startFrontTo(t *testing.T, e *engine, perSecond int, clients bool, echoPorts ...uint16) *frontService {
	f := &frontService{t: t, e: e, clients: clients, stop: make(chan struct{}), batch: ptrace.NewTraces()}
	for _, p := range echoPorts {
		f.backs = append(f.backs, fmt.Sprintf("127.0.0.1:%d", p))
	}
	f.wg.Add(2)
	go f.generate(perSecond)
	go f.ship()
	t.Cleanup(f.close)
	return f
}

func (f *frontService) close() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	f.wg.Wait()
}

func (f *frontService) generate(perSecond int) {
	defer f.wg.Done()
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-f.stop:
			return
		case <-tick.C:
			f.wg.Add(1)
			go f.request(i%5 != 4, f.backs[i%len(f.backs)])
		}
	}
}

func (f *frontService) request(callsBack bool, back string) {
	defer f.wg.Done()
	start := time.Now()
	time.Sleep(time.Duration(math.Max(0, 10+3*mrand.NormFloat64()) * float64(time.Millisecond)))
	name := "GET /static"
	var callStart, callEnd time.Time
	if callsBack {
		name = "GET /front"
		callStart = time.Now()
		conn, err := net.Dial("udp4", back)
		if err == nil {
			buf := []byte("ping")
			_ = conn.SetDeadline(time.Now().Add(time.Second))
			if _, err = conn.Write(buf); err == nil {
				_, err = conn.Read(buf)
			}
			_ = conn.Close()
		}
		callEnd = time.Now()
		if err != nil {
			f.mu.Lock()
			f.failures++
			f.mu.Unlock()
			return
		}
	}
	end := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	var rs ptrace.ResourceSpans
	if f.batch.ResourceSpans().Len() == 0 {
		rs = f.batch.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "front")
		rs.ScopeSpans().AppendEmpty()
	}
	rs = f.batch.ResourceSpans().At(0)
	sp := rs.ScopeSpans().At(0).Spans().AppendEmpty()
	var tid pcommon.TraceID
	var sid pcommon.SpanID
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	sp.SetTraceID(tid)
	sp.SetSpanID(sid)
	sp.SetName(name)
	sp.SetKind(ptrace.SpanKindServer)
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
	if f.clients && callsBack {
		host, port, _ := net.SplitHostPort(back)
		p, _ := strconv.Atoi(port)
		cl := rs.ScopeSpans().At(0).Spans().AppendEmpty()
		var cid pcommon.SpanID
		_, _ = rand.Read(cid[:])
		cl.SetTraceID(tid)
		cl.SetSpanID(cid)
		cl.SetParentSpanID(sid)
		cl.SetName("echo")
		cl.SetKind(ptrace.SpanKindClient)
		cl.SetStartTimestamp(pcommon.NewTimestampFromTime(callStart))
		cl.SetEndTimestamp(pcommon.NewTimestampFromTime(callEnd))
		cl.Attributes().PutStr("server.address", host)
		cl.Attributes().PutInt("server.port", int64(p))
	}
}

// ship hands the collected spans to the engine every 50 ms, as a batch
// processor would.
func (f *frontService) ship() {
	defer f.wg.Done()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-tick.C:
			f.mu.Lock()
			td := f.batch
			f.batch = ptrace.NewTraces()
			f.mu.Unlock()
			if td.SpanCount() == 0 {
				continue
			}
			if len(f.split) == 0 {
				_ = f.e.ConsumeTraces(context.Background(), td)
				continue
			}
			for i, part := range splitByTraceID(td, len(f.split)) {
				if part.SpanCount() > 0 {
					_ = f.split[i].ConsumeTraces(context.Background(), part)
				}
			}
		}
	}
}

// startLiveEngine runs an engine on the real clock, as the coordinator and
// the injector share time.
func startLiveEngine(t *testing.T, dsn string, mutate func(*Config)) *testEngine {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = "127.0.0.1:0"
	cfg.Storage.DSN = dsn
	cfg.Storage.Shard = "coord"
	cfg.TraceWait = 300 * time.Millisecond
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	e, err := newEngine(exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background(), componenttest.NewNopHost()))
	te := &testEngine{engine: e, t: t, url: "http://" + e.addr}
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	return te
}

func (te *testEngine) send(method, path, body string, out any) int {
	te.t.Helper()
	req, err := http.NewRequest(method, te.url+path, bytes.NewReader([]byte(body)))
	require.NoError(te.t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(te.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(te.t, err)
	if out != nil && resp.StatusCode < 300 {
		require.NoError(te.t, json.Unmarshal(b, out), string(b))
	}
	if resp.StatusCode >= 300 {
		te.t.Logf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return resp.StatusCode
}

// awaitExperiment starts an experiment with body and polls it until it
// finishes, failing after limit; each, if set, sees every poll.
func (te *testEngine) awaitExperiment(body string, limit time.Duration, each func(api.Experiment)) api.Experiment {
	te.t.Helper()
	var ex api.Experiment
	require.Equal(te.t, http.StatusCreated, te.send("POST", api.PathExperiments, body, &ex))
	for deadline := time.Now().Add(limit); ex.Finished == 0; {
		require.True(te.t, time.Now().Before(deadline), "experiment still %s after %v", ex.Phase, limit)
		time.Sleep(200 * time.Millisecond)
		id := ex.ID
		ex = api.Experiment{} // omitted fields must not keep the last poll's values
		require.Equal(te.t, http.StatusOK, te.send("GET", api.PathExperiments+"/"+id, "", &ex))
		if each != nil {
			each(ex)
		}
	}
	return ex
}

func linkSetup(t *testing.T, queueBase uint16, k, chunks, n int, scale float64) (*testEngine, *realInjector, uint16, *frontService) {
	needRoot(t)
	echo := udpEcho(t)
	inj := startInjector(t, queueBase, echo)
	te := startLiveEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "p.db"), func(c *Config) {
		c.Experiments.Injector = inj.url
		c.Experiments.Links = map[string]ExperimentLink{"front->back": {Address: fmt.Sprintf("udp://127.0.0.1:%d", echo)}}
		c.Experiments.Train.K = k
		c.Experiments.Train.N = n
		c.Experiments.Train.Chunks = chunks
		c.Experiments.Train.Scale = scale
	})
	front := startFront(t, te.engine, echo, 400)
	return te, inj, echo, front
}

// TestExperimentAbortAndShutdownReleaseLeases: aborting through the API, or
// shutting the collector down mid-experiment, leaves nothing injected.
func TestExperimentAbortAndShutdownReleaseLeases(t *testing.T) {
	te, inj, echo, _ := linkSetup(t, 3300, 4, 2, 16, 30)

	require.Equal(t, http.StatusBadRequest, te.send("POST", api.PathExperiments, `{"element":`, nil))
	require.Equal(t, http.StatusBadRequest, te.send("POST", api.PathExperiments, `{"element":"frequency:m1"}`, nil))
	require.Equal(t, http.StatusBadRequest, te.send("POST", api.PathExperiments, `{"element":"link:front->elsewhere"}`, nil))
	require.Equal(t, http.StatusBadRequest, te.send("POST", api.PathExperiments, `{"element":"link:front->back","n":100}`, nil))
	require.Equal(t, http.StatusBadRequest, te.send("POST", api.PathExperiments, `{"element":"link:front->back","bogus":1}`, nil))
	require.Equal(t, http.StatusBadRequest, te.send("POST", api.PathExperiments, `{}`, nil), "no element")
	require.Equal(t, http.StatusBadRequest, te.send("POST", api.PathExperiments, `{"element":"link:front->back","elements":["link:front->back"]}`, nil), "both")
	require.Equal(t, http.StatusBadRequest, te.send("POST", api.PathExperiments, `{"elements":["link:front->back","link:front->back"]}`, nil), "twice")
	require.Equal(t, http.StatusBadRequest, te.send("POST", api.PathExperiments, `{"elements":["link:front->back","link:front->elsewhere"]}`, nil), "one unknown")

	waitForLease := func() {
		t.Helper()
		for deadline := time.Now().Add(40 * time.Second); inj.activeLeases() == 0; time.Sleep(50 * time.Millisecond) {
			require.True(t, time.Now().Before(deadline), "no lease started within 40 s")
		}
		require.Positive(t, taggedRules(t, echo), "the lease's NFQUEUE rule is in place")
	}

	var ex api.Experiment
	require.Equal(t, http.StatusCreated, te.send("POST", api.PathExperiments, `{"element":"link:front->back"}`, &ex))
	require.Equal(t, http.StatusConflict, te.send("POST", api.PathExperiments, `{"element":"link:front->back"}`, nil), "max_concurrent 1")
	waitForLease()
	t0 := time.Now()
	require.Equal(t, http.StatusOK, te.send("DELETE", api.PathExperiments+"/"+ex.ID, "", &ex))
	t.Logf("abort answered in %v", time.Since(t0))
	require.Equal(t, "aborted", ex.Phase)
	require.Zero(t, inj.activeLeases(), "abort released the lease before answering")
	require.Zero(t, taggedRules(t, echo), "no tagged rule after the abort")
	require.Equal(t, http.StatusConflict, te.send("DELETE", api.PathExperiments+"/"+ex.ID, "", nil), "already ended")
	require.Equal(t, http.StatusNotFound, te.send("DELETE", api.PathExperiments+"/exp-none", "", nil))

	var second api.Experiment
	require.Equal(t, http.StatusCreated, te.send("POST", api.PathExperiments, `{"element":"link:front->back"}`, &second))
	waitForLease()
	require.NoError(t, te.Shutdown(context.Background()))
	require.Zero(t, inj.activeLeases(), "shutdown released the lease")
	require.Zero(t, taggedRules(t, echo), "no tagged rule after shutdown")

	// Both outcomes were stored before the store closed.
	again := startLiveEngine(t, te.cfg.Storage.DSN, nil)
	var list api.Experiments
	require.Equal(t, http.StatusOK, again.send("GET", api.PathExperiments, "", &list))
	require.Len(t, list.Experiments, 2)
	for _, x := range list.Experiments {
		require.Equal(t, "aborted", x.Phase)
		require.NotZero(t, x.Finished)
	}
}

// A capacity element needs its cgroup configured and its process's CPU
// readings: without them the request is refused with the reason (the basis
// itself is internal/coordinator's TestCapacityElementBasis), and the
// readings the coordinator reads are the open windows' mean share.
func TestCapacityElementBasis(t *testing.T) {
	te := startLiveEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "p.db"), func(c *Config) {
		c.CapacityMHz = 4000 // 2 CPUs of 2000 MHz
		c.CoreMHz = 2000
		c.Experiments.Injector = "http://127.0.0.1:1"
		c.Experiments.Capacities = map[string]ExperimentCapacity{"db": {Cgroup: "tierscope/db", Cores: 0.5, CPU: ExperimentCPU{Machine: "m1", Process: "tbdb"}}}
	})
	require.Equal(t, http.StatusBadRequest, te.send("POST", api.PathExperiments, `{"element":"capacity:nope"}`, nil))
	require.Equal(t, http.StatusUnprocessableEntity, te.send("POST", api.PathExperiments, `{"element":"capacity:db"}`, nil))
	require.Equal(t, http.StatusBadRequest, te.send("POST", api.PathExperiments, `{"element":"frequency:m1"}`, nil))

	te.ingest.AddCPU(time.Now().UnixNano(), model.ProcessKey("m1", "tbdb"), 0.1, 0, 0) // 0.1 of 4000 MHz
	te.ingest.AddCPU(time.Now().UnixNano(), model.ProcessKey("m1", "tbdb"), 0.2, 0, 0)
	share, _ := te.ingest.CPU("m1", "tbdb")
	require.InDelta(t, 0.15, share.Mean(), 1e-9)
	require.InDelta(t, 4000, te.query.Capacity("m1", &model.CPUStats{}), 0, "capacity_mhz")
}

// TestExperimentMeasuresSeveralElementsAfterOneTraining: one experiment
// measures two links in turn after a single passive training phase (paper
// 000 §3), each through its own lease at the real injector. The front
// transaction crosses one link and not the other.
func TestExperimentMeasuresSeveralElementsAfterOneTraining(t *testing.T) {
	needRoot(t)
	echo, idle := udpEcho(t), udpEcho(t)
	inj := startInjector(t, 3310, echo, idle)
	te := startLiveEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "p.db"), func(c *Config) {
		c.Experiments.Injector = inj.url
		c.Experiments.Links = map[string]ExperimentLink{
			"front->back": {Address: fmt.Sprintf("udp://127.0.0.1:%d", echo)},
			"front->idle": {Address: fmt.Sprintf("udp://127.0.0.1:%d", idle)},
		}
		c.Experiments.Train.K, c.Experiments.Train.N, c.Experiments.Train.Chunks, c.Experiments.Train.Scale = 8, 64, 3, 80
		c.Experiments.StealCovariate = true
	})
	front := startFront(t, te.engine, echo, 400)
	feedSteal(t, te.engine, "front-host", 500*time.Millisecond)

	var ex api.Experiment
	begun := time.Now()
	require.Equal(t, http.StatusCreated, te.send("POST", api.PathExperiments, `{"elements":["link:front->back","link:front->idle"]}`, &ex))
	require.Equal(t, "link:front->back,link:front->idle", ex.Element)
	require.Equal(t, []string{"link:front->back", "link:front->idle"}, ex.Elements)
	// The sequence of (phase, element) the API shows: training once, then
	// each element's adaptive and active phases in order.
	var seen []string
	for deadline := time.Now().Add(3 * time.Minute); ex.Finished == 0; {
		require.True(t, time.Now().Before(deadline), "experiment still %s (%s) after 3 min", ex.Phase, ex.CurrentElement)
		time.Sleep(200 * time.Millisecond)
		id := ex.ID
		ex = api.Experiment{} // omitted fields must not keep the last poll's values
		require.Equal(t, http.StatusOK, te.send("GET", api.PathExperiments+"/"+id, "", &ex))
		step := ex.Phase
		if ex.Phase == "adaptive" || ex.Phase == "active" {
			step += " " + ex.CurrentElement
		}
		if len(seen) == 0 || seen[len(seen)-1] != step {
			seen = append(seen, step)
			t.Logf("%5.1fs %s %.0f%% eta %.1fs", time.Since(begun).Seconds(), step, ex.Percent, ex.ETASeconds)
		}
	}
	t.Logf("two link experiments after one training: %v wall; front failures %d", time.Since(begun).Round(100*time.Millisecond), front.failures)
	require.Equal(t, "done", ex.Phase, ex.Reason)
	require.Empty(t, ex.CurrentElement)
	require.Equal(t, []string{"training",
		"adaptive link:front->back", "active link:front->back",
		"adaptive link:front->idle", "active link:front->idle", "done"}, seen)

	var res gradient.Result
	require.NoError(t, json.Unmarshal(ex.Detail, &res))
	require.NotNil(t, res.Plan)
	require.Len(t, res.Elements, 2)
	for _, el := range res.Elements {
		t.Logf("%s: A⁰ %.3f ms (injected %.3f), A_d′ %.3f ms (injected %.3f), k_d %d; notes %v", el.Element, el.AdaptiveAmplitude, el.AdaptiveInjected, el.Amplitude, el.Injected, el.Kd, el.Notes)
		require.Equal(t, "done", el.Status, el.Element)
		require.True(t, el.WindowStart.After(begun), el.Element)
	}
	require.True(t, res.Elements[1].WindowStart.After(res.Elements[0].WindowEnd), "the links are measured in turn")
	// The host's steal readings reached the state machine as a covariate
	// of the training and of each window.
	require.Equal(t, []string{"cpu.steal host=front-host"}, res.Covariates)
	for _, el := range res.Elements {
		require.Equal(t, []string{"cpu.steal host=front-host"}, el.Covariates, el.Element)
	}

	byElement := map[string]api.Gradient{}
	for _, g := range ex.Gradients {
		if g.Transaction == "GET /front" {
			byElement[g.Element] = g
		}
		t.Logf("%s %s: gradient %.3f ci95 [%.3f, %.3f] snr %.1f", g.Element, g.Transaction, g.Gradient, g.CI95[0], g.CI95[1], g.SNR)
	}
	// Loose bounds: the ±10% accuracy of this setup needs a quiet machine
	// (coordinator_long_test.go); here the point is that each element was
	// measured through its own lease. On a busy host the idle link once read
	// 0.25 [0.16, 0.34] beside the crossed link's 1.13, so the check is that
	// it reads well under the crossed one, not that its interval holds 0.
	crossed, uncrossed := byElement["link:front->back"].Gradient, byElement["link:front->idle"].Gradient
	require.Greater(t, crossed, 0.5, "the link the front crosses")
	require.Less(t, uncrossed, crossed/2, "the link nothing crosses")

	require.Zero(t, inj.activeLeases(), "no lease after the experiment")
	require.Zero(t, taggedRules(t, echo)+taggedRules(t, idle), "no tagged rule after the experiment")
}

// feedSteal sends the engine a hostmetrics-like system.cpu.utilization for
// host every interval until the test ends: two CPUs, with a steal share that
// wanders between 0 and 20%.
func feedSteal(t *testing.T, e *engine, host string, every time.Duration) {
	t.Helper()
	done := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() { close(done); <-stopped })
	go func() {
		defer close(stopped)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case now := <-tick.C:
				md, dps := gaugeOf(host, "system.cpu.utilization")
				steal := 0.1 + 0.1*math.Sin(float64(i)/7)
				for _, cpu := range []string{"cpu0", "cpu1"} {
					for state, v := range map[string]float64{"idle": 0.6, "user": 0.4 - steal, "steal": steal} {
						dp := dps.AppendEmpty()
						dp.SetTimestamp(pcommon.NewTimestampFromTime(now))
						dp.Attributes().PutStr("cpu", cpu)
						dp.Attributes().PutStr("state", state)
						dp.SetDoubleValue(v)
					}
				}
				if err := e.ConsumeMetrics(context.Background(), md); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
}
