package perfmodelexporter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/golden"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/store"
)

// The API's JSON on fixed inputs, byte for byte: the documents a refactor of
// the engine must leave unchanged. Regenerate (only when a change is meant)
// with `go test ./exporter/perfmodelexporter -run TestGoldenAPI -update`.
func TestGoldenAPI(t *testing.T) {
	var rec strings.Builder

	// Spans of the load generator's shop: paths, graph, catalog, health.
	traces := generate(t, 3000)
	te := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"), "a", loadStart.Add(5*time.Minute), nil)
	te.feed(traces, 1)
	rng := fmt.Sprintf("?from=%d&to=%d", alignDown(loadStart.Unix(), 60), alignDown(loadStart.Unix(), 60)+5*60)
	for _, path := range []string{
		api.PathHealth,
		api.PathPaths + rng,
		api.PathPaths + rng + "&top=2&service=app",
		api.PathGraph + rng,
		api.PathGraph + rng + "&transaction=" + firstTransaction(t, te, rng),
		api.PathCatalog + rng,
		api.PathExperiments,
		api.PathGraph + "?from=yesterday",
	} {
		goldenGet(t, te, &rec, path)
	}

	// A machine with known work factors and a release that slows one route:
	// work factors, signatures and their comparison.
	const windows = 60
	ta := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "a.db"), "a", loadStart.Add(2*time.Hour), func(c *Config) {
		c.CapacityMHz = 1000
		c.CoreMHz = 1000
	})
	feedKnownSystem(t, ta, windows)
	rng = fmt.Sprintf("?from=%d&to=%d", alignDown(loadStart.Unix(), 60), alignDown(loadStart.Unix(), 60)+windows*60)
	for _, path := range []string{
		api.PathWorkFactors + rng,
		api.PathSignatures + rng + "&service=web",
		api.PathCompare + rng + "&service=web&base=v1&candidate=v2",
	} {
		goldenGet(t, ta, &rec, path)
	}

	// A stored gradient: gradients and predictions.
	g := api.Gradient{Element: "link:app->db", Transaction: "Home", Gradient: 3, CI95: [2]float64{2.8, 3.2}, Measured: loadStart.Unix()}
	b, err := json.Marshal(g)
	require.NoError(t, err)
	require.NoError(t, ta.st.Put(context.Background(), []store.Record{{Kind: model.KindGradient, Key: g.Element + "\x1f" + g.Transaction,
		Shard: "a", WindowStart: alignDown(g.Measured, 60), Resolution: 60, Payload: b}}))
	ta.query.ResetCache()
	for _, path := range []string{
		api.PathGradients + "?transaction=Home",
		api.PathPredict + "?change=link:app->db=%2B20&baseline=Home=100,Search=50",
	} {
		goldenGet(t, ta, &rec, path)
	}
	golden.Compare(t, filepath.Join("testdata", "golden", "api.txt"), rec.String())
}

// firstTransaction is the first transaction the catalog lists for web.
func firstTransaction(t *testing.T, te *testEngine, rng string) string {
	var c api.Catalog
	require.Equal(t, 200, te.get(api.PathCatalog+rng, &c))
	for _, s := range c.Services {
		if s.Name == "web" && len(s.Transactions) > 0 {
			return strings.ReplaceAll(s.Transactions[0], " ", "%20")
		}
	}
	t.Fatal("web has no transaction")
	return ""
}

// goldenGet records a GET's status and body, re-indented; the health
// document's clock readings (uptime, last flush) are masked.
func goldenGet(t *testing.T, te *testEngine, rec *strings.Builder, path string) {
	t.Helper()
	resp, err := http.Get(te.url + path)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	if path == api.PathHealth {
		var h map[string]any
		require.NoError(t, json.Unmarshal(body, &h))
		for _, k := range []string{"uptime_seconds", "last_flush"} {
			if _, ok := h[k]; ok {
				h[k] = "<clock>"
			}
		}
		body, err = json.Marshal(h)
		require.NoError(t, err)
	}
	var out bytes.Buffer
	require.NoError(t, json.Indent(&out, body, "", " "), string(body))
	fmt.Fprintf(rec, "GET %s\n%d %s\n%s\n", path, resp.StatusCode, resp.Header.Get("Content-Type"), out.String())
}
