package injector

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/extension"

	"github.com/tierscope/tierscope/injector/internal/cgroupcpu"
	"github.com/tierscope/tierscope/injector/internal/cpufreq"
	"github.com/tierscope/tierscope/injector/internal/metadata"
)

// DefaultEndpoint is where the control API listens by default: loopback only.
const DefaultEndpoint = "127.0.0.1:18777"

// DefaultStateDir is where the restore journal lives by default.
const DefaultStateDir = "/var/lib/tierscope/injector"

// defaultHangTimeout: one second of a black-holed link, at most.
const defaultHangTimeout = time.Second

// NewFactory returns the factory of the injector extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, createExtension, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	srv := confighttp.NewDefaultServerConfig()
	srv.NetAddr.Endpoint = DefaultEndpoint
	return &Config{
		ServerConfig:   srv,
		MaxDelay:       100 * time.Millisecond,
		MaxLease:       10 * time.Minute,
		MaxFreqStepKHz: 500_000,
		MinQuota:       cgroupcpu.DefaultMinQuota,
		SysfsRoot:      cpufreq.DefaultRoot,
		CgroupRoot:     "/sys/fs/cgroup",
		StateDir:       DefaultStateDir,
		QueueBase:      17000,
		MaxLeases:      16,
		// 20 probes/s: each costs ~1 ms of CPU on the test VM (thread
		// wake-ups), 2% of a core (`make bench-hold-cost`); over a 2.5-minute
		// window a wave's on − off to ~2% of 1.5 ms.
		DelayProbeInterval: 50 * time.Millisecond,
		// iptables -C costs ~2 ms of CPU: 4/s per delay lease.
		RuleCheckInterval: 250 * time.Millisecond,
		HangTimeout:       defaultHangTimeout,
	}
}

func createExtension(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newInjector(set, cfg.(*Config)), nil
}
