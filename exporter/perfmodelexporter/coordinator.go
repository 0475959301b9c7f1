package perfmodelexporter

import (
	"encoding/json"
	"net/http"
	"net/url"
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

// observe sees every completed SERVER span (e.mu held; must be fast).
func (x *experiments) observe(s *model.Span) {}

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
