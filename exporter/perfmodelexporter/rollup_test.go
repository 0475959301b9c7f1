package perfmodelexporter

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/sim/loadgen"
)

// Hour rollups answer exactly what the hour's windows answer, across shards,
// and are only used once every shard that wrote in the hour has rolled it up.
func TestHourRollupsAnswerExactly(t *testing.T) {
	hour := time.Unix(alignDown(loadStart.Unix(), hourBlock)+hourBlock, 0)
	cfg := loadgen.DefaultConfig()
	cfg.DropFraction = 0
	cfg.Start = hour
	traces, err := loadgen.Generate(cfg, 4000)
	require.NoError(t, err)
	now := hour.Add(2 * time.Hour)
	q := "?from=" + itoa(hour.Unix()) + "&to=" + itoa(hour.Unix()+hourBlock)

	// One engine, windows only.
	single := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "single.db"), "single", now, nil)
	single.feed(traces, 3)

	// Two shards in one database, rolled up one after the other.
	db := "sqlite://" + filepath.Join(t.TempDir(), "shared.db")
	a := startEngine(t, db, "a", now, nil)
	b := startEngine(t, db, "b", now, nil)
	var toA, toB []int
	for i := range traces {
		if i%3 == 0 {
			toA = append(toA, i)
		} else {
			toB = append(toB, i)
		}
	}
	feedSubset(a, traces, toA, 3)
	feedSubset(b, traces, toB, 3)
	ctx := context.Background()
	closed := hour.Unix() + hourBlock // as if the engines had moved past the hour

	a.query.RollUp(ctx, closed)
	usable, err := a.query.RollupUsable(ctx, hour.Unix(), hour.Unix()+hourBlock)
	require.NoError(t, err)
	require.False(t, usable[hour.Unix()], "shard b has not rolled the hour up yet")
	b.query.RollUp(ctx, closed)
	usable, err = a.query.RollupUsable(ctx, hour.Unix(), hour.Unix()+hourBlock)
	require.NoError(t, err)
	require.True(t, usable[hour.Unix()])

	for _, path := range []string{api.PathPaths, api.PathGraph, api.PathCatalog} {
		a.query.ResetCache()
		var want, got json.RawMessage
		require.Equal(t, 200, single.get(path+q, &want))
		require.Equal(t, 200, a.get(path+q, &got))
		require.JSONEq(t, string(want), string(got), path)
	}
	var p api.PathsResponse
	require.Equal(t, 200, a.get(api.PathPaths+q, &p))
	require.Equal(t, int64(len(traces)), p.Traces)
}
