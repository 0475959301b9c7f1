package perfmodelexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/confmap/xconfmap"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	for name, check := range map[string]func(*Config){
		"": func(c *Config) {
			require.Equal(t, DefaultEndpoint, c.NetAddr.Endpoint)
			require.Equal(t, time.Minute, c.Window)
			require.Equal(t, "sqlite://perfmodel.db", c.Storage.DSN)
			require.Equal(t, 2, c.Experiments.MaxWindows)
			require.Equal(t, 8.0, c.Experiments.Train.MinSamplesPerPeriod, "paper 000 figure 8(a)")
			require.Equal(t, "peak", c.Experiments.PerturbationMeasure)
			require.Equal(t, WorkFactorsConfig{HalfLife: 10 * time.Minute, SmoothingHalfLife: 15 * time.Minute, Method: "plain"}, c.WorkFactors)
		},
		"custom": func(c *Config) {
			require.Equal(t, 30*time.Second, c.Window)
			require.Equal(t, 20, c.Limits.MaxPatterns)
			require.Equal(t, "analyzer-1", c.Storage.Shard)
			require.Equal(t, 12*time.Hour, c.Storage.DownsampleAfter)
			require.Equal(t, 9170.0, c.MachineCapacityMHz["xd008"])
			require.Equal(t, 4, c.Experiments.MaxWindows)
			require.Equal(t, 16.0, c.Experiments.Train.MinSamplesPerPeriod)
			require.Equal(t, "mean", c.Experiments.PerturbationMeasure)
			require.Equal(t, WorkFactorsConfig{HalfLife: time.Hour, SmoothingHalfLife: 15 * time.Minute, Method: "ridge"}, c.WorkFactors)
		},
	} {
		cfg := createDefaultConfig()
		sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
		require.NoError(t, err)
		require.NoError(t, sub.Unmarshal(cfg))
		require.NoError(t, xconfmap.Validate(cfg))
		check(cfg.(*Config))
	}
}

func TestValidateNamesField(t *testing.T) {
	for field, mutate := range map[string]func(*Config){
		"endpoint":                           func(c *Config) { c.NetAddr.Endpoint = "" },
		"window":                             func(c *Config) { c.Window = 1500 * time.Millisecond },
		"flush_interval":                     func(c *Config) { c.FlushInterval = 0 },
		"open_windows":                       func(c *Config) { c.OpenWindows = 0 },
		"trace_wait":                         func(c *Config) { c.TraceWait = -1 },
		"max_open_traces":                    func(c *Config) { c.MaxOpenTraces = 0 },
		"limits":                             func(c *Config) { c.Limits.MaxEdges = 0 },
		"storage: dsn":                       func(c *Config) { c.Storage.DSN = " " },
		"storage.downsample_to":              func(c *Config) { c.Storage.DownsampleTo = 90 * time.Second },
		"storage: retention":                 func(c *Config) { c.Storage.Retention = time.Hour },
		"machine_capacity_mhz.x1":            func(c *Config) { c.MachineCapacityMHz = map[string]float64{"x1": 0} },
		"work_factors.half_life":             func(c *Config) { c.WorkFactors.HalfLife = 30 * time.Second },
		"work_factors.smoothing_half_life":   func(c *Config) { c.WorkFactors.SmoothingHalfLife = 0 },
		"work_factors: method":               func(c *Config) { c.WorkFactors.Method = "lasso" },
		"experiments::settings: max_windows": func(c *Config) { c.Experiments.MaxWindows = 0 },
		"experiments::settings: min_snr":     func(c *Config) { c.Experiments.MinSNR = -1 },
		"experiments::settings: min_samples_per_period": func(c *Config) { c.Experiments.Train.MinSamplesPerPeriod = 1 },
		"experiments::settings: perturbation_measure":   func(c *Config) { c.Experiments.PerturbationMeasure = "max" },
	} {
		cfg := createDefaultConfig().(*Config)
		mutate(cfg)
		err := xconfmap.Validate(cfg)
		require.Error(t, err, field)
		require.Contains(t, err.Error(), field+":", field)
	}
	for _, mutate := range []func(*LimitsConfig){
		func(l *LimitsConfig) { l.MaxAddresses = 0 },
		func(l *LimitsConfig) { l.MaxVersionChanges = 0 },
	} {
		cfg := createDefaultConfig().(*Config)
		mutate(&cfg.Limits)
		require.ErrorContains(t, xconfmap.Validate(cfg), "limits: max_services, max_edges, max_patterns, max_addresses and max_version_changes must be ≥ 1")
	}
	cfg := createDefaultConfig().(*Config)
	cfg.Limits.MaxNames = 0
	require.ErrorContains(t, xconfmap.Validate(cfg), "limits: max_names: must be ≥")
}
