package gradient

import (
	"math"
	"strings"
	"testing"
)

func TestBasisKnobInvertsDelta(t *testing.T) {
	for _, b := range []Basis{
		Link(),
		{Kind: KindCPUFreq, Operating: 2400, Alpha: 20, Workload: 50},                     // U = 1000/2400
		{Kind: KindCapacity, Operating: 0.8, FrequencyMHz: 1000, Alpha: 10, Workload: 40}, // U = 0.5
	} {
		if err := b.Validate(); err != nil {
			t.Fatal(err)
		}
		for _, a := range []float64{0.05, 0.2} {
			if b.Kind == KindCPUFreq {
				a *= 1e6 // kHz: 50 and 200 MHz
			}
			d, err := b.Delta(a)
			if err != nil || !(d > 0) {
				t.Fatalf("%s: Delta(%v) = %v, %v; want > 0", b.Kind, a, d, err)
			}
			back, err := b.Knob(d)
			if err != nil || math.Abs(back-a) > 1e-9*math.Max(1, a) {
				t.Fatalf("%s: Knob(Delta(%v)) = %v, %v", b.Kind, a, back, err)
			}
		}
	}
}

func TestBasisValues(t *testing.T) {
	c := Basis{Kind: KindCapacity, Operating: 0.8, FrequencyMHz: 1000, Alpha: 10, Workload: 40}
	if v, _ := c.Value(0.8); math.Abs(v-1.0/400) > 1e-15 {
		t.Fatalf("1/(c·f − α·w) at 0.8: %v", v)
	}
	if u := c.Utilization(); math.Abs(u-0.5) > 1e-12 {
		t.Fatalf("utilization %v", u)
	}
	if _, err := c.Value(0.4); err == nil || !strings.Contains(err.Error(), "saturates") {
		t.Fatalf("a capacity at the demand must be refused: %v", err)
	}
	f := Basis{Kind: KindCPUFreq, Operating: 2000, Alpha: 5, Workload: 100}
	if v, _ := f.Value(1500); math.Abs(v-1.0/1000) > 1e-15 {
		t.Fatalf("1/(f − α·w) at 1500 MHz: %v", v)
	}
	if f.On(500000) != 1500 || c.On(0.25) != 0.6000000000000001 && c.On(0.25) != 0.6 {
		t.Fatalf("On: %v %v", f.On(500000), c.On(0.25))
	}
	if err := (Basis{Kind: "disk"}).Validate(); err == nil {
		t.Fatal("unknown kind must be refused")
	}
}

func TestAlpha(t *testing.T) {
	a, err := AlphaFromUtilization(0.5, 800, 40)
	if err != nil || a != 10 {
		t.Fatalf("%v %v", a, err)
	}
	// U = α·w/f with α = 10 at three workloads and two speeds.
	u := []float64{10 * 20.0 / 800, 10 * 40.0 / 800, 10 * 40.0 / 1000}
	a, err = AlphaRegression(u, []float64{20, 40, 40}, []float64{800, 800, 1000})
	if err != nil || math.Abs(a-10) > 1e-12 {
		t.Fatalf("%v %v", a, err)
	}
}

func TestFitLine(t *testing.T) {
	f, err := FitLine([]float64{1, 2, 3, 4}, []float64{3, 5, 7, 9})
	if err != nil || math.Abs(f.Slope-2) > 1e-12 || math.Abs(f.Intercept-1) > 1e-12 || math.Abs(f.R2-1) > 1e-12 {
		t.Fatalf("%+v %v", f, err)
	}
	f, _ = FitLine([]float64{1, 2, 3, 4}, []float64{1, 3, 2, 4})
	if !(f.R2 > 0.5 && f.R2 < 0.7) {
		t.Fatalf("R² %v", f.R2)
	}
}

func TestPredictInterval(t *testing.T) {
	grads := []Gradient{
		{Element: "web->app", Transaction: "T1", Basis: Link(), Gradient: 2, StdErr: 0.1},
		{Element: "app->db", Transaction: "T1", Basis: Link(), Gradient: 5, StdErr: 0.2},
	}
	p, err := Predict("T1", 120, 3, grads, []Change{{Element: "app->db", Delta: 20, StdErr: 1}, {Element: "web->app", Delta: -5}})
	if err != nil {
		t.Fatal(err)
	}
	// rt² = 120 + 5·20 + 2·(−5); ρ = 3² + 1²·5² + 20²·0.2² + 5²·0.1².
	wantSE := math.Sqrt(9 + 25 + 400*0.04 + 25*0.01)
	if math.Abs(p.PredictedMs-210) > 1e-9 || math.Abs(p.StdErr-wantSE) > 1e-9 || math.Abs(p.CI95[1]-(210+1.959963984540054*wantSE)) > 1e-9 {
		t.Fatalf("%+v, want 210 ± %v", p, wantSE)
	}
	if _, err := Predict("T2", 100, 0, grads, []Change{{Element: "app->db", Delta: 1}}); err == nil {
		t.Fatal("no gradient of T2: want an error")
	}
	// A capacity change through the basis: rt = 10·1000/(c·f − α·w) ms is
	// exactly linear in b, so the prediction is exact.
	cb := Basis{Kind: KindCapacity, Operating: 0.8, FrequencyMHz: 1000, Alpha: 10, Workload: 40}
	rt := func(c float64) float64 { v, _ := cb.Value(c); return 10 * 1000 * v }
	p, err = Predict("T", rt(0.8), 0, []Gradient{{Element: "cpu", Transaction: "T", Basis: cb, Gradient: 10 * 1000}}, []Change{{Element: "cpu", Absolute: true, Value: 0.6}})
	if err != nil || math.Abs(p.PredictedMs-rt(0.6)) > 1e-9 {
		t.Fatalf("capacity: %+v %v, want %v", p, err, rt(0.6))
	}
}

// Paper 000 §5.5: with a local and a remote application server, a
// transaction goes local exactly when its WS–AS gradient exceeds its AS–DB
// gradient (table 2, 30 clients: PutBidAuth local, the others remote).
func TestRoutePaperRule(t *testing.T) {
	const l = 40.0 // ms between the sites
	table2 := map[string][2]float64{"ViewItem": {1.47, 16.99}, "StoreBid": {0.68, 18.90}, "PutBidAuth": {1.46, 0.51}, "PutBid": {1.75, 19.13}}
	var grads []Gradient
	for tx, g := range table2 {
		grads = append(grads, Gradient{Element: "ws-as", Transaction: tx, Basis: Link(), Gradient: g[0], StdErr: 0.05},
			Gradient{Element: "as-db", Transaction: tx, Basis: Link(), Gradient: g[1], StdErr: 0.05})
	}
	opts := []Option{
		{Name: "local", Changes: []Change{{Element: "as-db", Delta: l}}},
		{Name: "remote", Changes: []Change{{Element: "ws-as", Delta: l}}},
	}
	for tx, g := range table2 {
		a, err := Route(tx, 100, 1, grads, opts)
		if err != nil {
			t.Fatal(err)
		}
		want := "remote"
		if g[0] > g[1] {
			want = "local"
		}
		if a.Best != want || !a.Decisive {
			t.Errorf("%s: %+v, want %s", tx, a, want)
		}
	}
}

// A centered capacity wave swings c·(1 ∓ a/2): its basis change spans the
// operating point, Knob inverts it, and to first order it equals the
// one-sided wave's while sitting between the two one-sided secants.
func TestCenteredCapacity(t *testing.T) {
	one := Basis{Kind: KindCapacity, Operating: 0.8, FrequencyMHz: 1000, Alpha: 10, Workload: 40} // U = 0.5
	c := one
	c.Centered = true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if on, off := c.On(0.2), c.Off(0.2); math.Abs(on-0.72) > 1e-12 || math.Abs(off-0.88) > 1e-12 || c.OffKnob(0.2) != -0.1 {
		t.Fatalf("on %v off %v floor %v; want 0.72, 0.88, -0.1", on, off, c.OffKnob(0.2))
	}
	if one.OffKnob(0.2) != 0 || one.Off(0.2) != 0.8 {
		t.Fatalf("a one-sided wave's off-phase is the operating point: %v %v", one.OffKnob(0.2), one.Off(0.2))
	}
	for _, a := range []float64{0.01, 0.1, 0.3, 0.9} {
		d, err := c.Delta(a)
		if err != nil || !(d > 0) {
			t.Fatalf("Delta(%v) = %v, %v", a, d, err)
		}
		vOn, _ := c.Value(0.8 * (1 - a/2))
		vOff, _ := c.Value(0.8 * (1 + a/2))
		if math.Abs(d-(vOn-vOff)) > 1e-15 {
			t.Fatalf("Delta(%v) = %v, want %v", a, d, vOn-vOff)
		}
		back, err := c.Knob(d)
		if err != nil || math.Abs(back-a) > 1e-9 {
			t.Fatalf("Knob(Delta(%v)) = %v, %v", a, back, err)
		}
	}
	// Small waves: the centered and one-sided changes agree to first order.
	dc, _ := c.Delta(0.001)
	d1, _ := one.Delta(0.001)
	if math.Abs(dc/d1-1) > 0.01 {
		t.Fatalf("centered %v against one-sided %v at a = 0.001", dc, d1)
	}
	// A large basis change asks for a wave that stays short of saturation.
	if k, err := c.Knob(1); err != nil || !(k > 0 && k < 2*(1-0.5)) {
		t.Fatalf("Knob(1) = %v, %v: the on-phase must keep c·f above α·w", k, err)
	}
	if _, err := c.Knob(0); err == nil {
		t.Fatal("a zero change has no centered wave")
	}
	for _, b := range []Basis{{Kind: KindLink, Centered: true}, {Kind: KindCPUFreq, Operating: 2400, Centered: true}} {
		if err := b.Validate(); err == nil || !strings.Contains(err.Error(), "centered") {
			t.Fatalf("%s: a centered wave must be refused: %v", b.Kind, err)
		}
	}
}

// A capacity wave above the operating point holds c in its on-phases and
// grants c·(1 + a) in its off-phases; Knob inverts it, and Nearest picks,
// for each change, the gradient measured on its side.
func TestCapacityAbove(t *testing.T) {
	below := Basis{Kind: KindCapacity, Operating: 0.8, FrequencyMHz: 1000, Alpha: 10, Workload: 40}
	above := below
	above.Above = true
	if err := above.Validate(); err != nil {
		t.Fatal(err)
	}
	if on, off, floor := above.On(0.2), above.Off(0.2), above.OffKnob(0.2); on != 0.8 || math.Abs(off-0.96) > 1e-12 || floor != -0.2 {
		t.Fatalf("on %v off %v floor %v; want 0.8, 0.96, -0.2", on, off, floor)
	}
	if iv := above.Interval(0.2); iv[0] != 0.8 || math.Abs(iv[1]-0.96) > 1e-12 {
		t.Fatalf("interval %v, want [0.8, 0.96]", iv)
	}
	if iv := below.Interval(0.2); math.Abs(iv[0]-0.64) > 1e-12 || iv[1] != 0.8 {
		t.Fatalf("interval %v, want [0.64, 0.8]", iv)
	}
	for _, a := range []float64{0.01, 0.1, 0.5, 2} {
		d, err := above.Delta(a)
		v0, _ := above.Value(0.8)
		v1, _ := above.Value(0.8 * (1 + a))
		if err != nil || math.Abs(d-(v0-v1)) > 1e-15 {
			t.Fatalf("Delta(%v) = %v, %v; want %v", a, d, err, v0-v1)
		}
		back, err := above.Knob(d)
		if err != nil || math.Abs(back-a) > 1e-9 {
			t.Fatalf("Knob(Delta(%v)) = %v, %v", a, back, err)
		}
	}
	// No grant lowers the basis by more than its whole value.
	v0, _ := above.Value(0.8)
	if _, err := above.Knob(v0); err == nil {
		t.Fatal("a change of the whole basis has no wave above")
	}
	if below.Side() != SideBelow || above.Side() != SideAbove || Link().Side() != "" {
		t.Fatalf("sides %q %q %q", below.Side(), above.Side(), Link().Side())
	}
	both := above
	both.Centered = true
	for _, b := range []Basis{both, {Kind: KindLink, Above: true}, {Kind: KindCPUFreq, Operating: 2400, Above: true}} {
		if err := b.Validate(); err == nil {
			t.Fatalf("%+v must be refused", b)
		}
	}

	// Two secants of one element: each change takes the one on its side.
	ivBelow, ivAbove := below.Interval(0.2), above.Interval(0.2)
	grads := []Gradient{
		{Element: "cpu", Transaction: "T", Basis: below, Gradient: 900, Interval: &ivBelow},
		{Element: "cpu", Transaction: "T", Basis: above, Gradient: 600, Interval: &ivAbove},
	}
	for _, tc := range []struct {
		to   float64
		side string
	}{{0.6, SideBelow}, {0.78, SideAbove + "+" + SideBelow}, {0.82, SideAbove + "+" + SideBelow}, {1.2, SideAbove}} {
		p, err := Predict("T", 50, 0, grads, []Change{{Element: "cpu", Absolute: true, Value: tc.to}})
		if err != nil || p.Terms[0].Side != tc.side {
			t.Fatalf("change to %v: %+v, %v; want the %s gradient", tc.to, p.Terms, err, tc.side)
		}
		// Outside the two secants' reach the nearest one holds; between
		// them the secant is interpolated in Δb.
		g := p.Terms[0].Gradient
		if (tc.side == SideBelow && g != 900) || (tc.side == SideAbove && g != 600) || (strings.Contains(tc.side, "+") && !(g > 600 && g < 900)) {
			t.Fatalf("change to %v: gradient %v from %s", tc.to, g, tc.side)
		}
	}
}

// A record's standard error comes from its interval's upper half-width,
// which the estimators never clip; the full width would understate a weak
// gradient's error once its lower bound is clipped at 0.
func TestStdErrFromCI95(t *testing.T) {
	if se := StdErrFromCI95(3, [2]float64{3 - z95*0.2, 3 + z95*0.2}); math.Abs(se-0.2) > 1e-12 {
		t.Fatalf("symmetric interval: %v, want 0.2", se)
	}
	if se := StdErrFromCI95(0.5, [2]float64{0, 0.5 + z95}); math.Abs(se-1) > 1e-12 {
		t.Fatalf("clipped interval: %v, want 1", se)
	}
	b := Basis{Kind: KindCapacity, Operating: 0.5, FrequencyMHz: 1000}
	if b.WithSide(SideAbove).Side() != SideAbove || b.WithSide(SideCentered).Side() != SideCentered || b.WithSide(SideAbove).WithSide(SideBelow).Side() != SideBelow {
		t.Fatal("WithSide must set exactly the side named")
	}
}
