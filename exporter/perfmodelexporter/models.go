package perfmodelexporter

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/apierror"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/store"
)

// storedGradients returns every stored gradient, newest per element and
// transaction, and per side for a capacity (gradientKey).
func (e *engine) storedGradients(ctx context.Context) ([]api.Gradient, error) {
	all, err := store.MergeScan(ctx, e.st, store.Query{Kind: model.KindGradient, From: 0, To: 1 << 40}, model.Merge)
	if err != nil {
		return nil, err
	}
	out := []api.Gradient{}
	for _, k := range sortedKeys(all) {
		var g api.Gradient
		if err := json.Unmarshal(all[k], &g); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

func (e *engine) gradients(r *http.Request, q url.Values) (any, error) {
	all, err := e.storedGradients(r.Context())
	if err != nil {
		return nil, err
	}
	tx, el := q.Get("transaction"), q.Get("element")
	all = slices.DeleteFunc(all, func(g api.Gradient) bool {
		return (tx != "" && g.Transaction != tx) || (el != "" && g.Element != el)
	})
	return api.Gradients{Gradients: all}, nil
}

// linkGradients maps "source->target" to the transaction's link gradient.
func (e *engine) linkGradients(r *http.Request, transaction string) (map[string]float64, error) {
	all, err := e.storedGradients(r.Context())
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

// predictGet reads change=element=delta (repeatable) and baseline=T1=120,T2=80.
func (e *engine) predictGet(r *http.Request, q url.Values) (any, error) {
	var req api.PredictRequest
	for _, c := range q["change"] {
		el, d, ok := strings.Cut(c, "=")
		if !ok || el == "" {
			return nil, badf("change: want element=delta (e.g. link:app->db=+20), got %q", c)
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(d, "ms"), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, badf("change %q: delta %q is not a number", c, d)
		}
		req.Changes = append(req.Changes, api.Change{Element: el, Delta: v})
	}
	if b := q.Get("baseline"); b != "" {
		req.BaselineMs = map[string]float64{}
		for _, kv := range strings.Split(b, ",") {
			tx, v, ok := strings.Cut(kv, "=")
			ms, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil || !(ms >= 0) {
				return nil, badf("baseline: want T1=120,T2=80 (ms), got %q", kv)
			}
			req.BaselineMs[tx] = ms
		}
	}
	return e.predict(r, req)
}

func (e *engine) predictPost(r *http.Request, _ url.Values) (any, error) {
	var req api.PredictRequest
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, badf("body: %v", err)
	}
	return e.predict(r, req)
}

// predict applies paper 000 §5.3's Taylor prediction (internal/gradient) to
// every transaction with a gradient on every changed element. The baseline is
// given, or the transaction's mean latency over the last hour.
func (e *engine) predict(r *http.Request, req api.PredictRequest) (any, error) {
	if len(req.Changes) == 0 {
		return nil, badf("changes: at least one change is required")
	}
	stored, err := e.storedGradients(r.Context())
	if err != nil {
		return nil, err
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
			return nil, badf("changes[%d].delta: must be a number, got %v", i, c.Delta)
		}
		changes[i] = gradient.Change{Element: c.Element, Delta: c.Delta}
	}
	baselines := req.BaselineMs
	if baselines == nil {
		if baselines, err = e.meanLatencies(r); err != nil {
			return nil, err
		}
	}
	out := api.Prediction{Transactions: []api.TransactionPrediction{}}
	for _, tx := range sortedKeys(baselines) {
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
		return nil, apierror.New(http.StatusUnprocessableEntity, "no transaction has gradients on every changed element; run an experiment first")
	}
	return out, nil
}

// meanLatencies is each transaction's mean SERVER latency over the last hour.
func (e *engine) meanLatencies(r *http.Request) (map[string]float64, error) {
	tr, err := e.timeRange(url.Values{})
	if err != nil {
		return nil, err
	}
	sigs, err := e.query(r.Context(), model.KindSigWindow, tr)
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
