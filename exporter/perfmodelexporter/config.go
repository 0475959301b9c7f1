package perfmodelexporter

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"

	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/spectral"
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

// isLoopback reports whether endpoint (host:port) listens on loopback only.
func isLoopback(endpoint string) bool {
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// ExperimentsConfig configures the gradient experiments (paper 000 §3):
// where the injectors are, the spectral defaults and the safety bounds.
type ExperimentsConfig struct {
	// Injector is the default injector URL (http://host:18777).
	Injector string `mapstructure:"injector"`
	// Token, when set, is sent as a bearer token to the configured injectors,
	// never to any other URL: a request may only name a configured injector.
	Token configopaque.String `mapstructure:"token"`
	// Client is how the coordinator reaches the injectors: TLS, CA, proxy
	// (its endpoint is unused; a zero timeout takes request_timeout).
	Client confighttp.ClientConfig `mapstructure:"client"`
	// Links gives, per "source->target", the address a delay lease matches
	// and the injector on the caller's host. A link without an entry takes
	// the address its caller's CLIENT spans called the target at most
	// (server.address and server.port, learned from the traces) or the
	// connection inventory shows open connections to, and the default
	// injector; a target that is itself host:port is its address.
	Links map[string]ExperimentLink `mapstructure:"links"`
	// Capacities names the cgroups whose CPU capacity "capacity:<name>"
	// experiments perturb (paper 003 §III-C).
	Capacities map[string]ExperimentCapacity `mapstructure:"capacities"`
	// Frequencies names the CPUs whose speed "frequency:<name>" experiments
	// perturb through the injector's cpufreq lease (paper 003 §III-B).
	Frequencies map[string]ExperimentFrequency `mapstructure:"frequencies"`
	// FrontServices are the services whose SERVER spans are the measured
	// transactions; empty means the root span of every trace.
	FrontServices []string `mapstructure:"front_services"`
	// K, N, Chunks (M) and Scale (d) are the spectral defaults a request
	// may override (k, n, scale).
	K      int     `mapstructure:"k"`
	N      int     `mapstructure:"n"`
	Chunks int     `mapstructure:"chunks"`
	Scale  float64 `mapstructure:"scale"`
	// MaxP99Ms is the default SLO bound of the guard; 0 turns it off.
	MaxP99Ms float64 `mapstructure:"max_p99_ms"`
	// MaxDelay caps every requested delay, delay_floor included; keep it at
	// the injectors' max_delay so no lease is refused as over the cap.
	MaxDelay time.Duration `mapstructure:"max_delay"`
	// MinDelay is the smallest amplitude a delay wave is given. Below about
	// a millisecond the injected delay is no more certain than its size
	// (paper 000 figure 7; our injector's error is ~0.13 ms), and a wave
	// that small is lost in the response time's noise.
	MinDelay time.Duration `mapstructure:"min_delay"`
	// DelayFloor is a delay every packet of a link lease gets under the
	// wave (the injector's wave.floor). Holding a packet costs the injector
	// more CPU than passing it; with a floor both phases hold every packet,
	// so that CPU does not rise and fall with the wave, where on a host the
	// application shares it would read as gradient. It moves the response
	// time by floor × gradient for the whole lease; 0 turns it off.
	DelayFloor time.Duration `mapstructure:"delay_floor"`
	// MinSNR is the least SNR of the target transaction's spike; below it
	// an element is measured again with up to 3 times the amplitude, and the
	// windows' spikes are averaged coherently, until the combined SNR
	// reaches it or max_windows have run (0 turns it off). At SNR 6 the
	// estimate's standard error is ~12%.
	MinSNR float64 `mapstructure:"min_snr"`
	// MinSamplesPerPeriod bounds the wave's frequency: every period spans at
	// least this many bins, k_d ≤ N/min_samples_per_period (default 8, paper
	// 000 figure 8(a)). A CPU capacity or frequency element answers through
	// a queue that needs time to settle after each change; a half period
	// shorter than a few of its relaxation times attenuates the response and
	// reads the gradient low, so such experiments want 16 or more.
	MinSamplesPerPeriod float64 `mapstructure:"min_samples_per_period"`
	// MaxWindows bounds an element's active windows of N bins (default 2).
	// On a noisy host, where the perturbation bound keeps the amplitude
	// down, more windows are what buys precision: the SNR grows with their
	// square root.
	MaxWindows int `mapstructure:"max_windows"`
	// MaxPerturbation bounds the active windows' perturbation of each
	// transaction's response time, in standard deviations of its natural
	// noise (paper 000 Table 3 keeps it under 1): A_d′ is kept to 0.8 of it
	// by the adaptive cycle's gradients, leaving room for their error, and a
	// second window that would pass it keeps the first's amplitude.
	// min_delay overrides it. 0 lifts the bound. A capacity wave above the
	// operating point only grants, so no request is slower for it, and only
	// max_grant_fraction bounds it.
	MaxPerturbation float64 `mapstructure:"max_perturbation"`
	// PerturbationMeasure is what max_perturbation bounds: "peak" (the
	// default), the change while the wave is on, or "mean", that change
	// averaged over the window, half the peak: paper 000 Table 3's
	// increase in response time during the measurement. "mean" lets the
	// wave's peak reach twice the bound; on the namespace testbed it did
	// not save windows, as the first is still kept down by the one-cycle
	// gradients' error (docs/gradient-report.md, run AF).
	PerturbationMeasure string `mapstructure:"perturbation_measure"`
	// AdaptiveInWindow runs a link's adaptive cycle (paper 000 §3) as the
	// active window's first periods instead of a phase of its own: A⁰ for
	// as few periods as the first on-phase's spans need to arrive
	// (lateness), then A_d′ for the rest. A link then takes its N bins, the
	// lead time and the lateness, a period and a lateness less; a plan
	// whose window is too short for it runs the separate phase. On by
	// default: on the namespace testbed, with the requests that did not
	// cross the link as references, three runs read 24 of 24 asserted
	// values within ±10% (the separate phase 22 of 24 in three), one
	// window of 128 bins taking N·ΔTs + 6.6–7.3 s against N·ΔTs + 22–26 s
	// (docs/gradient-report.md, runs AV–BA); before the references three
	// runs read 15 of 24 (runs N, O and Q). CPU waves (frequencies,
	// capacities) keep the separate phase, as the real cgroup runs measured
	// them.
	AdaptiveInWindow bool `mapstructure:"adaptive_in_window"`
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
	// StealCovariate adjusts the training and every active window for the
	// hosts' CPU steal (spectral.Adjust): the time a hypervisor takes from
	// the VMs slows every tier at once, and on the namespace testbed it
	// explained 88% of the variance of 5 s response-time means. It needs the
	// hostmetrics cpu scraper with system.cpu.utilization enabled and a
	// collection_interval shorter than a bin (1s); without those metrics,
	// or on hosts without steal, nothing changes. Off by default: in
	// simulation it halves the error, but its two testbed runs so far read
	// 4 and 5 of 8 values within ±10% (docs/gradient-report.md, AC and AE).
	StealCovariate bool `mapstructure:"steal_covariate"`
	// ReferenceRequests adjusts each transaction's active windows of a link
	// for its requests that did not call over the link (gradient.Config.
	// References): where a transaction splits over replicas, the other
	// replica's requests share the host's noise but not the wave. A request
	// counts as one that did not cross only when its trace shows the
	// link's caller calling, every call at a known address, none at the
	// delayed one. A reference whose own response to the wave is
	// significant is dropped for the estimate without it. On by default: on
	// the namespace testbed's load-balanced links it read 10 of 12 values
	// within ±10% in three runs, where the same windows without it read 8
	// of 12, and its SNR was 1.4–2.2× (docs/gradient-report.md, AO–AQ).
	// Where traces lack server.address and server.port nothing changes.
	ReferenceRequests bool `mapstructure:"reference_requests"`
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

func (n ExperimentCPU) validate(f string, bad func(field, format string, args ...any)) {
	if n.Injector != "" {
		if err := checkURL(n.Injector); err != nil {
			bad(f+".injector", "%v", err)
		}
	}
	if n.FrequencyMHz < 0 {
		bad(f+".frequency_mhz", "must be ≥ 0, got %v", n.FrequencyMHz)
	}
	if n.Machine == "" || n.Process == "" {
		bad(f, "machine and process are required: their CPU readings give the demand α·w")
	}
	if n.InitialFraction < 0 || n.InitialFraction >= 1 || n.MaxFraction < 0 || n.MaxFraction >= 1 {
		bad(f, "initial_fraction and max_fraction must be in [0, 1), got %v and %v", n.InitialFraction, n.MaxFraction)
	}
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

func (c ExperimentsConfig) validate(bad func(field, format string, args ...any)) {
	for name, fr := range c.Frequencies {
		f := "experiments.frequencies." + name
		fr.validate(f, bad)
		if len(fr.CPUs) == 0 {
			bad(f+".cpus", "is required: the CPU numbers whose speed the lease changes")
		}
		for _, cpu := range fr.CPUs {
			if cpu < 0 {
				bad(f+".cpus", "CPU numbers are ≥ 0, got %d", cpu)
			}
		}
	}
	for name, cp := range c.Capacities {
		f := "experiments.capacities." + name
		cp.validate(f, bad)
		if strings.TrimSpace(cp.Cgroup) == "" {
			bad(f+".cgroup", "is required")
		}
		if !(cp.Cores > 0) {
			bad(f+".cores", "must be > 0, got %v", cp.Cores)
		}
		if !(cp.MaxGrantFraction >= 0) || math.IsInf(cp.MaxGrantFraction, 0) {
			bad(f+".max_grant_fraction", "must be ≥ 0 (0: the default, 1), got %v", cp.MaxGrantFraction)
		}
		seen := map[string]bool{}
		for i, side := range cp.Sides {
			switch {
			case side != gradient.SideBelow && side != gradient.SideCentered && side != gradient.SideAbove:
				bad(fmt.Sprintf("%s.sides[%d]", f, i), "want below, centered or above, got %q", side)
			case seen[side]:
				bad(fmt.Sprintf("%s.sides[%d]", f, i), "%q is listed twice", side)
			}
			seen[side] = true
		}
	}
	if c.Injector != "" {
		if err := checkURL(c.Injector); err != nil {
			bad("experiments.injector", "%v", err)
		}
	}
	for name, l := range c.Links {
		if _, err := parseLinkAddress(l.Address); err != nil {
			bad("experiments.links."+name+".address", "%v", err)
		}
		if l.Injector != "" {
			if err := checkURL(l.Injector); err != nil {
				bad("experiments.links."+name+".injector", "%v", err)
			}
		}
	}
	train := spectral.TrainConfig{K: c.K, N: c.N, Chunks: c.Chunks, Scale: c.Scale, MinSamplesPerPeriod: spectral.DefaultMinSamplesPerPeriod}
	if err := train.Validate(); err != nil {
		bad("experiments", "%v", err)
	} else if err := spectral.CheckMinSamplesPerPeriod(c.MinSamplesPerPeriod, c.N); err != nil {
		bad("experiments.min_samples_per_period", "%v", err)
	}
	if !(c.MaxP99Ms >= 0) {
		bad("experiments.max_p99_ms", "must be ≥ 0, got %v", c.MaxP99Ms)
	}
	if !(c.MinSNR >= 0) || math.IsInf(c.MinSNR, 0) {
		bad("experiments.min_snr", "must be ≥ 0, got %v", c.MinSNR)
	}
	if c.MaxWindows < 1 || c.MaxWindows > gradient.MaxWindowsLimit {
		bad("experiments.max_windows", "must be in [1, %d], got %d", gradient.MaxWindowsLimit, c.MaxWindows)
	}
	if !(c.MaxPerturbation >= 0) || math.IsInf(c.MaxPerturbation, 0) {
		bad("experiments.max_perturbation", "must be ≥ 0, got %v", c.MaxPerturbation)
	}
	if err := gradient.CheckPerturbationMeasure(c.PerturbationMeasure); err != nil {
		bad("experiments.perturbation_measure", "%v", err)
	}
	if c.DelayFloor < 0 || c.DelayFloor >= c.MaxDelay {
		bad("experiments.delay_floor", "must be in [0, max_delay %v), got %v", c.MaxDelay, c.DelayFloor)
	}
	if c.MinDelay < 0 || c.MinDelay > c.MaxDelay-c.DelayFloor {
		bad("experiments.min_delay", "must be in [0, max_delay − delay_floor %v], got %v", c.MaxDelay-c.DelayFloor, c.MinDelay)
	}
	if c.MaxDelay <= 0 {
		bad("experiments.max_delay", "must be > 0, got %v", c.MaxDelay)
	}
	if c.MaxConcurrent < 1 {
		bad("experiments.max_concurrent", "must be ≥ 1, got %d", c.MaxConcurrent)
	}
	if c.Lateness < 0 {
		bad("experiments.lateness", "must be ≥ 0, got %v", c.Lateness)
	}
	if c.RequestTimeout <= 0 {
		bad("experiments.request_timeout", "must be > 0, got %v", c.RequestTimeout)
	}
	if c.SampleBuffer < 1 {
		bad("experiments.sample_buffer", "must be ≥ 1, got %d", c.SampleBuffer)
	}
}

var _ component.Config = (*Config)(nil)

// Validate checks the configuration, naming the field at fault.
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
	if c.Limits.MaxServices < 1 || c.Limits.MaxEdges < 1 || c.Limits.MaxPatterns < 1 {
		bad("limits", "max_services, max_edges and max_patterns must be ≥ 1, got %+v", c.Limits)
	}
	if c.WorkFactors.HalfLife < c.Window {
		bad("work_factors.half_life", "must be at least one window (%v), got %v", c.Window, c.WorkFactors.HalfLife)
	}
	if c.WorkFactors.SmoothingHalfLife < c.Window {
		bad("work_factors.smoothing_half_life", "must be at least one window (%v), got %v", c.Window, c.WorkFactors.SmoothingHalfLife)
	}
	if _, err := workfactor.ParseMethod(c.WorkFactors.Method); err != nil {
		bad("work_factors.method", "%v", err)
	}
	if c.Async.Quantum <= 0 || c.Async.Quantum > c.Window {
		bad("async.quantum", "must be > 0 and at most window, got %v", c.Async.Quantum)
	}
	if c.Async.MaxMessages < 0 {
		bad("async.max_messages", "must be ≥ 0, got %d", c.Async.MaxMessages)
	}
	if strings.TrimSpace(c.Storage.DSN) == "" {
		bad("storage.dsn", "must be set (sqlite:///path.db or postgres://...)")
	}
	if c.Storage.Retention < 0 {
		bad("storage.retention", "must be ≥ 0, got %v", c.Storage.Retention)
	}
	if c.Storage.DownsampleAfter < 0 || c.Storage.DownsampleTo < 0 {
		bad("storage.downsample_after", "and downsample_to must be ≥ 0")
	}
	if c.Storage.DownsampleAfter > 0 {
		if c.Storage.DownsampleTo <= c.Window || c.Storage.DownsampleTo%c.Window != 0 {
			bad("storage.downsample_to", "must be a multiple of window larger than it, got %v", c.Storage.DownsampleTo)
		}
		if c.Storage.Retention > 0 && c.Storage.Retention <= c.Storage.DownsampleAfter {
			bad("storage.retention", "must exceed downsample_after (%v), got %v", c.Storage.DownsampleAfter, c.Storage.Retention)
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
	c.Experiments.validate(bad)
	// Experiments make injectors perturb hosts: their API is for
	// authenticated callers, or for local ones on a loopback endpoint.
	if len(c.Experiments.injectorURLs()) > 0 && !c.Auth.HasValue() && !isLoopback(c.NetAddr.Endpoint) {
		bad("auth", "experiments are configured, so the API on %q (not loopback) needs an authenticator: POST %s starts perturbations", c.NetAddr.Endpoint, "/api/v1/experiments")
	}
	return errors.Join(errs...)
}
