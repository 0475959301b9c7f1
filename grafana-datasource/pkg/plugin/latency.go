package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/data"

	"github.com/tierscope/tierscope/internal/api"
)

// queryLatency returns each service's latency over time: one time-series
// frame per service with its mean, p50 and p99 in milliseconds and its
// requests per step. The step follows the panel's resolution (the query's
// interval), rounded up by the API to whole windows.
func queryLatency(ctx context.Context, client *APIClient, tr backend.TimeRange, interval time.Duration, model QueryModel) (data.Frames, error) {
	params := rangeParams(tr)
	setIfNotEmpty(params, "service", model.Service)
	if interval >= time.Second {
		params.Set("step", interval.Round(time.Second).String())
	}
	var doc api.Latency
	if err := client.get(ctx, api.PathLatency, params, &doc); err != nil {
		return nil, err
	}
	return latencyFrames(doc, executed(api.PathLatency, params))
}

func latencyFrames(doc api.Latency, executedQuery string) (data.Frames, error) {
	meta := func() *data.FrameMeta {
		return &data.FrameMeta{Type: data.FrameTypeTimeSeriesMulti, TypeVersion: data.FrameTypeVersion{0, 1},
			PreferredVisualization: data.VisTypeGraph, ExecutedQueryString: executedQuery}
	}
	var frames data.Frames
	for _, s := range doc.Series {
		n := len(s.Times)
		if len(s.Requests) != n || len(s.MeanMs) != n || len(s.P50Ms) != n || len(s.P99Ms) != n {
			return nil, fmt.Errorf("the latency series of %s has %d times but %d, %d, %d and %d values",
				s.Service, n, len(s.Requests), len(s.MeanMs), len(s.P50Ms), len(s.P99Ms))
		}
		times := make([]time.Time, n)
		for i, t := range s.Times {
			times[i] = unixTime(t)
		}
		labels := data.Labels{"service": s.Service}
		ms := func(stat string) *data.FieldConfig {
			return &data.FieldConfig{DisplayNameFromDS: s.Service + " " + stat, Unit: "ms"}
		}
		frame := data.NewFrame(s.Service,
			data.NewField("time", nil, times),
			data.NewField("p99_ms", labels, append([]float64(nil), s.P99Ms...)).SetConfig(ms("p99")),
			data.NewField("p50_ms", labels, append([]float64(nil), s.P50Ms...)).SetConfig(ms("p50")),
			data.NewField("mean_ms", labels, append([]float64(nil), s.MeanMs...)).SetConfig(ms("mean")),
			data.NewField("requests", labels, append([]int64(nil), s.Requests...)).SetConfig(&data.FieldConfig{
				DisplayNameFromDS: s.Service + " requests", Unit: "short"}),
		)
		frame.Meta = meta()
		frames = append(frames, frame)
	}
	if len(frames) == 0 {
		// The shape the time-series panel draws, without rows.
		empty := data.NewFrame("latency", data.NewField("time", nil, []time.Time{}), data.NewField("p99_ms", nil, []float64{}))
		empty.Meta = meta()
		frames = append(frames, empty)
	}
	return frames, nil
}
