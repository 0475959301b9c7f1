package perfmodelexporter

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/metadata"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/gradient"
	"github.com/tierscope/tierscope/internal/leaseapi"
)

// TestTokenGoesOnlyToConfiguredInjectors: a request that names its own
// injector URL is refused (403) and that URL never sees a request, let alone
// the token; the configured injector gets the token.
func TestTokenGoesOnlyToConfiguredInjectors(t *testing.T) {
	var stolen, configured atomic.Int32
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen.Add(1)
		http.Error(w, "no", http.StatusTeapot)
	}))
	defer thief.Close()
	inj := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer s3cret" {
			configured.Add(1)
		}
		http.Error(w, "refused for the test", http.StatusForbidden)
	}))
	defer inj.Close()
	te := startLiveEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "p.db"), func(c *Config) {
		c.Experiments.Injector = inj.URL
		c.Experiments.Token = "s3cret"
		c.Experiments.Links = map[string]ExperimentLink{"a->b": {Address: "tcp://127.0.0.1:9"}}
	})
	for _, url := range []string{thief.URL, thief.URL + "/", "http://127.0.0.1:1"} {
		code := te.send("POST", api.PathExperiments, fmt.Sprintf(`{"element":"link:a->b","injector":%q}`, url), nil)
		require.Equal(t, http.StatusForbidden, code, url)
	}
	require.Zero(t, stolen.Load(), "an unconfigured URL received requests")

	// Naming the configured injector (with a trailing slash) is allowed,
	// and its client carries the token there.
	r, err := te.engine.newRunner(api.ExperimentRequest{Element: "link:a->b", Injector: inj.URL + "/"})
	require.NoError(t, err)
	err = r.plans["link:a->b"].inj.Do(context.Background(), "GET", "/v1/health", nil, nil)
	require.ErrorContains(t, err, "403")
	require.Equal(t, int32(1), configured.Load(), "the configured injector gets the token")
	require.Zero(t, stolen.Load())
}

// TestExperimentsNeedAuthOffLoopback: with experiments configured, an API
// reachable from the network must have an authenticator.
func TestExperimentsNeedAuthOffLoopback(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Experiments.Injector = "http://10.0.0.6:18777"
	for _, ep := range []string{"127.0.0.1:8790", "localhost:8790", "[::1]:8790"} {
		cfg.NetAddr.Endpoint = ep
		require.NoError(t, cfg.Validate(), ep)
	}
	for _, ep := range []string{"0.0.0.0:8790", ":8790", "10.0.0.5:8790"} {
		cfg.NetAddr.Endpoint = ep
		require.ErrorContains(t, cfg.Validate(), "auth:", ep)
	}
	cfg.Auth = configoptional.Some(confighttp.AuthConfig{Config: configauth.Config{AuthenticatorID: component.MustNewID("bearertokenauth")}})
	require.NoError(t, cfg.Validate())
	// Without experiments, the read-only API may stay open.
	cfg = createDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = "0.0.0.0:8790"
	require.NoError(t, cfg.Validate())
}

// TestFailedLeaseMeasurementIsDiscarded: a lease the injector reports as
// failed when it is released (its rule was deleted while it ran) yields no
// injected amplitude, but the failure, which the runner turns into
// LeaseFailed: the element's window is not measured.
func TestFailedLeaseMeasurementIsDiscarded(t *testing.T) {
	state := "completed"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"lease-1"}`))
			return
		}
		_, _ = fmt.Fprintf(w, `{"id":"lease-1","state":%q,"error":"delay backend stopped by itself: nfqdelay: the rule was deleted by another process",`+
			`"stats":{"count":100,"mean_ms":5,"on":{"count":50,"mean_ms":10,"std_ms":1,"requested_mean_ms":10},"off":{"count":50,"mean_ms":0.1,"std_ms":0.1,"requested_mean_ms":0}}}`, state)
	}))
	defer srv.Close()
	cfg := createDefaultConfig().(*Config)
	inj := leaseapi.NewClient(srv.URL, "", &http.Client{Timeout: time.Second})
	set := exportertest.NewNopSettings(metadata.Type)
	r := &runner{x: &experiments{e: &engine{cfg: cfg, set: set}}, leases: map[string]*leaseRef{}, plans: map[string]elementPlan{
		"link": {inj: inj, target: leaseapi.Target{Link: &leaseapi.Link{Proto: "tcp", Dst: "10.0.0.2", DstPort: 5432, Direction: "out"}}}}}
	start := func() {
		require.NoError(t, r.startLease(gradient.Action{Kind: gradient.ActionStartLease, Lease: "L", Element: "link", LeaseKind: "delay",
			Amplitude: 10, Period: time.Second, Cycles: 4, Start: time.Now(), Duration: time.Minute}))
	}
	start()
	_, _, ok, failed := r.stopLease("L")
	require.NoError(t, failed)
	require.True(t, ok, "a completed lease reports its injected delay")

	state = "failed"
	start()
	mean, _, ok, failed := r.stopLease("L")
	require.ErrorContains(t, failed, "deleted by another process")
	require.False(t, ok)
	require.Zero(t, mean)
}
