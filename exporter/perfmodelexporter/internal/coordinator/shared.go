package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/apierror"
	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/span"
	"github.com/tierscope/tierscope/internal/spectral"
	"github.com/tierscope/tierscope/internal/store"
)

// Analyzers that share a PostgreSQL coordinate each element's experiment
// exactly once (docs/scale-out.md): the analyzer an experiment is started on
// takes a lease per element in the database, which every other analyzer
// refuses to take while it lives; and since the gateway splits traces by id,
// each analyzer sees only its share of the front requests, so every other
// analyzer hands the front samples it sees to the lease holder through the
// database, and the coordinator measures the merged series.
const (
	// sharedLeaseTTL is how long a lease outlives its holder's last renewal:
	// another analyzer may coordinate the element that long after a crash.
	sharedLeaseTTL = 30 * time.Second
	// sharedRenewEvery renews well before expiry.
	sharedRenewEvery = 10 * time.Second
	// sharedPoll is how often leases are read, samples handed over and taken.
	sharedPoll = time.Second
	// maxSharedBuffer bounds the samples held for one remote coordinator
	// between polls; more are dropped and counted.
	maxSharedBuffer = 100000
)

// sharedCoord is the cross-analyzer side of the experiments.
type sharedCoord struct {
	x     *Coordinator
	st    store.Leases
	owner string

	// publishing says another analyzer coordinates an experiment now: front
	// samples are then buffered for it (read by observe without the lock).
	publishing atomic.Bool

	mu      sync.Mutex
	remote  map[string]*remoteExperiment // by experiment id, coordinated elsewhere
	seq     int64                        // this analyzer's batches
	cursors map[string]map[string]int64  // experiment → shard → last batch taken
	renewed map[string]time.Time         // local experiment → last renewal attempt
	// renewedOK is each local experiment's last successful renewal.
	renewedOK map[string]time.Time

	// Counts for the logs and tests: samples handed over, taken, dropped.
	handed, taken, dropped atomic.Int64
}

// remoteExperiment is an experiment another analyzer coordinates: its
// elements' routes, to say which of them each request crossed.
type remoteExperiment struct {
	routes     []elementRoute
	references bool
	buf        []sharedSample
}

// sharedLease is a lease's payload: what the other analyzers need to feed
// the coordinator.
type sharedLease struct {
	Routes     []sharedRoute `json:"routes"`
	References bool          `json:"references"`
}

type sharedRoute struct {
	Caller  string `json:"caller,omitempty"`
	Address string `json:"address,omitempty"`
}

// sharedSample is one front request handed to the coordinator.
type sharedSample struct {
	T       float64 `json:"t"`
	Tx      string  `json:"x"`
	Ms      float64 `json:"ms"`
	Crossed uint64  `json:"c,omitempty"`
	Routed  bool    `json:"r,omitempty"`
}

// startShared coordinates experiments through the store when it is shared
// (PostgreSQL); one instance on SQLite coordinates alone.
func (x *Coordinator) startShared(dsn string) {
	l, ok := x.st.(store.Leases)
	if !ok || !isSharedDSN(dsn) {
		return
	}
	sc := &sharedCoord{x: x, st: l, owner: x.set.Shard,
		remote: map[string]*remoteExperiment{}, cursors: map[string]map[string]int64{},
		renewed: map[string]time.Time{}, renewedOK: map[string]time.Time{}}
	x.shared = sc
	x.done.Add(1)
	go func() {
		defer x.done.Done()
		tick := time.NewTicker(sharedPoll)
		defer tick.Stop()
		for {
			select {
			case <-x.stop:
				return
			case <-tick.C:
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := sc.poll(ctx, x.now()); err != nil {
					x.set.Logger.Warn("perfmodel: shared experiment coordination", zap.Error(err))
				}
				cancel()
			}
		}
	}()
}

// SharedCounts are the front samples handed to other analyzers'
// experiments, taken from them for this one's, and dropped; shared is false
// when this instance coordinates alone.
func (x *Coordinator) SharedCounts() (handed, taken, dropped int64, shared bool) {
	if x.shared == nil {
		return 0, 0, 0, false
	}
	return x.shared.handed.Load(), x.shared.taken.Load(), x.shared.dropped.Load(), true
}

func isSharedDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

func leaseName(element string) string { return "experiment " + element }

// acquire takes the run's elements for this analyzer, or answers 409 when
// another analyzer coordinates one of them or max_concurrent experiments
// run across the analyzers.
func (sc *sharedCoord) acquire(ctx context.Context, run *runner) error {
	names := make([]string, 0, len(run.plans))
	for _, el := range slices.Sorted(maps.Keys(run.plans)) {
		names = append(names, leaseName(el))
	}
	p := sharedLease{References: run.gcfg.References}
	for _, r := range run.routes {
		p.Routes = append(p.Routes, sharedRoute{Caller: r.caller, Address: r.address})
	}
	payload, err := json.Marshal(p)
	if err != nil {
		return err
	}
	now := sc.x.now()
	err = sc.st.AcquireLeases(ctx, names, run.id, sc.owner, payload, now.UnixMilli(), now.Add(sharedLeaseTTL).UnixMilli(), sc.x.set.Experiments.MaxConcurrent)
	switch {
	case errors.Is(err, store.ErrLeaseHeld):
		return apierror.New(http.StatusConflict, "another analyzer coordinates this element: %v", err)
	case errors.Is(err, store.ErrLeaseLimit):
		return apierror.New(http.StatusConflict, "experiments.max_concurrent experiment(s) already run across the analyzers: %v", err)
	case err != nil:
		return apierror.New(http.StatusServiceUnavailable, "cannot take the experiment's leases: %v", err)
	}
	sc.mu.Lock()
	sc.renewed[run.id], sc.renewedOK[run.id] = now, now
	sc.cursors[run.id] = map[string]int64{}
	sc.mu.Unlock()
	return nil
}

// release drops an ended experiment's leases (bounded; they expire anyway).
func (sc *sharedCoord) release(id string) {
	sc.mu.Lock()
	delete(sc.renewed, id)
	delete(sc.renewedOK, id)
	delete(sc.cursors, id)
	sc.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := sc.st.ReleaseLeases(ctx, id, sc.owner); err != nil {
		sc.x.set.Logger.Warn("perfmodel: releasing an experiment's leases; they expire by themselves", zap.String("experiment", id), zap.Error(err))
	}
}

// offer buffers a front request for every experiment coordinated elsewhere
// (under the ingest lock: it marks the routes' addresses seen, as crossings does).
func (sc *sharedCoord) offer(spans []span.Span, names *span.Names, s spectral.Sample) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, re := range sc.remote {
		if len(re.buf) >= maxSharedBuffer {
			sc.dropped.Add(1)
			continue
		}
		ss := sharedSample{T: s.Time, Tx: s.Transaction, Ms: s.Ms}
		if re.references {
			var c gradient.Crossings
			for i := range re.routes {
				if re.routes[i].crossedBy(spans, names) {
					c |= 1 << uint(i)
				}
			}
			ss.Crossed, ss.Routed = uint64(c), true
		}
		re.buf = append(re.buf, ss)
	}
}

// poll follows the leases, hands buffered samples to their coordinators,
// renews this analyzer's leases and feeds its experiments what the others
// handed over.
func (sc *sharedCoord) poll(ctx context.Context, now time.Time) error {
	leases, err := sc.st.LiveLeases(ctx, now.UnixMilli())
	if err != nil {
		return err
	}
	var errs []error
	sc.mu.Lock()
	live := map[string]bool{}
	for _, l := range leases {
		if l.Owner == sc.owner {
			continue
		}
		live[l.Group] = true
		if _, ok := sc.remote[l.Group]; ok {
			continue
		}
		var p sharedLease
		if err := json.Unmarshal(l.Payload, &p); err != nil {
			errs = append(errs, fmt.Errorf("lease %q: %w", l.Name, err))
			continue
		}
		re := &remoteExperiment{references: p.References}
		for _, r := range p.Routes {
			re.routes = append(re.routes, elementRoute{caller: r.Caller, address: r.Address})
		}
		sc.remote[l.Group] = re
	}
	type batch struct {
		group string
		seq   int64
		body  []sharedSample
	}
	var out []batch
	for id, re := range sc.remote {
		if !live[id] {
			delete(sc.remote, id)
			continue
		}
		if len(re.buf) > 0 {
			sc.seq++
			out = append(out, batch{id, sc.seq, re.buf})
			re.buf = nil
		}
	}
	sc.publishing.Store(len(sc.remote) > 0)
	var renew []string
	for id, last := range sc.renewed {
		if now.Sub(last) >= sharedRenewEvery {
			renew = append(renew, id)
			sc.renewed[id] = now
		}
	}
	local := make([]string, 0, len(sc.cursors))
	for id := range sc.cursors {
		local = append(local, id)
	}
	sc.mu.Unlock()

	for _, b := range out {
		body, err := json.Marshal(b.body)
		if err == nil {
			err = sc.st.PutLeaseSamples(ctx, b.group, sc.owner, b.seq, body)
		}
		if err != nil {
			sc.dropped.Add(int64(len(b.body)))
			errs = append(errs, err)
			continue
		}
		sc.handed.Add(int64(len(b.body)))
	}
	for _, id := range renew {
		err := sc.st.RenewLeases(ctx, id, sc.owner, now.UnixMilli(), now.Add(sharedLeaseTTL).UnixMilli())
		sc.mu.Lock()
		if err == nil {
			sc.renewedOK[id] = now
		}
		// Unrenewed for a lease's length, it may have been taken: stop.
		stale := now.Sub(sc.renewedOK[id]) >= sharedLeaseTTL-sharedRenewEvery
		sc.mu.Unlock()
		if errors.Is(err, store.ErrLeaseLost) || (err != nil && stale) {
			if r, ok := sc.x.get(id); ok {
				r.abort(fmt.Sprintf("its lease in the shared store was lost or could not be renewed (%v): another analyzer may coordinate the element now", err))
			}
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	for _, id := range local {
		if err := sc.feed(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// feed takes the samples other analyzers handed to experiment id and gives
// them to its runner.
func (sc *sharedCoord) feed(ctx context.Context, id string) error {
	r, ok := sc.x.get(id)
	if !ok {
		return nil
	}
	batches, err := sc.st.TakeLeaseSamples(ctx, id)
	if err != nil || len(batches) == 0 {
		return err
	}
	var errs []error
	for _, b := range batches {
		sc.mu.Lock()
		cur := sc.cursors[id]
		seen := cur != nil && b.Seq <= cur[b.Shard]
		if cur != nil && !seen {
			cur[b.Shard] = b.Seq
		}
		sc.mu.Unlock()
		if seen {
			continue
		}
		var body []sharedSample
		if err := json.Unmarshal(b.Payload, &body); err != nil {
			errs = append(errs, fmt.Errorf("samples from %s: %w", b.Shard, err))
			continue
		}
		for _, s := range body {
			fs := frontSample{Sample: spectral.Sample{Time: s.T, Transaction: s.Tx, Ms: s.Ms}, crossed: gradient.Crossings(s.Crossed), routed: s.Routed}
			select {
			case r.samples <- fs:
				sc.taken.Add(1)
			default:
				r.dropped.Add(1)
			}
		}
	}
	return errors.Join(errs...)
}
