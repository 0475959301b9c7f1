package injector

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"strings"
	"time"

	"go.opentelemetry.io/collector/config/confighttp"

	"github.com/tierscope/tierscope/internal/endpoint"
	"github.com/tierscope/tierscope/internal/nfqdelay"
)

// Config is the configuration of the injector extension.
type Config struct {
	// ServerConfig is the HTTP control API (default 127.0.0.1:18777). Set its
	// `auth` to an authenticator extension: the API changes the host.
	confighttp.ServerConfig `mapstructure:",squash"`
	// Insecure lets the API run without auth, on a loopback endpoint only
	// (a warning is logged); anything else needs `auth`.
	Insecure bool `mapstructure:"insecure"`
	// Allowlist bounds what leases may target; an empty list allows nothing.
	Allowlist Allowlist `mapstructure:"allowlist"`
	// MaxDelay caps a delay lease's amplitude.
	MaxDelay time.Duration `mapstructure:"max_delay"`
	// MaxLease caps a lease's duration (and each renewal).
	MaxLease time.Duration `mapstructure:"max_lease"`
	// MaxFreqStepKHz caps a cpufreq lease's amplitude (kHz below base).
	MaxFreqStepKHz int64 `mapstructure:"max_freq_step_khz"`
	// MinQuota is the smallest CPU quota a capacity lease may leave a cgroup
	// with during an on-phase.
	MinQuota time.Duration `mapstructure:"min_quota"`
	// SysfsRoot is where the per-CPU cpufreq directories are.
	SysfsRoot string `mapstructure:"sysfs_root"`
	// StateDir holds the journal of original quotas and frequencies, written
	// before a lease changes them and restored by the next start after a crash.
	StateDir string `mapstructure:"state_dir"`
	// CgroupRoot is the root of the cgroup hierarchy; allowlisted cgroup
	// paths are relative to it.
	CgroupRoot string `mapstructure:"cgroup_root"`
	// QueueBase is the first NFQUEUE number used; delay leases take
	// QueueBase … QueueBase+MaxLeases−1.
	QueueBase uint16 `mapstructure:"queue_base"`
	// MaxLeases bounds the number of active leases.
	MaxLeases int `mapstructure:"max_leases"`
	// DelayProbeInterval is how often a delay lease sends a loopback probe
	// through its queue (nfqdelay.Options.Probe): the probes' one-way delay
	// is the wave a receiver sees, reported as the lease's stats.probe. 0
	// turns probing off.
	DelayProbeInterval time.Duration `mapstructure:"delay_probe_interval"`
	// RuleCheckInterval is how often a delay lease checks that its NFQUEUE
	// rule is still there; a lease whose rule went turns failed.
	RuleCheckInterval time.Duration `mapstructure:"rule_check_interval"`
	// HangTimeout bounds how long a hung injector may hold a link: a
	// watchdog process deletes the rules after this long (or a delay wave's
	// period, if shorter) without a heartbeat.
	HangTimeout time.Duration `mapstructure:"hang_timeout"`
}

// Allowlist lists the targets leases may perturb.
type Allowlist struct {
	// Links are the CIDRs a delay lease's dst must fall within.
	Links []string `mapstructure:"links"`
	// Ports are the destination ports a delay lease may match; empty allows
	// any port (but never "all ports", dst_port 0, unless 0 is listed).
	Ports []uint16 `mapstructure:"ports"`
	// Cgroups are cgroup paths, relative to cgroup_root; a capacity lease
	// may target one of them or a cgroup below.
	Cgroups []string `mapstructure:"cgroups"`
	// CPUs are the CPU numbers a cpufreq lease may drive.
	CPUs []int `mapstructure:"cpus"`
}

// Validate checks the targets; each error names its field.
func (a Allowlist) Validate() error {
	var errs []error
	for i, s := range a.Links {
		if _, err := parsePrefix(s); err != nil {
			errs = append(errs, fmt.Errorf("links[%d]: %w", i, err))
		}
	}
	for i, s := range a.Cgroups {
		if _, err := cleanCgroup(s); err != nil {
			errs = append(errs, fmt.Errorf("cgroups[%d]: %w", i, err))
		}
	}
	for i, cpu := range a.CPUs {
		if cpu < 0 {
			errs = append(errs, fmt.Errorf("cpus[%d]: %d must be >= 0", i, cpu))
		}
	}
	return errors.Join(errs...)
}

// Validate checks the configuration's own fields (the collector also calls
// Allowlist.Validate); each error names its field.
func (c *Config) Validate() error {
	var errs []error
	if c.NetAddr.Endpoint == "" {
		errs = append(errs, errors.New("endpoint must not be empty"))
	}
	switch {
	case c.Insecure && c.Auth.HasValue():
		errs = append(errs, errors.New("insecure: true contradicts auth; remove one"))
	case c.Insecure && !endpoint.IsLoopback(c.NetAddr.Endpoint):
		errs = append(errs, fmt.Errorf("insecure: true is allowed on a loopback endpoint only, not %q", c.NetAddr.Endpoint))
	case !c.Insecure && !c.Auth.HasValue():
		errs = append(errs, errors.New("auth: the API changes the host and needs an authenticator (e.g. bearertokenauth); `insecure: true` on a loopback endpoint runs it without"))
	}
	if c.MaxDelay <= 0 || c.MaxDelay > nfqdelay.HardMaxDelay {
		errs = append(errs, fmt.Errorf("max_delay: %v must be in (0, %v]", c.MaxDelay, nfqdelay.HardMaxDelay))
	}
	if c.MaxLease <= 0 || c.MaxLease > nfqdelay.MaxLease {
		errs = append(errs, fmt.Errorf("max_lease: %v must be in (0, %v]", c.MaxLease, nfqdelay.MaxLease))
	}
	if c.MaxFreqStepKHz <= 0 {
		errs = append(errs, fmt.Errorf("max_freq_step_khz: %d must be > 0", c.MaxFreqStepKHz))
	}
	if c.MinQuota < time.Millisecond {
		errs = append(errs, fmt.Errorf("min_quota: %v must be >= 1ms (the kernel's lower bound)", c.MinQuota))
	}
	if c.SysfsRoot == "" {
		errs = append(errs, errors.New("sysfs_root must not be empty"))
	}
	if c.StateDir == "" {
		errs = append(errs, errors.New("state_dir must not be empty"))
	}
	if c.CgroupRoot == "" {
		errs = append(errs, errors.New("cgroup_root must not be empty"))
	}
	if c.DelayProbeInterval < 0 || c.DelayProbeInterval > time.Second {
		errs = append(errs, fmt.Errorf("delay_probe_interval: %v must be in [0, 1s] (0 turns probing off)", c.DelayProbeInterval))
	}
	if c.RuleCheckInterval < 10*time.Millisecond || c.RuleCheckInterval > 10*time.Second {
		errs = append(errs, fmt.Errorf("rule_check_interval: %v must be in [10ms, 10s]", c.RuleCheckInterval))
	}
	if c.HangTimeout < 20*time.Millisecond || c.HangTimeout > time.Minute {
		errs = append(errs, fmt.Errorf("hang_timeout: %v must be in [20ms, 1m]", c.HangTimeout))
	}
	if c.MaxLeases <= 0 || int(c.QueueBase)+c.MaxLeases > 65536 {
		errs = append(errs, fmt.Errorf("max_leases: %d must be > 0 and queue_base+max_leases <= 65536", c.MaxLeases))
	}
	return errors.Join(errs...)
}

// parsePrefix accepts a CIDR or a bare address (a /32 or /128).
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// cleanCgroup turns a cgroup path into a clean relative path ("a/b"),
// refusing anything that would leave the cgroup root.
func cleanCgroup(s string) (string, error) {
	p := path.Clean("/" + s)
	for _, part := range strings.Split(s, "/") {
		if part == ".." {
			return "", fmt.Errorf("cgroup path %q must not contain ..", s)
		}
	}
	if p == "/" {
		return "", fmt.Errorf("cgroup path %q names the root", s)
	}
	return strings.TrimPrefix(p, "/"), nil
}
