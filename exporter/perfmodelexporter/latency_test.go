package perfmodelexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierscope/tierscope/internal/api"
)

// The latency series adds up to the graph: every request of the range in
// exactly one step, steps in order and aligned to the windows.
func TestLatencyOverTime(t *testing.T) {
	traces := generate(t, 3000) // about 54 s of requests from loadStart
	te := startEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "m.db"), "a", loadStart.Add(5*time.Minute),
		func(c *Config) { c.Window = 10 * time.Second })
	te.feed(traces, 1)
	rng := "?from=" + loadStart.Add(-time.Minute).Format(time.RFC3339) + "&to=" + loadStart.Add(2*time.Minute).Format(time.RFC3339)

	var g api.Graph
	require.Equal(t, 200, te.get(api.PathGraph+rng, &g))
	want := map[string]int64{}
	for _, n := range g.Nodes {
		want[n.ID] = n.Requests
	}
	for _, step := range []string{"", "&step=30s"} {
		var l api.Latency
		require.Equal(t, 200, te.get(api.PathLatency+rng+step, &l))
		wantStep := map[string]int64{"": 10, "&step=30s": 30}[step]
		require.Equal(t, wantStep, l.StepSeconds)
		got := map[string]int64{}
		for _, s := range l.Series {
			require.Len(t, s.Requests, len(s.Times))
			require.Len(t, s.P99Ms, len(s.Times))
			for i, ts := range s.Times {
				require.Zero(t, (ts-l.From)%l.StepSeconds, "steps start on the step grid")
				if i > 0 {
					require.Greater(t, ts, s.Times[i-1])
				}
				require.Positive(t, s.MeanMs[i])
				require.LessOrEqual(t, s.P50Ms[i], s.P99Ms[i])
				got[s.Service] += s.Requests[i]
			}
		}
		require.Equal(t, want, got, "step %q", step)
		require.Equal(t, int64(len(traces)), got["web"])
	}
	var web api.Latency
	require.Equal(t, 200, te.get(api.PathLatency+rng+"&service=web", &web))
	require.Len(t, web.Series, 1)
	require.Equal(t, "web", web.Series[0].Service)
	require.Equal(t, 400, te.get(api.PathLatency+"?step=-1s", nil))
}
