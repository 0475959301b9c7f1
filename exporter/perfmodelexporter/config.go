package perfmodelexporter

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/coordinator"
	"github.com/tierscope/tierscope/internal/endpoint"
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

// The experiments' configuration lives with the coordinator that reads it.
type (
	// ExperimentsConfig configures the gradient experiment coordinator.
	ExperimentsConfig = coordinator.Config
	// ExperimentLink locates one link for its delay lease.
	ExperimentLink = coordinator.Link
	// ExperimentCapacity is a node whose CPU capacity can be perturbed.
	ExperimentCapacity = coordinator.Capacity
	// ExperimentFrequency is a set of CPUs whose speed can be perturbed.
	ExperimentFrequency = coordinator.Frequency
	// ExperimentCPU is what capacity and frequency elements share.
	ExperimentCPU = coordinator.CPU
)

// WorkFactorsConfig tunes the work-factor regression. Its time constants are
// durations, not periods: one period is one window, and the paper's h = 10
// and t = 15 periods are of one minute. Expressed as time, they keep their
// meaning whatever window is chosen.
type WorkFactorsConfig struct {
	// HalfLife is the shortest half-life h of the data's geometric aging
	// (§3.4), used right after a detected change of demand; the memory then
	// grows with the time since (up to 1,000 windows, or h if longer). Default 10m.
	HalfLife time.Duration `mapstructure:"half_life"`
	// SmoothingHalfLife is the half-life t of the estimates' smoothing
	// (§4.4). Default 15m.
	SmoothingHalfLife time.Duration `mapstructure:"smoothing_half_life"`
	// Method is the solver: plain (the paper's least squares), ridge or nnls
	// (for collinear flows, §5.5). Default plain.
	Method string `mapstructure:"method"`
}

// LimitsConfig bounds a window's service graph and patterns, and the
// exporter's own memory of addresses and logged version changes.
type LimitsConfig struct {
	MaxServices int `mapstructure:"max_services"`
	MaxEdges    int `mapstructure:"max_edges"`
	MaxPatterns int `mapstructure:"max_patterns"`
	// MaxAddresses bounds the address → service book that names the callee
	// of a CLIENT span no SERVER span answered.
	MaxAddresses int `mapstructure:"max_addresses"`
	// MaxVersionChanges bounds the changed transactions of new versions
	// remembered as logged, so that each is logged once.
	MaxVersionChanges int `mapstructure:"max_version_changes"`
	// MaxNames bounds the names (services, addresses, transactions) of the
	// spans being assembled; past it, the names of completed traces are
	// dropped.
	MaxNames int `mapstructure:"max_names"`
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

// Validate checks the solver.
func (c WorkFactorsConfig) Validate() error {
	if _, err := workfactor.ParseMethod(c.Method); err != nil {
		return fmt.Errorf("method: %w", err)
	}
	return nil
}

// Validate checks that every bound admits something.
func (c LimitsConfig) Validate() error {
	if c.MaxServices < 1 || c.MaxEdges < 1 || c.MaxPatterns < 1 || c.MaxAddresses < 1 || c.MaxVersionChanges < 1 {
		return fmt.Errorf("max_services, max_edges, max_patterns, max_addresses and max_version_changes must be ≥ 1, got %+v", c)
	}
	if c.MaxNames < 1 {
		return fmt.Errorf("max_names: must be ≥ 1, got %d", c.MaxNames)
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
	if len(c.Experiments.InjectorURLs()) > 0 && !c.Auth.HasValue() && !endpoint.IsLoopback(c.NetAddr.Endpoint) {
		bad("auth", "experiments are configured, so the API on %q (not loopback) needs an authenticator: POST %s starts perturbations", c.NetAddr.Endpoint, "/api/v1/experiments")
	}
	return errors.Join(errs...)
}
