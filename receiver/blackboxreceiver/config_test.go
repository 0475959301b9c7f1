package blackboxreceiver

import (
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/confmap/xconfmap"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/metadata"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig()
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg.(*Config)
}

func TestConfigDefault(t *testing.T) {
	cfg := loadConfig(t, "")
	require.NoError(t, xconfmap.Validate(cfg))
	assert.False(t, cfg.Capture.HasValue(), "sources are off unless configured")
	assert.False(t, cfg.TraceFile.HasValue())
	assert.False(t, cfg.Connections.HasValue())
	assert.Empty(t, cfg.AccessLogs)
}

func TestConfigFull(t *testing.T) {
	cfg := loadConfig(t, "full")
	require.NoError(t, xconfmap.Validate(cfg))
	require.True(t, cfg.Capture.HasValue())
	c := cfg.Capture.Get()
	assert.Equal(t, []uint16{8080, 5432}, c.Ports)
	assert.Equal(t, 1500, c.Snaplen)
	assert.Equal(t, time.Second, c.GapTimeout)
	assert.Equal(t, 2*time.Minute, c.IdleTimeout, "unset fields keep their defaults")
	assert.Equal(t, []string{"server"}, c.Spans)
	assert.Equal(t, 10.0, cfg.TraceFile.Get().Speed)
	assert.True(t, cfg.TraceFile.Get().Rebase)
	require.Len(t, cfg.AccessLogs, 2)
	assert.Equal(t, 5*time.Second, cfg.Connections.Get().Interval)
	assert.Equal(t, "/proc", cfg.Connections.Get().ProcPath)

	svc, err := parseServices(cfg.Services)
	require.NoError(t, err)
	assert.Equal(t, node{"app", "app-1", true, false}, svc.server(mustAP("10.0.0.3:8080")))
	assert.Equal(t, node{service: "10.0.0.3", instance: "10.0.0.3", independent: true}, svc.server(mustAP("10.0.0.3:9090")))
	assert.Equal(t, node{"web", "web", true, false}, svc.host(mustAddr("10.0.0.2")))
	assert.Equal(t, node{"db", "db", true, false}, svc.server(mustAP("10.0.1.7:5432")))
}

func TestConfigBad(t *testing.T) {
	err := xconfmap.Validate(loadConfig(t, "bad"))
	require.Error(t, err)
	for _, want := range []string{
		"not-an-address", "max_queued_batches", "framing \"smtp\"", "spans: \"both\"", "snaplen",
		"hosts: \"nowhere\"", "routes: \"txn\"", "tracefile: path is required", "speed",
		"no response time", "connections: interval", "ephemeral_ports",
	} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestRoutes(t *testing.T) {
	r, err := compileRoutes([]string{"/txn/{name}", "/op/{op}/x", "/static"})
	require.NoError(t, err)
	assert.Equal(t, "/txn/{name}", matchRoute(r, "/txn/Home"))
	assert.Equal(t, "", matchRoute(r, "/txn/"))
	assert.Equal(t, "", matchRoute(r, "/txn/Home/more"))
	assert.Equal(t, "/op/{op}/x", matchRoute(r, "/op/bid/x"))
	assert.Equal(t, "/static", matchRoute(r, "/static"))
	_, err = compileRoutes([]string{"/a{b}"})
	assert.Error(t, err)
}

func mustAP(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
func mustAddr(s string) netip.Addr   { return netip.MustParseAddr(s) }
