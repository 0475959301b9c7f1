//go:build long

package e2e

import "time"

// The model checks' lengths and tolerance. They need a quiet machine and
// minutes, hence the build tag: scripts/e2e-models.sh runs them (about 11
// minutes on 2 cores).
const (
	// 70 whole periods of 5 s: with 34 (3 minutes) the app tier's six flows
	// over two processes were often combined and shared one estimate.
	wfDuration = 6 * time.Minute
	// Three load runs of 2 minutes: about 13 on/off cycles of each
	// transaction's random process instead of 4.5 (runVaryingLoad).
	wfSegments = 3
	// The bound for flows ≥ 5% of CPU. Earlier runs missed it on db
	// search_items (+21% to +44%): the exporter aged its data with h = 10
	// periods of this test's 5 s windows (about a minute of data), and
	// weighed each process's rows by f(its own share). Half-lives are now
	// durations (10 min, the paper's 10 periods of a minute) and per-process
	// rows are not discounted; replayed offline on the same samples, every
	// flow ≥ 5% came within 12%.
	wfTolerance = 0.15
	sigUsers    = 4
	sigDuration = 2 * time.Minute // per version
)
