package paperexp

import (
	"github.com/tierscope/tierscope/internal/parallel"
	"github.com/tierscope/tierscope/internal/workfactor"
)

// SeedResult is the replay of one seed: each estimator configuration's
// verdict on the machine readings and on the per-process readings, in the
// order the configurations were given.
type SeedResult struct {
	Seed       uint64
	Machine    []Verdict
	PerProcess []Verdict
}

// ReplaySeeds generates base's run on each seed and replays it with each of
// cfgs, machine and per-process readings. Seeds run in parallel (up to
// GOMAXPROCS at a time): a replay is deterministic and shares nothing, so the
// results, in the order of seeds, are those of one seed at a time. The error
// is the first seed's, in that order.
func ReplaySeeds(base Config, seeds []uint64, cfgs ...workfactor.Config) ([]SeedResult, error) {
	out := make([]SeedResult, len(seeds))
	errs := make([]error, len(seeds))
	parallel.Do(len(seeds), func(i int) { out[i], errs[i] = replaySeed(base, seeds[i], cfgs) })
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// replaySeed is ReplaySeeds for one seed.
func replaySeed(base Config, seed uint64, cfgs []workfactor.Config) (SeedResult, error) {
	res := SeedResult{Seed: seed}
	c := base
	c.Seed = seed
	run, err := Generate(c)
	if err != nil {
		return res, err
	}
	for _, perProcess := range []bool{false, true} {
		for _, cfg := range cfgs {
			o, err := Evaluate(run, cfg, perProcess)
			if err != nil {
				return res, err
			}
			if perProcess {
				res.PerProcess = append(res.PerProcess, o.Verdict)
			} else {
				res.Machine = append(res.Machine, o.Verdict)
			}
		}
	}
	return res, nil
}

// Seeds returns the seeds first to last.
func Seeds(first, last uint64) []uint64 {
	var out []uint64
	for s := first; s <= last; s++ {
		out = append(out, s)
	}
	return out
}
