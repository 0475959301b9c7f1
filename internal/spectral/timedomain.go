package spectral

import (
	"errors"
	"math"
)

// TimeDomain is the comparator the spectral estimate is judged against: the
// difference between the mean response time of the requests made while the
// square wave was on and of those made while it was off, over the injected
// change. It needs the wave's phase, which the spectral estimate does not.
type TimeDomain struct {
	Gradient  float64    `json:"gradient"`
	CI95      [2]float64 `json:"ci95"`
	StdErr    float64    `json:"std_err"`
	OnMeanMs  float64    `json:"on_mean_ms"`
	OffMeanMs float64    `json:"off_mean_ms"`
	On        int        `json:"on"`
	Off       int        `json:"off"`
}

// meanVar accumulates a mean and a variance.
type meanVar struct {
	n          int
	sum, sumsq float64
}

func (m *meanVar) add(n int, sum, sumsq float64) { m.n += n; m.sum += sum; m.sumsq += sumsq }
func (m meanVar) mean() float64                  { return m.sum / float64(m.n) }
func (m meanVar) variance() float64 {
	if m.n < 2 {
		return 0
	}
	mu := m.mean()
	return math.Max(0, (m.sumsq-float64(m.n)*mu*mu)/float64(m.n-1))
}

// OnOff compares the samples with times in [from, to) by the phase of a wave
// that is on during the first half of each period from waveStart.
func OnOff(samples []Sample, waveStart, period, from, to, delta float64) (TimeDomain, error) {
	var on, off meanVar
	for _, s := range samples {
		if s.Time < from || s.Time >= to {
			continue
		}
		if phase(s.Time, waveStart, period) < 0.5 {
			on.add(1, s.Ms, s.Ms*s.Ms)
		} else {
			off.add(1, s.Ms, s.Ms*s.Ms)
		}
	}
	return timeDomain(on, off, delta)
}

// OnOffBins is OnOff over binned statistics: bins wholly inside an on-half
// or an off-half count, bins that straddle an edge are left out.
func OnOffBins(b *Bins, waveStart, period, delta float64) (TimeDomain, error) {
	var on, off meanVar
	const eps = 1e-9
	for i := range b.Count {
		p0 := phase(b.Start+float64(i)*b.Width+eps, waveStart, period)
		p1 := p0 + (b.Width-2*eps)/period
		switch {
		case p1 <= 0.5:
			on.add(b.Count[i], b.Sum[i], b.SumSq[i])
		case p0 >= 0.5 && p1 <= 1:
			off.add(b.Count[i], b.Sum[i], b.SumSq[i])
		}
	}
	return timeDomain(on, off, delta)
}

// phase returns where t falls in the wave's period, in [0, 1).
func phase(t, start, period float64) float64 {
	p := math.Mod((t-start)/period, 1)
	if p < 0 {
		p++
	}
	return p
}

func timeDomain(on, off meanVar, delta float64) (TimeDomain, error) {
	if on.n < 2 || off.n < 2 {
		return TimeDomain{On: on.n, Off: off.n}, errors.New("the time-domain comparator needs two samples on and two off")
	}
	if !(delta > 0) {
		return TimeDomain{}, errors.New("the injected change must be > 0")
	}
	t := TimeDomain{OnMeanMs: on.mean(), OffMeanMs: off.mean(), On: on.n, Off: off.n}
	t.Gradient = (t.OnMeanMs - t.OffMeanMs) / delta
	t.StdErr = math.Sqrt(on.variance()/float64(on.n)+off.variance()/float64(off.n)) / delta
	t.CI95 = [2]float64{t.Gradient - z95*t.StdErr, t.Gradient + z95*t.StdErr}
	return t, nil
}
