package query

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/apierror"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/signature"
	"github.com/tierscope/tierscope/internal/store"
	"github.com/tierscope/tierscope/internal/workfactor"
)

// windowInputs are one window's model inputs, merged over shards.
type windowInputs struct {
	start int64
	cpu   map[string]*model.CPUStats
	flows map[string]*model.FlowCounts
	sigs  map[string]*model.SignatureWindow
}

// inputs reads the per-window inputs of the work-factor and signature models,
// window by window (the models need the time series, not the range's sum).
func (q *Reader) inputs(ctx context.Context, tr api.TimeRange, withFlows, withSigs bool) ([]windowInputs, error) {
	var out []windowInputs
	for w := tr.From; w < tr.To; w += q.set.Window {
		one := api.TimeRange{From: w, To: w + q.set.Window}
		wi := windowInputs{start: w}
		var err error
		if wi.cpu, err = queryOf[model.CPUStats](ctx, q, model.KindCPU, one, true); err != nil {
			return nil, err
		}
		if wi.flows, err = queryOf[model.FlowCounts](ctx, q, model.KindSpanRates, one, withFlows); err != nil {
			return nil, err
		}
		if wi.sigs, err = queryOf[model.SignatureWindow](ctx, q, model.KindSigWindow, one, withSigs); err != nil {
			return nil, err
		}
		out = append(out, wi)
	}
	return out, nil
}

// queryOf is query with the values typed; it returns an empty map unless want.
func queryOf[T any](ctx context.Context, q *Reader, kind string, tr api.TimeRange, want bool) (map[string]*T, error) {
	out := map[string]*T{}
	if !want {
		return out, nil
	}
	s, err := q.Query(ctx, kind, tr)
	if err != nil {
		return nil, err
	}
	for k, v := range s {
		out[k] = v.(*T)
	}
	return out, nil
}

// WorkFactors runs paper 002's estimator over the range's windows, one
// period per window: λ from the SERVER spans per flow and machine (only, when
// not empty), ρ from the machine's CPU utilization, Ω from configuration or
// the frequency metric. sigs, when not nil, are the range's signatures
// already computed, which the cross-check reuses.
func (q *Reader) WorkFactors(ctx context.Context, tr api.TimeRange, only string, sigs []signature.AppSignature) (api.WorkFactors, error) {
	perProcess, periods, err := q.WorkFactorPeriods(ctx, tr, only)
	if err != nil {
		return api.WorkFactors{}, err
	}
	wcfg := workfactor.DefaultConfig()
	wcfg.PerProcess = perProcess
	wcfg.HalfLife = q.set.HalfLife
	wcfg.SmoothHalfLife = q.set.SmoothingHalfLife
	wcfg.MaxHalfLife = max(wcfg.MaxHalfLife, wcfg.HalfLife) // the half-life configured is the shortest memory
	wcfg.Method = q.set.Method
	est, err := workfactor.New(wcfg)
	if err != nil {
		return api.WorkFactors{}, err
	}
	out := api.WorkFactors{TimeRange: tr, Machines: []api.MachineWorkFactors{}}
	series := map[string]*api.WorkFactorSeries{}
	var last *workfactor.Estimate
	machines := map[string]bool{}
	for _, p := range periods {
		for _, o := range p.Obs {
			if o.Process != "" {
				machines[model.ProcessKey(o.Machine, o.Process)] = true
			} else {
				machines[o.Machine] = true
			}
		}
		est2, err := est.AddPeriod(p.Number, p.Obs)
		if err != nil {
			return api.WorkFactors{}, err
		}
		last = est2
		for _, f := range est2.Flows {
			if f.WorkFactor == nil {
				continue
			}
			s := series[f.Flow]
			if s == nil {
				s = &api.WorkFactorSeries{Flow: f.Flow}
				series[f.Flow] = s
			}
			s.Times = append(s.Times, p.Start+q.set.Window)
			s.Values = append(s.Values, *f.WorkFactor)
		}
	}
	if last == nil {
		return out, nil
	}
	name := cmp.Or(only, strings.Join(slices.Sorted(maps.Keys(machines)), ","))
	mw := api.MachineWorkFactors{Machine: name, Flows: []api.FlowWorkFactor{}}
	if last.R2 != nil {
		mw.R2 = *last.R2
	}
	if last.MSE != nil {
		mw.MSE = *last.MSE
	}
	services, err := q.serviceTimes(ctx, tr, sigs)
	if err != nil {
		return api.WorkFactors{}, err
	}
	mw.HalfLifeWindows = last.HalfLife
	for _, g := range last.Groups {
		mw.Groups = append(mw.Groups, api.WorkFactorGroup{Flows: g.Flows, Reason: g.Reason})
	}
	if len(last.Background) > 0 && last.Background[0].MHz != nil {
		v := *last.Background[0].MHz
		mw.BackgroundMHz = &v
	}
	mw.Flows, mw.Agreement = q.crossChecked(last, services)
	for _, k := range slices.Sorted(maps.Keys(series)) {
		mw.Series = append(mw.Series, *series[k])
	}
	out.Machines = append(out.Machines, mw)
	return out, nil
}

// crossChecked is each solved flow's work factor with the signature's service
// time beside it, and the agreement per service (docs/design.md): the
// regression's demand, as milliseconds on one core of core_mhz, against the
// signature's service time (workfactor.CrossCheck).
func (q *Reader) crossChecked(last *workfactor.Estimate, services map[string]float64) ([]api.FlowWorkFactor, []api.ServiceAgreement) {
	flows := []api.FlowWorkFactor{}
	var agreement []api.ServiceAgreement
	var cross []workfactor.CrossItem
	for _, f := range last.Flows {
		fw := api.FlowWorkFactor{Flow: f.Flow, Combined: f.Combined}
		if f.WorkFactor == nil {
			continue // never solved: no number rather than a wrong one
		}
		fw.WorkFactor = *f.WorkFactor
		fw.Goodness = deref(f.Goodness)
		fw.AlphaRaw = deref(f.AlphaRaw)
		fw.AlphaSmoothed = deref(f.AlphaSmoothed)
		if st, ok := services[f.Flow]; ok {
			v := st
			fw.ServiceTimeMs = &v
			item := workfactor.CrossItem{Service: f.Flow, Flow: f.Flow, WorkFactor: fw.WorkFactor, Rate: 1, ServiceTimeMs: st}
			if a := workfactor.CrossCheck([]workfactor.CrossItem{item}, q.set.CoreMHz, workfactor.DefaultCrossTolerance); len(a) == 1 {
				fw.Disagrees = a[0].Disagrees
			}
			item.Service, _, _ = strings.Cut(f.Flow, " ") // model.FlowName: service, space, transaction
			item.Rate = f.Share
			cross = append(cross, item)
		}
		flows = append(flows, fw)
	}
	for _, a := range workfactor.CrossCheck(cross, q.set.CoreMHz, workfactor.DefaultCrossTolerance) {
		agreement = append(agreement, api.ServiceAgreement{Service: a.Service, ImpliedMs: a.ImpliedMs,
			ServiceTimeMs: a.ServiceTimeMs, Ratio: a.Ratio, Disagrees: a.Disagrees})
	}
	return flows, agreement
}

// WorkFactorPeriod is one window's observations for the work-factor model.
type WorkFactorPeriod struct {
	Number int64 // the window's number in the range, from 1: gaps are missing periods
	Start  int64
	Obs    []workfactor.Observation
}

// WorkFactorPeriods turns the range's windows into the regression's periods:
// λ from the SERVER spans per flow, ρ and Ω per machine, or per process when
// spans and process.cpu.utilization both name processes (paper 002 §4.6: those
// readings are far less noisy than the machine's, which include everything
// else the machine runs). Windows without a reading are left out.
func (q *Reader) WorkFactorPeriods(ctx context.Context, tr api.TimeRange, only string) (bool, []WorkFactorPeriod, error) {
	wins, err := q.inputs(ctx, tr, true, false)
	if err != nil {
		return false, nil, err
	}
	perProcess := false
	for _, w := range wins {
		for key := range w.flows {
			if strings.Contains(key, "/") && w.cpu[key] != nil {
				perProcess = true
			}
		}
	}
	var out []WorkFactorPeriod
	for i, w := range wins {
		var obs []workfactor.Observation
		for _, key := range slices.Sorted(maps.Keys(w.flows)) {
			fc := w.flows[key]
			machine, process, isProcess := strings.Cut(key, "/")
			if isProcess != perProcess || (only != "" && machine != only) {
				continue
			}
			c := w.cpu[key]
			if c == nil || c.Mean() < 0 {
				continue // no utilization for this machine in this window
			}
			mc := w.cpu[machine]
			if mc == nil {
				mc = c
			}
			omega := q.Capacity(machine, mc)
			if !(omega > 0) {
				continue
			}
			rates := make(map[string]float64, len(fc.Counts))
			for f, n := range fc.Counts {
				rates[f] = float64(n) / float64(q.set.Window)
			}
			obs = append(obs, workfactor.Observation{Machine: machine, Process: process, CapacityMHz: omega, Utilization: c.Mean(), Rates: rates})
		}
		if len(obs) > 0 {
			out = append(out, WorkFactorPeriod{Number: int64(i + 1), Start: w.start, Obs: obs})
		}
	}
	return perProcess, out, nil
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// profiles builds paper 004's latency profiles of the range: each window of
// each (service, version, transaction) with its machine's utilization.
func (q *Reader) profiles(ctx context.Context, tr api.TimeRange) ([]*signature.Profile, error) {
	wins, err := q.inputs(ctx, tr, false, true)
	if err != nil {
		return nil, err
	}
	byKey := map[string]*signature.Profile{}
	for _, w := range wins {
		for key, sw := range w.sigs {
			parts := strings.Split(key, "\x1f")
			if len(parts) != 3 || sw.Count == 0 {
				continue
			}
			c := w.cpu[sw.Machine]
			if c == nil || c.Mean() < 0 {
				continue
			}
			p := byKey[key]
			if p == nil {
				p = signature.NewProfile(signature.Key{Service: parts[0], Version: parts[1], Transaction: parts[2]})
				byKey[key] = p
			}
			p.Servers = max(p.Servers, c.LogicalCPUs)
			win := signature.WindowFromSums(sw.Count, float64(sw.SumLatencyNs)/1e6, sw.OutboundCalls, float64(sw.SumOutboundNs)/1e6, c.Mean())
			if _, _, err := p.Add(win); err != nil {
				continue // malformed window: counted by the profile's skip reasons
			}
		}
	}
	out := make([]*signature.Profile, 0, len(byKey))
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		out = append(out, byKey[k])
	}
	return out, nil
}

// AppSignatures are the range's application signatures (paper 004).
func (q *Reader) AppSignatures(ctx context.Context, tr api.TimeRange) ([]signature.AppSignature, error) {
	ps, err := q.profiles(ctx, tr)
	if err != nil {
		return nil, err
	}
	return signature.Signatures(ps, signature.DefaultOptions())
}

// serviceTimes maps flow names (service and transaction) to the newest
// version's service time, for the work-factor cross-check; sigs are
// computed when nil.
func (q *Reader) serviceTimes(ctx context.Context, tr api.TimeRange, sigs []signature.AppSignature) (map[string]float64, error) {
	if sigs == nil {
		var err error
		if sigs, err = q.AppSignatures(ctx, tr); err != nil {
			return nil, err
		}
	}
	out := map[string]float64{}
	for _, a := range sigs {
		for _, t := range a.Transactions {
			if t.OK() {
				out[model.FlowName(a.Service, t.Transaction)] = *t.ServiceTimeMs
			}
		}
	}
	return out, nil
}

func toAPISignature(a signature.AppSignature) api.Signature {
	s := api.Signature{Service: a.Service, Version: a.Version, Transactions: []api.TransactionSignature{}}
	for _, t := range a.Transactions {
		s.Transactions = append(s.Transactions, api.TransactionSignature{
			Transaction: t.Transaction, ServiceTimeMs: t.ServiceTimeMs, Status: t.Status,
			BucketsUsed: t.BucketsUsed, Spread: deref(t.Spread), Shape: t.SpreadClass, Profile: t.Profile,
		})
	}
	return s
}

// Signatures are the range's application signatures (paper 004), of one
// service and version when they are not empty.
func (q *Reader) Signatures(ctx context.Context, tr api.TimeRange, service, version string) (api.Signatures, error) {
	sigs, err := q.AppSignatures(ctx, tr)
	if err != nil {
		return api.Signatures{}, err
	}
	out := api.Signatures{TimeRange: tr, Signatures: []api.Signature{}}
	for _, a := range sigs {
		if (service != "" && a.Service != service) || (version != "" && a.Version != version) {
			continue
		}
		out.Signatures = append(out.Signatures, toAPISignature(a))
	}
	return out, nil
}

// Compare compares a service's base and candidate versions over the range;
// 404 when either has no signature in it.
func (q *Reader) Compare(ctx context.Context, tr api.TimeRange, service, base, candidate string) (api.Comparison, error) {
	sigs, err := q.AppSignatures(ctx, tr)
	if err != nil {
		return api.Comparison{}, err
	}
	c, err := compareVersions(sigs, service, base, candidate)
	if err != nil {
		return api.Comparison{}, apierror.New(http.StatusNotFound, "%s", err)
	}
	return c, nil
}

func compareVersions(sigs []signature.AppSignature, service, base, candidate string) (api.Comparison, error) {
	find := func(v string) *signature.AppSignature {
		i := slices.IndexFunc(sigs, func(a signature.AppSignature) bool { return a.Service == service && a.Version == v })
		if i < 0 {
			return nil
		}
		return &sigs[i]
	}
	b, c := find(base), find(candidate)
	if b == nil || c == nil {
		return api.Comparison{}, fmt.Errorf("no signature of %s version %q or %q in the range", service, base, candidate)
	}
	ac := signature.CompareApps(b, c, signature.DefaultCompareOptions())
	out := api.Comparison{Service: service, Base: base, Candidate: candidate, Transactions: []api.TransactionComparison{}}
	for _, t := range ac.Transactions {
		basis := t.Reason
		if t.Test != nil {
			basis = fmt.Sprintf("Mann-Whitney U over per-bucket service times: %+v", *t.Test)
		}
		out.Transactions = append(out.Transactions, api.TransactionComparison{
			Transaction: t.Transaction, BaseMs: t.BaseMs, CandidateMs: t.CandidateMs, DeltaMs: t.DeltaMs, DeltaPct: t.DeltaPct,
			Changed: t.Changed, Verdict: t.Verdict, Basis: basis, Confidence: deref(t.Confidence),
		})
	}
	return out, nil
}

// VersionChange is a transaction whose service time changed from a
// service's previous version (Base) to its newest (Candidate).
type VersionChange struct {
	Service, Base, Candidate string
	api.TransactionComparison
}

// VersionChanges compares, for every service with two or more versions in
// the last day, the newest version with the one before, and returns the
// transactions that changed.
func (q *Reader) VersionChanges(ctx context.Context) ([]VersionChange, error) {
	now := q.set.Now().Unix()
	tr := api.TimeRange{From: alignDown(now-24*3600, q.set.Window), To: alignDown(now, q.set.Window)}
	sigs, err := q.AppSignatures(ctx, tr)
	if err != nil {
		return nil, err
	}
	versions := map[string][]string{}
	for _, a := range sigs {
		versions[a.Service] = append(versions[a.Service], a.Version)
	}
	seen, err := q.firstSeen(ctx, tr)
	if err != nil {
		return nil, err
	}
	var out []VersionChange
	for _, service := range slices.Sorted(maps.Keys(versions)) {
		vs := versions[service]
		if len(vs) < 2 {
			continue
		}
		// Versions in the order they first appeared.
		slices.SortFunc(vs, func(a, b string) int {
			return cmp.Or(cmp.Compare(seen[[2]string{service, a}], seen[[2]string{service, b}]), strings.Compare(a, b))
		})
		base, cand := vs[len(vs)-2], vs[len(vs)-1]
		c, err := compareVersions(sigs, service, base, cand)
		if err != nil {
			continue
		}
		for _, t := range c.Transactions {
			if t.Changed {
				out = append(out, VersionChange{Service: service, Base: base, Candidate: cand, TransactionComparison: t})
			}
		}
	}
	return out, nil
}

// firstSeen maps service and version to the first window in tr with data of
// them, from one scan of the stored keys.
func (q *Reader) firstSeen(ctx context.Context, tr api.TimeRange) (map[[2]string]int64, error) {
	out := map[[2]string]int64{}
	err := q.st.Scan(ctx, store.Query{Kind: model.KindSigWindow, From: tr.From, To: tr.To}, func(r store.Record) error {
		parts := strings.SplitN(r.Key, "\x1f", 3)
		if len(parts) != 3 {
			return nil
		}
		k := [2]string{parts[0], parts[1]}
		if t, ok := out[k]; !ok || r.WindowStart < t {
			out[k] = r.WindowStart
		}
		return ctx.Err()
	})
	return out, err
}
