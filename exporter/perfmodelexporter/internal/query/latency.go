package query

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/apierror"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/model"
)

// maxLatencySteps bounds the points of a latency series when no step is
// given: a plot's width, and a bounded number of store queries.
const maxLatencySteps = 240

// Latency is each service's SERVER latency (of only, when not empty) per
// step, a duration such as 30s (whole windows; by default, "", the fewest
// windows that keep the range to maxLatencySteps points), merged from the
// windows' service-graph nodes.
func (q *Reader) Latency(ctx context.Context, tr api.TimeRange, step, only string) (api.Latency, error) {
	windows := (tr.To - tr.From) / q.set.Window
	stepWindows := max(1, (windows+maxLatencySteps-1)/maxLatencySteps)
	if s := step; s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return api.Latency{}, apierror.Badf("step: want a positive duration such as 30s or 5m, got %q", s)
		}
		stepWindows = max(1, (int64(d/time.Second)+q.set.Window-1)/q.set.Window)
		if windows/stepWindows > 10*maxLatencySteps {
			return api.Latency{}, apierror.Badf("step %s gives %d points; at most %d", s, windows/stepWindows, 10*maxLatencySteps)
		}
	}
	stepSeconds := stepWindows * q.set.Window
	out := api.Latency{TimeRange: tr, StepSeconds: stepSeconds, Series: []api.ServiceLatency{}}
	byService := map[string]*api.ServiceLatency{}
	for from := tr.From; from < tr.To; from += stepSeconds {
		nodes, err := q.Query(ctx, model.KindGraphNode, api.TimeRange{From: from, To: min(from+stepSeconds, tr.To)})
		if err != nil {
			return api.Latency{}, err
		}
		for _, name := range slices.Sorted(maps.Keys(nodes)) {
			cs := nodes[name].(*model.CallStats)
			qs := cs.Latency.Quantiles()
			if (only != "" && name != only) || cs.Requests == 0 || qs == nil {
				continue
			}
			s := byService[name]
			if s == nil {
				s = &api.ServiceLatency{Service: name}
				byService[name] = s
			}
			s.Times = append(s.Times, from)
			s.Requests = append(s.Requests, cs.Requests)
			s.MeanMs = append(s.MeanMs, qs.Mean)
			s.P50Ms = append(s.P50Ms, qs.P50)
			s.P99Ms = append(s.P99Ms, qs.P99)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byService)) {
		out.Series = append(out.Series, *byService[name])
	}
	return out, nil
}
