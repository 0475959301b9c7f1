package gradient

import (
	"slices"

	"github.com/tierscope/tierscope/internal/spectral"
)

// Crossings is the set of the experiment's elements one request crossed:
// bit i stands for Config.Elements[i]. A link is crossed when the request
// called over it, a server when the request was served there.
type Crossings uint64

// Has reports whether the request crossed element i.
func (c Crossings) Has(i int) bool { return i < MaxRoutedElements && c&(1<<uint(i)) != 0 }

// MaxRoutedElements is the most elements Crossings can name.
const MaxRoutedElements = 64

// The share of a transaction's requests that must not cross an element for
// them to serve as its reference: below the lower bound the reference is
// too sparse to follow the noise bin by bin; above the upper one the
// transaction hardly crosses the element, and the series would be adjusted
// for nearly itself, leaving nothing to estimate.
const (
	MinReferenceShare = 0.2
	MaxReferenceShare = 0.8
)

// references are the reference series of Config.References: per element
// and transaction, the requests that did not cross the element. Their
// response time moves with the host's noise as the rest of the transaction
// does, but not with the element's wave unless it reaches them through a
// resource they share, so they are a covariate of the transaction's series
// (spectral.Adjust) that the wave leaves alone by construction of the split.
// Both bounds follow from the configuration: at most one series of
// Chunks·N bins per element and transaction (MaxTransactions) in training,
// one of N bins per transaction in an active window.
type references struct {
	train []map[string]*spectral.Bins // by element index, during training
	// base holds, by element index, the baselines of the transactions with a
	// usable reference: trained adjusted for it (and for the plan's
	// covariates).
	base []map[string]spectral.TransactionBaseline
}

// observeTraining adds a routed training sample to the reference of every
// element it did not cross.
func (rf *references) observeTraining(x *Experiment, s spectral.Sample, crossed Crossings) {
	if rf.train == nil {
		rf.train = make([]map[string]*spectral.Bins, len(x.cfg.Elements))
	}
	tb := x.trainBins[s.Transaction]
	for i := range x.cfg.Elements {
		if crossed.Has(i) {
			continue
		}
		m := rf.train[i]
		if m == nil {
			m = map[string]*spectral.Bins{}
			rf.train[i] = m
		}
		b := m[s.Transaction]
		if b == nil {
			b = spectral.NewBins(tb.Start, tb.Width, tb.Len())
			m[s.Transaction] = b
		}
		b.Add(s.Time, s.Ms)
	}
}

// finishTraining computes, for every element and transaction whose
// reference share is within bounds, the baseline adjusted for the
// reference and covs (the plan's covariates), then drops the training
// bins.
func (rf *references) finishTraining(p *spectral.Plan, trainBins map[string]*spectral.Bins, covs [][]float64) {
	rf.base = make([]map[string]spectral.TransactionBaseline, len(rf.train))
	for i, m := range rf.train {
		for _, tx := range sortedKeys(m) {
			all, own := trainBins[tx], p.Transactions[tx]
			if all == nil || own.Error != "" {
				continue
			}
			ref, ok := referenceSeries(m[tx], all)
			if !ok {
				continue
			}
			b := p.AdjustedBaseline(all, append(slices.Clone(covs), ref))
			if b.Error != "" {
				continue
			}
			if rf.base[i] == nil {
				rf.base[i] = map[string]spectral.TransactionBaseline{}
			}
			rf.base[i][tx] = b
		}
	}
	rf.train = nil
}

// referenceSeries is ref's binned series when its share of all's samples
// is within [MinReferenceShare, MaxReferenceShare] and it is dense enough.
func referenceSeries(ref, all *spectral.Bins) ([]float64, bool) {
	n := all.Samples()
	if n == 0 {
		return nil, false
	}
	share := float64(ref.Samples()) / float64(n)
	if share < MinReferenceShare || share > MaxReferenceShare {
		return nil, false
	}
	s, err := ref.Series()
	if err != nil {
		return nil, false
	}
	return s.Values, true
}

// windowBins returns empty reference bins for element i's window, one per
// transaction with a reference baseline, or nil.
func (rf *references) windowBins(i int, start, width float64, n int) map[string]*spectral.Bins {
	if i >= len(rf.base) || len(rf.base[i]) == 0 {
		return nil
	}
	out := make(map[string]*spectral.Bins, len(rf.base[i]))
	for tx := range rf.base[i] {
		out[tx] = spectral.NewBins(start, width, n)
	}
	return out
}

// forWindow returns what transaction tx's window needs to be adjusted for
// its reference: the covariates (covs and the reference) and the baseline
// trained alike; ok is false when tx has no reference or the window's is
// out of bounds.
func (rf *references) forWindow(i int, tx string, refBins, all *spectral.Bins, covs [][]float64) ([][]float64, spectral.TransactionBaseline, bool) {
	if refBins == nil || i >= len(rf.base) {
		return nil, spectral.TransactionBaseline{}, false
	}
	base, ok := rf.base[i][tx]
	if !ok {
		return nil, spectral.TransactionBaseline{}, false
	}
	ref, ok := referenceSeries(refBins, all)
	if !ok {
		return nil, spectral.TransactionBaseline{}, false
	}
	return append(slices.Clone(covs), ref), base, true
}
