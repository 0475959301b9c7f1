package perfmodelexporter

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/coordinator"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/metadata"
	"github.com/tierscope/tierscope/internal/model"
)

// DefaultEndpoint serves the API on loopback only; exposing it is a decision.
const DefaultEndpoint = "127.0.0.1:8790"

// NewFactory returns the factory of the perfmodel exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(metadata.Type, createDefaultConfig,
		exporter.WithTraces(createTraces, metadata.TracesStability),
		exporter.WithMetrics(createMetrics, metadata.MetricsStability))
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
		Limits:           LimitsConfig{MaxServices: lim.MaxServices, MaxEdges: lim.MaxEdges, MaxPatterns: lim.MaxPatterns},
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

// One engine serves both the traces and the metrics pipeline of a component
// id: the models join spans with CPU metrics.
var (
	sharedMu sync.Mutex
	shared   = map[component.ID]*sharedEngine{}
)

type sharedEngine struct {
	eng  *engine
	refs int // started pipelines
}

func engineFor(set exporter.Settings, cfg *Config) (*sharedEngine, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if s, ok := shared[set.ID]; ok {
		return s, nil
	}
	eng, err := newEngine(set, cfg)
	if err != nil {
		return nil, err
	}
	s := &sharedEngine{eng: eng}
	shared[set.ID] = s
	return s, nil
}

func (s *sharedEngine) start(id component.ID) component.StartFunc {
	return func(ctx context.Context, host component.Host) error {
		sharedMu.Lock()
		defer sharedMu.Unlock()
		s.refs++
		if s.refs > 1 {
			return nil
		}
		return s.eng.Start(ctx, host)
	}
}

func (s *sharedEngine) shutdown(id component.ID) component.ShutdownFunc {
	return func(ctx context.Context) error {
		sharedMu.Lock()
		defer sharedMu.Unlock()
		if s.refs == 0 { // never started
			delete(shared, id)
			return s.eng.Shutdown(ctx)
		}
		s.refs--
		if s.refs > 0 {
			return nil
		}
		delete(shared, id)
		return s.eng.Shutdown(ctx)
	}
}

func createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	s, err := engineFor(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewTraces(ctx, set, cfg, s.eng.ConsumeTraces,
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithStart(s.start(set.ID)),
		exporterhelper.WithShutdown(s.shutdown(set.ID)))
}

func createMetrics(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	s, err := engineFor(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewMetrics(ctx, set, cfg, s.eng.ConsumeMetrics,
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithStart(s.start(set.ID)),
		exporterhelper.WithShutdown(s.shutdown(set.ID)))
}
