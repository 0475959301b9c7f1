package perfmodelexporter

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/store"
)

// experiments tracks the gradient experiments this instance coordinates.
type experiments struct {
	e       *engine
	mu      sync.Mutex
	running map[string]*api.Experiment
}

func newExperiments(e *engine) *experiments {
	return &experiments{e: e, running: map[string]*api.Experiment{}}
}

// abortAll stops every running experiment (their injector leases expire by
// themselves in any case).
func (x *experiments) abortAll(reason string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, ex := range x.running {
		ex.Phase, ex.Reason = "aborted", reason
	}
}

func (e *engine) listExperiments(r *http.Request, _ url.Values) (any, error) {
	out := api.Experiments{Experiments: []api.Experiment{}}
	all, err := store.MergeScan(r.Context(), e.st, store.Query{Kind: model.KindExperimnt, From: 0, To: 1 << 40}, model.Merge)
	if err != nil {
		return nil, err
	}
	for _, id := range sortedKeys(all) {
		var ex api.Experiment
		if err := json.Unmarshal(all[id], &ex); err != nil {
			return nil, err
		}
		out.Experiments = append(out.Experiments, ex)
	}
	return out, nil
}

func (e *engine) getExperiment(r *http.Request, _ url.Values) (any, error) {
	id := r.PathValue("id")
	all, err := store.MergeScan(r.Context(), e.st, store.Query{Kind: model.KindExperimnt, KeyPrefix: id, From: 0, To: 1 << 40}, model.Merge)
	if err != nil {
		return nil, err
	}
	b, ok := all[id]
	if !ok {
		return nil, statusError{http.StatusNotFound, "no experiment " + id}
	}
	var ex api.Experiment
	return ex, json.Unmarshal(b, &ex)
}

func (e *engine) startExperiment(*http.Request, url.Values) (any, error) {
	return nil, statusError{http.StatusNotImplemented, "the gradient coordinator is not available in this build"}
}

func (e *engine) abortExperiment(*http.Request, url.Values) (any, error) {
	return nil, statusError{http.StatusNotImplemented, "the gradient coordinator is not available in this build"}
}

// storedGradients returns every stored gradient, newest per element and
// transaction.
func (e *engine) storedGradients(r *http.Request) ([]api.Gradient, error) {
	all, err := store.MergeScan(r.Context(), e.st, store.Query{Kind: model.KindGradient, From: 0, To: 1 << 40}, model.Merge)
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
	all, err := e.storedGradients(r)
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
	all, err := e.storedGradients(r)
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

func (e *engine) predictGet(*http.Request, url.Values) (any, error) {
	return nil, statusError{http.StatusNotImplemented, "prediction is not available in this build"}
}

func (e *engine) predictPost(*http.Request, url.Values) (any, error) {
	return nil, statusError{http.StatusNotImplemented, "prediction is not available in this build"}
}

func (e *engine) workFactors(r *http.Request, q url.Values) (any, error) {
	tr, err := e.timeRange(q)
	if err != nil {
		return nil, err
	}
	return api.WorkFactors{TimeRange: tr, Machines: []api.MachineWorkFactors{}}, nil
}

func (e *engine) signatures(r *http.Request, q url.Values) (any, error) {
	tr, err := e.timeRange(q)
	if err != nil {
		return nil, err
	}
	return api.Signatures{TimeRange: tr, Signatures: []api.Signature{}}, nil
}

func (e *engine) compare(r *http.Request, q url.Values) (any, error) {
	for _, p := range []string{"service", "base", "candidate"} {
		if q.Get(p) == "" {
			return nil, badf("%s: required", p)
		}
	}
	return api.Comparison{Service: q.Get("service"), Base: q.Get("base"), Candidate: q.Get("candidate"), Transactions: []api.TransactionComparison{}}, nil
}
