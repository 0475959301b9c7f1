package blackboxreceiver

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/metadata"
)

// NewFactory returns the factory of the blackbox receiver.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(
		metadata.Type,
		createDefaultConfig,
		receiver.WithTraces(createTracesReceiver, metadata.TracesStability),
		receiver.WithMetrics(createMetricsReceiver, metadata.MetricsStability))
}

func createDefaultConfig() component.Config {
	return &Config{
		Capture:          configoptional.Default(defaultCapture()),
		TraceFile:        configoptional.Default(defaultTraceFile()),
		Connections:      configoptional.Default(defaultConnections()),
		MaxQueuedBatches: 64,
	}
}

func createTracesReceiver(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Traces) (receiver.Traces, error) {
	return newTracesReceiver(set, cfg.(*Config), next)
}

func createMetricsReceiver(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	return newMetricsReceiver(set, cfg.(*Config), next)
}

// source is one running source.
type source interface {
	start() error
	shutdown(context.Context) error
}

// blackboxReceiver runs its sources: in a traces pipeline capture, tracefile
// and accesslog; in a metrics pipeline connections.
type blackboxReceiver struct {
	set     receiver.Settings
	tb      *metadata.TelemetryBuilder
	em      *emitter
	sources []source
	started []source
}

func newTracesReceiver(set receiver.Settings, cfg *Config, next consumer.Traces) (*blackboxReceiver, error) {
	svc, err := parseServices(cfg.Services)
	if err != nil {
		return nil, err
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	r := &blackboxReceiver{set: set, tb: tb}
	r.em = newEmitter(next, tb, set.Logger, cfg.MaxQueuedBatches)
	if cfg.Capture.HasValue() {
		c, err := newCaptureSource(cfg.Capture.Get(), svc, r.em, tb, set.Logger)
		if err != nil {
			return nil, err
		}
		r.sources = append(r.sources, c)
	}
	if cfg.TraceFile.HasValue() {
		r.sources = append(r.sources, &traceFileSource{cfg: cfg.TraceFile.Get(), em: r.em, tb: tb, logger: set.Logger, now: time.Now})
	}
	for i := range cfg.AccessLogs {
		s, err := newAccessLogSource(&cfg.AccessLogs[i], r.em, tb, set.Logger)
		if err != nil {
			return nil, err
		}
		r.sources = append(r.sources, s)
	}
	if len(r.sources) == 0 {
		set.Logger.Info("blackbox receiver in a traces pipeline has no trace source (capture, tracefile, accesslog)")
	}
	return r, nil
}

func newMetricsReceiver(set receiver.Settings, cfg *Config, next consumer.Metrics) (*blackboxReceiver, error) {
	svc, err := parseServices(cfg.Services)
	if err != nil {
		return nil, err
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	r := &blackboxReceiver{set: set, tb: tb}
	if cfg.Connections.HasValue() {
		r.sources = append(r.sources, &connectionsSource{cfg: cfg.Connections.Get(), svc: svc, next: next, tb: tb, logger: set.Logger})
	} else {
		set.Logger.Info("blackbox receiver in a metrics pipeline has no metrics source (connections)")
	}
	return r, nil
}

// Start starts every source; if one fails, those started are stopped.
func (r *blackboxReceiver) Start(ctx context.Context, _ component.Host) error {
	for _, s := range r.sources {
		if err := s.start(); err != nil {
			_ = r.Shutdown(ctx)
			return err
		}
		r.started = append(r.started, s)
	}
	return nil
}

// Shutdown stops the sources, then flushes the spans they left.
func (r *blackboxReceiver) Shutdown(ctx context.Context) error {
	var errs []error
	for _, s := range r.started {
		if err := s.shutdown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	r.started = nil
	if r.em != nil {
		r.em.close()
	}
	r.tb.Shutdown()
	return errors.Join(errs...)
}
