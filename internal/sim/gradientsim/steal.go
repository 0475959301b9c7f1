package gradientsim

import (
	"math"
	"math/rand/v2"
)

// Steal is a host's CPU steal fraction as a hypervisor imposes it: constant
// over each second, wandering as an AR(1) process around Mean with a
// correlation time of about 20 s, in [0, 0.95]. The namespace testbed's host
// showed such steal (0–21% over 5 s) explaining 88% of the variance of its
// 5 s response-time means. The series is drawn second by second in order
// from its seed, so the simulator and the driver see the same values.
type Steal struct {
	Mean, Std float64
	start     float64
	rng       *rand.Rand
	values    []float64
}

// NewSteal returns a steal process from start (Unix seconds).
func NewSteal(seed uint64, start, mean, std float64) *Steal {
	return &Steal{Mean: mean, Std: std, start: start, rng: rand.New(rand.NewPCG(seed, 0x5735a1))}
}

const stealCorrelation = 0.95 // per second

// At is the steal fraction during the second holding t.
func (s *Steal) At(t float64) float64 {
	i := int(math.Floor(t - s.start))
	if i < 0 {
		i = 0
	}
	if len(s.values) <= i {
		v := s.Mean
		if n := len(s.values); n > 0 {
			v = s.values[n-1]
		}
		innovation := s.Std * math.Sqrt(1-stealCorrelation*stealCorrelation)
		for len(s.values) <= i {
			v = s.Mean + stealCorrelation*(v-s.Mean) + innovation*s.rng.NormFloat64()
			s.values = append(s.values, math.Min(0.95, math.Max(0, v)))
		}
	}
	return s.values[i]
}

// Slowdown is a Server.Modulation: service times stretched by 1 + k·steal,
// as work on a vCPU the hypervisor takes away for that share of the time.
func (s *Steal) Slowdown(k float64) func(t float64) float64 {
	return func(t float64) float64 { return 1 + k*s.At(t) }
}
