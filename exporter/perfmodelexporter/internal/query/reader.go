// Package query is the perfmodel exporter's read side: it merges the
// stored window statistics over shards and windows (with hour rollups and
// an LRU cache of settled blocks), and runs the models over them, the
// work factors (paper 002), the signatures (paper 004) and the predictions
// from stored gradients (paper 000 §5.3), into the API's documents.
package query // import "github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/query"

import (
	"time"

	"go.uber.org/zap"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/timegrid"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/store"
	"github.com/tierscope/tierscope/internal/workfactor"
)

// Settings is what the read side needs of the exporter's configuration.
type Settings struct {
	// Window is the window length in seconds; OpenWindows and FlushInterval
	// say when the writers are done with a window (SettledBefore).
	Window        int64
	OpenWindows   int64
	FlushInterval time.Duration
	// Shard is this instance's: it rolls up its own windows.
	Shard  string
	Now    func() time.Time
	Logger *zap.Logger

	// HalfLife and SmoothingHalfLife are the work-factor regression's, in
	// windows; Method is its solver.
	HalfLife, SmoothingHalfLife float64
	Method                      workfactor.Method
	// CoreMHz is one core's speed, for the work factor vs signature
	// cross-check; 0 turns it off.
	CoreMHz float64
	// CapacityMHz and MachineCapacityMHz are the configured Ω.
	CapacityMHz        float64
	MachineCapacityMHz map[string]float64
}

// Reader answers the API's questions from the store.
type Reader struct {
	set        Settings
	st         store.Store
	cache      *blockCache
	rolledUpTo int64 // hours before it are rolled up (warming goroutine only)
}

// New returns a reader; Open gives it the store.
func New(set Settings) *Reader {
	return &Reader{set: set, cache: newBlockCache()}
}

// Open gives the reader the store it reads.
func (q *Reader) Open(st store.Store) { q.st = st }

// Window is the window length in seconds.
func (q *Reader) Window() int64 { return q.set.Window }

// Now is the reader's clock.
func (q *Reader) Now() time.Time { return q.set.Now() }

// ResetCache forgets every cached block: the store changed under them.
func (q *Reader) ResetCache() { q.cache.reset() }

// CacheGeneration counts the cache's resets.
func (q *Reader) CacheGeneration() uint64 { return q.cache.generation() }

// LastHour is the last hour to now, widened to whole windows.
func (q *Reader) LastHour() api.TimeRange {
	now := q.set.Now()
	return api.TimeRange{From: alignDown(now.Add(-time.Hour).Unix(), q.set.Window), To: alignDown(now.Unix()+q.set.Window-1, q.set.Window)}
}

// Capacity is Ω of a machine: configured, else measured, else 0 (unknown).
func (q *Reader) Capacity(machine string, c *model.CPUStats) float64 {
	if v, ok := q.set.MachineCapacityMHz[machine]; ok {
		return v
	}
	if q.set.CapacityMHz > 0 {
		return q.set.CapacityMHz
	}
	return c.CapacityMHz
}

func alignDown(t, r int64) int64 { return timegrid.AlignDown(t, r) }
