package perfmodelexporter

import (
	"net/http"
	"net/url"
	"time"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/model"
)

// maxLatencySteps bounds the points of a latency series when no step is
// given: a plot's width, and a bounded number of store queries.
const maxLatencySteps = 240

// latency answers GET /api/v1/latency: each service's SERVER latency per
// step (whole windows; by default the fewest windows that keep the range to
// maxLatencySteps points), merged from the windows' service-graph nodes.
func (e *engine) latency(r *http.Request, q url.Values) (any, error) {
	tr, err := e.timeRange(q)
	if err != nil {
		return nil, err
	}
	windows := (tr.To - tr.From) / e.window
	stepWindows := max(1, (windows+maxLatencySteps-1)/maxLatencySteps)
	if s := q.Get("step"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return nil, badf("step: want a positive duration such as 30s or 5m, got %q", s)
		}
		stepWindows = max(1, (int64(d/time.Second)+e.window-1)/e.window)
		if windows/stepWindows > 10*maxLatencySteps {
			return nil, badf("step %s gives %d points; at most %d", s, windows/stepWindows, 10*maxLatencySteps)
		}
	}
	step := stepWindows * e.window
	only := q.Get("service")
	out := api.Latency{TimeRange: tr, StepSeconds: step, Series: []api.ServiceLatency{}}
	byService := map[string]*api.ServiceLatency{}
	for from := tr.From; from < tr.To; from += step {
		nodes, err := e.query(r.Context(), model.KindGraphNode, api.TimeRange{From: from, To: min(from+step, tr.To)})
		if err != nil {
			return nil, err
		}
		for _, name := range sortedKeys(nodes) {
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
	for _, name := range sortedKeys(byService) {
		out.Series = append(out.Series, *byService[name])
	}
	return out, nil
}
