package scenario

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/tierscope/tierscope/internal/workfactor"
)

// The must-show of issue 37, with the estimator's defaults and no per-scenario
// flags: 3 machines, 7 flows, 2% utilization noise, a 1% background and a
// collinear pair; every unit drawing ≥ 5% of the CPU within 15% of its true
// power at the end of the run, stationary and after a release at 75%. Over
// seeds 1–20 at least 18 stationary runs and 14 release runs must pass (20
// and 14 today; the report gives the rates over seeds 1–20, 101–160 and the
// held-out 401–460 and 501–620, and what least squares with the true model
// and the true changed flows reaches),
// and after a release at least as many as least squares on the periods after
// the release alone.
func TestMustShowDefaults(t *testing.T) {
	const seeds = 20
	for _, release := range []bool{false, true} {
		passed, reference := 0, 0
		for seed := uint64(1); seed <= seeds; seed++ {
			c := Default()
			c.Seed = seed
			if release {
				c.ReleaseAt, c.ReleaseFlows = 0.75, 3
			}
			o, err := Evaluate(c, workfactor.DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			if len(o.Units) == 0 {
				t.Fatalf("seed %d: no significant flow scored", seed)
			}
			if release {
				r, err := EvaluateAfterRelease(c)
				if err != nil {
					t.Fatal(err)
				}
				if r.Pass {
					reference++
				}
			}
			if o.Pass {
				passed++
				continue
			}
			for _, u := range o.Units {
				if !u.Estimated {
					t.Errorf("release %v, seed %d: %v drawing %.0f%% of the CPU has no estimate", release, seed, u.Flows, 100*u.Share)
				}
			}
			t.Logf("release %v, seed %d: worst power error %.1f%%", release, seed, 100*o.Worst)
		}
		want := 18
		if release {
			want = 14
		}
		if passed < want {
			t.Errorf("release %v: %d of %d seeds within 15%%, want ≥ %d", release, passed, seeds, want)
		}
		if release && passed < reference {
			t.Errorf("release %v: %d seeds within 15%%, fewer than least squares on the periods after the release alone (%d)", release, passed, reference)
		}
		t.Logf("release %v: %d of %d seeds within 15%%", release, passed, seeds)
		if release {
			t.Logf("least squares on the periods after the release alone: %d of %d", reference, seeds)
		}
	}
}

// The collinear pair is reported as one group with its reason, scored as one
// unit, and a stationary run's memory grows to the maximum.
func TestCollinearGroupAndMemory(t *testing.T) {
	c := Default()
	run, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	ests, err := Replay(run, workfactor.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	last := ests[len(ests)-1]
	var pair []string
	for _, f := range run.Flows {
		if f.Group != "" {
			pair = append(pair, f.Name)
		}
	}
	if len(last.Groups) != 1 || len(last.Groups[0].Flows) != 2 || last.Groups[0].Flows[0] != pair[0] || last.Groups[0].Flows[1] != pair[1] {
		t.Fatalf("groups %+v, want one: %v", last.Groups, pair)
	}
	if g := last.Groups[0]; g.Correlation < 0.99 || g.Reason == "" {
		t.Errorf("group %+v: want its correlation ≥ 0.99 and a reason", g)
	}
	if last.HalfLife != workfactor.DefaultConfig().MaxHalfLife {
		t.Errorf("memory %v periods at the end of a stationary run, want %v", last.HalfLife, workfactor.DefaultConfig().MaxHalfLife)
	}
	if last.Counters.Shifts != 0 {
		t.Errorf("%d shifts detected in a stationary run", last.Counters.Shifts)
	}
	// The background (1% of each machine) is estimated, within 50% of the
	// machines' mean.
	mean := 0.0
	for _, cap := range run.CapacityMHz {
		mean += c.Background * cap / float64(len(run.CapacityMHz))
	}
	if len(last.Background) != 1 || last.Background[0].MHz == nil || math.Abs(*last.Background[0].MHz-mean) > 0.5*mean {
		t.Errorf("background %+v, want about %.0f MHz", last.Background, mean)
	}
}

// A release is detected at once and the memory shortened, then grows again.
func TestReleaseShortensMemory(t *testing.T) {
	c := Default()
	c.ReleaseAt, c.ReleaseFlows = 0.75, 3
	run, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	ests, err := Replay(run, workfactor.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	r := run.Release
	if before := ests[r-2]; before.Counters.Shifts != 0 {
		t.Fatalf("%d shifts before the release", before.Counters.Shifts)
	}
	after := ests[r+4] // five periods in
	if after.Counters.Shifts == 0 || after.HalfLife > 10 {
		t.Fatalf("five periods after the release: %d shifts, memory %v periods; want a shift and the shortest memory", after.Counters.Shifts, after.HalfLife)
	}
	if last := ests[len(ests)-1]; last.HalfLife < 50 {
		t.Errorf("memory %v periods at the end, want it grown again", last.HalfLife)
	}
}

// After a release at 75%, read at the end: most flows the release changed are
// reported changed (FlowEstimate.Changed; with the model average, a posterior
// probability of at least ½), and few unchanged ones (at most 30%), over
// seeds 1–20, for both ways of selecting them. The average finds more
// changes and flags more unchanged flows (37 of 40 and 16 of 60 today; 15
// before a second shift rebased the previous regime, whose seed 9 now flags
// f05 and reads 4% where it read 6%; backward elimination 35 and 1): its
// estimates are posterior means either way.
func TestReleaseFindsChangedFlows(t *testing.T) {
	for _, x := range []struct {
		name string
		sel  workfactor.ChangeSelection
	}{{"averaging", workfactor.ChangeAveraging}, {"backward", workfactor.ChangeBackward}} {
		cfg := workfactor.DefaultConfig()
		cfg.Changes = x.sel
		found, changed, flaggedUnchanged, unchanged := 0, 0, 0, 0
		for seed := uint64(1); seed <= 20; seed++ {
			c := Default()
			c.Seed, c.ReleaseAt, c.ReleaseFlows = seed, 0.75, 3
			run, err := Generate(c)
			if err != nil {
				t.Fatal(err)
			}
			ests, err := Replay(run, cfg)
			if err != nil {
				t.Fatal(err)
			}
			flagged := map[string]bool{}
			for _, f := range ests[len(ests)-1].Flows {
				flagged[f.Flow] = f.Changed
			}
			for _, f := range run.Flows {
				if f.Group != "" {
					continue // a collinear pair is one column: flagged with its partner
				}
				if f.AlphaAfter != f.Alpha {
					changed++
					if flagged[f.Name] {
						found++
					}
				} else {
					unchanged++
					if flagged[f.Name] {
						flaggedUnchanged++
					}
				}
			}
		}
		t.Logf("%s: %d of %d changed flows found, %d of %d unchanged flows flagged", x.name, found, changed, flaggedUnchanged, unchanged)
		if found < changed*3/4 || 10*flaggedUnchanged > 3*unchanged {
			t.Errorf("%s: %d of %d changed flows found (want ≥ ¾), %d of %d unchanged flagged (want ≤ 30%%)", x.name, found, changed, flaggedUnchanged, unchanged)
		}
	}
}

// A release that changes most flows (5 of the 7) is where one hard choice of
// the changed columns costs most: over seeds 1–20 the model average (the
// default) passes at least 12 runs (13 today) and more than backward
// elimination (10).
func TestReleaseOfMostFlows(t *testing.T) {
	passed := map[workfactor.ChangeSelection]int{}
	for _, sel := range []workfactor.ChangeSelection{workfactor.ChangeAveraging, workfactor.ChangeBackward} {
		cfg := workfactor.DefaultConfig()
		cfg.Changes = sel
		for seed := uint64(1); seed <= 20; seed++ {
			c := Default()
			c.Seed, c.ReleaseAt, c.ReleaseFlows = seed, 0.75, 5
			o, err := Evaluate(c, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if o.Pass {
				passed[sel]++
			}
		}
	}
	avg, back := passed[workfactor.ChangeAveraging], passed[workfactor.ChangeBackward]
	t.Logf("5 of 7 flows changed: %d of 20 runs within 15%% (backward elimination: %d)", avg, back)
	if avg < 12 || avg <= back {
		t.Errorf("5 of 7 flows changed: %d of 20 runs within 15%%, want ≥ 12 and more than backward elimination's %d", avg, back)
	}
}

// One must-show run with a release at 75% (400 periods, 3 machines, 7 or
// 20 flows) through the default estimator: the cost of following a release,
// whose last 100 periods solve across both regimes.
func BenchmarkReplayRelease(b *testing.B) {
	for _, flows := range []int{7, 20} {
		// The previous default (ChangePointRecent: no trails) against the
		// default, in one run.
		for _, cp := range []workfactor.ChangePointMethod{workfactor.ChangePointRecent, workfactor.DefaultConfig().ChangePoint} {
			b.Run(fmt.Sprintf("flows=%d/changepoint=%v", flows, cp), func(b *testing.B) {
				c := Default()
				c.Flows, c.ReleaseAt, c.ReleaseFlows = flows, 0.75, 3
				run, err := Generate(c)
				if err != nil {
					b.Fatal(err)
				}
				cfg := workfactor.DefaultConfig()
				cfg.ChangePoint = cp
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := Replay(run, cfg); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// A version 2 state (before the trails) still loads from both encodings,
// resumes, and the current state it becomes keeps a bounded trail and
// round-trips. testdata/state-v2.* were written by commit 8ada99e's
// estimator (DefaultConfig, MarshalBinary and encoding/json) at period 150
// of this very run (release at period 101): they hold a previous regime.
func TestVersion2StateResumes(t *testing.T) {
	c := Default()
	c.Periods, c.ReleaseAt, c.ReleaseFlows, c.Seed = 200, 0.5, 3, 5
	run, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	fromBin, fromJSON, _, _ := loadStates(t, "testdata/state-v2")
	if fromJSON.Version != 2 || len(fromBin.PrevC) == 0 || fromBin.Period != 150 {
		t.Fatalf("test data: version %d, previous regime %d, period %d", fromJSON.Version, len(fromBin.PrevC), fromBin.Period)
	}
	cfg := workfactor.DefaultConfig()
	a, err := workfactor.Restore(cfg, &fromBin)
	if err != nil {
		t.Fatal(err)
	}
	b, err := workfactor.Restore(cfg, &fromJSON)
	if err != nil {
		t.Fatal(err)
	}
	var last *workfactor.Estimate
	for _, p := range run.Periods[150:] {
		ea, err := a.AddPeriod(p.Index, p.Obs)
		if err != nil {
			t.Fatal(err)
		}
		eb, _ := b.AddPeriod(p.Index, p.Obs)
		ja, _ := json.Marshal(ea)
		jb, _ := json.Marshal(eb)
		if string(ja) != string(jb) {
			t.Fatalf("period %d: the binary and JSON version 2 states diverge", p.Index)
		}
		last = ea
	}
	if w := Worst(ScoreAt(run, last, run.Release, int64(len(run.Periods)))); !(w <= Target) {
		t.Errorf("resumed from a version 2 state: worst power error %.0f%%, want ≤ 15%%", 100*w)
	}
	st := a.State()
	trail := 0
	for _, s := range st.Sources {
		trail += len(s.Trail)
		for _, r := range s.Trail {
			if r.Period <= st.Period-128 {
				t.Errorf("source %s keeps period %d at period %d", s.Key, r.Period, st.Period)
			}
		}
	}
	if st.Version != 5 || trail == 0 {
		t.Fatalf("version %d, %d trail rows; want 5 and a trail", st.Version, trail)
	}
	enc, err := st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var again workfactor.State
	if err := again.UnmarshalBinary(enc); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Sources[0].Trail, st.Sources[0].Trail) {
		t.Error("the trail did not survive the binary round trip")
	}
}

// A version 3 state (flows named in every equation) loads from both
// encodings with the writer's data (its sums and trails are those of an
// estimator run from period 1 with the writer's memory cap) and resumes
// exactly as the same state re-encoded in the current version:
// testdata/state-v3.* were written by commit cfc36ec's estimator
// (DefaultConfig, MarshalBinary and encoding/json) at period 150 of the run of
// TestVersion2StateResumes. The current (version 5) state it becomes is smaller in both
// encodings (equations' flows by index, the JSON's equations as columns) and
// round-trips exactly.
func TestVersion3StateResumes(t *testing.T) {
	c := Default()
	c.Periods, c.ReleaseAt, c.ReleaseFlows, c.Seed = 200, 0.5, 3, 5
	run, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	cfg := workfactor.DefaultConfig()
	fromBin, fromJSON, bin, js := loadStates(t, "testdata/state-v3")
	if fromJSON.Version != 3 || fromBin.Period != 150 || len(fromBin.Sources) == 0 || len(fromBin.Sources[0].Trail) == 0 {
		t.Fatalf("test data: version %d, period %d, %d sources", fromJSON.Version, fromBin.Period, len(fromBin.Sources))
	}
	// What the file holds is the data: its sums and trails are those of an
	// estimator run from period 1 with the writer's memory cap (300), to
	// rounding. Its solves' outputs are not (the solve has changed since), so
	// the reference for resuming is the same state re-encoded by this
	// version (4).
	writer := cfg
	writer.MaxHalfLife = 300
	whole, err := workfactor.New(writer)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range run.Periods[:150] {
		if _, err := whole.AddPeriod(p.Index, p.Obs); err != nil {
			t.Fatal(err)
		}
	}
	for _, loaded := range []struct {
		what string
		st   *workfactor.State
	}{{"binary", &fromBin}, {"JSON", &fromJSON}} {
		if err := sameData(whole.State(), loaded.st); err != nil {
			t.Fatalf("version 3, %s: %v", loaded.what, err)
		}
	}
	v4, _ := encodeStates(t, &fromBin)
	var reference workfactor.State
	if err := reference.UnmarshalBinary(v4); err != nil {
		t.Fatal(err)
	}
	resumed, err := workfactor.Restore(cfg, &reference)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]string, len(run.Periods))
	for _, p := range run.Periods[150:] {
		e, err := resumed.AddPeriod(p.Index, p.Obs)
		if err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(e)
		want[p.Index-1] = string(j)
	}
	resume := func(what string, st *workfactor.State, from int) *workfactor.Estimator {
		t.Helper()
		e, err := workfactor.Restore(cfg, st)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for i, p := range run.Periods[from:175] {
			got, err := e.AddPeriod(p.Index, p.Obs)
			if err != nil {
				t.Fatal(err)
			}
			if j, _ := json.Marshal(got); string(j) != want[from+i] {
				t.Fatalf("%s: period %d differs from the state re-encoded as version 5", what, p.Index)
			}
		}
		return e
	}
	resume("version 3, binary", &fromBin, 150)
	st := resume("version 3, JSON", &fromJSON, 150).State()

	bin4, js4 := encodeStates(t, st)
	var back3 workfactor.State
	if err := back3.UnmarshalBinary(bin); err != nil {
		t.Fatal(err)
	}
	bin3, _ := json.Marshal(back3) // the period-150 state, now version 5
	t.Logf("period 150: binary %d → %d bytes, JSON %d → %d", len(bin), must(back3.MarshalBinary()), len(js), len(bin3))
	again, againJSON := decodeStates(t, bin4, js4)
	if st.Version != 5 || againJSON.Version != 5 {
		t.Fatalf("version %d, from JSON %d; want 5", st.Version, againJSON.Version)
	}
	if !reflect.DeepEqual(&again, st) || !reflect.DeepEqual(&againJSON, st) {
		t.Fatal("the version 5 state did not survive its round trips")
	}
	for _, x := range []struct {
		what string
		st   *workfactor.State
	}{{"version 5, binary", &again}, {"version 5, JSON", &againJSON}} {
		e, err := workfactor.Restore(cfg, x.st)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range run.Periods[175:] {
			got, _ := e.AddPeriod(p.Index, p.Obs)
			if j, _ := json.Marshal(got); string(j) != want[p.Index-1] {
				t.Fatalf("%s: period %d differs from the state re-encoded as version 5", x.what, p.Index)
			}
		}
	}
	if len(bin3) >= len(js) || must(back3.MarshalBinary()) >= len(bin) {
		t.Error("the version 5 encodings are not smaller than version 3's")
	}
}

// sameData reports the first difference, beyond rounding, between two
// states' data: the flows, the normal equations of both regimes, each
// source's sums and regime, and its trail's equations (their residuals come
// from solves, and are not compared).
func sameData(a, b *workfactor.State) error {
	near := func(what string, x, y []float64) error {
		if len(x) != len(y) {
			return fmt.Errorf("%s: %d values against %d", what, len(x), len(y))
		}
		for i := range x {
			if math.Abs(x[i]-y[i]) > 1e-12*math.Max(1, math.Max(math.Abs(x[i]), math.Abs(y[i]))) {
				return fmt.Errorf("%s[%d]: %v against %v", what, i, x[i], y[i])
			}
		}
		return nil
	}
	if !slices.Equal(a.Flows, b.Flows) || len(a.Sources) != len(b.Sources) {
		return fmt.Errorf("flows %v and %d sources against %v and %d", a.Flows, len(a.Sources), b.Flows, len(b.Sources))
	}
	checks := []error{near("C", a.C, b.C), near("D", a.D, b.D), near("previous C", a.PrevC, b.PrevC), near("previous D", a.PrevD, b.PrevD)}
	for i := range a.Sources {
		x, y := &a.Sources[i], &b.Sources[i]
		if x.Key != y.Key || x.RegimeStart != y.RegimeStart || len(x.Trail) != len(y.Trail) {
			return fmt.Errorf("source %d: %s from %d with %d trail rows against %s from %d with %d", i, x.Key, x.RegimeStart, len(x.Trail), y.Key, y.RegimeStart, len(y.Trail))
		}
		checks = append(checks,
			near(x.Key+" sums", []float64{x.N, x.YY, x.B0, x.BY, x.PrevN, x.PrevYY, x.PrevB0, x.PrevBY}, []float64{y.N, y.YY, y.B0, y.BY, y.PrevN, y.PrevYY, y.PrevB0, y.PrevBY}),
			near(x.Key+" BX", x.BX, y.BX), near(x.Key+" previous BX", x.PrevBX, y.PrevBX))
		for j := range x.Trail {
			r, q := &x.Trail[j], &y.Trail[j]
			if r.Period != q.Period || !slices.Equal(r.Flows, q.Flows) {
				return fmt.Errorf("%s trail row %d: period %d flows %v against %d %v", x.Key, j, r.Period, r.Flows, q.Period, q.Flows)
			}
			checks = append(checks, near(fmt.Sprintf("%s trail row %d", x.Key, j), append([]float64{r.Y, r.V, r.Weight}, r.Rates...), append([]float64{q.Y, q.V, q.Weight}, q.Rates...)))
		}
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	return nil
}

func must(b []byte, err error) int {
	if err != nil {
		panic(err)
	}
	return len(b)
}

// The state's size at the end of the must-show runs (seed 1; the report's
// "Costs"): mostly the equations each source keeps since its regime started
// (at most 128 periods). Version 4 stores an equation in binary in 49 bytes
// plus 9 per flow (a varint index and the rate; the bound below leaves room);
// version 3 stored each flow's name, and length prefixes.
func TestStateSize(t *testing.T) {
	for _, x := range []struct {
		flows   int
		release bool
	}{{7, false}, {7, true}, {20, false}, {20, true}} {
		c := Default()
		c.Seed, c.Flows = 1, x.flows
		if x.release {
			c.ReleaseAt, c.ReleaseFlows = 0.75, 3
		}
		run, err := Generate(c)
		if err != nil {
			t.Fatal(err)
		}
		e, err := workfactor.New(workfactor.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range run.Periods {
			if _, err := e.AddPeriod(p.Index, p.Obs); err != nil {
				t.Fatal(err)
			}
		}
		st := e.State()
		bin, js := encodeStates(t, st)
		rows, rates := 0, 0
		for _, s := range st.Sources {
			for _, r := range append(append(slices.Clone(s.Held), s.Recent...), trailRows(s.Trail)...) {
				rows, rates = rows+1, rates+len(r.Rates)
			}
		}
		t.Logf("%d flows, release %v: binary %d bytes, JSON %d bytes; %d equations kept (%d rates)", x.flows, x.release, len(bin), len(js), rows, rates)
		if limit := 72*rows + 9*rates + 4096; len(bin) > limit {
			t.Errorf("%d flows, release %v: binary state %d bytes, want ≤ %d", x.flows, x.release, len(bin), limit)
		}
	}
}

func trailRows(trail []workfactor.TrailRow) []workfactor.HeldRow {
	out := make([]workfactor.HeldRow, len(trail))
	for i, r := range trail {
		out[i] = r.HeldRow
	}
	return out
}

// loadStates reads a state an earlier version wrote, in both encodings (the
// .bin and .json files of base), decoded and as read.
func loadStates(t *testing.T, base string) (fromBin, fromJSON workfactor.State, bin, js []byte) {
	t.Helper()
	bin, err := os.ReadFile(base + ".bin")
	if err != nil {
		t.Fatal(err)
	}
	js, err = os.ReadFile(base + ".json")
	if err != nil {
		t.Fatal(err)
	}
	fromBin, fromJSON = decodeStates(t, bin, js)
	return fromBin, fromJSON, bin, js
}

// encodeStates writes st in both encodings.
func encodeStates(t *testing.T, st *workfactor.State) (bin, js []byte) {
	t.Helper()
	bin, err := st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if js, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	return bin, js
}

// decodeStates reads a state from each encoding.
func decodeStates(t *testing.T, bin, js []byte) (fromBin, fromJSON workfactor.State) {
	t.Helper()
	if err := fromBin.UnmarshalBinary(bin); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &fromJSON); err != nil {
		t.Fatal(err)
	}
	return fromBin, fromJSON
}

// The oracle read after the release is the end-of-run oracle at the last
// period, undetermined at the release itself (one period of the new work
// factors cannot pin three changed flows and their machines), and within
// 15% well before the end.
func TestOracleSinceRelease(t *testing.T) {
	c := Default()
	c.Seed, c.ReleaseAt, c.ReleaseFlows = 3, 0.75, 3
	since, err := OracleSinceRelease(c)
	if err != nil {
		t.Fatal(err)
	}
	end, err := EvaluateOracle(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(since) != 100 || since[len(since)-1] != end.Worst {
		t.Fatalf("%d readings, the last %v; want 100 (periods 301–400) and the end-of-run oracle's %v", len(since), since[len(since)-1], end.Worst)
	}
	if !(since[0] > Target) {
		t.Errorf("at the release the oracle reads %v, want beyond %v", since[0], Target)
	}
	if !(since[50] <= Target) {
		t.Errorf("50 periods after the release the oracle reads %v, want ≤ %v", since[50], Target)
	}
}

func TestAveragingSinceRelease(t *testing.T) {
	c := Default()
	c.Seed, c.ReleaseAt, c.ReleaseFlows, c.Noise = 3, 0.75, 3, 0.002
	since, err := AveragingSinceRelease(c)
	if err != nil {
		t.Fatal(err)
	}
	end, err := EvaluateAveraging(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(since) != 100 || since[len(since)-1] != end.Worst {
		t.Fatalf("%d readings, the last %v; want 100 (periods 301–400) and EvaluateAveraging's %v", len(since), since[len(since)-1], end.Worst)
	}
	if !(since[0] > Target) {
		t.Errorf("at the release the averaging reads %v, want beyond %v (one period cannot tell)", since[0], Target)
	}
	// At low noise the data tell which units changed: the average ends where
	// the oracle, which is told them, does.
	oracle, err := EvaluateOracle(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("σ 0.2%%: averaging %.1f%%, oracle %.1f%% at the end", 100*end.Worst, 100*oracle.Worst)
	if !(end.Worst <= 0.03) || math.Abs(end.Worst-oracle.Worst) > 0.01 {
		t.Errorf("at σ 0.2%% the averaging ends %v off and the oracle %v; want both within 3%% and 1 point apart", end.Worst, oracle.Worst)
	}
	// Without a release there is nothing to average.
	c.ReleaseAt = 0
	if since, err := AveragingSinceRelease(c); err != nil || since != nil {
		t.Errorf("no release: %v, %v; want nil", since, err)
	}
}

func TestBackgroundSwing(t *testing.T) {
	c := Default()
	c.BackgroundSwing = 1
	run, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	mean := 0.0
	for _, capacity := range run.CapacityMHz {
		mean += c.Background * capacity
	}
	lo, hi := math.Inf(1), 0.0
	for _, p := range run.Periods {
		lo, hi = min(lo, p.BackgroundMHz), max(hi, p.BackgroundMHz)
	}
	if !(lo < 0.1*mean && hi > 1.9*mean) {
		t.Errorf("a full swing ran from %.1f to %.1f MHz; want from near 0 to near %.1f", lo, hi, 2*mean)
	}
	// Without the swing the background is the constant it always was.
	c.BackgroundSwing = 0
	still, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range still.Periods {
		if math.Abs(p.BackgroundMHz-mean) > 1e-9*mean {
			t.Fatalf("period %d: background %v MHz, want %v", p.Index, p.BackgroundMHz, mean)
		}
	}
}

func TestNewFlows(t *testing.T) {
	c := Default()
	c.ReleaseAt, c.ReleaseFlows, c.NewFlows, c.NewFlowsAt = 0.75, 3, 2, 0.75
	run, err := Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	var late []Flow
	for _, f := range run.Flows {
		if f.From > 1 {
			late = append(late, f)
			if f.From != run.Release || f.Group != "" || f.AlphaAfter != f.Alpha {
				t.Errorf("%s starts at %d (release %d), group %q, work factor %v → %v; want a flow of its own, unchanged, starting with the release", f.Name, f.From, run.Release, f.Group, f.Alpha, f.AlphaAfter)
			}
		}
	}
	if len(late) != 2 {
		t.Fatalf("%d flows start late, want 2", len(late))
	}
	for _, p := range run.Periods {
		for _, f := range late {
			inObs := false
			for _, o := range p.Obs {
				_, has := o.Rates[f.Name]
				inObs = inObs || has
			}
			if before := p.Index < f.From; before && (inObs || p.Rates[f.Name] != 0) || !before && p.Rates[f.Name] <= 0 {
				t.Fatalf("period %d, %s (from %d): reported %v, rate %v", p.Index, f.Name, f.From, inObs, p.Rates[f.Name])
			}
		}
	}
	bad := c
	bad.NewFlows = 6
	if _, err := Generate(bad); err == nil {
		t.Error("6 new flows beside 3 changed ones and a pair among 7 flows: no error")
	}
}

// A background that swings is taken out exactly by a background per period:
// without noise (nor jitter in the collinear pair) that oracle is exact, while
// the constant background's is not.
func TestOraclePeriodBackground(t *testing.T) {
	c := Default()
	c.Noise, c.BackgroundSwing, c.Machines, c.CollinearJitter = 0, 1, 6, 0
	per, err := EvaluateOraclePeriodBackground(c)
	if err != nil {
		t.Fatal(err)
	}
	constant, err := EvaluateOracle(c)
	if err != nil {
		t.Fatal(err)
	}
	if !(per.Worst < 1e-6) || !(constant.Worst > 0.01) {
		t.Errorf("no noise, a full swing: a background per period is %v off, a constant one %v; want < 1e-6 and > 1%%", per.Worst, constant.Worst)
	}
}
