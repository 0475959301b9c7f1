package perfmodelexporter

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/sim/loadgen"
	"github.com/tierscope/tierscope/internal/store/pgtest"
)

// startPostgres starts a throwaway PostgreSQL (Debian's binaries) for one test.
// CI must never skip it.
func startPostgres(t *testing.T) *pgtest.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := pgtest.Start(ctx)
	if errors.Is(err, pgtest.ErrNotInstalled) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// Mergeability (docs/design.md, "beyond one machine"): one stream split by trace
// over two exporter instances writing to one PostgreSQL gives, through either
// instance's API, exactly the paths and graph of one instance that saw it all.
func TestSplitOverTwoInstancesMergesExactly(t *testing.T) {
	srv := startPostgres(t)
	ctx := context.Background()
	sharedDSN, dropShared, err := srv.NewSchema(ctx)
	require.NoError(t, err)
	t.Cleanup(dropShared)

	traces := generate(t, 6000) // about 110 s: two windows and a bit
	now := loadStart.Add(10 * time.Minute)
	single := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "single.db"), "single", now, nil)
	single.feed(traces, 7)

	a := startEngine(t, sharedDSN, "analyzer-a", now, nil)
	b := startEngine(t, sharedDSN, "analyzer-b", now, nil)
	var toA, toB []int
	for i := range traces {
		if (i*2654435761)%7 < 3 { // an uneven, interleaved split
			toA = append(toA, i)
		} else {
			toB = append(toB, i)
		}
	}
	feedSubset(a, traces, toA, 7)
	feedSubset(b, traces, toB, 7)
	require.NotEmpty(t, toA)
	require.NotEmpty(t, toB)

	for _, path := range []string{api.PathPaths, api.PathGraph, api.PathCatalog} {
		var want, gotA, gotB json.RawMessage
		require.Equal(t, 200, single.get(path, &want))
		require.Equal(t, 200, a.get(path, &gotA))
		require.Equal(t, 200, b.get(path, &gotB))
		require.JSONEq(t, string(want), string(gotA), path)
		require.JSONEq(t, string(want), string(gotB), path)
	}
	var p api.PathsResponse
	require.Equal(t, 200, a.get(api.PathPaths, &p))
	require.Equal(t, int64(len(traces)), p.Traces)
	t.Logf("%d traces split %d/%d over two instances on PostgreSQL: %d patterns, merged result identical to one instance",
		len(traces), len(toA), len(toB), len(p.Patterns))
}

// feedSubset feeds the traces at idx. Span ids differ from the single
// instance's, which the statistics never depend on.
func feedSubset(te *testEngine, traces []loadgen.Trace, idx []int, seed int64) {
	sub := make([]loadgen.Trace, len(idx))
	for k, i := range idx {
		sub[k] = traces[i]
	}
	te.feed(sub, seed)
}
