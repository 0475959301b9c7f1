package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/tierscope/tierscope/internal/workfactor"
	"github.com/tierscope/tierscope/internal/workfactor/scenario"
)

// devVariants are the configurations -dev compares (issue 37's fourth round:
// where a regime found by a CUSUM alarm started).
func devVariants() []estimator {
	with := func(cp workfactor.ChangePointMethod) workfactor.Config {
		c := workfactor.DefaultConfig()
		c.ChangePoint = cp
		return c
	}
	return []estimator{
		{"recent", with(workfactor.ChangePointRecent)},
		{"excursion", with(workfactor.ChangePointExcursion)},
		{"mean-shift", with(workfactor.ChangePointMeanShift)},
		{"regression", with(workfactor.ChangePointRegression)},
	}
}

// devSets prints, per variant, the development sets of issue 37's third and
// fourth rounds: a release of 3 flows (seeds 101–220); releases of 1, 5 and
// 7 flows (101–160); the ten sweep settings other than the must-show one
// with a release (101–120); and stationary runs (101–160). The paper replay's
// columns come from `wfreplay -change-points` (simulators stay out of
// production code, this command included).
func devSets(w io.Writer, only string) error {
	fmt.Fprintln(w, "| variant | release of 3, 101–220 | release of 1 / 5 / 7, 101–160 | sweeps with a release, 101–120 | development total (500) | against the first variant: runs won, lost | stationary, 101–160 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	var first []bool
	for _, v := range devVariants() {
		if only != "" && !strings.Contains(","+only+",", ","+v.name+",") {
			continue
		}
		var runs []bool
		passed := func(c scenario.Config, first, n int) (int, error) {
			outs, err := batch(c, withEstimator(v.cfg), first, n)
			if err != nil {
				return 0, err
			}
			if c.ReleaseAt > 0 {
				for _, o := range outs {
					runs = append(runs, o.Pass)
				}
			}
			return scenario.Summarise("", outs).Passed, nil
		}
		rel3, err := passed(withRelease(scenario.Default()), 101, 120)
		if err != nil {
			return err
		}
		var rf [3]int
		for i, k := range []int{1, 5, 7} {
			c := withRelease(scenario.Default())
			c.ReleaseFlows = k
			if rf[i], err = passed(c, 101, 60); err != nil {
				return err
			}
		}
		sw := 0
		for _, s := range sweepAxes() {
			for _, x := range s.xs {
				c := scenario.Default()
				s.set(&c, x)
				if c == scenario.Default() || c.Flows < 2*c.Collinear {
					continue
				}
				rc := withRelease(c)
				rc.ReleaseFlows = min(rc.ReleaseFlows, c.Flows)
				n, err := passed(rc, 101, 20)
				if err != nil {
					return err
				}
				sw += n
			}
		}
		st, err := passed(scenario.Default(), 101, 60)
		if err != nil {
			return err
		}
		if first == nil {
			first = runs
		}
		won, lost := 0, 0
		for i := range runs {
			won += boolInt(runs[i] && !first[i])
			lost += boolInt(!runs[i] && first[i])
		}
		fmt.Fprintf(w, "| %s | %d/120 | %d / %d / %d of 60 | %d/200 | %d | %d, %d | %d/60 |\n",
			v.name, rel3, rf[0], rf[1], rf[2], sw, rel3+rf[0]+rf[1]+rf[2]+sw, won, lost, st)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
