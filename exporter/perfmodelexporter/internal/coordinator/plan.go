package coordinator

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/apierror"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/leaseapi"
)

// Planning an experiment: what each element's perturbation acts on (links,
// CPU capacity, CPU frequency) and the runner that will carry it out.

// capacityBasis is the basis 1/(c·f − α·w) of a capacity element at its
// configured operating point, with α·w the demand its process's CPU
// readings show now (processDemand).
func (x *Coordinator) capacityBasis(cp Capacity) (gradient.Basis, error) {
	f, demand, err := x.cpuNode(cp.CPU)
	if err != nil {
		return gradient.Basis{}, err
	}
	b := gradient.Basis{Kind: gradient.KindCapacity, Operating: cp.Cores, FrequencyMHz: f, Alpha: demand, Workload: 1}
	return b, b.Validate()
}

// frequencyBasis is the basis 1/(f − α·w) of a frequency element at the
// CPUs' speed now. With n CPUs the queue's speed is n·f, and
// 1/(n·f − D) = (1/n)·1/(f − D/n): the demand is taken per CPU, which
// scales the gradient by n and leaves predictions alone.
func (x *Coordinator) frequencyBasis(fr Frequency) (gradient.Basis, error) {
	f, demand, err := x.cpuNode(fr.CPU)
	if err != nil {
		return gradient.Basis{}, err
	}
	b := gradient.Basis{Kind: gradient.KindCPUFreq, Operating: f, Alpha: demand / float64(len(fr.CPUs)), Workload: 1}
	return b, b.Validate()
}

// cpuNode is a node's CPU speed f (frequency_mhz, else core_mhz) and the
// demand α·w of its process.
func (x *Coordinator) cpuNode(n CPU) (f, demand float64, err error) {
	f = n.FrequencyMHz
	if f == 0 {
		f = x.set.CoreMHz
	}
	if !(f > 0) {
		return 0, 0, errors.New("no CPU speed: set frequency_mhz or core_mhz")
	}
	demand, err = x.processDemand(n.Machine, n.Process)
	return f, demand, err
}

// processDemand is α·w in MHz: the mean process.cpu.utilization of a
// process over the open windows (a share of the machine) times the
// machine's capacity.
func (x *Coordinator) processDemand(machineName, process string) (float64, error) {
	share, machine := x.set.Traffic.CPU(machineName, process)
	if share.Samples == 0 {
		return 0, fmt.Errorf("no process.cpu.utilization readings of %q on %q in the open windows: the demand α·w is unknown", process, machineName)
	}
	machineMHz := x.set.Capacity(machineName, &machine)
	if !(machineMHz > 0) {
		return 0, fmt.Errorf("no capacity for machine %q: set machine_capacity_mhz or capacity_mhz (frequency × logical CPUs)", machineName)
	}
	return share.Mean() * machineMHz, nil
}

// linkTarget is where a link's delay lease applies and which injector runs it.
type linkTarget struct {
	proto, host string
	port        uint16
	injector    string
}

// maxExperimentElements bounds the elements of one experiment.
const maxExperimentElements = 64

// elementPlan is one element of an experiment: what the state machine
// measures, and which injector perturbs what for it.
type elementPlan struct {
	// elements holds one element, or for a capacity one per side its
	// waves are measured on (Capacity.Sides).
	elements []gradient.Element
	target   leaseapi.Target
	inj      *leaseapi.Client
	route    elementRoute
}

// newRunner turns a request into a runner, or a 400.
func (x *Coordinator) newRunner(req api.ExperimentRequest) (*runner, error) {
	xc := x.set.Experiments
	names := req.Elements
	switch {
	case req.Element != "" && len(names) > 0:
		return nil, apierror.Badf("give element or elements, not both")
	case req.Element != "":
		names = []string{req.Element}
	case len(names) == 0:
		return nil, apierror.Badf("element: want link:<source>-><target>, frequency:<name> or capacity:<name>")
	case len(names) > maxExperimentElements:
		return nil, apierror.Badf("elements: %d, at most %d in one experiment", len(names), maxExperimentElements)
	}
	plans := make(map[string]elementPlan, len(names))
	elements := make([]gradient.Element, 0, len(names))
	routes := make([]elementRoute, 0, len(names))
	for _, name := range names {
		if _, dup := plans[name]; dup {
			return nil, apierror.Badf("elements: %q is listed twice", name)
		}
		p, err := x.planElement(name, req.Injector)
		if err != nil {
			return nil, err
		}
		plans[name] = p
		for _, el := range p.elements {
			elements = append(elements, el)
			routes = append(routes, p.route)
		}
	}
	settings := xc.Settings
	train := &settings.Train
	if req.K != 0 {
		train.K = req.K
	}
	if req.N != 0 {
		train.N = req.N
	}
	if req.Scale != 0 {
		train.Scale = req.Scale
	}
	if err := train.Validate(); err != nil {
		return nil, apierror.Badf("%v", err)
	}
	p99 := xc.MaxP99Ms
	if req.MaxP99Ms != 0 {
		p99 = req.MaxP99Ms
	}
	if !(p99 >= 0) || math.IsInf(p99, 0) {
		return nil, apierror.Badf("max_p99_ms: must be ≥ 0, got %v", req.MaxP99Ms)
	}
	lateness := xc.Lateness
	if lateness == 0 {
		// A sample reaches observe when its trace completes: up to
		// trace_wait after the request, plus the engine's 1 s expiry tick.
		lateness = x.set.TraceWait + 2*time.Second
	}
	id := newExperimentID()
	gcfg := gradient.Config{
		ID:       id,
		Settings: settings,
		Elements: elements,
		Lateness: lateness,
		Guard:    gradient.Guard{P99Ms: p99},
	}
	now := x.now()
	label := strings.Join(names, ",")
	run := &runner{
		x: x, id: id, element: label, plans: plans, gcfg: gcfg, routes: routes,
		samples:    make(chan frontSample, xc.SampleBuffer),
		covariates: make(chan covariateSample, covariateBuffer),
		stopCh:     make(chan struct{}),
		done:       make(chan struct{}),
		leases:     map[string]*leaseRef{},
		started:    now,
		snap: api.Experiment{ID: id, Element: label, Elements: slices.Clone(names),
			Phase: string(gradient.PhaseTraining), Started: now.Unix()},
	}
	return run, nil
}

// planElement resolves one element of a request: its basis, bounds and
// injector target, or a 400 (422 when its operating point is unusable).
func (x *Coordinator) planElement(name, reqInjector string) (elementPlan, error) {
	xc := x.set.Experiments
	kind, rest, ok := strings.Cut(name, ":")
	if !ok || rest == "" {
		return elementPlan{}, apierror.Badf("element: want link:<source>-><target>, frequency:<name> or capacity:<name>, got %q", name)
	}
	var (
		p      elementPlan
		injURL string
	)
	switch kind {
	case "link":
		src, dst, ok := strings.Cut(rest, "->")
		if !ok || src == "" || dst == "" {
			return p, apierror.Badf("element: want link:<source>-><target>, got %q", name)
		}
		addresses, known := x.set.Traffic.Links(src, dst)
		lt, err := xc.linkTarget(rest, dst, addresses, known)
		var calls map[string]float64
		if err == nil {
			// The prior gradients: calls per request to the delayed
			// address, else on the link (spans may name the callee by
			// host name).
			calls = x.set.Traffic.CallsPerRequest(src, dst, net.JoinHostPort(lt.host, strconv.Itoa(int(lt.port))))
		}
		if err != nil {
			return p, apierror.Badf("element %q: %v", name, err)
		}
		injURL = firstNonEmpty(reqInjector, lt.injector, xc.Injector)
		p.target = leaseapi.Target{Link: &leaseapi.Link{Proto: lt.proto, Dst: lt.host, DstPort: lt.port, Direction: "out"}}
		p.route = elementRoute{caller: src, address: net.JoinHostPort(lt.host, strconv.Itoa(int(lt.port)))}
		p.elements = []gradient.Element{{
			ID: name, Basis: gradient.Link(),
			MinAmplitude: float64(xc.MinDelay) / float64(time.Millisecond),
			// The injector holds floor + amplitude under its max_delay.
			MaxAmplitude:   float64(xc.MaxDelay-xc.DelayFloor) / float64(time.Millisecond),
			PriorGradients: calls,
		}}
	case "capacity":
		cp, ok := xc.Capacities[rest]
		if !ok {
			return p, apierror.Badf("element %q: no experiments.capacities[%q] names its cgroup and process", name, rest)
		}
		basis, err := x.capacityBasis(cp)
		if err != nil {
			return p, apierror.New(http.StatusUnprocessableEntity, "element %q: %v", name, err)
		}
		injURL = firstNonEmpty(reqInjector, cp.Injector, xc.Injector)
		p.target = leaseapi.Target{Cgroup: cp.Cgroup}
		a0, maxA := cp.fractions()
		for _, b := range cp.bases(basis) {
			el := gradient.Element{ID: name, Basis: b, InitialAmplitude: a0, MinAmplitude: 0.01, MaxAmplitude: maxA, SeparateAdaptive: true}
			if b.Above {
				el.MaxAmplitude = cp.maxGrant()
			}
			p.elements = append(p.elements, el)
		}
	case "frequency":
		fr, ok := xc.Frequencies[rest]
		if !ok {
			return p, apierror.Badf("element %q: no experiments.frequencies[%q] names its CPUs and process", name, rest)
		}
		basis, err := x.frequencyBasis(fr)
		if err != nil {
			return p, apierror.New(http.StatusUnprocessableEntity, "element %q: %v", name, err)
		}
		injURL = firstNonEmpty(reqInjector, fr.Injector, xc.Injector)
		p.target = leaseapi.Target{CPUs: fr.CPUs}
		// The knob is kHz below f.
		a0, maxA := fr.fractions()
		khz := basis.Operating * 1000
		p.elements = []gradient.Element{{ID: name, Basis: basis, InitialAmplitude: a0 * khz, MinAmplitude: 0.01 * khz, MaxAmplitude: maxA * khz, SeparateAdaptive: true}}
	default:
		return p, apierror.Badf("element: %q: the coordinator measures link:<source>-><target>, frequency:<name> and capacity:<name> elements", name)
	}
	if injURL == "" {
		return p, apierror.Badf("element %q: injector: no injector URL in the request, the element's configuration or experiments.injector", name)
	}
	if err := checkURL(injURL); err != nil {
		return p, apierror.Badf("element %q: injector: %v", name, err)
	}
	// The token goes only where the configuration sends it: a request may
	// pick among the configured injectors, never name its own.
	injURL = strings.TrimRight(injURL, "/")
	if !slices.Contains(xc.InjectorURLs(), injURL) {
		return p, apierror.New(http.StatusForbidden, "element %q: injector %q is not a configured injector (experiments.injector or an element's own)", name, injURL)
	}
	p.inj = leaseapi.NewClient(injURL, string(xc.Token), x.injectorHTTP())
	return p, nil
}

func (c Config) linkTarget(link, dst string, discovered, known []string) (linkTarget, error) {
	addr, inj := dst, ""
	if l, ok := c.Links[link]; ok {
		addr, inj = l.Address, l.Injector
	} else if len(discovered) > 0 {
		// The address the caller's spans called the callee at most often.
		addr = discovered[0]
	}
	t, err := parseLinkAddress(addr)
	if err != nil {
		if len(known) > 20 {
			known = append(known[:20:20], "…")
		}
		return t, fmt.Errorf("no address for the link: the traces show no call on it with server.address and server.port (links seen: %s), and experiments.links[%q].address is not set (%v)",
			strings.Join(known, ", "), link, err)
	}
	t.injector = inj
	return t, nil
}

// parseLinkAddress reads "tcp://host:port", "udp://host:port" or
// "host:port" (tcp).
func parseLinkAddress(s string) (linkTarget, error) {
	t := linkTarget{proto: "tcp"}
	if p, rest, ok := strings.Cut(s, "://"); ok {
		t.proto, s = p, rest
	}
	if t.proto != "tcp" && t.proto != "udp" {
		return t, fmt.Errorf("protocol %q, want tcp or udp", t.proto)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return t, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 || host == "" {
		return t, fmt.Errorf("%q is not host:port", s)
	}
	t.host, t.port = host, uint16(p)
	return t, nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", s)
	}
	return nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func newExperimentID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "exp-" + hex.EncodeToString(b)
}
