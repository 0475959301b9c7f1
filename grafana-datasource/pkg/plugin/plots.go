package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"math/cmplx"
	"net/url"
	"sort"
	"strings"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/grafana/grafana-plugin-sdk-go/data"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/gradient"
)

// queryProfiles returns each transaction's signature profile, its mean front
// latency against CPU utilization (paper 004): one frame per service version
// and transaction, utilization ascending, for Grafana's trend or XY panels.
func queryProfiles(ctx context.Context, client *APIClient, tr backend.TimeRange, model QueryModel) (data.Frames, error) {
	params := rangeParams(tr)
	setIfNotEmpty(params, "service", model.Service)
	setIfNotEmpty(params, "version", model.Version)
	var doc api.Signatures
	if err := client.get(ctx, api.PathSignatures, params, &doc); err != nil {
		return nil, err
	}
	executedQuery := executed(api.PathSignatures, params)
	transaction := strings.TrimSpace(model.Transaction)
	var frames data.Frames
	for _, s := range doc.Signatures {
		for _, t := range s.Transactions {
			if len(t.Profile) == 0 || (transaction != "" && t.Transaction != transaction) {
				continue
			}
			profile := append([][3]float64(nil), t.Profile...)
			sort.Slice(profile, func(i, j int) bool { return profile[i][0] < profile[j][0] })
			labels := data.Labels{"service": s.Service, "version": s.Version, "transaction": t.Transaction}
			name := fmt.Sprintf("%s %s %s", s.Service, s.Version, t.Transaction)
			utilization := make([]float64, len(profile))
			latency := make([]float64, len(profile))
			count := make([]float64, len(profile))
			for i, p := range profile {
				utilization[i], count[i], latency[i] = p[0], p[1], p[2]
			}
			frame := data.NewFrame("profile",
				data.NewField("utilization", nil, utilization).SetConfig(&data.FieldConfig{DisplayName: "CPU utilization", Unit: "percentunit"}),
				data.NewField("front_latency_ms", labels, latency).SetConfig(&data.FieldConfig{DisplayNameFromDS: name, Unit: "ms"}),
				data.NewField("count", labels, count).SetConfig(&data.FieldConfig{DisplayName: "transactions", Custom: map[string]any{"hideFrom": map[string]bool{"viz": true}}}),
			)
			frame.Meta = &data.FrameMeta{ExecutedQueryString: executedQuery, PreferredVisualization: data.VisTypeGraph}
			frames = append(frames, frame)
		}
	}
	return frames, nil
}

// querySpectrum returns an experiment's training spectrum (paper 000 §3): the
// baseline's noise at each frequency the injection could use, the frequency
// chosen, and the experiment's progress, from GET /api/v1/experiments/{id}
// (the newest experiment when the query names none).
func querySpectrum(ctx context.Context, client *APIClient, model QueryModel) (data.Frames, error) {
	id := strings.TrimSpace(model.Experiment)
	if id == "" {
		var list api.Experiments
		if err := client.get(ctx, api.PathExperiments, nil, &list); err != nil {
			return nil, err
		}
		var newest *api.Experiment
		for i := range list.Experiments {
			if newest == nil || list.Experiments[i].Started > newest.Started {
				newest = &list.Experiments[i]
			}
		}
		if newest == nil {
			return nil, nil // explained by explainEmpty
		}
		id = newest.ID
	}
	path := api.PathExperiments + "/" + url.PathEscape(id)
	var x api.Experiment
	if err := client.get(ctx, path, nil, &x); err != nil {
		return nil, err
	}
	var result gradient.Result
	if len(x.Detail) > 0 {
		if err := json.Unmarshal(x.Detail, &result); err != nil {
			return nil, fmt.Errorf("experiment %s: its detail is not an experiment result: %w", id, err)
		}
	}
	frame := data.NewFrame("spectrum",
		data.NewField("frequency_hz", nil, []float64{}).SetConfig(&data.FieldConfig{DisplayName: "frequency", Unit: "hertz"}),
		data.NewField("noise_ms", nil, []float64{}).SetConfig(&data.FieldConfig{DisplayName: "baseline noise σ", Unit: "ms"}),
		data.NewField("baseline_ms", nil, []float64{}).SetConfig(&data.FieldConfig{DisplayName: "baseline |mean|", Unit: "ms"}),
		data.NewField("chosen_ms", nil, []*float64{}).SetConfig(&data.FieldConfig{DisplayName: "injection frequency", Unit: "ms"}),
	)
	plan := result.Plan
	executedQuery := fmt.Sprintf("GET %s (%s, %s, %.0f%%)", path, x.Element, x.Phase, x.Percent)
	frame.Meta = &data.FrameMeta{ExecutedQueryString: executedQuery, PreferredVisualization: data.VisTypeGraph}
	if plan == nil || plan.N == 0 || plan.BinSeconds <= 0 || len(plan.BaselineFFTStd) == 0 {
		addNotice(frame, fmt.Sprintf("experiment %s on %s is %s (%.0f%%): its spectrum appears once the training phase has chosen the bins and the frequency",
			x.ID, x.Element, x.Phase, x.Percent))
		return data.Frames{frame}, nil
	}
	// k = 0 is the mean, not a frequency the square wave can use.
	for k := 1; k < len(plan.BaselineFFTStd) && k <= plan.N/2; k++ {
		noise := cmplx.Abs(plan.BaselineFFTStd[k].Value())
		var mean float64
		if k < len(plan.BaselineFFTMean) {
			mean = cmplx.Abs(plan.BaselineFFTMean[k].Value())
		}
		var chosen *float64
		if k == plan.Kd {
			chosen = &noise
		}
		frame.AppendRow(float64(k)/(float64(plan.N)*plan.BinSeconds), noise, mean, chosen)
	}
	addNotice(frame, fmt.Sprintf("experiment %s on %s: %s, %.0f%%; injecting at %.4g Hz (k_d %d of N %d, bins of %.3g s)",
		x.ID, x.Element, x.Phase, x.Percent, plan.FrequencyHz, plan.Kd, plan.N, plan.BinSeconds))
	return data.Frames{frame}, nil
}
