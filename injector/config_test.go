package injector

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/confmap/xconfmap"

	"github.com/tierscope/tierscope/injector/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)

	def := createDefaultConfig().(*Config)
	require.Equal(t, DefaultEndpoint, def.NetAddr.Endpoint)
	require.Equal(t, 100*time.Millisecond, def.MaxDelay)
	require.Equal(t, 10*time.Minute, def.MaxLease)
	require.Equal(t, time.Millisecond, def.MinQuota)
	require.Equal(t, "/sys/devices/system/cpu", def.SysfsRoot)
	require.Equal(t, "/sys/fs/cgroup", def.CgroupRoot)
	// No default runs an unauthenticated API: auth or an explicit insecure.
	require.ErrorContains(t, xconfmap.Validate(def), "auth")
	def.Insecure = true
	require.NoError(t, xconfmap.Validate(def))

	for _, tt := range []struct {
		id   component.ID
		want func(*Config)
	}{
		{id: component.NewID(metadata.Type), want: func(c *Config) { c.Insecure = true }},
		{id: component.NewIDWithName(metadata.Type, "custom"), want: func(c *Config) {
			c.NetAddr.Endpoint = "0.0.0.0:18778"
			c.Auth = configoptional.Some(confighttp.AuthConfig{Config: configauth.Config{AuthenticatorID: component.MustNewID("bearertokenauth")}})
			c.Allowlist = Allowlist{
				Links:   []string{"10.0.0.0/24", "192.168.1.7"},
				Ports:   []uint16{5432, 8080},
				Cgroups: []string{"system.slice/app.service"},
				CPUs:    []int{2, 3},
			}
			c.MaxDelay = 20 * time.Millisecond
			c.MaxLease = 5 * time.Minute
			c.MaxFreqStepKHz = 200000
			c.MinQuota = 2 * time.Millisecond
			c.SysfsRoot = "/tmp/sys"
			c.CgroupRoot = "/tmp/cgroup"
			c.QueueBase = 100
			c.MaxLeases = 4
			c.DelayProbeInterval = 0
		}},
	} {
		t.Run(tt.id.String(), func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			sub, err := cm.Sub(tt.id.String())
			require.NoError(t, err)
			require.NoError(t, sub.Unmarshal(cfg))
			require.NoError(t, xconfmap.Validate(cfg))
			want := createDefaultConfig().(*Config)
			tt.want(want)
			require.Equal(t, want, cfg)
		})
	}
}

func TestValidateNamesField(t *testing.T) {
	for field, mutate := range map[string]func(*Config){
		"endpoint":              func(c *Config) { c.NetAddr.Endpoint = "" },
		"allowlist: links[1]":   func(c *Config) { c.Allowlist.Links = []string{"10.0.0.0/8", "nope"} },
		"allowlist: cgroups[0]": func(c *Config) { c.Allowlist.Cgroups = []string{"../etc"} },
		"allowlist: cpus[0]":    func(c *Config) { c.Allowlist.CPUs = []int{-1} },
		"max_delay":             func(c *Config) { c.MaxDelay = 0 },
		"max_lease":             func(c *Config) { c.MaxLease = 2 * time.Hour },
		"max_freq_step_khz":     func(c *Config) { c.MaxFreqStepKHz = 0 },
		"min_quota":             func(c *Config) { c.MinQuota = time.Microsecond },
		"sysfs_root":            func(c *Config) { c.SysfsRoot = "" },
		"cgroup_root":           func(c *Config) { c.CgroupRoot = "" },
		"state_dir":             func(c *Config) { c.StateDir = "" },
		"rule_check_interval":   func(c *Config) { c.RuleCheckInterval = 0 },
		"max_leases":            func(c *Config) { c.MaxLeases = 0 },
		"delay_probe_interval":  func(c *Config) { c.DelayProbeInterval = -time.Millisecond },
		"auth":                  func(c *Config) { c.Insecure = false },
		"insecure":              func(c *Config) { c.NetAddr.Endpoint = "0.0.0.0:18777" },
	} {
		cfg := createDefaultConfig().(*Config)
		cfg.Insecure = true
		mutate(cfg)
		err := xconfmap.Validate(cfg)
		require.Error(t, err, field)
		require.Contains(t, err.Error(), field)
	}
}
