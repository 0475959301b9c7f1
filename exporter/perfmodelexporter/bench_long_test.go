//go:build long

package perfmodelexporter

// The API latency requirement over a day of windows; `make bench` runs it.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/query"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/span"
	"github.com/tierscope/tierscope/internal/span/spantest"
	"github.com/tierscope/tierscope/internal/store"
)

// synthWindows writes 24 h of 1-minute windows of a 100-service system
// (100 nodes, 200 edges, 50 patterns per window) straight into the store.
func synthWindows(t testing.TB, st store.Store, end int64) {
	rng := rand.New(rand.NewPCG(1, 1))
	const services = 100
	var out []store.Record
	names := span.NewNames()
	for w := end - 24*3600; w < end; w += 60 {
		win := model.NewWindow(w, model.Limits{MaxServices: 1000, MaxEdges: 10000, MaxPatterns: 1000})
		for p := range 50 {
			// A chain of 3-5 services per pattern, 20 traces each.
			hops := 3 + p%3
			for range 20 {
				var spans []spantest.Named
				start := w*1e9 + rng.Int64N(50e9)
				for h := range hops {
					svc := fmt.Sprintf("svc-%02d", (p*7+h*13)%services)
					d := int64(hops-h) * (5e6 + rng.Int64N(5e6))
					spans = append(spans, spantest.Named{ID: uint64(h + 1), ParentID: uint64(h), Service: svc, Kind: span.KindServer,
						Start: start + int64(h)*1e6, End: start + int64(h)*1e6 + d, Transaction: "GET /x", Machine: svc})
				}
				win.AddTrace(spantest.Spans(names, spans...), names)
			}
		}
		recs, err := win.Records()
		require.NoError(t, err)
		for _, r := range recs {
			out = append(out, store.Record{Kind: r.Kind, Key: r.Key, Shard: "s", WindowStart: w, Resolution: 60, Payload: r.Payload})
		}
		out = append(out, store.Record{Kind: query.ShardWindowKind, Key: "s", Shard: "s", WindowStart: w, Resolution: 60, Payload: []byte("1")})
		if len(out) > 20000 {
			require.NoError(t, st.Put(context.Background(), out))
			out = out[:0]
		}
	}
	require.NoError(t, st.Put(context.Background(), out))
}

// The API over 24 h of 1-minute windows of 100 services: p99 of each query.
func TestAPILatency24h(t *testing.T) {
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "api.db")
	end := alignDown(loadStart.Unix(), 60)
	st, err := store.Open(context.Background(), dsn)
	require.NoError(t, err)
	t0 := time.Now()
	synthWindows(t, st, end)
	require.NoError(t, st.Close())
	t.Logf("wrote 1440 windows in %v", time.Since(t0).Round(time.Millisecond))
	te := startEngine(t, dsn, "s", time.Unix(end, 0), nil)
	ctx := context.Background()
	t0 = time.Now()
	te.query.RollUp(ctx, end) // as if this engine had written the day
	t.Logf("rolling up 24 hours: %v", time.Since(t0).Round(time.Millisecond))
	q := fmt.Sprintf("?from=%d&to=%d", end-24*3600, end)
	for _, path := range []string{api.PathGraph, api.PathPaths, api.PathCatalog} {
		for _, cold := range []bool{true, false} {
			var lat []time.Duration
			for range 20 {
				if cold {
					te.query.ResetCache()
				}
				s := time.Now()
				resp, err := http.Get(te.url + path + q)
				require.NoError(t, err)
				require.Equal(t, 200, resp.StatusCode)
				resp.Body.Close()
				lat = append(lat, time.Since(s))
			}
			slices.Sort(lat)
			t.Logf("%s over 24 h, cache %s: p50 %v p99 %v", path, map[bool]string{true: "cold", false: "warm"}[cold],
				lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
		}
	}
}
