//go:build long

package causal_test

// The costs of the convolution algorithm at scale (paper 001 §5.2.5, §7.6,
// figure 23 and table 1). They take a few minutes: run them with
//
//	go test -tags long -run 'TestConvolution(Figure23|Memory)' -v ./internal/causal/
//
// or scripts/bench-convolution.sh, which also measures the command line.

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/causal"
	"github.com/tierscope/tierscope/internal/maketrace"
)

// Figure 23: run time against the quantum on the email trace. The time of a
// correlation by FFT is proportional to S log S, S = T/μ; the whole run is
// about e such correlations (e the edges of the output graph, §5.2.5). With
// the FFT forced, the time per correlation must fit a·S·log2(S) + b closely;
// the default method, which sums directly when that is cheaper, is reported
// beside it.
func TestConvolutionFigure23(t *testing.T) {
	tr := generate(t, "relay-email.yaml", maketrace.Options{Seed: 1})
	var xs, ys []float64
	for _, sec := range []float64{5, 10, 20, 30, 60, 120, 360, 720} {
		mu := time.Duration(sec * float64(time.Second))
		cfg := causal.DefaultConvolutionConfig(mu)
		cfg.Method = causal.CorrelateFFT
		res, cpu, wall := timedConvolve(t, tr, cfg)
		S := float64(res.Bins)
		per := cpu.Seconds() / float64(res.Stats.Correlations)
		xs, ys = append(xs, S*math.Log2(S)), append(ys, per)
		auto, acpu, _ := timedConvolve(t, tr, causal.DefaultConvolutionConfig(mu))
		t.Logf("fig23\tμ %4.0f s\tS %8d\tFFT: %3d correlations, CPU %7.3f s (wall %7.3f s), %7.2f ms each\tauto: CPU %6.3f s, %d patterns (FFT %d)",
			sec, res.Bins, res.Stats.Correlations, cpu.Seconds(), wall.Seconds(), 1000*per, acpu.Seconds(), len(auto.Patterns), len(res.Patterns))
	}
	a, b, r2 := fitLine(xs, ys)
	t.Logf("fig23\tper-correlation CPU = %.3g ns × S·log2(S) + %.3g ms, R² = %.4f", a*1e9, b*1e3, r2)
	if r2 < 0.9 {
		t.Errorf("time per FFT correlation does not fit S log S: R² = %.3f", r2)
	}
}

// fitLine is least squares y = a·x + b, with R².
func fitLine(xs, ys []float64) (a, b, r2 float64) {
	n := float64(len(xs))
	var sx, sy, sxx, sxy, syy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
		syy += ys[i] * ys[i]
	}
	a = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	b = (sy - a*sx) / n
	var ssr, sst float64
	for i := range xs {
		e := ys[i] - (a*xs[i] + b)
		ssr += e * e
		d := ys[i] - sy/n
		sst += d * d
	}
	return a, b, 1 - ssr/sst
}

// peakHeap runs f and returns the largest heap (live and not yet collected
// objects) seen above the heap before it, sampling every half millisecond. The
// collector runs at GOGC=10 meanwhile, so that the peak is close to the live
// memory the algorithm needs rather than to the garbage it leaves.
func peakHeap(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	var peak uint64
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(500 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				metrics.Read(s)
				mu.Lock()
				peak = max(peak, s[0].Value.Uint64())
				mu.Unlock()
			}
		}
	}()
	f()
	close(done)
	metrics.Read(sample)
	mu.Lock()
	defer mu.Unlock()
	peak = max(peak, sample[0].Value.Uint64())
	if peak < base {
		return 0
	}
	return peak - base
}

// §5.2.5: memory is O(m + S). The quantum-length vectors are a constant
// number: with the FFT, a plan (3N floats), a sequence (N), a spectrum (N/2
// complex) and a cache of at most 16 spectra within 64 MB (at least one), N the
// FFT length ≥ S + L; with direct sums, one padded copy of a signal (S + 2L).
// Per message there are the sorted copy and its indices (about 44 bytes) and
// the candidate edges on the current path (PeakHeld indices, 4 bytes each).
// This checks the bound up to S = 10^7, on the multi-tier trace at μ = 50 µs
// with the FFT forced (the first two levels of the graph, which is where the
// S-sized vectors live), and on the email trace at μ = 0.5 s with the default
// method, whole.
func TestConvolutionMemory(t *testing.T) {
	multi := generate(t, "multitier.yaml", maketrace.Options{Seed: 1})
	var prevS, prevPeak float64
	for _, mu := range []time.Duration{5 * time.Millisecond, 500 * time.Microsecond, 50 * time.Microsecond} {
		cfg := causal.DefaultConvolutionConfig(mu)
		cfg.Method = causal.CorrelateFFT
		cfg.MaxDepth = 2
		var res *causal.ConvolutionResult
		var cpu time.Duration
		peak := peakHeap(func() { res, cpu, _ = timedConvolve(t, multi, cfg) })
		m, S := len(multi.Messages), res.Bins
		bound := 64*float64(S+res.MaxLag) + 48*float64(m) + 4*float64(res.Stats.PeakHeld) + 16<<20
		slope := ""
		if prevS > 0 {
			slope = "; since the last row " + strconv.FormatFloat((float64(peak)-prevPeak)/(float64(S)-prevS), 'f', 1, 64) + " bytes per quantum"
		}
		t.Logf("memory\tmulti-tier FFT\tm %d\tS %9d\tpeak heap %7.1f MB = %5.1f bytes/quantum (bound %7.1f MB)\tCPU %v\t%d correlations%s",
			m, S, float64(peak)/1e6, float64(peak)/float64(S), bound/1e6, cpu.Round(time.Millisecond), res.Stats.Correlations, slope)
		if float64(peak) > bound {
			t.Errorf("S=%d: peak heap %d bytes exceeds the O(m+S) bound %.0f", S, peak, bound)
		}
		prevS, prevPeak = float64(S), float64(peak)
	}
	email := generate(t, "relay-email.yaml", maketrace.Options{Seed: 1})
	mu := 500 * time.Millisecond
	var res *causal.ConvolutionResult
	var cpu time.Duration
	peak := peakHeap(func() { res, cpu, _ = timedConvolve(t, email, causal.DefaultConvolutionConfig(mu)) })
	m, S := len(email.Messages), res.Bins
	bound := 64*float64(S+res.MaxLag) + 48*float64(m) + 4*float64(res.Stats.PeakHeld) + 16<<20
	t.Logf("memory\temail auto\tm %d\tS %9d\tpeak heap %7.1f MB (bound %7.1f MB)\tCPU %v\t%d correlations (%d FFT), %d patterns, peak held %d",
		m, S, float64(peak)/1e6, bound/1e6, cpu.Round(time.Millisecond), res.Stats.Correlations, res.Stats.FFTs, len(res.Patterns), res.Stats.PeakHeld)
	if S < 10_000_000 {
		t.Errorf("S = %d, want 10^7", S)
	}
	if float64(peak) > bound {
		t.Errorf("email at S=%d: peak heap %d bytes exceeds the O(m+S) bound %.0f", S, peak, bound)
	}
}
