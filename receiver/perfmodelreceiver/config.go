package perfmodelreceiver

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.opentelemetry.io/collector/config/confighttp"
)

// Config is where the perfmodel API is and how often its models are read.
type Config struct {
	// ClientConfig reaches the API: endpoint (http://host:8790, with or
	// without /api/v1), TLS, CA, headers and auth as any confighttp client.
	confighttp.ClientConfig `mapstructure:",squash"`
	// CollectionInterval is how often the models are read and emitted.
	CollectionInterval time.Duration `mapstructure:"collection_interval"`
	// Range is the span of recent windows the models are computed over: the
	// work-factor regression and the signatures' utilization buckets need
	// many windows, the last few minutes at least.
	Range time.Duration `mapstructure:"range"`
}

// Validate checks the endpoint, the interval and the range.
func (c *Config) Validate() error {
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("endpoint: want the perfmodel API's http(s) URL such as http://127.0.0.1:8790, got %q", c.Endpoint)
	}
	if c.CollectionInterval <= 0 {
		return errors.New("collection_interval: must be positive")
	}
	if c.Range < time.Second {
		return fmt.Errorf("range: must be at least 1s, got %v", c.Range)
	}
	return nil
}
