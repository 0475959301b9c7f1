package workfactor

import (
	"cmp"
	"math"
	"slices"
)

// CrossItem is one flow for the cross-check with the application signature
// (paper 004): the regression's work factor and the signature's service time
// S = R·(1−U) estimate the same CPU demand per request, two ways.
type CrossItem struct {
	// Service groups flows; Flow names one.
	Service, Flow string
	// WorkFactor is α, in standard megacycles per request.
	WorkFactor float64
	// Rate weighs the flow within its service (requests per second, or any
	// proportional measure such as the estimate's Share).
	Rate float64
	// ServiceTimeMs is the signature's service time; NaN or ≤ 0 when none.
	ServiceTimeMs float64
}

// Agreement is the cross-check of one service (or flow).
type Agreement struct {
	Service string   `json:"service"`
	Flows   []string `json:"flows"`
	// ImpliedMs is the rate-weighted mean work factor as milliseconds of one
	// core of the given speed: α/coreMHz·1000. ServiceTimeMs is the same mean
	// of the signature's service times.
	ImpliedMs     float64 `json:"implied_ms"`
	ServiceTimeMs float64 `json:"service_time_ms"`
	// Ratio is ImpliedMs/ServiceTimeMs; Disagrees is |Ratio − 1| > tolerance.
	Ratio     float64 `json:"ratio"`
	Disagrees bool    `json:"disagrees"`
}

// DefaultCrossTolerance is the relative difference from which the two
// estimates disagree.
const DefaultCrossTolerance = 0.25

// CrossCheck compares, per service, the regression's demand with the
// signature's, over the flows that have both (and a positive rate). The
// signature measures a request's CPU time on one core of coreMHz standard MHz
// (a machine of c cores has Ω = c·coreMHz): it reads the same work as
// α/coreMHz seconds. A disagreement means one of the two models is wrong for
// that service: background CPU the regression gave to its flows, a
// non-CPU bottleneck in the latency, a collinear partner, or a multi-core
// machine without Profile.Servers. Services are in name order.
func CrossCheck(items []CrossItem, coreMHz, tolerance float64) []Agreement {
	if !(coreMHz > 0) {
		return nil
	}
	type acc struct {
		flows       []string
		w, imp, sig float64
	}
	by := map[string]*acc{}
	for _, it := range items {
		if !(it.ServiceTimeMs > 0) || !(it.Rate > 0) || math.IsNaN(it.WorkFactor) || math.IsInf(it.WorkFactor, 0) || math.IsInf(it.ServiceTimeMs, 0) || math.IsInf(it.Rate, 0) {
			continue
		}
		a := by[it.Service]
		if a == nil {
			a = &acc{}
			by[it.Service] = a
		}
		a.flows = append(a.flows, it.Flow)
		a.w += it.Rate
		a.imp += it.Rate * it.WorkFactor / coreMHz * 1000
		a.sig += it.Rate * it.ServiceTimeMs
	}
	out := make([]Agreement, 0, len(by))
	for s, a := range by {
		g := Agreement{Service: s, Flows: a.flows, ImpliedMs: a.imp / a.w, ServiceTimeMs: a.sig / a.w}
		slices.Sort(g.Flows)
		g.Ratio = g.ImpliedMs / g.ServiceTimeMs
		g.Disagrees = math.Abs(g.Ratio-1) > tolerance
		out = append(out, g)
	}
	slices.SortFunc(out, func(x, y Agreement) int { return cmp.Compare(x.Service, y.Service) })
	return out
}
