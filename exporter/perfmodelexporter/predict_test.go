package perfmodelexporter

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/coordinator"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/store"
)

func TestPredictFromStoredGradients(t *testing.T) {
	te := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"), "a", loadStart, nil)
	g := api.Gradient{Element: "link:app->db", Transaction: "Home", Gradient: 3, CI95: [2]float64{2.8, 3.2}, Measured: loadStart.Unix()}
	b, err := json.Marshal(g)
	require.NoError(t, err)
	require.NoError(t, te.st.Put(context.Background(), []store.Record{{Kind: model.KindGradient, Key: g.Element + "\x1f" + g.Transaction, Shard: "a", WindowStart: alignDown(g.Measured, 60), Resolution: 60, Payload: b}}))

	var p api.Prediction
	require.Equal(t, 200, te.get(api.PathPredict+"?change=link:app->db=%2B20&baseline=Home=100,Search=50", &p))
	require.Len(t, p.Transactions, 1, "Search has no gradient on the link")
	require.InDelta(t, 160, p.Transactions[0].PredictedMs, 1e-9, "100 + 3·20")
	require.Less(t, p.Transactions[0].CI95[0], 160.0)
	require.Greater(t, p.Transactions[0].CI95[1], 160.0)

	resp, err := http.Post(te.url+api.PathPredict, "application/json", strings.NewReader(`{"baseline_ms":{"Home":100},"changes":[{"element":"link:app->db","delta":-10}]}`))
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	resp.Body.Close()
	require.InDelta(t, 70, p.Transactions[0].PredictedMs, 1e-9)

	var er api.ErrorResponse
	require.Equal(t, 400, te.get(api.PathPredict+"?change=link:app->db=lots", &er))
	require.Contains(t, er.Error, "not a number")
	require.Equal(t, 422, te.get(api.PathPredict+"?change=link:web->app=5&baseline=Home=100", &er))
	var gs api.Gradients
	require.Equal(t, 200, te.get(api.PathGradients+"?transaction=Home", &gs))
	require.Len(t, gs.Gradients, 1)
	metrics := scrapeMetrics(t, te.url)
	require.Contains(t, metrics, `tierscope_gradient{element="link:app->db",side="",transaction="Home"} 3`)
	require.Contains(t, metrics, `tierscope_gradient_ci95_lower{element="link:app->db",side="",transaction="Home"} 2.8`)
}

// scrapeMetrics reads the exporter's /metrics.
func scrapeMetrics(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + api.PathMetrics)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

// A capacity measured below and above its operating point keeps both
// gradients (gradientKey), and each prediction uses the one on its side.
func TestPredictCapacityFromBothSides(t *testing.T) {
	te := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"), "a", loadStart, nil)
	basis := func(side string) *api.Basis {
		return &api.Basis{Kind: "capacity", Operating: 0.8, FrequencyMHz: 1000, Alpha: 10, Workload: 40, Side: side}
	}
	var recs []store.Record
	for _, g := range []api.Gradient{
		{Element: "capacity:db", Transaction: "Cap", Gradient: 10000, CI95: [2]float64{9000, 11000}, Basis: basis("below"), Interval: &[2]float64{0.6, 0.8}},
		{Element: "capacity:db", Transaction: "Cap", Gradient: 6000, CI95: [2]float64{5000, 7000}, Basis: basis("above"), Interval: &[2]float64{0.8, 1.0}},
	} {
		g.Measured = loadStart.Unix()
		b, err := json.Marshal(g)
		require.NoError(t, err)
		recs = append(recs, store.Record{Kind: model.KindGradient, Key: coordinator.GradientKey(g), Shard: "a", WindowStart: alignDown(g.Measured, 60), Resolution: 60, Payload: b})
	}
	require.NoError(t, te.st.Put(context.Background(), recs))
	var gs api.Gradients
	require.Equal(t, 200, te.get(api.PathGradients+"?element=capacity:db", &gs))
	require.Len(t, gs.Gradients, 2, "one gradient per side")
	// Both sides are metrics of their own.
	metrics := scrapeMetrics(t, te.url)
	require.Contains(t, metrics, `tierscope_gradient{element="capacity:db",side="below",transaction="Cap"} 10000`)
	require.Contains(t, metrics, `tierscope_gradient{element="capacity:db",side="above",transaction="Cap"} 6000`)
	require.Contains(t, metrics, `tierscope_gradient_ci95_upper{element="capacity:db",side="above",transaction="Cap"} 7000`)

	for _, tc := range []struct {
		delta, want float64
		side        string
	}{
		{-0.3, 26 + 10000*(1.0/100-1.0/400), "below"},      // past the below wave
		{+0.3, 26 + 6000*(1.0/700-1.0/400), "above"},       // past the above wave
		{-0.1, 26 + 8000*(1.0/300-1.0/400), "above+below"}, // halfway between the reaches
	} {
		var p api.Prediction
		require.Equal(t, 200, te.get(api.PathPredict+"?change=capacity:db="+strconv.FormatFloat(tc.delta, 'f', -1, 64)+"&baseline=Cap=26", &p))
		require.Len(t, p.Transactions, 1)
		require.InDelta(t, tc.want, p.Transactions[0].PredictedMs, 1e-6, "change %v", tc.delta)
		require.Equal(t, tc.side, p.Transactions[0].Terms[0].Side, "change %v", tc.delta)
	}
}
