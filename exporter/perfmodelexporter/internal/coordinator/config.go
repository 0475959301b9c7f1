package coordinator

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configopaque"

	"github.com/tierscope/tierscope/internal/gradient"
)

// DefaultConfig is the experiments' default configuration.
func DefaultConfig() Config {
	return Config{
		Settings: gradient.DefaultSettings(),
		MaxDelay: 100 * time.Millisecond, MinDelay: time.Millisecond, DelayFloor: 300 * time.Microsecond, MaxConcurrent: 1,
		RequestTimeout: 5 * time.Second, SampleBuffer: 1 << 16,
		Client: confighttp.NewDefaultClientConfig(),
	}
}

// Config configures the gradient experiments (paper 000 §3): where
// the injectors are, the experiment settings and the safety bounds. The
// reasons behind the defaults are in docs/configuration.md.
type Config struct {
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
	Links map[string]Link `mapstructure:"links"`
	// Capacities names the cgroups "capacity:<name>" experiments perturb.
	Capacities map[string]Capacity `mapstructure:"capacities"`
	// Frequencies names the CPUs "frequency:<name>" experiments perturb.
	Frequencies map[string]Frequency `mapstructure:"frequencies"`
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

// InjectorURLs is the configured set of injectors: experiments.injector and
// every link's, capacity's and frequency's own, without trailing slashes.
func (c Config) InjectorURLs() []string {
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

// LinkInjectors reports whether an injector is configured for link
// experiments (experiments.injector, or one link's own): only then does the
// exporter keep the calls per request that bound their adaptive pulse, a
// cost of some 5% of trace ingestion.
func (c Config) LinkInjectors() bool {
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

// Link locates one link for its delay lease.
type Link struct {
	// Address is "tcp://10.0.0.5:5432", "udp://host:port" or "host:port".
	Address string `mapstructure:"address"`
	// Injector overrides experiments.injector for this link.
	Injector string `mapstructure:"injector"`
}

// Capacity is one node whose CPU capacity can be perturbed: a
// cgroup the injector's capacity lease withholds a fraction of, and the
// process inside it whose CPU readings give the demand α·w of the basis
// 1/(c·f − α·w).
type Capacity struct {
	CPU `mapstructure:",squash"`
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
func (cp Capacity) maxGrant() float64 {
	if cp.MaxGrantFraction == 0 {
		return 1
	}
	return cp.MaxGrantFraction
}

// bases is one basis per configured side, below by default.
func (cp Capacity) bases(b gradient.Basis) []gradient.Basis {
	if len(cp.Sides) == 0 {
		return []gradient.Basis{b}
	}
	out := make([]gradient.Basis, 0, len(cp.Sides))
	for _, side := range cp.Sides {
		out = append(out, b.WithSide(side))
	}
	return out
}

// CPU is what capacity and frequency elements share: the CPU's
// speed, the process whose CPU readings (hostmetrics process.cpu.utilization)
// give the demand α·w, and the wave's fractions.
type CPU struct {
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
func (n CPU) Validate() error {
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
func (n CPU) fractions() (a0, maxA float64) {
	a0, maxA = n.InitialFraction, n.MaxFraction
	if a0 == 0 {
		a0 = 0.05
	}
	if maxA == 0 {
		maxA = 0.3
	}
	return min(a0, maxA), maxA
}

// Frequency is a set of CPUs whose speed can be perturbed (DVFS
// through the userspace governor), and the process running on them whose
// CPU readings give the demand α·w of the basis 1/(f − α·w). Its fractions
// are of f; the injector rounds each amplitude to a P-state the CPUs have.
type Frequency struct {
	CPU `mapstructure:",squash"`
	// CPUs are the CPU numbers the lease drives (one base frequency). The
	// process should be confined to them (a cpuset), or the basis does not
	// describe it.
	CPUs []int `mapstructure:"cpus"`
}

// Validate checks the CPUs the lease drives (the node's own fields are
// checked by CPU.Validate).
func (fr Frequency) Validate() error {
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
// are checked by CPU.Validate).
func (cp Capacity) Validate() error {
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
func (l Link) Validate() error {
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
func (c Config) Validate() error {
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
