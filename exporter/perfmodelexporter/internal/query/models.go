package query

import (
	"context"
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/apierror"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/store"
)

// StoredGradients returns every stored gradient, newest per element and
// transaction, and per side for a capacity (gradientKey).
func (q *Reader) StoredGradients(ctx context.Context) ([]api.Gradient, error) {
	all, err := store.MergeScan(ctx, q.st, store.Query{Kind: model.KindGradient, From: 0, To: 1 << 40}, model.Merge)
	if err != nil {
		return nil, err
	}
	out := []api.Gradient{}
	for _, k := range slices.Sorted(maps.Keys(all)) {
		var g api.Gradient
		if err := json.Unmarshal(all[k], &g); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// Gradients are the stored gradients, of one transaction and element when
// they are not empty.
func (q *Reader) Gradients(ctx context.Context, transaction, element string) (api.Gradients, error) {
	all, err := q.StoredGradients(ctx)
	if err != nil {
		return api.Gradients{}, err
	}
	all = slices.DeleteFunc(all, func(g api.Gradient) bool {
		return (transaction != "" && g.Transaction != transaction) || (element != "" && g.Element != element)
	})
	return api.Gradients{Gradients: all}, nil
}

// linkGradients maps "source->target" to the transaction's link gradient.
func (q *Reader) linkGradients(ctx context.Context, transaction string) (map[string]float64, error) {
	all, err := q.StoredGradients(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, g := range all {
		if g.Transaction == transaction && strings.HasPrefix(g.Element, "link:") {
			out[strings.TrimPrefix(g.Element, "link:")] = g.Gradient
		}
	}
	return out, nil
}

// Predict applies paper 000 §5.3's Taylor prediction (internal/gradient) to
// every transaction with a gradient on every changed element. The baseline is
// given, or the transaction's mean latency over the last hour.
func (q *Reader) Predict(ctx context.Context, req api.PredictRequest) (api.Prediction, error) {
	if len(req.Changes) == 0 {
		return api.Prediction{}, apierror.Badf("changes: at least one change is required")
	}
	stored, err := q.StoredGradients(ctx)
	if err != nil {
		return api.Prediction{}, err
	}
	var grads []gradient.Gradient
	for _, g := range stored {
		basis := gradient.Link()
		if g.Basis != nil {
			basis = gradient.Basis{Kind: gradient.Kind(g.Basis.Kind), Operating: g.Basis.Operating, FrequencyMHz: g.Basis.FrequencyMHz,
				Alpha: g.Basis.Alpha, Workload: g.Basis.Workload}.WithSide(g.Basis.Side)
		}
		if basis.Validate() != nil {
			continue
		}
		grads = append(grads, gradient.Gradient{Element: g.Element, Transaction: g.Transaction, Basis: basis,
			Gradient: g.Gradient, StdErr: gradient.StdErrFromCI95(g.Gradient, g.CI95), Interval: g.Interval})
	}
	changes := make([]gradient.Change, len(req.Changes))
	for i, c := range req.Changes {
		if !(c.Delta == c.Delta) || math.IsInf(c.Delta, 0) {
			return api.Prediction{}, apierror.Badf("changes[%d].delta: must be a number, got %v", i, c.Delta)
		}
		changes[i] = gradient.Change{Element: c.Element, Delta: c.Delta}
	}
	baselines := req.BaselineMs
	if baselines == nil {
		if baselines, err = q.meanLatencies(ctx); err != nil {
			return api.Prediction{}, err
		}
	}
	out := api.Prediction{Transactions: []api.TransactionPrediction{}}
	for _, tx := range slices.Sorted(maps.Keys(baselines)) {
		p, err := gradient.Predict(tx, baselines[tx], 0, grads, changes)
		if err != nil {
			continue // no gradient of this transaction on some changed element
		}
		tp := api.TransactionPrediction{Transaction: tx, BaselineMs: p.BaselineMs, PredictedMs: p.PredictedMs, CI95: p.CI95}
		for _, t := range p.Terms {
			tp.Terms = append(tp.Terms, api.PredictionTerm{Element: t.Element, BasisChange: t.BasisChange, Gradient: t.Gradient, ContributionMs: t.ContributionMs, Side: t.Side})
		}
		out.Transactions = append(out.Transactions, tp)
	}
	if len(out.Transactions) == 0 {
		return api.Prediction{}, apierror.New(http.StatusUnprocessableEntity, "no transaction has gradients on every changed element; run an experiment first")
	}
	return out, nil
}

// meanLatencies is each transaction's mean SERVER latency over the last hour.
func (q *Reader) meanLatencies(ctx context.Context) (map[string]float64, error) {
	sigs, err := q.Query(ctx, model.KindSigWindow, q.LastHour())
	if err != nil {
		return nil, err
	}
	sum, n := map[string]float64{}, map[string]int64{}
	for key, v := range sigs {
		parts := strings.Split(key, "\x1f")
		if len(parts) != 3 {
			continue
		}
		sw := v.(*model.SignatureWindow)
		sum[parts[2]] += float64(sw.SumLatencyNs) / 1e6
		n[parts[2]] += sw.Count
	}
	out := map[string]float64{}
	for tx, c := range n {
		if c > 0 {
			out[tx] = sum[tx] / float64(c)
		}
	}
	return out, nil
}
