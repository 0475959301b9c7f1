package gradientsim

import (
	"math"
	"testing"

	"github.com/tierscope/tierscope/internal/spectral"
)

// Paper 000 §4: a front end calling a back end of N(100 ms, 30 ms), k = 8,
// N = 128, a 30 ms delay, 10 replications: the mean gradient is 1 ± 0.05.
func TestPaperSection4Replay(t *testing.T) {
	var sum, sumsq, td float64
	for seed := uint64(1); seed <= 10; seed++ {
		r, err := Replay(FrontBack(seed, 0.1, 0.03), ReplayConfig{Train: spectral.DefaultTrainConfig(), Link: "front->back", Transaction: "T",
			AmplitudeMs: 30, Phase: math.Mod(float64(seed)*0.618, 1)})
		if err != nil {
			t.Fatal(err)
		}
		g := r.Spectral["T"].Gradient
		sum += g
		sumsq += g * g
		td += r.TimeDomain["T"].Gradient
		if r.Plan.K != 8 || r.Plan.N != 128 || r.Plan.Chunks != 9 || r.Plan.SamplesPerPeriod < 8 {
			t.Fatalf("plan %+v", r.Plan)
		}
	}
	mean := sum / 10
	std := math.Sqrt((sumsq - 10*mean*mean) / 9)
	if math.Abs(mean-1) > 0.05 {
		t.Fatalf("mean gradient %.3f over 10 replications, want 1 ± 0.05", mean)
	}
	t.Logf("mean gradient %.3f, std %.3f (on/off comparator %.3f)", mean, std, td/10)
}

// The simulator itself: a processor-sharing CPU matches the M/M/1-PS mean
// response time, and leases inject what they report and then stop.
func TestSimulatorSanity(t *testing.T) {
	s, err := New(PS(1, 40, 10, 0.8, 1000))
	if err != nil {
		t.Fatal(err)
	}
	s.RunUntil(s.Now() + 3000)
	var sum float64
	out := s.Drain()
	for _, x := range out {
		sum += x.Ms
	}
	want := 1000*10/(800-400.0) + 1 // ms, plus the links
	if got := sum / float64(len(out)); math.Abs(got-want) > 0.05*want {
		t.Fatalf("M/M/1-PS mean %.2f ms, want %.2f", got, want)
	}
	busy, _ := s.Busy("cpu")
	if u := busy / 3000; math.Abs(u-0.5) > 0.03 {
		t.Fatalf("utilization %.3f, want 0.5", u)
	}

	cfg := FrontBack(2, 0.1, 0.03)
	cfg.InjectorOffsetMs = 1
	s, _ = New(cfg)
	start := s.Now() + 1
	if err := s.StartLease(Wave{Key: "a", Kind: "delay", Target: "front->back", Amplitude: 20, Start: start, Period: 4, Cycles: 5}); err != nil {
		t.Fatal(err)
	}
	if err := s.StartLease(Wave{Key: "b", Kind: "delay", Target: "front->back", Amplitude: 5, Start: start, Period: 4}); err == nil {
		t.Fatal("two leases on one link must conflict")
	}
	s.RunUntil(start + 30)
	in, _ := s.StopLease("a")
	if math.Abs(in.Mean-21) > 1e-9 || in.Count < 50 || len(s.Active(s.Now())) != 0 {
		t.Fatalf("injected %+v, active %v", in, s.Active(s.Now()))
	}
	var on, off, non, noff float64
	for _, x := range s.Drain() {
		ph := math.Mod(x.Time-start, 4)
		switch {
		case x.Time < start || x.Time >= start+20 || math.Abs(ph-2) < 0.2 || ph < 0.2 || ph > 3.8:
		case ph < 2:
			on += x.Ms
			non++
		default:
			off += x.Ms
			noff++
		}
	}
	if d := on/non - off/noff; math.Abs(d-21) > 8 {
		t.Fatalf("on-off difference %.1f ms, want about 21", d)
	}

	// A capacity square wave changes the speed only while on, and the stop
	// restores it.
	s, _ = New(PS(3, 40, 10, 0.8, 1000))
	if err := s.StartLease(Wave{Key: "c", Kind: "capacity", Target: "cpu", Amplitude: 0.25, Start: s.Now() + 1, Period: 10}); err != nil {
		t.Fatal(err)
	}
	s.RunUntil(s.Now() + 3)
	if c := s.servers["cpu"].capacity; math.Abs(c-0.6) > 1e-12 {
		t.Fatalf("capacity during the on-phase %v", c)
	}
	s.StopLease("c")
	s.RunUntil(s.Now() + 20)
	if c := s.servers["cpu"].capacity; c != 0.8 {
		t.Fatalf("capacity after stop %v", c)
	}
}
