package gradientsim

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tierscope/tierscope/internal/gradient"
)

// Driver runs a gradient experiment against the simulator, as the
// coordinator runs it against real injectors: every Tick seconds of
// simulated time it feeds the completed requests to the experiment, ticks
// it, and executes the actions on the simulator's injector. An element's
// ID names its target: a link "a->b" or a ps server.
type Driver struct {
	Sim *Sim
	X   *gradient.Experiment
	// Tick is the step in seconds (default 0.5).
	Tick float64
	// Log records every action, in order.
	Log []gradient.Action
	// OnStep, if set, runs after each step (progress checks, faults).
	OnStep func(d *Driver, now float64) bool
	// StopErrors counts stop actions for unknown leases.
	StopErrors int
	// InjectorSkew shifts every wave this many seconds later than asked, as
	// an injector whose clock is behind the coordinator's would.
	InjectorSkew float64
	// DropInjected never reports what a lease injected (a lost status).
	DropInjected bool
	// SayNoReport, with DropInjected, tells the experiment at once that no
	// report will come (NoInjectedReport), as the coordinator does when the
	// injector kept no statistics.
	SayNoReport bool
	// Covariates, if set, are fed to the experiment each step as what a host
	// metrics scraper reports: the value at the step's end held over the step.
	Covariates map[string]func(t float64) float64
	// Routed feeds each request with the elements it crossed
	// (ObserveRouted), as the coordinator does from a trace's spans.
	Routed   bool
	elements []string // the experiment's element IDs, in order
}

func timeOf(s float64) time.Time { return time.Unix(0, int64(math.Round(s*1e9))) }

func secondsOf(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Run drives until the experiment finishes or the time limit passes, and
// reports whether it finished.
func (d *Driver) Run(limit float64) bool {
	if d.Tick <= 0 {
		d.Tick = 0.5
	}
	prev := d.Sim.Now()
	for t := d.Sim.Now(); t <= limit; t += d.Tick {
		d.Sim.RunUntil(t)
		if t > prev {
			for _, name := range sortedNames(d.Covariates) {
				d.X.ObserveCovariate(name, prev, t, d.Covariates[name](t-1e-9))
			}
			prev = t
		}
		samples, visited := d.Sim.DrainVisited()
		for i, s := range samples {
			if d.Routed {
				d.exec(d.X.ObserveRouted(s, d.crossings(visited[i])), t)
			} else {
				d.exec(d.X.Observe(s), t)
			}
		}
		d.exec(d.X.Tick(timeOf(t)), t)
		if d.OnStep != nil && !d.OnStep(d, t) {
			return d.X.Finished()
		}
		if d.X.Finished() {
			return true
		}
	}
	return false
}

// crossings names the elements among visited, by ID.
func (d *Driver) crossings(visited []string) gradient.Crossings {
	var c gradient.Crossings
	if d.elements == nil {
		for _, e := range d.X.Result().Elements {
			d.elements = append(d.elements, e.Element)
		}
	}
	for i, e := range d.elements {
		if i < gradient.MaxRoutedElements && slices.Contains(visited, e) {
			c |= 1 << uint(i)
		}
	}
	return c
}

func (d *Driver) exec(acts []gradient.Action, now float64) {
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		d.Log = append(d.Log, a)
		switch a.Kind {
		case gradient.ActionStartLease:
			w := Wave{Key: a.Lease, Kind: a.LeaseKind, Target: a.Element, Amplitude: a.Amplitude, Floor: a.Floor,
				Start: secondsOf(a.Start) + d.InjectorSkew, Period: a.Period.Seconds(), Cycles: a.Cycles}
			if err := d.Sim.StartLease(w); err != nil {
				acts = append(acts, d.X.LeaseFailed(a.Lease, timeOf(now), err)...)
			}
		case gradient.ActionStopLease:
			inj, err := d.Sim.StopLease(a.Lease)
			if err != nil {
				d.StopErrors++
				continue
			}
			switch {
			case !d.DropInjected:
				d.X.Injected(a.Lease, inj.Mean, inj.StdErr)
			case d.SayNoReport:
				d.X.NoInjectedReport(a.Lease)
			}
		default:
			panic(fmt.Sprintf("sim driver: unknown action %q", a.Kind))
		}
	}
}
