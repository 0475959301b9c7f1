package load

import (
	"math"
	"math/rand/v2"
	"time"
)

// Stream kinds: each owner of random choices gets its own PCG stream, so that
// the choices of one user do not depend on how the others interleave.
const (
	kindUser uint64 = iota + 1
	kindSession
	kindArrivals
	kindSchedule
)

// procRandom numbers the random process after the three base processes.
const procRandom = 3

// splitmix64 scrambles stream identifiers into well-spread PCG seeds.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// stream returns the PCG stream of (seed, ids...).
func stream(seed uint64, ids ...uint64) *rand.Rand {
	h := splitmix64(seed)
	for _, id := range ids {
		h = splitmix64(h ^ id)
	}
	return rand.New(rand.NewPCG(h, splitmix64(h^0x5bd1e995)))
}

// step is one request of a session and the think time before it.
type step struct {
	think time.Duration
	class string
	name  string
	last  bool // the session ends after this request
}

type chooser struct {
	rng       *rand.Rand
	pBrowse   float64
	browsing  []string
	ordering  []string
	thinkMean time.Duration
	pEnd      float64
}

func (r *runner) chooser(pBrowse float64, ids ...uint64) *chooser {
	return &chooser{
		rng:       stream(r.opt.Seed, ids...),
		pBrowse:   pBrowse,
		browsing:  r.opt.Classes["browsing"],
		ordering:  r.opt.Classes["ordering"],
		thinkMean: r.opt.ThinkMean,
		pEnd:      1 / r.opt.SessionLength,
	}
}

// next draws the same number of values per step whatever the outcome, so the
// sequence of a stream is fixed by the seed alone.
func (c *chooser) next() step {
	// TPC-W truncates think times at ten times their mean.
	think := min(c.rng.ExpFloat64(), 10) * float64(c.thinkMean)
	class, names := "browsing", c.browsing
	if c.rng.Float64() >= c.pBrowse {
		class, names = "ordering", c.ordering
	}
	if len(names) == 0 { // a class without transactions yields to the other
		if class == "browsing" {
			class, names = "ordering", c.ordering
		} else {
			class, names = "browsing", c.browsing
		}
	}
	name := names[c.rng.IntN(len(names))]
	return step{think: time.Duration(think), class: class, name: name, last: c.rng.Float64() < c.pEnd}
}

// baseShares are the base processes' sizes in table III mix I: 20, 30 and 50
// browsers of 100 run the browsing, shopping and ordering mixes.
var baseShares = [3]float64{0.2, 0.3, 0.5}

// baseUsers splits users over the base processes in the 20/30/50 ratio; the
// ordering process takes the rounding remainder so the sizes sum to users.
func baseUsers(users int) (browsing, shopping, ordering int) {
	browsing = int(math.Round(baseShares[0] * float64(users)))
	shopping = int(math.Round(baseShares[1] * float64(users)))
	return browsing, shopping, users - browsing - shopping
}

// paperRun is the length of the paper's runs, which its ranges refer to.
const paperRun = 3 * time.Hour

type period struct {
	start, end time.Duration
	users      int
	rate       float64
}

// schedule draws the random process of fig. 2 for a run of length d.
//
// Scaling: the paper runs 3 h with execution periods in [20, 30] min and sleep
// periods in [10, 20] min, i.e. [1/9, 1/6] and [1/18, 1/9] of the run; those
// fractions are kept, so any Duration sees about 4.5 execution/sleep cycles
// (an unbounded run uses the paper's 3 h). Its size is random(150, 700)
// browsers for base processes of 100 browsers in total (table III), i.e.
// uniform in [1.5, 7]·users, or for an open loop a session rate uniform in
// [1.5, 7]·rate.
func schedule(seed uint64, d time.Duration, users int, rate float64) []period {
	if d <= 0 {
		d = paperRun
	}
	rng := stream(seed, kindSchedule)
	uniform := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(rng.Float64()*float64(hi-lo))
	}
	lo := max(1, int(math.Round(1.5*float64(users))))
	hi := max(lo, int(math.Round(7*float64(users))))
	var out []period
	for t := time.Duration(0); t < d; {
		exe := uniform(d/9, d/6)
		p := period{start: t, end: t + exe, users: lo + rng.IntN(hi-lo+1), rate: (1.5 + 5.5*rng.Float64()) * rate}
		out = append(out, p)
		t += exe + uniform(d/18, d/9)
	}
	return out
}
