package perfmodelexporter

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/injector"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/model"
)

// fakeCPU0 is a cpufreq tree with one CPU on the userspace governor at
// 2 GHz and P-states 100 MHz apart, as acpi-cpufreq shows them.
func fakeCPU0(t *testing.T) (root, setspeed string) {
	t.Helper()
	root = t.TempDir()
	dir := filepath.Join(root, "cpu0", "cpufreq")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	var states []string
	for f := 2000000; f >= 1000000; f -= 100000 {
		states = append(states, strconv.Itoa(f))
	}
	for name, v := range map[string]string{
		"scaling_available_governors":   "performance powersave userspace",
		"scaling_available_frequencies": strings.Join(states, " "),
		"scaling_governor":              "userspace",
		"cpuinfo_min_freq":              "1000000",
		"cpuinfo_max_freq":              "2000000",
		"scaling_cur_freq":              "2000000",
		"scaling_setspeed":              "2000000",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644))
	}
	return root, filepath.Join(dir, "scaling_setspeed")
}

// speedBound is a front whose requests are CPU work: workMs at 2 GHz,
// slower as the fake CPU's speed drops, plus a little jitter.
type speedBound struct {
	e        *engine
	setspeed string
	workMs   float64
	stop     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	batch    ptrace.Traces
}

func (s *speedBound) speedMHz() float64 {
	b, err := os.ReadFile(s.setspeed)
	if err != nil {
		return 2000
	}
	khz, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil || khz <= 0 {
		return 2000
	}
	return khz / 1000
}

func (s *speedBound) run(perSecond int) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		ship := time.NewTicker(50 * time.Millisecond)
		defer ship.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
				s.wg.Add(1)
				go s.request()
			case <-ship.C:
				s.mu.Lock()
				td := s.batch
				s.batch = ptrace.NewTraces()
				s.mu.Unlock()
				if td.SpanCount() > 0 {
					_ = s.e.ConsumeTraces(context.Background(), td)
				}
			}
		}
	}()
}

func (s *speedBound) request() {
	defer s.wg.Done()
	start := time.Now()
	ms := s.workMs*2000/s.speedMHz() + 0.3*mrand.NormFloat64()
	time.Sleep(time.Duration(max(ms, 0) * float64(time.Millisecond)))
	end := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.batch.ResourceSpans().Len() == 0 {
		rs := s.batch.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "front")
		rs.ScopeSpans().AppendEmpty()
	}
	sp := s.batch.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty()
	var tid pcommon.TraceID
	var sid pcommon.SpanID
	_, _ = crand.Read(tid[:])
	_, _ = crand.Read(sid[:])
	sp.SetTraceID(tid)
	sp.SetSpanID(sid)
	sp.SetName("GET /work")
	sp.SetKind(ptrace.SpanKindServer)
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
}

// A frequency element runs through the coordinator and the injector's real
// cpufreq backend on a fake sysfs tree: the lease drives cpu0 with the
// userspace governor, rounds the wave to a P-state and reports the step it
// took; the gradient is taken against b(f) = 1/(f − α·w) with α·w from the
// process's CPU readings, and matches the secant of a front whose work
// follows the speed; the CPU is back at its speed afterwards.
func TestFrequencyExperimentThroughInjector(t *testing.T) {
	root, setspeed := fakeCPU0(t)
	f := injector.NewFactory()
	icfg := f.CreateDefaultConfig().(*injector.Config)
	port := freePort(t)
	icfg.NetAddr.Endpoint = "127.0.0.1:" + strconv.Itoa(port)
	icfg.Insecure = true
	icfg.StateDir = t.TempDir()
	icfg.SysfsRoot = root
	icfg.Allowlist = injector.Allowlist{CPUs: []int{0}}
	icfg.MaxFreqStepKHz = 600000
	require.NoError(t, icfg.Validate())
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), icfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { _ = ext.Shutdown(context.Background()) })
	injURL := "http://127.0.0.1:" + strconv.Itoa(port)

	te := startLiveEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "p.db"), func(c *Config) {
		c.CapacityMHz = 4000 // 2 CPUs of 2000 MHz
		c.CoreMHz = 2000
		c.Experiments.Injector = injURL
		// A spike well above the noise (d 200, no perturbation bound): this
		// checks the plumbing and the basis, not how quiet a wave can be.
		c.Experiments.Train.K, c.Experiments.Train.N, c.Experiments.Train.Chunks, c.Experiments.Train.Scale = 8, 64, 3, 200
		c.Experiments.MaxPerturbation = 0
		c.Experiments.Frequencies = map[string]ExperimentFrequency{"cpu0": {CPUs: []int{0}, CPU: ExperimentCPU{Machine: "m1", Process: "front"}}}
	})
	// No CPU readings yet: α·w is unknown, and the request says so.
	require.Equal(t, http.StatusUnprocessableEntity, te.send("POST", api.PathExperiments, `{"element":"frequency:cpu0"}`, nil))
	require.Equal(t, http.StatusBadRequest, te.send("POST", api.PathExperiments, `{"element":"frequency:cpu9"}`, nil))
	te.ingest.AddCPU(time.Now().UnixNano(), model.ProcessKey("m1", "front"), 0.05, 0, 0) // 200 of 4000 MHz

	front := &speedBound{e: te.engine, setspeed: setspeed, workMs: 20, stop: make(chan struct{}), batch: ptrace.NewTraces()}
	front.run(200)
	t.Cleanup(func() { close(front.stop); front.wg.Wait() })

	begun := time.Now()
	ex := te.awaitExperiment(`{"element":"frequency:cpu0"}`, 90*time.Second, nil)
	t.Logf("frequency:cpu0: %s after %v (%s)", ex.Phase, time.Since(begun).Round(100*time.Millisecond), ex.Reason)
	require.Equal(t, "done", ex.Phase, ex.Reason)

	require.Len(t, ex.Gradients, 1)
	g := ex.Gradients[0]
	require.NotNil(t, g.Basis)
	require.Equal(t, "cpufreq", g.Basis.Kind)
	require.InDelta(t, 2000, g.Basis.Operating, 0)
	require.InDelta(t, 200, g.Basis.Alpha*g.Basis.Workload, 1e-9)

	var res gradient.Result
	require.NoError(t, json.Unmarshal(ex.Detail, &res))
	require.Len(t, res.Elements, 1)
	el := res.Elements[0]
	t.Logf("amplitude asked %.0f kHz, injected %.0f kHz (assumed %v); gradient %.0f ms·MHz ci95 [%.0f, %.0f] snr %.1f; notes %v",
		el.Amplitude, el.Injected, el.InjectedAssumed, g.Gradient, g.CI95[0], g.CI95[1], g.SNR, el.Notes)
	for tx, e := range el.Transactions {
		t.Logf("%s: %+v; on/off %+v; plan bins %.3fs k_d %d N %d A_d %.3f ms", tx, e, el.TimeDomain[tx], res.Plan.BinSeconds, res.Plan.Kd, res.Plan.N, res.Plan.AmplitudeMs)
	}
	require.False(t, el.AdaptiveInWindow, "a CPU wave keeps the separate adaptive phase")
	require.False(t, el.InjectedAssumed, "the injector reported the step it took")
	require.Zero(t, int64(el.Injected)%100000, "the step is a whole number of 100 MHz P-states")
	require.Positive(t, el.Injected)

	// rt = 40000/f ms; over the step s the basis moves by
	// 1/(f−s−200) − 1/(f−200) and the response time by 40000·(1/(f−s) − 1/f).
	fMHz, s := 2000.0, el.Injected/1000
	want := 40000 * (1/(fMHz-s) - 1/fMHz) / (1/(fMHz-s-200) - 1/(fMHz-200))
	require.GreaterOrEqual(t, g.SNR, 5.0)
	require.InEpsilon(t, want, g.Gradient, 0.2, "gradient %.0f, secant %.0f", g.Gradient, want)

	b, err := os.ReadFile(setspeed)
	require.NoError(t, err)
	require.Equal(t, "2000000", strings.TrimSpace(string(b)), "cpu0 is back at its speed")
	b, err = os.ReadFile(filepath.Join(root, "cpu0", "cpufreq", "scaling_governor"))
	require.NoError(t, err)
	require.Equal(t, "userspace", strings.TrimSpace(string(b)))

	// The prediction for 200 MHz less goes through the same basis.
	var pred api.Prediction
	require.Equal(t, http.StatusOK, te.send("POST", api.PathPredict, fmt.Sprintf(`{"baseline_ms":{%q:20},"changes":[{"element":"frequency:cpu0","delta":-200}]}`, g.Transaction), &pred))
	require.Len(t, pred.Transactions, 1)
	p := pred.Transactions[0].PredictedMs
	t.Logf("predicted at 1800 MHz: %.2f ms (the front's truth 22.22 ms)", p)
	require.InEpsilon(t, 40000/1800.0, p, 0.05)
}
