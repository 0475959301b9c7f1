package perfmodelexporter

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/workfactor"
)

// One machine of 1000 MHz serves two flows with known CPU costs (20 and 50
// megacycles per request) at rates that change every minute; its utilization
// follows. Service times are 5 ms (GET /a) and 12 ms (GET /b) under processor
// sharing, R = S/(1−U); version v2 adds 2 ms to GET /a.
func feedKnownSystem(t *testing.T, te *testEngine, windows int) { feedSystem(t, te, windows, false) }

// feedSystem, with perProcess, names the server process on its spans and
// reports its CPU as process.cpu.utilization, while the machine's
// system.cpu.utilization carries a random background of 0–30%.
func feedSystem(t *testing.T, te *testEngine, windows int, perProcess bool) {
	rng := rand.New(rand.NewPCG(4, 2))
	alpha := map[string]float64{"GET /a": 20, "GET /b": 50}
	for w := range windows {
		start := time.Unix(alignDown(loadStart.Unix(), 60), 0).Add(time.Duration(w) * time.Minute)
		rates := map[string]float64{"GET /a": 2 + 8*rng.Float64(), "GET /b": 1 + 5*rng.Float64()}
		util := (rates["GET /a"]*alpha["GET /a"] + rates["GET /b"]*alpha["GET /b"]) / 1000
		version := "v1"
		if w >= windows/2 {
			version = "v2"
		}
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "web")
		rs.Resource().Attributes().PutStr("service.version", version)
		rs.Resource().Attributes().PutStr("host.name", "m1")
		if perProcess {
			rs.Resource().Attributes().PutStr("process.executable.name", "webd")
		}
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		id := uint64(w) << 32
		for _, route := range []string{"GET /a", "GET /b"} {
			s := map[string]float64{"GET /a": 5, "GET /b": 12}[route]
			if route == "GET /a" && version == "v2" {
				s += 2
			}
			n := int(rates[route] * 60)
			for i := range n {
				id++
				sp := spans.AppendEmpty()
				var tid [16]byte
				var sid [8]byte
				for b := range 8 {
					tid[b] = byte(id >> (8 * b))
					sid[b] = byte(id >> (8 * b))
				}
				sp.SetTraceID(tid)
				sp.SetSpanID(sid)
				sp.SetKind(ptrace.SpanKindServer)
				sp.SetName(route)
				sp.Attributes().PutStr("http.route", route)
				at := start.Add(time.Duration(i) * time.Minute / time.Duration(n+1))
				d := s / (1 - util) * (0.9 + 0.2*rng.Float64())
				sp.SetStartTimestamp(pcommon.NewTimestampFromTime(at))
				sp.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Duration(d * float64(time.Millisecond)))))
			}
		}
		require.NoError(t, te.ConsumeTraces(context.Background(), td))
		md, dps := gaugeOf("m1", "system.cpu.utilization")
		machineUtil := util
		if perProcess {
			machineUtil = min(util+0.3*rng.Float64(), 1)
			prm := md.ResourceMetrics().AppendEmpty()
			prm.Resource().Attributes().PutStr("host.name", "m1")
			prm.Resource().Attributes().PutStr("process.executable.name", "webd")
			pm := prm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
			pm.SetName("process.cpu.utilization")
			pdps := pm.SetEmptyGauge().DataPoints()
			for state, v := range map[string]float64{"user": util * 0.7, "system": util * 0.3} {
				dp := pdps.AppendEmpty()
				dp.SetTimestamp(pcommon.NewTimestampFromTime(start.Add(30 * time.Second)))
				dp.Attributes().PutStr("state", state)
				dp.SetDoubleValue(v)
			}
		}
		for state, v := range map[string]float64{"idle": 1 - machineUtil, "user": machineUtil} {
			dp := dps.AppendEmpty()
			dp.SetTimestamp(pcommon.NewTimestampFromTime(start.Add(30 * time.Second)))
			dp.Attributes().PutStr("cpu", "cpu0")
			dp.Attributes().PutStr("state", state)
			dp.SetDoubleValue(v)
		}
		require.NoError(t, te.ConsumeMetrics(context.Background(), md))
	}
	te.completeAll()
	require.NoError(t, te.flush(context.Background(), false))
	te.query.ResetCache()
}

func TestWorkFactorsAndSignaturesFromTelemetry(t *testing.T) {
	const windows = 60
	te := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"), "a", loadStart.Add(2*time.Hour), func(c *Config) {
		c.CapacityMHz = 1000
		c.CoreMHz = 1000
	})
	feedKnownSystem(t, te, windows)
	rng := fmt.Sprintf("?from=%d&to=%d", alignDown(loadStart.Unix(), 60), alignDown(loadStart.Unix(), 60)+windows*60)

	var wf api.WorkFactors
	require.Equal(t, 200, te.get(api.PathWorkFactors+rng, &wf))
	require.Len(t, wf.Machines, 1)
	got := map[string]float64{}
	for _, f := range wf.Machines[0].Flows {
		got[f.Flow] = f.WorkFactor
	}
	t.Logf("work factors: %v (true 20 and 50), R² %.4f", got, wf.Machines[0].R2)
	require.InDelta(t, 20, got["web GET /a"], 2)
	require.InDelta(t, 50, got["web GET /b"], 5)
	require.NotEmpty(t, wf.Machines[0].Series)

	var sigs api.Signatures
	require.Equal(t, 200, te.get(api.PathSignatures+rng+"&service=web", &sigs))
	require.Len(t, sigs.Signatures, 2)
	for _, s := range sigs.Signatures {
		for _, tx := range s.Transactions {
			t.Logf("%s %s %s: S = %v ms (%s, %d buckets)", s.Service, s.Version, tx.Transaction, deref(tx.ServiceTimeMs), tx.Status, tx.BucketsUsed)
		}
	}
	var cmp api.Comparison
	require.Equal(t, 200, te.get(api.PathCompare+rng+"&service=web&base=v1&candidate=v2", &cmp))
	verdict := map[string]string{}
	for _, tx := range cmp.Transactions {
		verdict[tx.Transaction] = tx.Verdict
	}
	require.Equal(t, "changed", verdict["GET /a"], "+2 ms on GET /a")
	require.Equal(t, "unchanged", verdict["GET /b"])
	var er api.ErrorResponse
	require.Equal(t, 404, te.get(api.PathCompare+rng+"&service=web&base=v1&candidate=v9", &er))

	// The new version's change is logged once, as a structured event.
	core, logs := observer.New(zap.InfoLevel)
	te.set.Logger = zap.New(core)
	te.checkNewVersions(context.Background())
	te.checkNewVersions(context.Background())
	events := logs.FilterField(zap.String("event.name", "tierscope.signature.changed")).All()
	require.Len(t, events, 1)
	fields := events[0].ContextMap()
	require.Equal(t, "GET /a", fields["transaction"])
	require.Equal(t, "v1", fields["base.version"])
	require.Equal(t, "v2", fields["service.version"])
	// The memory of logged changes is this check's changes, bounded by
	// limits.max_version_changes; past it a change is counted, not kept
	// nor logged.
	require.Len(t, te.reported, 1)
	te.cfg.Limits.MaxVersionChanges = 0
	te.checkNewVersions(context.Background())
	require.Empty(t, te.reported)
	require.Len(t, logs.FilterField(zap.String("event.name", "tierscope.signature.changed")).All(), 1)
	te.cfg.Limits.MaxVersionChanges = 1000

	// Derived gauges, of the last hour: move the clock to the data's end.
	te.setClock(func() time.Time { return time.Unix(alignDown(loadStart.Unix(), 60)+windows*60, 0) })
	resp, err := http.Get(te.url + api.PathMetrics)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), `tierscope_work_factor_megacycles{flow="web GET /a",host_name=`)
	require.Contains(t, string(body), `tierscope_service_time_seconds{service_name="web",service_version="v2",transaction="GET /a"}`)
}

// Per-process readings (paper 002 §4.6) recover the work factors although the
// machine runs a random 0–30% of other work.
func TestWorkFactorsPerProcess(t *testing.T) {
	const windows = 40
	te := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"), "a", loadStart.Add(2*time.Hour), func(c *Config) { c.CapacityMHz = 1000 })
	feedSystem(t, te, windows, true)
	rng := fmt.Sprintf("?from=%d&to=%d", alignDown(loadStart.Unix(), 60), alignDown(loadStart.Unix(), 60)+windows*60)
	var wf api.WorkFactors
	require.Equal(t, 200, te.get(api.PathWorkFactors+rng, &wf))
	require.Len(t, wf.Machines, 1)
	require.Equal(t, "m1/webd", wf.Machines[0].Machine)
	got := map[string]float64{}
	for _, f := range wf.Machines[0].Flows {
		got[f.Flow] = f.WorkFactor
	}
	t.Logf("per-process work factors: %v (true 20 and 50)", got)
	require.InDelta(t, 20, got["web GET /a"], 2)
	require.InDelta(t, 50, got["web GET /b"], 5)

	// The samples endpoint serves the regression's inputs: replayed through
	// the estimator, they give the API's work factors exactly.
	resp, err := http.Get(te.url + api.PathWorkFactorSamples + rng)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "text/csv; charset=utf-8", resp.Header.Get("Content-Type"))
	rows, err := csv.NewReader(resp.Body).ReadAll()
	require.NoError(t, err)
	require.Equal(t, []string{"period", "machine", "capacity_mhz", "cpu_utilization", "flow", "rate", "process"}, rows[0])
	require.Len(t, rows, 1+2*windows, "two flows per window")
	cfg := workfactor.DefaultConfig()
	cfg.PerProcess = true
	est, err := workfactor.New(cfg)
	require.NoError(t, err)
	var last *workfactor.Estimate
	for i := 1; i < len(rows); i += 2 {
		obs := workfactor.Observation{Machine: rows[i][1], Process: rows[i][6], Rates: map[string]float64{}}
		obs.CapacityMHz, _ = strconv.ParseFloat(rows[i][2], 64)
		obs.Utilization, _ = strconv.ParseFloat(rows[i][3], 64)
		for _, r := range rows[i : i+2] {
			require.Equal(t, rows[i][0], r[0], "one window's rows are adjacent")
			obs.Rates[r[4]], _ = strconv.ParseFloat(r[5], 64)
		}
		period, err := strconv.ParseInt(rows[i][0], 10, 64)
		require.NoError(t, err)
		last, err = est.AddPeriod(period, []workfactor.Observation{obs})
		require.NoError(t, err)
	}
	for _, f := range last.Flows {
		require.Equal(t, got[f.Flow], *f.WorkFactor, f.Flow)
	}

	var er api.ErrorResponse
	require.Equal(t, 400, te.get(api.PathWorkFactorSamples+rng+"&flow=x", &er))
	require.Contains(t, er.Error, "unknown query parameter")
}
