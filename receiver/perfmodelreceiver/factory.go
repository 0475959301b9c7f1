package perfmodelreceiver

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/tierscope/tierscope/receiver/perfmodelreceiver/internal/metadata"
)

// NewFactory returns the factory of the perfmodel receiver.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(metadata.Type, createDefaultConfig,
		receiver.WithMetrics(createMetricsReceiver, metadata.MetricsStability))
}

func createDefaultConfig() component.Config {
	client := confighttp.NewDefaultClientConfig()
	client.Endpoint = "http://127.0.0.1:8790"
	client.Timeout = 30 * time.Second
	return &Config{ClientConfig: client, CollectionInterval: 30 * time.Second, Range: 15 * time.Minute}
}

func createMetricsReceiver(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	return newReceiver(set, cfg.(*Config), next), nil
}
