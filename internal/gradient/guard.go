package gradient

import (
	"math"
	"slices"
	"time"

	"github.com/tierscope/tierscope/internal/spectral"
)

// Guard is the SLO guard: the experiment aborts, releasing its lease at
// once, when the p99 of the watched response times over the last Window
// exceeds P99Ms while a lease is out, and it does not start a lease while
// the p99 is over.
type Guard struct {
	P99Ms float64 // 0 turns the guard off
	// Window is the span of request times the p99 is over (default 30 s).
	Window time.Duration
	// MinSamples is the fewest samples the p99 is judged on (default 100).
	MinSamples int
	// Transactions are watched together; empty watches every transaction.
	Transactions []string
}

// guardWindow keeps the watched samples of the last Window (by request
// time) and the count over the bound, so the p99 test is O(1): with n
// samples the nearest-rank p99 is the ⌈0.99·n⌉-th smallest, so it exceeds
// the bound exactly when more than n − ⌈0.99·n⌉ samples do.
type guardWindow struct {
	cfg    Guard
	watch  map[string]bool
	times  []float64 // a queue: times[head:], ms[head:]
	ms     []float64
	head   int
	nOver  int
	latest float64
}

// guardCap bounds the samples the guard holds; past it the oldest go.
const guardCap = 1 << 18

func (g *guardWindow) init(cfg Guard) {
	g.cfg = cfg
	if len(cfg.Transactions) > 0 {
		g.watch = map[string]bool{}
		for _, tx := range cfg.Transactions {
			g.watch[tx] = true
		}
	}
}

// add records s and reports whether the guard is now violated.
func (g *guardWindow) add(s spectral.Sample) bool {
	if g.cfg.P99Ms <= 0 || (g.watch != nil && !g.watch[s.Transaction]) {
		return false
	}
	if s.Time > g.latest {
		g.latest = s.Time
	}
	if len(g.times)-g.head >= guardCap {
		g.pop()
	}
	over := s.Ms > g.cfg.P99Ms
	g.times = append(g.times, s.Time)
	g.ms = append(g.ms, s.Ms)
	if over {
		g.nOver++
	}
	g.evict()
	return over && g.violated()
}

func (g *guardWindow) pop() {
	if g.ms[g.head] > g.cfg.P99Ms {
		g.nOver--
	}
	g.head++
	if g.head > 1024 && g.head*2 > len(g.times) {
		g.times = append(g.times[:0], g.times[g.head:]...)
		g.ms = append(g.ms[:0], g.ms[g.head:]...)
		g.head = 0
	}
}

// evict forgets samples older than Window before the latest. Samples come
// roughly in time order (they are reported as requests end), so the oldest
// are at the head; a straggler behind a newer sample leaves a little late.
func (g *guardWindow) evict() {
	for g.head < len(g.times) && g.times[g.head] < g.latest-g.cfg.Window.Seconds() {
		g.pop()
	}
}

func (g *guardWindow) violated() bool {
	if g.cfg.P99Ms <= 0 {
		return false
	}
	n := len(g.times) - g.head
	if n < g.cfg.MinSamples {
		return false
	}
	return g.nOver > n-int(math.Ceil(0.99*float64(n)))
}

// p99 is the nearest-rank p99 of the window, computed only for messages.
func (g *guardWindow) p99() float64 {
	v := slices.Clone(g.ms[g.head:])
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[int(math.Ceil(0.99*float64(len(v))))-1]
}
