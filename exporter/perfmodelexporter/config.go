package perfmodelexporter

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"

	"github.com/tierscope/tierscope/internal/endpoint"
	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/workfactor"
)

// Config is the perfmodel exporter's configuration.
type Config struct {
	// The HTTP API (JSON under /api/v1, Prometheus at /metrics): endpoint,
	// TLS and auth as any confighttp server.
	confighttp.ServerConfig `mapstructure:",squash"`

	// Window is the length of a model window.
	Window time.Duration `mapstructure:"window"`
	// FlushInterval is how often the open windows are written to the store.
	// A crash loses at most this much of the statistics (plus the traces still
	// being assembled, at most TraceWait).
	FlushInterval time.Duration `mapstructure:"flush_interval"`
	// OpenWindows is how many recent windows stay in memory for late traces;
	// at least enough to span twice trace_wait and a window.
	OpenWindows int `mapstructure:"open_windows"`

	// TraceWait is how long a trace's spans are gathered after its first one.
	// It must exceed the wait of a causalpath processor upstream, whose
	// repaired spans arrive that much later than the rest of their trace.
	TraceWait time.Duration `mapstructure:"trace_wait"`
	// MaxOpenTraces bounds the traces being assembled; the oldest is
	// completed early beyond it.
	MaxOpenTraces int `mapstructure:"max_open_traces"`
	// MaxSpansPerTrace bounds one trace; later spans are dropped.
	MaxSpansPerTrace int `mapstructure:"max_spans_per_trace"`

	// Limits bound each window's model.
	Limits LimitsConfig `mapstructure:"limits"`

	// Async configures the convolution of messages without context.
	Async AsyncConfig `mapstructure:"async"`

	// Storage is where the statistics persist.
	Storage StorageConfig `mapstructure:"storage"`

	// CapacityMHz is every machine's CPU capacity (frequency × logical cores)
	// for the work-factor model when the metrics do not give it; per machine
	// values override it.
	CapacityMHz        float64            `mapstructure:"capacity_mhz"`
	MachineCapacityMHz map[string]float64 `mapstructure:"machine_capacity_mhz"`
	// HostName is the host.name given to spans and metrics whose resource has
	// none: set it when the collector and the applications share one machine,
	// since hostmetrics and many SDKs do not set host.name themselves (or add
	// the resourcedetection processor upstream). Empty leaves such resources
	// keyed by service.instance.id, and metrics without one either (hostmetrics
	// scraped in this collector) keyed by this collector's host name.
	HostName string `mapstructure:"host_name"`
	// CoreMHz is the speed of one core: a flow's work factor divided by it is
	// the service time it implies, which is checked against the signature's
	// (disagreement beyond 25% is flagged). 0 disables the check.
	CoreMHz float64 `mapstructure:"core_mhz"`

	// WorkFactors tunes the work-factor regression (paper 002).
	WorkFactors WorkFactorsConfig `mapstructure:"work_factors"`

	// Experiments configures the gradient experiment coordinator.
	Experiments ExperimentsConfig `mapstructure:"experiments"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// WorkFactorsConfig tunes the work-factor regression. Its time constants are
// durations, not periods: one period is one window, and the paper's h = 10
// and t = 15 periods are of one minute. Expressed as time, they keep their
// meaning whatever window is chosen.
type WorkFactorsConfig struct {
	// HalfLife is the shortest half-life h of the data's geometric aging
	// (§3.4), used right after a detected change of demand; the memory then
	// grows with the time since (up to 300 windows, or h if longer). Default 10m.
	HalfLife time.Duration `mapstructure:"half_life"`
	// SmoothingHalfLife is the half-life t of the estimates' smoothing
	// (§4.4). Default 15m.
	SmoothingHalfLife time.Duration `mapstructure:"smoothing_half_life"`
	// Method is the solver: plain (the paper's least squares), ridge or nnls
	// (for collinear flows, §5.5). Default plain.
	Method string `mapstructure:"method"`
}

// LimitsConfig bounds a window's service graph and patterns.
type LimitsConfig struct {
	MaxServices int `mapstructure:"max_services"`
	MaxEdges    int `mapstructure:"max_edges"`
	MaxPatterns int `mapstructure:"max_patterns"`
}

// AsyncConfig configures the convolution algorithm (paper 001 §5.2) that finds
// async edges among PRODUCER spans and CONSUMER spans that lost their context.
type AsyncConfig struct {
	// Quantum is the time quantum μ of the indicator functions.
	Quantum time.Duration `mapstructure:"quantum"`
	// MaxMessages bounds one window's messages; more are counted and dropped.
	MaxMessages int `mapstructure:"max_messages"`
}

// StorageConfig selects the store and its retention.
type StorageConfig struct {
	// DSN is "sqlite:///path/file.db" (or a bare path) for embedded SQLite, or
	// "postgres://user@host/db" for a PostgreSQL shared by several collectors.
	DSN string `mapstructure:"dsn"`
	// Shard names this instance's statistics; instances sharing a database
	// need distinct shards. Empty means the host name and the component id.
	Shard string `mapstructure:"shard"`
	// Retention deletes windows older than this; 0 keeps everything.
	Retention time.Duration `mapstructure:"retention"`
	// DownsampleAfter merges windows older than this into DownsampleTo-long
	// windows; 0 disables downsampling.
	DownsampleAfter time.Duration `mapstructure:"downsample_after"`
	DownsampleTo    time.Duration `mapstructure:"downsample_to"`
}

// ExperimentsConfig configures the gradient experiments (paper 000 §3): where
// the injectors are, the experiment settings and the safety bounds. The
// reasons behind the defaults are in docs/configuration.md.
type ExperimentsConfig struct {
	// Settings are k, n, chunks, scale, min_samples_per_period, min_snr,
	// max_windows, max_perturbation, perturbation_measure,
	// adaptive_in_window and reference_requests, passed to every experiment
	// as they are (a request may override k, n and scale).
	gradient.Settings `mapstructure:",squash"`

	// Injector is the default injector URL (http://host:18777).
	Injector string `mapstructure:"injector"`
	// Token is sent as a bearer token to the configured injectors only.
	Token configopaque.String `mapstructure:"token"`
	// Client is how the coordinator reaches the injectors (TLS, CA, proxy);
	// its endpoint is unused and a zero timeout takes request_timeout.
	Client confighttp.ClientConfig `mapstructure:"client"`
	// Links gives, per "source->target", the address a delay lease matches
	// and the injector on the caller's host; unlisted links are learned from
	// the traces and the connection inventory.
	Links map[string]ExperimentLink `mapstructure:"links"`
	// Capacities names the cgroups "capacity:<name>" experiments perturb.
	Capacities map[string]ExperimentCapacity `mapstructure:"capacities"`
	// Frequencies names the CPUs "frequency:<name>" experiments perturb.
	Frequencies map[string]ExperimentFrequency `mapstructure:"frequencies"`
	// FrontServices are the services whose SERVER spans are the measured
	// transactions; empty means every trace's root span.
	FrontServices []string `mapstructure:"front_services"`
	// MaxP99Ms is the guard's default SLO bound; 0 turns it off.
	MaxP99Ms float64 `mapstructure:"max_p99_ms"`
	// MaxDelay caps every requested delay, delay_floor included; keep it at
	// the injectors' max_delay.
	MaxDelay time.Duration `mapstructure:"max_delay"`
	// MinDelay is the smallest amplitude a delay wave is given.
	MinDelay time.Duration `mapstructure:"min_delay"`
	// DelayFloor is a delay every packet of a link lease gets under the wave
	// (the injector's wave.floor), so the injector's CPU does not follow the
	// wave; 0 turns it off.
	DelayFloor time.Duration `mapstructure:"delay_floor"`
	// MaxConcurrent bounds the experiments running at once.
	MaxConcurrent int `mapstructure:"max_concurrent"`
	// Lateness is how long after a bin ends its samples may still arrive;
	// 0 means trace_wait + 2s. Spans held upstream (an SDK's batch delay, a
	// causalpath processor's wait) arrive that much later: add them, or the
	// windows' bins read empty.
	Lateness time.Duration `mapstructure:"lateness"`
	// RequestTimeout bounds one request to an injector.
	RequestTimeout time.Duration `mapstructure:"request_timeout"`
	// SampleBuffer bounds the samples queued per experiment; more are dropped.
	SampleBuffer int `mapstructure:"sample_buffer"`
	// StealCovariate adjusts the training and the active windows for the
	// hosts' CPU steal (needs system.cpu.utilization at least once a bin).
	StealCovariate bool `mapstructure:"steal_covariate"`
}

// injectorURLs is the configured set of injectors: experiments.injector and
// every link's, capacity's and frequency's own, without trailing slashes.
func (c ExperimentsConfig) injectorURLs() []string {
	var out []string
	add := func(u string) {
		if u = strings.TrimRight(u, "/"); u != "" && !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	add(c.Injector)
	for _, l := range c.Links {
		add(l.Injector)
	}
	for _, cp := range c.Capacities {
		add(cp.Injector)
	}
	for _, fr := range c.Frequencies {
		add(fr.Injector)
	}
	slices.Sort(out)
	return out
}

// linkInjectors reports whether an injector is configured for link
// experiments (experiments.injector, or one link's own): only then does the
// exporter keep the calls per request that bound their adaptive pulse, a
// cost of some 5% of trace ingestion.
func (c ExperimentsConfig) linkInjectors() bool {
	if c.Injector != "" {
		return true
	}
	for _, l := range c.Links {
		if l.Injector != "" {
			return true
		}
	}
	return false
}

// ExperimentLink locates one link for its delay lease.
type ExperimentLink struct {
	// Address is "tcp://10.0.0.5:5432", "udp://host:port" or "host:port".
	Address string `mapstructure:"address"`
	// Injector overrides experiments.injector for this link.
	Injector string `mapstructure:"injector"`
}

// ExperimentCapacity is one node whose CPU capacity can be perturbed: a
// cgroup the injector's capacity lease withholds a fraction of, and the
// process inside it whose CPU readings give the demand α·w of the basis
// 1/(c·f − α·w).
type ExperimentCapacity struct {
	ExperimentCPU `mapstructure:",squash"`
	// Cgroup is the cgroup's path below the injector's cgroup_root.
	Cgroup string `mapstructure:"cgroup"`
	// Cores is c, the capacity the cgroup is allotted now, in CPUs.
	Cores float64 `mapstructure:"cores"`
	// Sides lists the waves the experiment measures the capacity with, one
	// gradient each, in order: "below" withholds a fraction of the quota,
	// c·(1 − a); "centered" swings it both ways, c·(1 ∓ a/2); "above"
	// grants, c·(1 + a). Each gradient is the secant over its wave's
	// interval, and where the response curves near saturation, below and
	// above together let a prediction use the secant on its side, or
	// between them (paper 000 §6). Default [below]. Centered and above
	// need a quota (not "max") and the host CPUs to grant.
	Sides []string `mapstructure:"sides"`
	// MaxGrantFraction caps the grant of an above wave, c·(1 + a), as a
	// fraction of c (default 1: up to twice the quota). Unlike a cut, a
	// grant cannot saturate the node, so its wave may reach the basis
	// change a cut of max_fraction does, and a secant that spans the larger
	// capacities predictions ask about. The injector refuses a grant past
	// the host's CPUs.
	MaxGrantFraction float64 `mapstructure:"max_grant_fraction"`
}

// maxGrant is MaxGrantFraction with its default.
func (cp ExperimentCapacity) maxGrant() float64 {
	if cp.MaxGrantFraction == 0 {
		return 1
	}
	return cp.MaxGrantFraction
}

// bases is one basis per configured side, below by default.
func (cp ExperimentCapacity) bases(b gradient.Basis) []gradient.Basis {
	if len(cp.Sides) == 0 {
		return []gradient.Basis{b}
	}
	out := make([]gradient.Basis, 0, len(cp.Sides))
	for _, side := range cp.Sides {
		out = append(out, b.WithSide(side))
	}
	return out
}

// ExperimentCPU is what capacity and frequency elements share: the CPU's
// speed, the process whose CPU readings (hostmetrics process.cpu.utilization)
// give the demand α·w, and the wave's fractions.
type ExperimentCPU struct {
	// Injector overrides experiments.injector for this node.
	Injector string `mapstructure:"injector"`
	// FrequencyMHz is f, one CPU's speed now; default core_mhz.
	FrequencyMHz float64 `mapstructure:"frequency_mhz"`
	// Machine and Process name the CPU readings of the process: its
	// host.name (or host_name) and process.executable.name.
	Machine string `mapstructure:"machine"`
	Process string `mapstructure:"process"`
	// InitialFraction is A⁰, the fraction of the capacity (or of f) taken
	// away in the adaptive phase (default 0.05); MaxFraction caps every
	// amplitude (default 0.3).
	InitialFraction float64 `mapstructure:"initial_fraction"`
	MaxFraction     float64 `mapstructure:"max_fraction"`
}

// Validate checks the node's own fields.
func (n ExperimentCPU) Validate() error {
	var errs []error
	if n.Injector != "" {
		if err := checkURL(n.Injector); err != nil {
			errs = append(errs, fmt.Errorf("injector: %w", err))
		}
	}
	if n.FrequencyMHz < 0 {
		errs = append(errs, fmt.Errorf("frequency_mhz: must be ≥ 0, got %v", n.FrequencyMHz))
	}
	if n.Machine == "" || n.Process == "" {
		errs = append(errs, errors.New("machine and process are required: their CPU readings give the demand α·w"))
	}
	if n.InitialFraction < 0 || n.InitialFraction >= 1 || n.MaxFraction < 0 || n.MaxFraction >= 1 {
		errs = append(errs, fmt.Errorf("initial_fraction and max_fraction must be in [0, 1), got %v and %v", n.InitialFraction, n.MaxFraction))
	}
	return errors.Join(errs...)
}

// fractions are A⁰ and the largest amplitude, with their defaults.
func (n ExperimentCPU) fractions() (a0, maxA float64) {
	a0, maxA = n.InitialFraction, n.MaxFraction
	if a0 == 0 {
		a0 = 0.05
	}
	if maxA == 0 {
		maxA = 0.3
	}
	return min(a0, maxA), maxA
}

// ExperimentFrequency is a set of CPUs whose speed can be perturbed (DVFS
// through the userspace governor), and the process running on them whose
// CPU readings give the demand α·w of the basis 1/(f − α·w). Its fractions
// are of f; the injector rounds each amplitude to a P-state the CPUs have.
type ExperimentFrequency struct {
	ExperimentCPU `mapstructure:",squash"`
	// CPUs are the CPU numbers the lease drives (one base frequency). The
	// process should be confined to them (a cpuset), or the basis does not
	// describe it.
	CPUs []int `mapstructure:"cpus"`
}

// Validate checks the CPUs the lease drives (the node's own fields are
// checked by ExperimentCPU.Validate).
func (fr ExperimentFrequency) Validate() error {
	if len(fr.CPUs) == 0 {
		return errors.New("cpus: is required: the CPU numbers whose speed the lease changes")
	}
	for _, cpu := range fr.CPUs {
		if cpu < 0 {
			return fmt.Errorf("cpus: CPU numbers are ≥ 0, got %d", cpu)
		}
	}
	return nil
}

// Validate checks the cgroup, its cores and the sides (the node's own fields
// are checked by ExperimentCPU.Validate).
func (cp ExperimentCapacity) Validate() error {
	var errs []error
	if strings.TrimSpace(cp.Cgroup) == "" {
		errs = append(errs, errors.New("cgroup: is required"))
	}
	if !(cp.Cores > 0) {
		errs = append(errs, fmt.Errorf("cores: must be > 0, got %v", cp.Cores))
	}
	if !(cp.MaxGrantFraction >= 0) || math.IsInf(cp.MaxGrantFraction, 0) {
		errs = append(errs, fmt.Errorf("max_grant_fraction: must be ≥ 0 (0: the default, 1), got %v", cp.MaxGrantFraction))
	}
	seen := map[string]bool{}
	for i, side := range cp.Sides {
		switch {
		case side != gradient.SideBelow && side != gradient.SideCentered && side != gradient.SideAbove:
			errs = append(errs, fmt.Errorf("sides[%d]: want below, centered or above, got %q", i, side))
		case seen[side]:
			errs = append(errs, fmt.Errorf("sides[%d]: %q is listed twice", i, side))
		}
		seen[side] = true
	}
	return errors.Join(errs...)
}

// Validate checks the link's address and injector.
func (l ExperimentLink) Validate() error {
	var errs []error
	if _, err := parseLinkAddress(l.Address); err != nil {
		errs = append(errs, fmt.Errorf("address: %w", err))
	}
	if l.Injector != "" {
		if err := checkURL(l.Injector); err != nil {
			errs = append(errs, fmt.Errorf("injector: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Validate checks the coordinator's own fields; the experiment settings,
// links, capacities and frequencies validate themselves.
func (c ExperimentsConfig) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Injector != "" {
		if err := checkURL(c.Injector); err != nil {
			bad("injector", "%v", err)
		}
	}
	if !(c.MaxP99Ms >= 0) {
		bad("max_p99_ms", "must be ≥ 0, got %v", c.MaxP99Ms)
	}
	if c.DelayFloor < 0 || c.DelayFloor >= c.MaxDelay {
		bad("delay_floor", "must be in [0, max_delay %v), got %v", c.MaxDelay, c.DelayFloor)
	}
	if c.MinDelay < 0 || c.MinDelay > c.MaxDelay-c.DelayFloor {
		bad("min_delay", "must be in [0, max_delay − delay_floor %v], got %v", c.MaxDelay-c.DelayFloor, c.MinDelay)
	}
	if c.MaxDelay <= 0 {
		bad("max_delay", "must be > 0, got %v", c.MaxDelay)
	}
	if c.MaxConcurrent < 1 {
		bad("max_concurrent", "must be ≥ 1, got %d", c.MaxConcurrent)
	}
	if c.Lateness < 0 {
		bad("lateness", "must be ≥ 0, got %v", c.Lateness)
	}
	if c.RequestTimeout <= 0 {
		bad("request_timeout", "must be > 0, got %v", c.RequestTimeout)
	}
	if c.SampleBuffer < 1 {
		bad("sample_buffer", "must be ≥ 1, got %d", c.SampleBuffer)
	}
	return errors.Join(errs...)
}

// Validate checks the solver.
func (c WorkFactorsConfig) Validate() error {
	if _, err := workfactor.ParseMethod(c.Method); err != nil {
		return fmt.Errorf("method: %w", err)
	}
	return nil
}

// Validate checks that every bound admits something.
func (c LimitsConfig) Validate() error {
	if c.MaxServices < 1 || c.MaxEdges < 1 || c.MaxPatterns < 1 {
		return fmt.Errorf("max_services, max_edges and max_patterns must be ≥ 1, got %+v", c)
	}
	return nil
}

// Validate checks the quantum and the message bound (the quantum's bound by
// the window is Config's).
func (c AsyncConfig) Validate() error {
	var errs []error
	if c.Quantum <= 0 {
		errs = append(errs, fmt.Errorf("quantum: must be > 0, got %v", c.Quantum))
	}
	if c.MaxMessages < 0 {
		errs = append(errs, fmt.Errorf("max_messages: must be ≥ 0, got %d", c.MaxMessages))
	}
	return errors.Join(errs...)
}

// Validate checks the DSN and the retention (downsample_to's fit with the
// window is Config's).
func (c StorageConfig) Validate() error {
	var errs []error
	if strings.TrimSpace(c.DSN) == "" {
		errs = append(errs, errors.New("dsn: must be set (sqlite:///path.db or postgres://...)"))
	}
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("retention: must be ≥ 0, got %v", c.Retention))
	}
	if c.DownsampleAfter < 0 || c.DownsampleTo < 0 {
		errs = append(errs, errors.New("downsample_after and downsample_to must be ≥ 0"))
	}
	if c.DownsampleAfter > 0 && c.Retention > 0 && c.Retention <= c.DownsampleAfter {
		errs = append(errs, fmt.Errorf("retention: must exceed downsample_after (%v), got %v", c.DownsampleAfter, c.Retention))
	}
	return errors.Join(errs...)
}

var _ component.Config = (*Config)(nil)

// Validate checks the top-level fields and what spans several nested structs
// (the window against the time constants, the auth experiments need); the
// collector calls each nested struct's Validate too (xconfmap.Validate).
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.NetAddr.Endpoint == "" {
		bad("endpoint", "must be set (host:port of the HTTP API)")
	}
	if c.Window < time.Second || c.Window%time.Second != 0 {
		bad("window", "must be a whole number of seconds ≥ 1s, got %v", c.Window)
	}
	if c.FlushInterval <= 0 {
		bad("flush_interval", "must be > 0, got %v", c.FlushInterval)
	}
	if c.OpenWindows < 1 {
		bad("open_windows", "must be ≥ 1, got %d", c.OpenWindows)
	}
	if c.TraceWait <= 0 {
		bad("trace_wait", "must be > 0, got %v", c.TraceWait)
	}
	if c.MaxOpenTraces < 1 {
		bad("max_open_traces", "must be ≥ 1, got %d", c.MaxOpenTraces)
	}
	if c.MaxSpansPerTrace < 1 {
		bad("max_spans_per_trace", "must be ≥ 1, got %d", c.MaxSpansPerTrace)
	}
	if c.WorkFactors.HalfLife < c.Window {
		bad("work_factors.half_life", "must be at least one window (%v), got %v", c.Window, c.WorkFactors.HalfLife)
	}
	if c.WorkFactors.SmoothingHalfLife < c.Window {
		bad("work_factors.smoothing_half_life", "must be at least one window (%v), got %v", c.Window, c.WorkFactors.SmoothingHalfLife)
	}
	if c.Async.Quantum > c.Window {
		bad("async.quantum", "must be at most window, got %v", c.Async.Quantum)
	}
	if c.Storage.DownsampleAfter > 0 {
		if c.Storage.DownsampleTo <= c.Window || c.Storage.DownsampleTo%c.Window != 0 {
			bad("storage.downsample_to", "must be a multiple of window larger than it, got %v", c.Storage.DownsampleTo)
		}
	}
	if c.CapacityMHz < 0 {
		bad("capacity_mhz", "must be ≥ 0, got %v", c.CapacityMHz)
	}
	for m, v := range c.MachineCapacityMHz {
		if !(v > 0) {
			bad("machine_capacity_mhz."+m, "must be > 0, got %v", v)
		}
	}
	// Experiments make injectors perturb hosts: their API is for
	// authenticated callers, or for local ones on a loopback endpoint.
	if len(c.Experiments.injectorURLs()) > 0 && !c.Auth.HasValue() && !endpoint.IsLoopback(c.NetAddr.Endpoint) {
		bad("auth", "experiments are configured, so the API on %q (not loopback) needs an authenticator: POST %s starts perturbations", c.NetAddr.Endpoint, "/api/v1/experiments")
	}
	return errors.Join(errs...)
}
