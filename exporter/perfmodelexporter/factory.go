package perfmodelexporter

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/coordinator"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/metadata"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/sharedcomponent"
)

// DefaultEndpoint serves the API on loopback only; exposing it is a decision.
const DefaultEndpoint = "127.0.0.1:8790"

// NewFactory returns the factory of the perfmodel exporter.
func NewFactory() exporter.Factory {
	return newFactory(sharedcomponent.NewRegistry[component.ID, *engine]())
}

// newFactory is the factory whose pipelines share the engines of reg.
func newFactory(reg *engines) exporter.Factory {
	return exporter.NewFactory(metadata.Type, createDefaultConfig,
		exporter.WithTraces(createTraces(reg), metadata.TracesStability),
		exporter.WithMetrics(createMetrics(reg), metadata.MetricsStability))
}

func createDefaultConfig() component.Config {
	srv := confighttp.NewDefaultServerConfig()
	srv.NetAddr.Endpoint = DefaultEndpoint
	lim := model.DefaultLimits()
	return &Config{
		ServerConfig:     srv,
		Window:           time.Minute,
		FlushInterval:    10 * time.Second,
		OpenWindows:      3,
		TraceWait:        15 * time.Second,
		MaxOpenTraces:    50000,
		MaxSpansPerTrace: 1000,
		Async:            AsyncConfig{Quantum: 10 * time.Millisecond, MaxMessages: 200000},
		Limits: LimitsConfig{MaxServices: lim.MaxServices, MaxEdges: lim.MaxEdges, MaxPatterns: lim.MaxPatterns,
			MaxAddresses: 10000, MaxVersionChanges: 1000, MaxNames: 1 << 16},
		Storage: StorageConfig{
			DSN:             "sqlite://perfmodel.db",
			Retention:       7 * 24 * time.Hour,
			DownsampleAfter: 24 * time.Hour,
			DownsampleTo:    time.Hour,
		},
		WorkFactors: WorkFactorsConfig{HalfLife: 10 * time.Minute, SmoothingHalfLife: 15 * time.Minute, Method: "plain"},
		Experiments: coordinator.DefaultConfig(),
	}
}

// engines holds, per component id, the one engine that serves both the
// traces and the metrics pipeline: the models join spans with CPU metrics.
type engines = sharedcomponent.Registry[component.ID, *engine]

func createTraces(reg *engines) exporter.CreateTracesFunc {
	return func(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
		s, err := engineFor(reg, set, cfg.(*Config))
		if err != nil {
			return nil, err
		}
		return exporterhelper.NewTraces(ctx, set, cfg, s.Unwrap().ConsumeTraces,
			exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
			exporterhelper.WithStart(s.Start),
			exporterhelper.WithShutdown(s.Shutdown))
	}
}

func createMetrics(reg *engines) exporter.CreateMetricsFunc {
	return func(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
		s, err := engineFor(reg, set, cfg.(*Config))
		if err != nil {
			return nil, err
		}
		return exporterhelper.NewMetrics(ctx, set, cfg, s.Unwrap().ConsumeMetrics,
			exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
			exporterhelper.WithStart(s.Start),
			exporterhelper.WithShutdown(s.Shutdown))
	}
}

func engineFor(reg *engines, set exporter.Settings, cfg *Config) (*sharedcomponent.Shared[*engine], error) {
	return reg.GetOrCreate(set.ID, func() (*engine, error) { return newEngine(set, cfg) })
}
