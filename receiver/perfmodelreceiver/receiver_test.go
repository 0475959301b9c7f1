package perfmodelreceiver

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/tierscope/tierscope/internal/api"
)

func TestToMetricsAttributesAndUnits(t *testing.T) {
	st := 2.5
	wf := api.WorkFactors{Machines: []api.MachineWorkFactors{{Machine: "vm/testbed-tiers",
		Flows: []api.FlowWorkFactor{{Flow: "web /txn/Home", WorkFactor: 3.25}, {Flow: "db /query/get_item", WorkFactor: 0.75}}}}}
	sigs := api.Signatures{Signatures: []api.Signature{{Service: "web", Version: "v1", Transactions: []api.TransactionSignature{
		{Transaction: "/txn/Home", ServiceTimeMs: &st, Status: "ok"},
		{Transaction: "/txn/Login", Status: "insufficient data"},
	}}}}
	grads := api.Gradients{Gradients: []api.Gradient{{Element: "link:web->app", Transaction: "/txn/Home", Gradient: 0.98}}}
	md := toMetrics(pcommon.Timestamp(7), wf, sigs, grads)

	got := map[string]pmetric.Metric{}
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	for i := 0; i < ms.Len(); i++ {
		got[ms.At(i).Name()] = ms.At(i)
	}
	require.Len(t, got, 3)

	w := got[MetricWorkFactor]
	require.Equal(t, "{megacycle}", w.Unit())
	require.Equal(t, 2, w.Gauge().DataPoints().Len())
	a := w.Gauge().DataPoints().At(0).Attributes().AsRaw()
	require.Equal(t, map[string]any{"service.name": "web", AttrTransaction: "/txn/Home", "host.name": "vm", "process.executable.name": "testbed-tiers"}, a)
	require.Equal(t, 3.25, w.Gauge().DataPoints().At(0).DoubleValue())

	s := got[MetricServiceTime]
	require.Equal(t, "s", s.Unit())
	require.Equal(t, 1, s.Gauge().DataPoints().Len(), "no point for insufficient data")
	require.InDelta(t, 0.0025, s.Gauge().DataPoints().At(0).DoubleValue(), 1e-12, "seconds, as the servicegraph connector")
	require.Equal(t, map[string]any{"service.name": "web", "service.version": "v1", AttrTransaction: "/txn/Home"},
		s.Gauge().DataPoints().At(0).Attributes().AsRaw())

	g := got[MetricGradient]
	require.Equal(t, "1", g.Unit())
	require.Equal(t, map[string]any{AttrElement: "link:web->app", AttrTransaction: "/txn/Home"}, g.Gauge().DataPoints().At(0).Attributes().AsRaw())
	require.Equal(t, pcommon.Timestamp(7), g.Gauge().DataPoints().At(0).Timestamp())
}

func TestToMetricsEmptyModelsHaveNoMetrics(t *testing.T) {
	md := toMetrics(1, api.WorkFactors{}, api.Signatures{}, api.Gradients{})
	require.Zero(t, md.MetricCount())
}

func TestConfigValidate(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, cfg.Validate())
	for name, mutate := range map[string]func(*Config){
		"no scheme":     func(c *Config) { c.Endpoint = "127.0.0.1:8790" },
		"zero interval": func(c *Config) { c.CollectionInterval = 0 },
		"short range":   func(c *Config) { c.Range = 0 },
	} {
		c := *cfg
		mutate(&c)
		require.Error(t, c.Validate(), name)
	}
}
