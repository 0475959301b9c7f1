package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/timegrid"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/leaseapi"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/store"
)

// The runner of one experiment: its loop over the gradient state machine,
// the injector leases it holds, and what it publishes and persists.

// leaseRef is one lease the experiment holds at the injector.
type leaseRef struct {
	id        string // the injector's
	element   string
	amplitude float64
}

// runner drives one experiment: its goroutine alone owns the state machine
// and the leases; the API reads the snapshot.
type runner struct {
	x       *Coordinator
	id      string
	element string                 // the elements, comma-separated
	plans   map[string]elementPlan // by element: what its leases perturb, at which injector
	gcfg    gradient.Config
	routes  []elementRoute // by element index, for references (under x.mu)
	samples chan frontSample
	// covariates carries host steal readings (observeSteal).
	covariates chan covariateSample
	dropped    atomic.Int64

	stopOnce   sync.Once
	stopCh     chan struct{}
	stopReason atomic.Value // string
	done       chan struct{}

	// Owned by the run goroutine.
	exp         *gradient.Experiment
	pending     []frontSample
	pendingCovs []covariateSample
	leases      map[string]*leaseRef
	started     time.Time
	lastPersist time.Time
	lastPhase   string

	mu   sync.Mutex
	snap api.Experiment
}

func (r *runner) abort(reason string) {
	r.stopOnce.Do(func() {
		r.stopReason.Store(reason)
		close(r.stopCh)
	})
}

func (r *runner) snapshot() api.Experiment {
	r.mu.Lock()
	defer r.mu.Unlock()
	ex := r.snap
	ex.Gradients = append([]api.Gradient(nil), r.snap.Gradients...)
	return ex
}

func (r *runner) logger() *zap.Logger {
	return r.x.set.Logger.With(zap.String("experiment", r.id), zap.String("element", r.element))
}

// run ticks the state machine every second, feeds it the samples and
// executes its actions until it ends or is aborted.
func (r *runner) run() {
	defer close(r.done)
	tick := time.NewTicker(tickInterval)
	defer tick.Stop()
	r.persist(true)
	for !r.finished() {
		select {
		case <-r.stopCh:
			reason, _ := r.stopReason.Load().(string)
			r.end(reason)
			return
		case s := <-r.samples:
			r.observe(s)
		case c := <-r.covariates:
			r.observeCovariate(c)
		case <-tick.C:
			r.drain()
			r.tick(r.x.now())
		}
	}
	r.end("")
}

func (r *runner) finished() bool { return r.exp != nil && r.exp.Finished() }

func (r *runner) drain() {
	for {
		select {
		case s := <-r.samples:
			r.observe(s)
		case c := <-r.covariates:
			r.observeCovariate(c)
		default:
			return
		}
	}
}

// observeCovariate feeds a steal reading to the state machine, or holds it
// (bounded) until the target is chosen: the training grid starts with the
// samples held then.
func (r *runner) observeCovariate(c covariateSample) {
	if r.exp == nil {
		holdPending(r, &r.pendingCovs, c, maxPendingCovariates)
		return
	}
	r.exp.ObserveCovariate(c.name, c.from, c.to, c.v)
}

// holdPending keeps v until the state machine exists, while buf has room,
// and counts what it drops.
func holdPending[T any](r *runner, buf *[]T, v T, limit int) {
	if len(*buf) < limit {
		*buf = append(*buf, v)
	} else {
		r.dropped.Add(1)
	}
}

func (r *runner) observe(s frontSample) {
	if r.exp == nil {
		holdPending(r, &r.pending, s, maxPending)
		return
	}
	r.feed(s)
}

// feed gives the state machine one sample and carries out what it says (a
// stop when the SLO guard trips).
func (r *runner) feed(s frontSample) {
	if s.routed {
		r.execute(r.exp.ObserveRouted(s.Sample, s.crossed))
		return
	}
	r.execute(r.exp.Observe(s.Sample))
}

func (r *runner) tick(now time.Time) {
	if r.exp == nil && !r.discover(now) {
		r.publish(now)
		return
	}
	r.execute(r.exp.Tick(now))
	r.publish(now)
}

// discover chooses the busiest front transaction as the target once enough
// samples came, and replays them into a new state machine.
func (r *runner) discover(now time.Time) bool {
	if len(r.pending) < discoverySamples {
		if now.Sub(r.started) > discoveryTimeout {
			r.fail(fmt.Sprintf("only %d front SERVER spans in %v: nothing to measure", len(r.pending), discoveryTimeout))
		}
		return false
	}
	counts := map[string]int{}
	for _, s := range r.pending {
		counts[s.Transaction]++
	}
	best := ""
	for _, tx := range slices.Sorted(maps.Keys(counts)) {
		if counts[tx] > counts[best] {
			best = tx
		}
	}
	cfg := r.gcfg
	cfg.Target = best
	exp, err := gradient.NewExperiment(cfg)
	if err != nil {
		r.fail(err.Error())
		return false
	}
	r.exp = exp
	for _, c := range r.pendingCovs {
		exp.ObserveCovariate(c.name, c.from, c.to, c.v)
	}
	for _, s := range r.pending {
		r.feed(s)
	}
	r.pending, r.pendingCovs = nil, nil
	return true
}

func (r *runner) fail(reason string) {
	// Before the state machine exists there are no gradients to store first.
	r.mu.Lock()
	r.snap.Phase, r.snap.Reason, r.snap.Finished = "failed", reason, r.x.now().Unix()
	r.mu.Unlock()
	r.abort(reason)
}

// execute carries out the state machine's actions against the injector.
func (r *runner) execute(acts []gradient.Action) {
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		switch a.Kind {
		case gradient.ActionStartLease:
			if err := r.startLease(a); err != nil {
				r.logger().Warn("perfmodel: injector lease failed", zap.String("lease", a.Lease), zap.Error(err))
				acts = append(acts, r.exp.LeaseFailed(a.Lease, r.x.now(), err)...)
			}
		case gradient.ActionStopLease:
			mean, stdErr, ok, failed := r.stopLease(a.Lease)
			switch {
			case failed != nil:
				// The perturbation stopped before its end (e.g. another
				// process deleted the rule): the window did not get the wave
				// it asked for, so its measurement is discarded.
				r.logger().Warn("perfmodel: injector lease failed while running; its measurement is discarded", zap.String("lease", a.Lease), zap.Error(failed))
				acts = append(acts, r.exp.LeaseFailed(a.Lease, r.x.now(), failed)...)
			case ok:
				r.exp.Injected(a.Lease, mean, stdErr)
			default:
				r.exp.NoInjectedReport(a.Lease)
			}
		}
	}
}

func (r *runner) startLease(a gradient.Action) error {
	p, ok := r.plans[a.Element]
	if !ok {
		return fmt.Errorf("no element %q in this experiment", a.Element)
	}
	start := a.Start.UTC()
	body := leaseapi.Request{
		Kind:   a.LeaseKind,
		Target: p.target,
		Wave: leaseapi.Wave{Amplitude: a.Amplitude, Period: a.Period.String(), Cycles: a.Cycles,
			Start: &start},
		Duration: a.Duration.Round(time.Millisecond).String(),
	}
	if a.LeaseKind == gradient.KindLink.LeaseKind() {
		body.Wave.Floor = float64(r.x.set.Experiments.DelayFloor) / float64(time.Millisecond)
	} else {
		body.Wave.Floor = a.Floor // a centered or above capacity wave's grant
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	st, err := p.inj.Create(ctx, body)
	if err != nil {
		return err
	}
	if st.ID == "" {
		return errors.New("injector answered without a lease id")
	}
	r.leases[a.Lease] = &leaseRef{id: st.ID, element: a.Element, amplitude: a.Amplitude}
	return nil
}

// stopLease deletes the lease at the injector and returns the on-phase delay
// it actually applied, with its standard error (see injectedDelay); failed
// is set when the injector reports that the lease failed while it ran.
func (r *runner) stopLease(name string) (mean, stdErr float64, ok bool, failed error) {
	ref, ok := r.leases[name]
	if !ok {
		return 0, 0, false, nil
	}
	p := r.plans[ref.element]
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	st, err := p.inj.Stop(ctx, ref.id)
	if leaseapi.IsNotFound(err) {
		delete(r.leases, name) // already forgotten by the injector: nothing active
		return 0, 0, false, nil
	}
	if err != nil {
		// Kept for a retry at the end; the lease expires by itself anyway.
		r.logger().Warn("perfmodel: releasing injector lease failed", zap.String("lease", ref.id), zap.Error(err))
		return 0, 0, false, nil
	}
	delete(r.leases, name)
	if st.State == leaseapi.StateFailed {
		return 0, 0, false, fmt.Errorf("lease %s failed: %s", ref.id, st.Error)
	}
	if p.target.CPUs != nil {
		// The injector rounds a frequency wave to a P-state: the step it
		// took is the change injected, known exactly.
		if st.Stats == nil || !(st.Stats.StepKHz > 0) {
			return 0, 0, false, nil
		}
		return st.Stats.StepKHz, 0, true, nil
	}
	mean, stdErr, ok = injectedDelay(ref.amplitude, st)
	if s := st.Stats; ok && s != nil {
		fields := []zap.Field{zap.String("lease_element", ref.element), zap.Float64("amplitude_ms", ref.amplitude),
			zap.Float64("injected_ms", mean), zap.Float64("injected_se_ms", stdErr)}
		if s.On != nil && s.Off != nil {
			fields = append(fields, zap.Float64("packets_on_minus_off_ms", s.On.MeanMs-s.Off.MeanMs), zap.Int("packets_on", s.On.Count))
		}
		if p := s.Probe; p != nil && p.On != nil && p.Off != nil {
			fields = append(fields, zap.Float64("probes_on_minus_off_ms", p.On.MeanMs-p.Off.MeanMs), zap.Int("probes_on", p.On.Count))
		}
		r.logger().Info("perfmodel: injector lease released", fields...)
	}
	return mean, stdErr, ok, nil
}

// minProbesPerPhase is how many probes each phase needs before their on −
// off is taken over the hook-to-verdict one: 20 s of the injector's default
// 50 ms probe stream, so an active window qualifies and a single cycle not.
const minProbesPerPhase = 200

// injectedDelay is the on-phase delay a lease's statistics show (paper 000
// §3: the delay actually injected, not the amplitude requested). The
// injector splits its measurements by phase: the on-phase mean less the
// off-phase mean is the delay the wave added, free of the pass-through time
// and the floor every packet pays, scaled to the amplitude by the phases'
// requested difference. Its loopback probes, timed from send to receive,
// are preferred when there are enough of them: the packets' own times run
// from the injector's hook to its verdict and miss the extra wait a busy
// host adds to the on-phase before the hook and after the verdict (a 1.5 ms
// wave reached a receiver 4–11% larger than those times; the probes read
// it within two standard errors in 11 of 12 cases, `make bench-hold-cost`). An injector
// without the split gives only the mean over every packet; then the
// on-phase delay is the amplitude scaled by the ratio of actual to requested
// means, after the pass-through time (at least min_ms) is subtracted.
func injectedDelay(amplitude float64, st leaseapi.Status[*leaseapi.Stats]) (mean, stdErr float64, ok bool) {
	s := st.Stats
	if s == nil || s.Count == 0 {
		return 0, 0, false
	}
	byPhase := func(on, off *leaseapi.PhaseStats, min int) (mean, stdErr float64, ok bool) {
		if on == nil || off == nil || on.Count < min || off.Count < min || !(on.RequestedMeanMs > off.RequestedMeanMs) {
			return 0, 0, false
		}
		// Both phases' requests include the floor; their difference is the wave.
		scale := amplitude / (on.RequestedMeanMs - off.RequestedMeanMs)
		mean = math.Max(0, on.MeanMs-off.MeanMs) * scale
		stdErr = math.Hypot(on.StdMs/math.Sqrt(float64(on.Count)), off.StdMs/math.Sqrt(float64(off.Count))) * scale
		return mean, stdErr, true
	}
	if p := s.Probe; p != nil {
		if mean, stdErr, ok := byPhase(p.On, p.Off, minProbesPerPhase); ok {
			return mean, stdErr, true
		}
	}
	if mean, stdErr, ok := byPhase(s.On, s.Off, 2); ok {
		return mean, stdErr, true
	}
	if !(s.RequestedMeanMs > 0) {
		return 0, 0, false
	}
	return amplitude * math.Max(0, s.MeanMs-s.MinMs) / s.RequestedMeanMs, 0, true
}

// end aborts the state machine if it still runs, releases every lease
// left, and stores the final record and the gradients.
func (r *runner) end(reason string) {
	now := r.x.now()
	if r.exp != nil && !r.exp.Finished() {
		r.execute(r.exp.Abort(now, reason))
	}
	for name := range r.leases {
		r.stopLease(name)
	}
	if len(r.leases) > 0 {
		r.logger().Error("perfmodel: injector leases not released; they end at their expiry", zap.Int("leases", len(r.leases)))
	}
	r.mu.Lock()
	if r.exp == nil && r.snap.Phase != "failed" {
		r.snap.Phase, r.snap.Reason = string(gradient.PhaseAborted), reason
	}
	r.mu.Unlock()
	r.publish(now)
	ex := r.snapshot()
	if ex.Finished == 0 {
		ex.Finished = now.Unix()
	}
	r.commit(ex, true)
	r.logger().Info("perfmodel: experiment ended", zap.String("phase", r.snapshot().Phase), zap.Duration("wall", now.Sub(r.started)))
}

// publish refreshes the snapshot the API serves from the state machine.
func (r *runner) publish(now time.Time) {
	if r.exp == nil {
		r.persist(false)
		return
	}
	p := r.exp.Progress(now)
	res := r.exp.Result()
	detail, _ := json.Marshal(res)
	next := r.snapshot()
	next.Detail = detail
	next.Phase, next.Reason = string(p.Phase), p.Reason
	next.Percent = p.Percent
	next.ETASeconds = p.ETA.Seconds()
	next.Gradients = gradientsOf(r.id, res)
	next.CurrentElement = ""
	if !r.exp.Finished() {
		next.CurrentElement = p.Element
	}
	if p.Phase == gradient.PhaseDone {
		// Failed only if no element succeeded; otherwise the reason names
		// the elements that failed beside the gradients of the others.
		var failed []string
		for _, el := range res.Elements {
			if el.Status == "failed" {
				failed = append(failed, el.Element+": "+el.Error)
			}
		}
		if len(failed) > 0 {
			next.Reason = strings.Join(failed, "; ")
			if len(failed) == len(res.Elements) {
				next.Phase = "failed"
			}
			if len(res.Elements) == 1 {
				next.Reason = res.Elements[0].Error
			}
		}
	}
	if r.exp.Finished() && next.Finished == 0 {
		next.Finished = now.Unix()
		next.ETASeconds = 0
	}
	r.commit(next, false)
}

func gradientsOf(id string, res gradient.Result) []api.Gradient {
	var out []api.Gradient
	for _, el := range res.Elements {
		if el.Status != "done" {
			continue
		}
		var basis *api.Basis
		if b := el.Basis; b.Kind != gradient.KindLink {
			basis = &api.Basis{Kind: string(b.Kind), Operating: b.Operating, FrequencyMHz: b.FrequencyMHz, Alpha: b.Alpha, Workload: b.Workload, Side: b.Side()}
		}
		interval := el.Interval()
		for _, tx := range slices.Sorted(maps.Keys(el.Transactions)) {
			est := el.Transactions[tx]
			out = append(out, api.Gradient{
				Element: el.Element, Transaction: tx, Gradient: est.Gradient, CI95: est.CI95,
				SNR: est.SNR, Bins: est.Bins, PerturbationMs: est.PerturbationMs,
				Experiment: id, Measured: el.WindowEnd.Unix(), Basis: basis, Interval: interval,
			})
		}
	}
	return out
}

// persist stores the experiment record (on a phase change, every
// persistEvery, or when forced) and, once it is finished, its gradients.
func (r *runner) persist(force bool) {
	r.store(r.snapshot(), force)
}

// commit makes ex the snapshot the API serves and stores it. An experiment
// that finishes is stored before it is served, so that a client who sees it
// finished finds its gradients (a prediction right after "done").
func (r *runner) commit(ex api.Experiment, force bool) {
	r.mu.Lock()
	finishing := ex.Finished != 0 && r.snap.Finished == 0
	if !finishing {
		r.snap = ex
	}
	r.mu.Unlock()
	r.store(ex, force || finishing)
	if finishing {
		r.mu.Lock()
		r.snap = ex
		r.mu.Unlock()
	}
}

// store writes ex (on a phase change, every persistEvery, or when forced)
// and, once it is finished, its gradients.
func (r *runner) store(ex api.Experiment, force bool) {
	now := r.x.now()
	if !force && ex.Phase == r.lastPhase && now.Sub(r.lastPersist) < persistEvery {
		return
	}
	r.lastPhase, r.lastPersist = ex.Phase, now
	x := r.x
	var recs []store.Record
	put := func(kind, key string, at int64, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			return
		}
		recs = append(recs, store.Record{Kind: kind, Key: key, Shard: x.set.Shard, WindowStart: timegrid.AlignDown(at, x.set.Window), Resolution: x.set.Window, Payload: b})
	}
	put(model.KindExperimnt, ex.ID, ex.Started, ex)
	if ex.Finished != 0 {
		for _, g := range ex.Gradients {
			put(model.KindGradient, GradientKey(g), g.Measured, g)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := x.st.Put(ctx, recs); err != nil {
		r.logger().Warn("perfmodel: storing the experiment failed", zap.Error(err))
	}
}

// GradientKey keeps the newest gradient per element, transaction and, for a
// capacity measured on several sides of its operating point, side: those are
// one set (gradient.Secant). A below wave keeps the key it always had.
func GradientKey(g api.Gradient) string {
	k := g.Element + "\x1f" + g.Transaction
	if g.Basis != nil && g.Basis.Side != "" && g.Basis.Side != gradient.SideBelow {
		k += "\x1f" + g.Basis.Side
	}
	return k
}
