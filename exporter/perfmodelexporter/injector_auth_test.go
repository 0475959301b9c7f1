package perfmodelexporter

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"

	"github.com/tierscope/tierscope/internal/api"
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
	// That the configured injector gets the token is internal/coordinator's
	// TestTokenGoesOnlyToConfiguredInjectors.
	require.Zero(t, configured.Load(), "refused requests reach no injector")
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
