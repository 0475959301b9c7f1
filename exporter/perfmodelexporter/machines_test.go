package perfmodelexporter

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/tierscope/tierscope/internal/api"
)

// hostmetrics scraped in this collector sets no resource attributes: without
// host_name its readings are this host's, under the name SDKs give it, so that
// they meet the spans of applications on the same host (they used to be
// dropped, and every model that needs CPU stayed empty).
func TestHostmetricsWithoutHostNameAreThisHost(t *testing.T) {
	host, err := os.Hostname()
	require.NoError(t, err)
	now := loadStart.Add(5 * time.Minute)
	te := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"), "a", now, nil)
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("system.cpu.utilization")
	dps := m.SetEmptyGauge().DataPoints()
	for _, state := range []struct {
		name string
		v    float64
	}{{"idle", 0.75}, {"user", 0.25}} {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(now.Add(-2 * time.Minute)))
		dp.SetDoubleValue(state.v)
		dp.Attributes().PutStr("cpu", "cpu0")
		dp.Attributes().PutStr("state", state.name)
	}
	require.NoError(t, te.ConsumeMetrics(context.Background(), md))
	require.NoError(t, te.flush(context.Background(), true))
	te.query.ResetCache()
	var c api.Catalog
	require.Equal(t, 200, te.get(api.PathCatalog, &c))
	require.Equal(t, []string{host}, c.Machines)
}

// The open windows span twice trace_wait and a window: with the 5 s windows
// and 20 s trace_wait of make run, 3 windows (15 s) closed before any trace
// arrived.
func TestOpenWindowsCoverTraceWait(t *testing.T) {
	for _, tc := range []struct {
		window, traceWait time.Duration
		open              int
		want              int64
	}{
		{time.Minute, 15 * time.Second, 3, 3}, // the defaults: unchanged
		{5 * time.Second, 20 * time.Second, 3, 9},
		{10 * time.Second, 20 * time.Second, 3, 5},
		{time.Second, 2 * time.Second, 3, 5},
		{5 * time.Second, 2 * time.Second, 12, 12}, // more configured: kept
	} {
		cfg := createDefaultConfig().(*Config)
		cfg.Window, cfg.TraceWait, cfg.OpenWindows = tc.window, tc.traceWait, tc.open
		got := openWindowsOf(cfg)
		require.Equal(t, tc.want, got, "window %v, trace_wait %v", tc.window, tc.traceWait)
		require.GreaterOrEqual(t, (got-1)*int64(tc.window/time.Second), 2*int64(tc.traceWait/time.Second))
	}
}
