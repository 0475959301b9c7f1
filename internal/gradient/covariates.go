package gradient

import (
	"errors"
	"slices"

	"github.com/tierscope/tierscope/internal/spectral"
)

// covSample is one exogenous value held over (from, to].
type covSample struct{ from, to, v float64 }

// covariates keeps the recent samples of each exogenous series (a host's CPU
// steal fraction, say) so that the training grid and each active window can
// be binned from them when they close. Series and samples are bounded;
// what does not fit is counted.
type covariates struct {
	maxSeries, maxSamples int
	series                map[string][]covSample
	dropped               int
}

func (c *covariates) add(name string, from, to, v float64) {
	s, ok := c.series[name]
	if !ok {
		if len(c.series) >= c.maxSeries {
			c.dropped++
			return
		}
		if c.series == nil {
			c.series = map[string][]covSample{}
		}
	}
	if len(s) >= c.maxSamples { // oldest out: windows need the recent past
		copy(s, s[1:])
		s = s[:len(s)-1]
		c.dropped++
	}
	c.series[name] = append(s, covSample{from, to, v})
}

// binned returns the names and series of every covariate that covers at
// least half of the n bins of width w from start, in name order.
func (c *covariates) binned(start, w float64, n int) ([]string, [][]float64) {
	names := make([]string, 0, len(c.series))
	for name := range c.series {
		names = append(names, name)
	}
	slices.Sort(names)
	var used []string
	var out [][]float64
	for _, name := range names {
		b := spectral.NewCovariateBins(start, w, n)
		for _, s := range c.series[name] {
			b.Add(s.from, s.to, s.v)
		}
		if v, err := b.Series(); err == nil {
			used, out = append(used, name), append(out, v)
		}
	}
	return used, out
}

// prune drops samples that ended before t: no window to come reaches back.
func (c *covariates) prune(t float64) {
	for name, s := range c.series {
		i := 0
		for i < len(s) && s[i].to < t {
			i++
		}
		if i > 0 {
			c.series[name] = append(s[:0], s[i:]...)
		}
	}
}

// adjustWindow adjusts one window's series for the covariates binned on its
// grid; it returns the values unchanged when there are none or none varies.
func adjustWindow(values []float64, covs [][]float64, kd int) ([]float64, *spectral.Adjustment, error) {
	if len(covs) == 0 {
		return values, nil, nil
	}
	out, adj, err := spectral.Adjust(values, covs, kd)
	if errors.Is(err, spectral.ErrNoCovariateVariation) {
		return values, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return out, &adj, nil
}
