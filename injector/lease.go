package injector

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tierscope/tierscope/internal/leaseapi"
	"github.com/tierscope/tierscope/internal/nfqdelay"
	"github.com/tierscope/tierscope/internal/wave"
)

// The lease kinds.
const (
	kindDelay    = leaseapi.KindDelay
	kindCPUFreq  = leaseapi.KindCPUFreq
	kindCapacity = leaseapi.KindCapacity
)

// The lease states.
const (
	stateActive    = leaseapi.StateActive
	stateCompleted = leaseapi.StateCompleted
	stateExpired   = leaseapi.StateExpired
	stateStopped   = leaseapi.StateStopped
	stateFailed    = leaseapi.StateFailed
)

const (
	defaultDuration = time.Minute
	maxEnded        = 256 // ended leases kept for status queries
)

var (
	errExpired  = errors.New("lease expired")
	errStopped  = errors.New("lease stopped")
	errShutdown = errors.New("extension shut down")
	errBackstop = errors.New("delay backend stopped by itself")
)

// apiError carries the HTTP status of a refused request.
type apiError struct {
	code int
	msg  string
}

func (e *apiError) Error() string { return e.msg }

func apiErrorf(code int, format string, args ...any) error {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

// leaseRequest is the body of POST /v1/leases, with what validate parses
// from it.
type leaseRequest struct {
	leaseapi.Request

	id       string
	w        wave.Wave
	duration time.Duration
	match    nfqdelay.Match
	cgroup   string
}

// validate parses req (400) and checks it against the allowlist (403) and
// the caps (422).
func (m *manager) validate(req *leaseRequest, now time.Time) error {
	bad := func(format string, args ...any) error { return apiErrorf(http.StatusBadRequest, format, args...) }
	period, err := time.ParseDuration(req.Wave.Period)
	if err != nil {
		return bad("wave.period: %v", err)
	}
	req.w = wave.Wave{Amplitude: req.Wave.Amplitude, Period: period, Cycles: req.Wave.Cycles, Start: now, Single: req.Wave.Single}
	if req.Wave.Start != nil {
		req.w.Start = *req.Wave.Start
	}
	if err := req.w.Validate(); err != nil {
		return bad("%v", err)
	}
	req.duration = defaultDuration
	if req.Duration != "" {
		if req.duration, err = time.ParseDuration(req.Duration); err != nil || req.duration <= 0 {
			return bad("duration: %q must be a positive Go duration", req.Duration)
		}
	}
	t := req.Target
	targets := 0
	if t.Link != nil {
		targets++
	}
	if len(t.CPUs) > 0 {
		targets++
	}
	if t.Cgroup != "" {
		targets++
	}
	if targets != 1 {
		return bad("target: give exactly one of link, cpus, cgroup")
	}
	var kindErr error
	switch req.Kind {
	case kindDelay:
		kindErr = m.validateDelay(req)
	case kindCPUFreq:
		kindErr = m.validateCPUFreq(req)
	case kindCapacity:
		kindErr = m.validateCapacity(req)
	default:
		return badRequest("kind: %q, want delay, cpufreq or capacity", req.Kind)
	}
	if kindErr != nil {
		return kindErr
	}
	if req.duration > m.cfg.MaxLease {
		return apiErrorf(http.StatusUnprocessableEntity, "duration: %v is over max_lease %v", req.duration, m.cfg.MaxLease)
	}
	return nil
}

// badRequest is a 400 with its message formatted.
func badRequest(format string, args ...any) error {
	return apiErrorf(http.StatusBadRequest, format, args...)
}

// validateDelay checks a delay lease's link, against the allowlist, and its
// floor and amplitude, against max_delay.
func (m *manager) validateDelay(req *leaseRequest) error {
	al := m.cfg.Allowlist
	l := req.Target.Link
	if l == nil {
		return badRequest("target.link: required for kind delay")
	}
	if l.Proto != "tcp" && l.Proto != "udp" {
		return badRequest("target.link.proto: %q, want tcp or udp", l.Proto)
	}
	switch l.Direction {
	case "", "out", "in", "fwd":
	default:
		return badRequest("target.link.direction: %q, want out, in or fwd", l.Direction)
	}
	dst, err := parsePrefix(l.Dst)
	if err != nil {
		return badRequest("target.link.dst: %v", err)
	}
	req.match = nfqdelay.Match{Proto: l.Proto, Dst: dst, DstPort: l.DstPort, Direction: l.Direction}
	if !m.linkAllowed(dst) {
		return apiErrorf(http.StatusForbidden, "target.link.dst: %s is outside allowlist.links", dst)
	}
	if len(al.Ports) > 0 && !slices.Contains(al.Ports, l.DstPort) {
		return apiErrorf(http.StatusForbidden, "target.link.dst_port: %d is not in allowlist.ports", l.DstPort)
	}
	if !(req.Wave.Floor >= 0) {
		return badRequest("wave.floor: %v ms, want ≥ 0", req.Wave.Floor)
	}
	if max := ms(m.cfg.MaxDelay); req.w.Amplitude+req.Wave.Floor > max {
		return apiErrorf(http.StatusUnprocessableEntity, "wave.amplitude: %v ms over a floor of %v ms is over max_delay %v", req.w.Amplitude, req.Wave.Floor, m.cfg.MaxDelay)
	}
	return nil
}

// validateCPUFreq checks a cpufreq lease's CPUs, against the allowlist, and
// its amplitude, against max_freq_step_khz.
func (m *manager) validateCPUFreq(req *leaseRequest) error {
	t := req.Target
	if req.Wave.Floor != 0 {
		return badRequest("wave.floor: only delay and capacity leases take a floor")
	}
	if len(t.CPUs) == 0 {
		return badRequest("target.cpus: required for kind cpufreq")
	}
	seen := map[int]bool{}
	for _, cpu := range t.CPUs {
		if seen[cpu] {
			return badRequest("target.cpus: cpu %d given twice", cpu)
		}
		seen[cpu] = true
		if !slices.Contains(m.cfg.Allowlist.CPUs, cpu) {
			return apiErrorf(http.StatusForbidden, "target.cpus: cpu %d is not in allowlist.cpus", cpu)
		}
	}
	if req.w.Amplitude > float64(m.cfg.MaxFreqStepKHz) {
		return apiErrorf(http.StatusUnprocessableEntity, "wave.amplitude: %v kHz is over max_freq_step_khz %d", req.w.Amplitude, m.cfg.MaxFreqStepKHz)
	}
	return nil
}

// validateCapacity checks a capacity lease's cgroup, against the allowlist,
// and its floor and amplitude, which must withhold less than the whole.
func (m *manager) validateCapacity(req *leaseRequest) error {
	t := req.Target
	if !(req.Wave.Floor >= -1 && req.Wave.Floor < 1) {
		return badRequest("wave.floor: %v, want a fraction withheld in [-1, 1) (below 0 grants)", req.Wave.Floor)
	}
	if t.Cgroup == "" {
		return badRequest("target.cgroup: required for kind capacity")
	}
	cg, err := cleanCgroup(t.Cgroup)
	if err != nil {
		return badRequest("target.cgroup: %v", err)
	}
	req.cgroup = cg
	if !m.cgroupAllowed(cg) {
		return apiErrorf(http.StatusForbidden, "target.cgroup: %q is not within allowlist.cgroups", cg)
	}
	if req.w.Amplitude+req.Wave.Floor >= 1 {
		return apiErrorf(http.StatusUnprocessableEntity, "wave.amplitude: %v over a floor of %v must withhold less than the whole capacity (< 1)", req.w.Amplitude, req.Wave.Floor)
	}
	return nil
}

func (m *manager) linkAllowed(dst netip.Prefix) bool {
	for _, s := range m.cfg.Allowlist.Links {
		p, err := parsePrefix(s)
		if err == nil && p.Addr().Is4() == dst.Addr().Is4() && p.Bits() <= dst.Bits() && p.Contains(dst.Addr()) {
			return true
		}
	}
	return false
}

// within reports whether cgroup a is b or below it.
func within(a, b string) bool { return a == b || strings.HasPrefix(a, b+"/") }

func (m *manager) cgroupAllowed(cg string) bool {
	for _, s := range m.cfg.Allowlist.Cgroups {
		if c, err := cleanCgroup(s); err == nil && within(cg, c) {
			return true
		}
	}
	return false
}

// conflicts reports whether two requests perturb the same thing.
func conflicts(a, b *leaseRequest) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case kindDelay:
		// Direction is ignored: on loopback, or on a host that is both ends,
		// an in and an out lease hold the same packets twice.
		x, y := a.match, b.match
		return x.Proto == y.Proto && x.Dst.Overlaps(y.Dst) &&
			(x.DstPort == y.DstPort || x.DstPort == 0 || y.DstPort == 0)
	case kindCPUFreq:
		for _, c := range a.Target.CPUs {
			if slices.Contains(b.Target.CPUs, c) {
				return true
			}
		}
	case kindCapacity:
		return within(a.cgroup, b.cgroup) || within(b.cgroup, a.cgroup)
	}
	return false
}

// lease is one running perturbation.
type lease struct {
	req     *leaseRequest
	slot    int
	act     actuator
	cancel  context.CancelCauseFunc
	renewCh chan struct{}
	done    chan struct{}

	mu      sync.Mutex
	state   string
	expires time.Time
	err     error
}

// leaseStatus is the body of lease responses; its stats are the backend's.
type leaseStatus = leaseapi.Status[any]

func (l *lease) status() leaseStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.req.Wave
	start := l.req.w.Start
	w.Start = &start
	st := leaseStatus{ID: l.req.id, Kind: l.req.Kind, Target: l.req.Target, Wave: w, State: l.state, Expires: l.expires}
	if l.err != nil {
		st.Error = l.err.Error()
	}
	if l.act != nil {
		st.Stats = l.act.Stats()
	}
	return st
}

// manager owns the leases.
type manager struct {
	cfg     *Config
	clock   wave.Clock
	openers map[string]opener
	// report is told of backend failures; restore failures are permanent.
	report func(err error, permanent bool)

	mu     sync.Mutex
	leases map[string]*lease
	ended  []string // ids of ended leases, oldest first
	slots  []bool
	closed bool
	wg     sync.WaitGroup
}

func newManager(cfg *Config, clock wave.Clock, openers map[string]opener, report func(error, bool)) *manager {
	return &manager{cfg: cfg, clock: clock, openers: openers, report: report,
		leases: map[string]*lease{}, slots: make([]bool, cfg.MaxLeases)}
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// create validates req, opens its backend and starts its wave.
func (m *manager) create(req *leaseRequest) (*lease, error) {
	now := m.clock.Now()
	if err := m.validate(req, now); err != nil {
		return nil, err
	}
	req.id = newID()
	l := &lease{req: req, slot: -1, state: stateActive, expires: now.Add(req.duration),
		renewCh: make(chan struct{}, 1), done: make(chan struct{})}

	// Reserve the target and a slot before opening, so concurrent requests
	// conflict with this one.
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, apiErrorf(http.StatusServiceUnavailable, "shutting down")
	}
	for _, o := range m.leases {
		if o.active() && conflicts(req, o.req) {
			m.mu.Unlock()
			return nil, apiErrorf(http.StatusConflict, "target: conflicts with active lease %s", o.req.id)
		}
	}
	for i, used := range m.slots {
		if !used {
			l.slot = i
			break
		}
	}
	if l.slot < 0 {
		m.mu.Unlock()
		return nil, apiErrorf(http.StatusTooManyRequests, "max_leases (%d) leases are active", len(m.slots))
	}
	m.slots[l.slot] = true
	m.leases[req.id] = l
	m.mu.Unlock()

	act, err := m.openers[req.Kind](req, l.slot)
	if err == nil {
		m.mu.Lock()
		if m.closed {
			err = errors.Join(apiErrorf(http.StatusServiceUnavailable, "shutting down"), act.Restore())
		} else {
			ctx, cancel := context.WithCancelCause(context.Background())
			l.mu.Lock()
			l.act, l.cancel = act, cancel
			l.mu.Unlock()
			m.wg.Add(2)
			go m.run(ctx, l)
			go m.watch(ctx, l)
		}
		m.mu.Unlock()
	}
	if err != nil {
		m.mu.Lock()
		delete(m.leases, req.id)
		m.slots[l.slot] = false
		m.mu.Unlock()
		var ae *apiError
		if !errors.As(err, &ae) {
			m.report(fmt.Errorf("opening %s backend: %w", req.Kind, err), false)
			err = apiErrorf(http.StatusInternalServerError, "backend: %v", err)
		}
		return nil, err
	}
	return l, nil
}

func (l *lease) active() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == stateActive
}

// run drives the wave and restores the backend when it ends for any reason.
func (m *manager) run(ctx context.Context, l *lease) {
	defer m.wg.Done()
	err := wave.Run(ctx, l.req.w, m.clock, l.act.Apply)
	// Why the wave ended is read before Restore: restoring a delay backend
	// stops it, and the watcher would take that for a backstop and turn a
	// completed wave into a failed one.
	ctxErr, cause := ctx.Err(), context.Cause(ctx)
	rerr := l.act.Restore()
	l.cancel(nil) // stops the watcher
	state := stateCompleted
	switch {
	case err != nil && ctxErr == nil:
		state = stateFailed
		m.report(fmt.Errorf("lease %s: %w", l.req.id, err), false)
	case errors.Is(cause, errExpired):
		state, err = stateExpired, nil
	case errors.Is(cause, errBackstop):
		state, err = stateFailed, cause
	case errors.Is(cause, errStopped), errors.Is(cause, errShutdown):
		state, err = stateStopped, nil
	}
	if rerr != nil {
		state = stateFailed
		err = errors.Join(err, fmt.Errorf("restoring: %w", rerr))
		m.report(fmt.Errorf("lease %s: restoring: %w", l.req.id, rerr), true)
	}
	l.mu.Lock()
	l.state, l.err = state, err
	l.mu.Unlock()

	m.mu.Lock()
	m.slots[l.slot] = false
	m.ended = append(m.ended, l.req.id)
	if len(m.ended) > maxEnded {
		delete(m.leases, m.ended[0])
		m.ended = m.ended[1:]
	}
	m.mu.Unlock()
	close(l.done)
}

// watch cancels the lease at its expiry, which renew may push back, or when
// the backend stops by itself.
func (m *manager) watch(ctx context.Context, l *lease) {
	defer m.wg.Done()
	var backend <-chan struct{}
	if d, ok := l.act.(interface{ Done() <-chan struct{} }); ok {
		backend = d.Done()
	}
	for {
		l.mu.Lock()
		left := l.expires.Sub(m.clock.Now())
		l.mu.Unlock()
		if left <= 0 {
			l.cancel(errExpired)
			return
		}
		t := m.clock.NewTimer(left)
		select {
		case <-t.C():
		case <-l.renewCh:
			t.Stop()
		case <-backend:
			t.Stop()
			cause := errBackstop
			if c, ok := l.act.(interface{ Cause() error }); ok && c.Cause() != nil {
				cause = fmt.Errorf("%w: %w", errBackstop, c.Cause())
			}
			l.cancel(cause)
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

func (m *manager) get(id string) (*lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[id]
	if !ok || l.cancel == nil && l.active() {
		// Unknown, or still opening.
		return nil, apiErrorf(http.StatusNotFound, "lease %q not found", id)
	}
	return l, nil
}

// renew moves an active lease's expiry to now+d (d 0: its original duration).
func (m *manager) renew(id string, d time.Duration) (*lease, error) {
	l, err := m.get(id)
	if err != nil {
		return nil, err
	}
	if d == 0 {
		d = l.req.duration
	}
	if d < 0 || d > m.cfg.MaxLease {
		return nil, apiErrorf(http.StatusUnprocessableEntity, "duration: %v must be in (0, max_lease %v]", d, m.cfg.MaxLease)
	}
	l.mu.Lock()
	if l.state != stateActive {
		l.mu.Unlock()
		return nil, apiErrorf(http.StatusConflict, "lease %s is %s", id, l.state)
	}
	l.expires = m.clock.Now().Add(d)
	l.mu.Unlock()
	select {
	case l.renewCh <- struct{}{}:
	default:
	}
	return l, nil
}

// stop ends a lease, waits for its backend to be restored, and forgets it.
func (m *manager) stop(ctx context.Context, id string) (leaseStatus, error) {
	l, err := m.get(id)
	if err != nil {
		return leaseStatus{}, err
	}
	l.cancel(errStopped)
	select {
	case <-l.done:
	case <-ctx.Done():
		return leaseStatus{}, ctx.Err()
	}
	m.mu.Lock()
	delete(m.leases, id)
	m.ended = slices.DeleteFunc(m.ended, func(e string) bool { return e == id })
	m.mu.Unlock()
	return l.status(), nil
}

// shutdown stops every lease and waits until all are restored.
func (m *manager) shutdown(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	for _, l := range m.leases {
		if l.cancel != nil {
			l.cancel(errShutdown)
		}
	}
	m.mu.Unlock()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("injector: leases not yet restored: %w", ctx.Err())
	}
}

// activeCount is the number of active leases.
func (m *manager) activeCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, l := range m.leases {
		if l.active() {
			n++
		}
	}
	return n
}
