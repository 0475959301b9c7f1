package gradient

import (
	"fmt"
	"math"

	"github.com/tierscope/tierscope/internal/spectral"
)

// Injection describes what was injected during a measurement
// (docs/formats.md §7, injection.json). For a link the amplitudes are ms of
// delay; with a Basis of another kind they are in the injector's unit for
// that kind (kHz below the base frequency, the fraction of capacity
// withheld).
type Injection struct {
	// Start is when the wave's first on-phase began, in Unix seconds. The
	// estimate does not depend on the phase, so the injector's clock need
	// not agree with the samples' beyond a fraction of a bin; the window of
	// N bins starts here.
	Start       float64 `json:"start"`
	FrequencyHz float64 `json:"frequency_hz"`
	AmplitudeMs float64 `json:"amplitude_ms"`
	// ActualMeanDelayMs is the mean change the injector reports it made.
	ActualMeanDelayMs float64 `json:"actual_mean_delay_ms"`
	// ActualStdErrMs is the standard error of that mean, if known.
	ActualStdErrMs float64 `json:"actual_std_err_ms,omitempty"`
	// Element names what was perturbed, e.g. "app->db".
	Element string `json:"element,omitempty"`
	// Basis is the element's basis; absent means a link.
	Basis *Basis `json:"basis,omitempty"`
	// Aligned says the wave's edges fell on the plan's bin edges.
	Aligned bool `json:"aligned,omitempty"`
}

// TransactionGradient is one transaction's entry in gradient.json: the
// spectral estimate and the time-domain comparator over the same window.
type TransactionGradient struct {
	spectral.Estimate
	TimeDomain *spectral.TimeDomain `json:"time_domain,omitempty"`
}

// Measurement is gradient.json: every transaction's gradient on one element.
type Measurement struct {
	Element     string  `json:"element,omitempty"`
	Basis       Basis   `json:"basis"`
	FrequencyHz float64 `json:"frequency_hz"`
	Kd          int     `json:"k_d"`
	N           int     `json:"n"`
	BinSeconds  float64 `json:"bin_seconds"`
	Start       float64 `json:"start"`
	End         float64 `json:"end"`
	// AmplitudeMs and ActualMeanDelayMs repeat the injection; BasisDelta is
	// the change of the basis the actual amplitude made (equal to it for a
	// link), the Δ of equation 5.
	AmplitudeMs       float64 `json:"amplitude_ms"`
	ActualMeanDelayMs float64 `json:"actual_mean_delay_ms"`
	ActualAssumed     bool    `json:"actual_assumed,omitempty"`
	BasisDelta        float64 `json:"basis_delta"`
	// Transactions is keyed by transaction.
	Transactions map[string]TransactionGradient `json:"transactions"`
	// Errors says why a transaction of the samples has no gradient.
	Errors map[string]string `json:"errors,omitempty"`
}

// Gradients lists the measurement's gradients for prediction.
func (m *Measurement) Gradients() []Gradient {
	var out []Gradient
	for _, tx := range sortedKeys(m.Transactions) {
		e := m.Transactions[tx]
		out = append(out, Gradient{Element: m.Element, Transaction: tx, Basis: m.Basis, Gradient: e.Gradient, StdErr: e.StdErr})
	}
	return out
}

// Measure estimates every transaction's gradient from the samples of an
// active phase: N bins of the plan's width from the injection's start,
// equation 5 at the plan's k_d against each transaction's baseline, with
// the change actually injected.
func Measure(p *spectral.Plan, samples []spectral.Sample, inj Injection) (*Measurement, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	basis := Link()
	if inj.Basis != nil {
		basis = *inj.Basis
	}
	if err := basis.Validate(); err != nil {
		return nil, fmt.Errorf("injection: %w", err)
	}
	if inj.FrequencyHz != 0 {
		kd := inj.FrequencyHz * float64(p.N) * p.BinSeconds
		if math.Abs(kd-float64(p.Kd)) > 0.01*float64(p.Kd) {
			return nil, fmt.Errorf("injection: frequency_hz %g is not the plan's %g (k_d %d)", inj.FrequencyHz, p.FrequencyHz, p.Kd)
		}
	}
	m := &Measurement{Element: inj.Element, Basis: basis, FrequencyHz: p.FrequencyHz, Kd: p.Kd, N: p.N, BinSeconds: p.BinSeconds,
		Start: inj.Start, End: inj.Start + float64(p.N)*p.BinSeconds, AmplitudeMs: inj.AmplitudeMs, ActualMeanDelayMs: inj.ActualMeanDelayMs,
		Transactions: map[string]TransactionGradient{}}
	actual := inj.ActualMeanDelayMs
	if !(actual > 0) {
		actual, m.ActualAssumed = inj.AmplitudeMs, true
	}
	if !(actual > 0) {
		return nil, fmt.Errorf("injection: actual_mean_delay_ms (or amplitude_ms) must be > 0")
	}
	delta, err := basis.Delta(actual)
	if err != nil {
		return nil, fmt.Errorf("injection: %w", err)
	}
	deltaSE := 0.0
	if inj.ActualStdErrMs > 0 {
		if d2, err := basis.Delta(actual + inj.ActualStdErrMs); err == nil {
			deltaSE = math.Abs(d2 - delta)
		}
	}
	m.BasisDelta = delta
	if len(samples) == 0 || samples[len(samples)-1].Time < m.End-p.BinSeconds {
		last := math.NaN()
		if len(samples) > 0 {
			last = samples[len(samples)-1].Time
		}
		return nil, fmt.Errorf("the samples end at %.3f, before the window [%.3f, %.3f) of %d bins does", last, m.Start, m.End, p.N)
	}
	bins := map[string]*spectral.Bins{}
	for _, s := range samples {
		b := bins[s.Transaction]
		if b == nil {
			b = spectral.NewBins(m.Start, p.BinSeconds, p.N)
			bins[s.Transaction] = b
		}
		b.Add(s.Time, s.Ms)
	}
	period := 1 / p.FrequencyHz
	for _, tx := range sortedKeys(bins) {
		mean, sigma, ok := p.Baseline(tx)
		if !ok {
			m.setErr(tx, "no baseline in the plan")
			continue
		}
		series, err := bins[tx].Series()
		if err != nil {
			m.setErr(tx, err.Error())
			continue
		}
		e, err := spectral.EstimateGradient(spectral.EstimateInput{Values: series.Values, Kd: p.Kd, BaselineMean: mean, BaselineSigma: sigma,
			Chunks: p.Chunks, Delta: delta, DeltaStdErr: deltaSE, Aligned: inj.Aligned})
		if err != nil {
			m.setErr(tx, err.Error())
			continue
		}
		e.Samples, e.EmptyBins = series.Samples, series.Empty
		if b, ok := p.Transactions[tx]; ok && b.StdMs > 0 {
			e.PerturbationOverStd = e.PerturbationMs / b.StdMs
		}
		tg := TransactionGradient{Estimate: e}
		var txs []spectral.Sample
		for _, s := range samples {
			if s.Transaction == tx {
				txs = append(txs, s)
			}
		}
		if td, err := spectral.OnOff(txs, inj.Start, period, m.Start, m.End, delta); err == nil {
			tg.TimeDomain = &td
		}
		m.Transactions[tx] = tg
	}
	if len(m.Transactions) == 0 {
		return m, fmt.Errorf("no transaction could be measured: %v", m.Errors)
	}
	return m, nil
}

func (m *Measurement) setErr(tx, msg string) {
	if m.Errors == nil {
		m.Errors = map[string]string{}
	}
	m.Errors[tx] = msg
}
