package perfmodelexporter

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/coordinator"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/httpapi"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/ingest"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/metadata"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/query"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/store"
	"github.com/tierscope/tierscope/internal/workfactor"
)

//go:embed openapi.yaml
var openapiDoc []byte

// version is reported by the health endpoint.
const version = "0.1.0-dev"

// engine is one perfmodel exporter, shared by its traces and metrics
// pipelines: it wires ingestion, the read side, the coordinator and the
// HTTP API over one store, and runs their loops from Start to Shutdown.
type engine struct {
	set    exporter.Settings
	cfg    *Config
	shard  string
	window int64 // seconds
	// clock is the time of every part (tests set it while it runs).
	clock atomic.Pointer[func() time.Time]

	ingest *ingest.Engine
	query  *query.Reader
	coord  *coordinator.Coordinator

	st      store.Store
	srv     *http.Server
	addr    string // where the API listens, once started
	stop    chan struct{}
	done    sync.WaitGroup
	started time.Time

	// reported are the version changes already logged, of the last check
	// (warming goroutine only; at most limits.max_version_changes).
	reported map[string]bool
	tel      *metadata.TelemetryBuilder
}

func newEngine(set exporter.Settings, cfg *Config) (*engine, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	method, err := workfactor.ParseMethod(cfg.WorkFactors.Method)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	shard := cfg.Storage.Shard
	if shard == "" {
		shard = host + "/" + set.ID.String()
	}
	e := &engine{set: set, cfg: cfg, tel: tel, shard: shard, window: int64(cfg.Window / time.Second), reported: map[string]bool{}}
	e.setClock(time.Now)
	clock := func() time.Time { return e.now() }
	e.query = query.New(query.Settings{
		Window: e.window, OpenWindows: openWindowsOf(cfg), FlushInterval: cfg.FlushInterval, Shard: shard,
		Now: clock, Logger: set.Logger,
		HalfLife:          float64(cfg.WorkFactors.HalfLife) / float64(cfg.Window),
		SmoothingHalfLife: float64(cfg.WorkFactors.SmoothingHalfLife) / float64(cfg.Window),
		Method:            method, CoreMHz: cfg.CoreMHz, CapacityMHz: cfg.CapacityMHz, MachineCapacityMHz: cfg.MachineCapacityMHz,
	})
	e.coord = coordinator.New(coordinator.Settings{
		Experiments: cfg.Experiments, TraceWait: cfg.TraceWait, CoreMHz: cfg.CoreMHz, Capacity: e.query.Capacity,
		Shard: shard, Window: e.window, Logger: set.Logger, Now: clock,
	})
	e.ingest = ingest.New(ingest.Settings{
		Window: e.window, OpenWindows: openWindowsOf(cfg),
		TraceWait: cfg.TraceWait, MaxOpenTraces: cfg.MaxOpenTraces, MaxSpansPerTrace: cfg.MaxSpansPerTrace,
		Limits:       model.Limits{MaxServices: cfg.Limits.MaxServices, MaxEdges: cfg.Limits.MaxEdges, MaxPatterns: cfg.Limits.MaxPatterns},
		MaxAddresses: cfg.Limits.MaxAddresses, MaxNames: cfg.Limits.MaxNames,
		AsyncQuantum: cfg.Async.Quantum, MaxMessages: cfg.Async.MaxMessages,
		Shard: shard, HostName: cfg.HostName, LocalHost: host,
		// A request may name its injector, but without one configured
		// the pulse is only reported, not bounded by the call counts.
		CountCalls: cfg.Experiments.LinkInjectors(),
		Retention:  cfg.Storage.Retention, DownsampleAfter: cfg.Storage.DownsampleAfter, DownsampleTo: cfg.Storage.DownsampleTo,
		Now: clock, Logger: set.Logger, Telemetry: tel, Observer: e.coord,
		SettledBefore: e.query.SettledBefore, Invalidate: e.query.ResetCache,
	})
	e.coord.SetTraffic(e.ingest)
	return e, nil
}

// setClock makes now the clock of every part.
func (e *engine) setClock(now func() time.Time) { e.clock.Store(&now) }

func (e *engine) now() time.Time { return (*e.clock.Load())() }

// openWindowsOf is open_windows, raised so that the open windows span twice
// trace_wait and one window more: a trace reaches a window only trace_wait
// after its first span arrived, which itself waited upstream (the SDK's batch,
// causalpath's wait, itself shorter than trace_wait), and a trace whose
// window had closed would be lost to every model. With a 1m window this is
// open_windows as configured; with windows of a few seconds, not.
func openWindowsOf(cfg *Config) int64 {
	window := max(int64(cfg.Window/time.Second), 1)
	need := (2*int64(cfg.TraceWait/time.Second)+window-1)/window + 1
	return max(int64(cfg.OpenWindows), need)
}

// ConsumeTraces adds spans to the traces being assembled.
func (e *engine) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	return e.ingest.ConsumeTraces(ctx, td)
}

// ConsumeMetrics takes the CPU readings and the connection inventory.
func (e *engine) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	return e.ingest.ConsumeMetrics(ctx, md)
}

// Start opens the store, starts the API server and the flush loop.
func (e *engine) Start(ctx context.Context, host component.Host) error {
	st, err := store.Open(ctx, e.cfg.Storage.DSN)
	if err != nil {
		return fmt.Errorf("perfmodel: storage.dsn: %w", err)
	}
	e.st = st
	e.query.Open(st)
	e.ingest.Open(st)
	e.started = e.now()
	ln, err := e.cfg.ToListener(ctx)
	if err != nil {
		_ = st.Close()
		return fmt.Errorf("perfmodel: endpoint %s: %w", e.cfg.NetAddr.Endpoint, err)
	}
	handler := httpapi.Handler(httpapi.Deps{Query: e.query, Coordinator: e.coord, Health: e.health, OpenAPI: openapiDoc, Logger: e.set.Logger})
	srv, err := e.cfg.ToServer(ctx, host.GetExtensions(), e.set.TelemetrySettings, handler)
	if err != nil {
		_ = ln.Close()
		_ = st.Close()
		return fmt.Errorf("perfmodel: %w", err)
	}
	var injectors *http.Client
	if len(e.cfg.Experiments.InjectorURLs()) > 0 {
		if injectors, err = e.cfg.Experiments.Client.ToClient(ctx, host.GetExtensions(), e.set.TelemetrySettings); err != nil {
			_ = ln.Close()
			_ = st.Close()
			return fmt.Errorf("perfmodel: experiments.client: %w", err)
		}
		if injectors.Timeout == 0 {
			injectors.Timeout = e.cfg.Experiments.RequestTimeout
		}
	}
	// The coordinator has the store before the API can ask it anything.
	e.coord.Start(st, e.cfg.Storage.DSN, injectors)
	e.srv = srv
	e.stop = make(chan struct{})
	e.done.Add(2)
	go func() {
		defer e.done.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
		}
	}()
	go e.loop(host)
	e.done.Add(1)
	go func() {
		defer e.done.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-e.stop
			cancel()
		}()
		// Once at start, then every 5 minutes: warm the query cache for
		// the hours that settled, and compare new versions' signatures. Off
		// the flush loop, and cancelled by Shutdown.
		e.query.Warm(ctx, e.ingest.ClosedBefore())
		tick := time.NewTicker(5 * time.Minute)
		defer tick.Stop()
		for {
			select {
			case <-e.stop:
				return
			case <-tick.C:
				e.query.Warm(ctx, e.ingest.ClosedBefore())
				e.checkNewVersions(ctx)
			}
		}
	}()
	e.addr = ln.Addr().String()
	e.set.Logger.Info("perfmodel API listening", zap.String("url", "http://"+e.addr+"/api/v1/graph"), zap.String("shard", e.shard))
	return nil
}

// Shutdown completes every trace, flushes every window and closes the store.
func (e *engine) Shutdown(ctx context.Context) error {
	if e.stop == nil {
		return nil
	}
	close(e.stop)
	var errs []error
	if e.srv != nil {
		errs = append(errs, e.srv.Shutdown(ctx))
	}
	e.done.Wait()
	e.coord.Shutdown()
	e.ingest.CompleteAll()
	errs = append(errs, e.ingest.Flush(ctx, true))
	errs = append(errs, e.st.Close())
	e.stop = nil
	return errors.Join(errs...)
}

// loop completes traces every second, flushes every FlushInterval and runs
// retention and downsampling every hour.
func (e *engine) loop(host component.Host) {
	defer e.done.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastFlush := e.now()
	var lastMaint time.Time
	for {
		select {
		case <-e.stop:
			return
		case <-tick.C:
			now := e.now()
			e.ingest.Expire(now)
			if now.Sub(lastFlush) >= e.cfg.FlushInterval {
				lastFlush = now
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				if err := e.ingest.Flush(ctx, false); err != nil {
					e.set.Logger.Warn("perfmodel: flush failed; windows kept in memory", zap.Error(err))
					componentstatus.ReportStatus(host, componentstatus.NewRecoverableErrorEvent(err))
				} else if e.ingest.Recovered() {
					componentstatus.ReportStatus(host, componentstatus.NewEvent(componentstatus.StatusOK))
				}
				cancel()
			}
			if now.Sub(lastMaint) >= time.Hour {
				lastMaint = now
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				if err := e.ingest.Maintain(ctx, now); err != nil {
					e.set.Logger.Warn("perfmodel: retention/downsampling failed", zap.Error(err))
				}
				cancel()
			}
		}
	}
}

// health is the health document: the store's and the last flush's state.
func (e *engine) health(ctx context.Context) api.Health {
	h := api.Health{
		Status: "ok", Version: version, UptimeSeconds: e.now().Sub(e.started).Seconds(),
		Shard: e.shard, WindowSeconds: e.window, LastFlush: e.ingest.LastFlush(),
	}
	h.Store = "sqlite"
	if strings.HasPrefix(e.cfg.Storage.DSN, "postgres") {
		h.Store = "postgres"
	}
	v, err := e.st.SchemaVersion(ctx)
	if err != nil {
		h.Status = "degraded"
		h.Problems = append(h.Problems, "store: "+err.Error())
	}
	h.SchemaVersion = v
	if e.ingest.FlushFailed() {
		h.Status = "degraded"
		h.Problems = append(h.Problems, "the last flush to the store failed")
	}
	return h
}

// checkNewVersions logs one structured event per transaction whose service
// time changed with a service's newest version, the first time it is seen.
func (e *engine) checkNewVersions(ctx context.Context) {
	changes, err := e.query.VersionChanges(ctx)
	if err != nil {
		e.set.Logger.Debug("perfmodel: signature check: " + err.Error())
		return
	}
	changed := map[string]bool{} // this check's: what the next one will not log again
	for _, t := range changes {
		key := t.Service + "\x1f" + t.Base + "\x1f" + t.Candidate + "\x1f" + t.Transaction
		if len(changed) >= e.cfg.Limits.MaxVersionChanges {
			e.tel.ExporterPerfmodelOverflow.Add(ctx, 1)
			continue
		}
		changed[key] = true
		if e.reported[key] {
			continue
		}
		e.set.Logger.Warn("perfmodel: service time changed with a new version",
			zap.String("event.name", "tierscope.signature.changed"),
			zap.String("service.name", t.Service), zap.String("base.version", t.Base), zap.String("service.version", t.Candidate),
			zap.String("transaction", t.Transaction), zap.Float64p("delta_ms", t.DeltaMs), zap.Float64p("delta_pct", t.DeltaPct),
			zap.Float64("confidence", t.Confidence), zap.String("basis", t.Basis))
	}
	// Changes of versions that left the last day are forgotten.
	e.reported = changed
}
