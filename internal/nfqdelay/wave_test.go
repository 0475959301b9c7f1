//go:build timing

package nfqdelay_test

// The end-to-end check of the spectral method's premise: a square-wave delay
// driven by package wave shows up as a spike at the wave's frequency in the
// spectrum of the round-trip times a client measures across the link. It
// measures time, so it runs alone in `make test-timing`.

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/cmplx"
	"net/netip"
	"slices"
	"testing"
	"time"

	"gonum.org/v1/gonum/dsp/fourier"

	"github.com/tierscope/tierscope/internal/nfqdelay"
	"github.com/tierscope/tierscope/internal/wave"
)

const (
	waveAmp    = 2 * time.Millisecond
	wavePeriod = 400 * time.Millisecond // 2.5 Hz
	waveCycles = 8
	probeRate  = 200 // probes per second
	binWidth   = 25 * time.Millisecond
)

type probe struct {
	sent time.Time     // client send time
	rtt  time.Duration // 0 if no echo arrived
}

// echo makes the server send every datagram it receives back to its sender
// until rx is closed.
func (tb *testbed) echo() {
	buf := make([]byte, 64)
	for {
		_ = tb.rx.SetReadDeadline(time.Time{})
		n, addr, err := tb.rx.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = tb.rx.WriteTo(buf[:n], addr)
	}
}

// probeRTT sends rate probes per second from the client for dur starting at
// start, and returns each probe's send time and round-trip time, waiting up to
// 300 ms after the last send for late echoes.
func (tb *testbed) probeRTT(t *testing.T, start time.Time, rate int, dur time.Duration) []probe {
	t.Helper()
	total := int(float64(rate) * dur.Seconds())
	ps := make([]probe, total)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64)
		for {
			n, err := tb.tx.Read(buf)
			now := time.Now()
			if err != nil {
				return
			}
			if n < 16 {
				continue
			}
			seq := binary.BigEndian.Uint64(buf)
			if seq < uint64(total) {
				ps[seq].rtt = now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(buf[8:]))))
			}
		}
	}()
	_ = tb.tx.SetReadDeadline(start.Add(dur + 2*time.Second))
	time.Sleep(time.Until(start))
	buf := make([]byte, 64)
	sent := 0
	for sent < total {
		target := min(total, int(time.Since(start).Seconds()*float64(rate))+1)
		for ; sent < target; sent++ {
			now := time.Now()
			ps[sent].sent = now
			binary.BigEndian.PutUint64(buf, uint64(sent))
			binary.BigEndian.PutUint64(buf[8:], uint64(now.UnixNano()))
			if _, err := tb.tx.Write(buf); err != nil {
				t.Fatalf("send %d: %v", sent, err)
			}
		}
		time.Sleep(time.Until(start.Add(time.Duration(sent) * time.Second / time.Duration(rate))))
	}
	time.Sleep(300 * time.Millisecond)
	_ = tb.tx.SetReadDeadline(time.Now()) // unblock the reader
	<-done
	_ = tb.tx.SetReadDeadline(time.Time{})
	return ps
}

type peak struct {
	hz, mag float64
	idx     int
}

func TestSquareWaveFFTPeak(t *testing.T) {
	tb := newTestbed(t)
	go tb.echo() // ends when newTestbed's cleanup closes rx

	// Warm up the path (ARP, socket buffers, the echo goroutine) before
	// anything is measured; on a loaded machine the first echo can take a
	// while, so probe in rounds until one comes back.
	var base []time.Duration
	for round := 0; round < 25 && len(base) == 0; round++ {
		for _, p := range tb.probeRTT(t, time.Now(), probeRate, 200*time.Millisecond) {
			if p.rtt > 0 {
				base = append(base, p.rtt)
			}
		}
	}
	slices.Sort(base)
	if len(base) == 0 {
		t.Fatal("no echo came back during 5 s of warm-up: the echo path is broken")
	}
	t.Logf("baseline RTT (no delayer): median %v over %d probes", base[len(base)/2].Round(time.Microsecond), len(base))

	// Like TestPrecision, a wave that a stall of the host disturbed (a
	// smeared on/off difference, a peak drowned in the host's noise) is
	// measured again after a pause; a delayer error never is.
	var problems []string
	for attempt := 1; attempt <= timingAttempts; attempt++ {
		problems = measureSquareWave(t, tb, attempt)
		if len(problems) == 0 {
			return
		}
		t.Logf("attempt %d: %v", attempt, problems)
		if attempt < timingAttempts {
			time.Sleep(timingPause)
		}
	}
	t.Errorf("after %d attempts: %v", timingAttempts, problems)
}

// measureSquareWave runs one 2 ms square wave on the echo's replies and
// returns what its probes' RTTs and their spectrum got wrong.
func measureSquareWave(t *testing.T, tb *testbed, attempt int) []string {
	t.Helper()
	// The delay is applied to the echo direction: the server's replies to the
	// client, delayed in the server's OUTPUT chain.
	w := wave.Wave{Amplitude: float64(waveAmp) / float64(time.Millisecond), Period: wavePeriod, Cycles: waveCycles}
	var d *nfqdelay.Delayer
	started := make(chan struct{})
	opt := nfqdelay.Options{
		Match: nfqdelay.Match{Proto: "udp", Src: netip.PrefixFrom(tb.link.BAddr, 32), SrcPort: tb.port,
			Dst: netip.PrefixFrom(tb.link.AAddr, 32), Direction: "out"},
		Lease: 30 * time.Second,
		Delay: func(now time.Time) time.Duration {
			select {
			case <-started:
			default:
				return 0
			}
			return time.Duration(w.Value(now) * float64(time.Millisecond))
		},
	}
	if err := tb.srv.Run(func() error {
		var err error
		d, err = nfqdelay.Start(opt)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = d.Stop() }()

	w.Start = time.Now().Add(100 * time.Millisecond)
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	close(started) // publishes w.Start to the delayer's goroutine
	end, _ := w.End()
	dur := end.Sub(w.Start)
	ps := tb.probeRTT(t, w.Start, probeRate, dur)
	st, err := d.Stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("attempt %d: delayer: %v", attempt, st)
	if st.Errors != 0 {
		t.Fatalf("delayer: %d errors, last %v", st.Errors, st.LastError)
	}
	if st.Count < len(ps)*9/10 {
		t.Fatalf("delayer measured %d packets of %d probes", st.Count, len(ps))
	}
	var problems []string

	// On/off means, classified by the wave's value at the probe's send time
	// (the echo leaves the server ~100 µs later; probes within 2 ms of an
	// edge are left out of this comparison).
	var on, off []float64
	lost := 0
	for _, p := range ps {
		if p.rtt == 0 {
			lost++
			continue
		}
		ph := p.sent.Sub(w.Start) % (wavePeriod / 2)
		if ph < 2*time.Millisecond || ph > wavePeriod/2-2*time.Millisecond {
			continue
		}
		ms := float64(p.rtt) / float64(time.Millisecond)
		if w.Value(p.sent) > 0 {
			on = append(on, ms)
		} else {
			off = append(off, ms)
		}
	}
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	if len(on) == 0 || len(off) == 0 {
		t.Fatalf("no on- or off-phase probes measured (on %d, off %d, lost %d of %d)", len(on), len(off), lost, len(ps))
	}
	onM, offM := mean(on), mean(off)
	t.Logf("probes: %d sent, %d lost; RTT mean on-phase %.3f ms (n=%d), off-phase %.3f ms (n=%d), difference %.3f ms (amplitude %v)",
		len(ps), lost, onM, len(on), offM, len(off), onM-offM, waveAmp)
	if lost > len(ps)/10 {
		problems = append(problems, fmt.Sprintf("%d of %d probes lost", lost, len(ps)))
	}
	if diff := onM - offM; diff < 1.5 || diff > 2.5 {
		problems = append(problems, fmt.Sprintf("on/off RTT difference %.3f ms, want ≈2 ms (1.5–2.5)", diff))
	}

	// Bin by send time, mean per bin, empty bins carry the previous value.
	nb := int(dur / binWidth)
	sum := make([]float64, nb)
	cnt := make([]int, nb)
	for _, p := range ps {
		if p.rtt == 0 {
			continue
		}
		i := int(p.sent.Sub(w.Start) / binWidth)
		if i < 0 || i >= nb {
			continue
		}
		sum[i] += float64(p.rtt) / float64(time.Millisecond)
		cnt[i]++
	}
	series := make([]float64, nb)
	prev, empty := math.NaN(), 0
	for i := range series {
		if cnt[i] > 0 {
			prev = sum[i] / float64(cnt[i])
		} else {
			empty++
		}
		series[i] = prev
	}
	// Leading empty bins (none expected) take the first measured value.
	first := slices.IndexFunc(series, func(v float64) bool { return !math.IsNaN(v) })
	for i := 0; i < first; i++ {
		series[i] = series[first]
	}
	m := mean(series)
	n := 1
	for n < nb {
		n <<= 1
	}
	padded := make([]float64, n) // zero-padded to a power of two
	for i, v := range series {
		padded[i] = v - m
	}
	fft := fourier.NewFFT(n)
	coef := fft.Coefficients(nil, padded)
	fs := 1 / binWidth.Seconds()
	var peaks []peak
	for i := 1; i < len(coef); i++ { // skip DC
		peaks = append(peaks, peak{hz: fft.Freq(i) * fs, mag: cmplx.Abs(coef[i]), idx: i})
	}
	byMag := slices.Clone(peaks)
	slices.SortFunc(byMag, func(a, b peak) int { return cmp.Compare(b.mag, a.mag) })
	top := byMag[0]
	rest := make([]float64, 0, len(byMag)-1)
	for _, p := range byMag[1:] {
		rest = append(rest, p.mag)
	}
	slices.Sort(rest)
	med := rest[len(rest)/2]
	res := fs / float64(n)
	want := 1 / wavePeriod.Seconds()
	for k, p := range byMag[:5] {
		t.Logf("spectrum peak %d: %.4f Hz |X|=%.3f (%.1f× median)", k+1, p.hz, p.mag, p.mag/med)
	}
	t.Logf("spectrum: %d bins of %v (%d empty), %d-point FFT, resolution %.4f Hz; largest non-DC peak %.4f Hz (want %.4f Hz), peak/median %.1f",
		nb, binWidth, empty, n, res, top.hz, want, top.mag/med)
	if math.Abs(top.hz-want) > res {
		problems = append(problems, fmt.Sprintf("largest non-DC peak at %.4f Hz, want %.4f Hz ± %.4f Hz", top.hz, want, res))
	}
	if top.mag < 5*med {
		problems = append(problems, fmt.Sprintf("peak magnitude %.3f is %.1f× the median %.3f, want ≥ 5×", top.mag, top.mag/med, med))
	}
	return problems
}
