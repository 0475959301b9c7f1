package injector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/extension"
	"go.uber.org/zap"

	"github.com/tierscope/tierscope/internal/leaseapi"
	"github.com/tierscope/tierscope/internal/nfqdelay"
	"github.com/tierscope/tierscope/internal/wave"
)

// sweepStale deletes the tagged rules of owners that are gone (never a live
// injector's); tests replace it.
var sweepStale = nfqdelay.SweepStale

const maxBody = 64 << 10

type injector struct {
	cfg     *Config
	set     extension.Settings
	mgr     *manager
	journal *journal
	// instance names this injector among others in the process: its rules'
	// IDs start with it, and its watchdog deletes those only.
	instance string

	mu       sync.Mutex
	host     component.Host
	server   *http.Server
	addr     string // where the API listens
	served   chan struct{}
	watchdog *watchdog
	beatStop chan struct{}
}

// startWatchdogFn starts the hang watchdog; tests replace it.
var startWatchdogFn = startWatchdog

func newInjector(set extension.Settings, cfg *Config) *injector {
	i := &injector{cfg: cfg, set: set, journal: &journal{dir: cfg.StateDir}, instance: newID()[:8]}
	i.mgr = newManager(cfg, wave.RealClock{}, i.defaultOpeners(), i.reportErr)
	return i
}

// reportErr logs a backend failure and reports it as component status.
func (i *injector) reportErr(err error, permanent bool) {
	i.set.Logger.Error("injector backend failure", zap.Error(err), zap.Bool("permanent", permanent))
	i.mu.Lock()
	host := i.host
	i.mu.Unlock()
	if host == nil {
		return
	}
	ev := componentstatus.NewRecoverableErrorEvent(err)
	if permanent {
		ev = componentstatus.NewPermanentErrorEvent(err)
	}
	componentstatus.ReportStatus(host, ev)
}

// Start sweeps stale rules and serves the control API.
func (i *injector) Start(ctx context.Context, host component.Host) error {
	i.mu.Lock()
	i.host = host
	i.mu.Unlock()
	// What a dead injector changed goes back before anything new starts.
	if n, err := i.journal.restoreStale(); err != nil {
		// A quota or frequency that cannot be restored is for an operator;
		// serving leases on top of it would hide it.
		return fmt.Errorf("injector: state_dir %s: %w", i.cfg.StateDir, err)
	} else if n > 0 {
		i.set.Logger.Warn("restored the quotas and frequencies a dead injector left changed", zap.Int("leases", n), zap.String("state_dir", i.cfg.StateDir))
	}
	if n, err := sweepStale(); err != nil {
		i.set.Logger.Warn("sweeping stale NFQUEUE rules", zap.Int("deleted", n), zap.Error(err))
	} else if n > 0 {
		i.set.Logger.Info("swept stale NFQUEUE rules", zap.Int("deleted", n))
	}
	if i.cfg.Insecure {
		i.set.Logger.Warn("injector API runs without auth (insecure: true): any local process can perturb this host", zap.String("endpoint", i.cfg.NetAddr.Endpoint))
	}
	ln, err := i.cfg.ToListener(ctx)
	if err != nil {
		return err
	}
	srv, err := i.cfg.ToServer(ctx, host.GetExtensions(), i.set.TelemetrySettings, i.handler())
	if err != nil {
		_ = ln.Close()
		return err
	}
	w, err := startWatchdogFn(i.instance)
	if err != nil {
		_ = ln.Close()
		return err
	}
	if w != nil {
		i.mu.Lock()
		i.watchdog, i.beatStop = w, make(chan struct{})
		i.mu.Unlock()
		go i.heartbeat(w, i.beatStop)
	}
	i.mu.Lock()
	i.server, i.served, i.addr = srv, make(chan struct{}), ln.Addr().String()
	i.mu.Unlock()
	go func() {
		defer close(i.served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
		}
	}()
	i.set.Logger.Info("injector API listening", zap.String("endpoint", ln.Addr().String()))
	return nil
}

// Shutdown stops the API, then every lease, restoring every backend.
func (i *injector) Shutdown(ctx context.Context) error {
	i.mu.Lock()
	srv, served := i.server, i.served
	i.mu.Unlock()
	var errs []error
	if srv != nil {
		errs = append(errs, srv.Shutdown(ctx))
		<-served
	}
	errs = append(errs, i.mgr.shutdown(ctx))
	i.mu.Lock()
	w, beatStop := i.watchdog, i.beatStop
	i.watchdog = nil
	i.mu.Unlock()
	if w != nil {
		close(beatStop)
		w.stop()
	}
	return errors.Join(errs...)
}

func (i *injector) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+leaseapi.PathHealth, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "active_leases": i.mgr.activeCount()})
	})
	mux.HandleFunc("POST "+leaseapi.PathLeases, func(w http.ResponseWriter, r *http.Request) {
		var req leaseRequest
		if err := decode(r, &req); err != nil {
			writeErr(w, err)
			return
		}
		l, err := i.mgr.create(&req)
		if err != nil {
			writeErr(w, err)
			return
		}
		st := l.status()
		writeJSON(w, http.StatusCreated, leaseapi.Created{ID: st.ID, Expires: st.Expires})
	})
	mux.HandleFunc("GET "+leaseapi.PathLeases+"/{id}", func(w http.ResponseWriter, r *http.Request) {
		l, err := i.mgr.get(r.PathValue("id"))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, l.status())
	})
	mux.HandleFunc("POST "+leaseapi.PathLeases+"/{id}/renew", func(w http.ResponseWriter, r *http.Request) {
		var body leaseapi.Renewal
		if err := decode(r, &body); err != nil {
			writeErr(w, err)
			return
		}
		var d time.Duration
		if body.Duration != "" {
			var err error
			if d, err = time.ParseDuration(body.Duration); err != nil || d <= 0 {
				writeErr(w, apiErrorf(http.StatusBadRequest, "duration: %q must be a positive Go duration", body.Duration))
				return
			}
		}
		l, err := i.mgr.renew(r.PathValue("id"), d)
		if err != nil {
			writeErr(w, err)
			return
		}
		st := l.status()
		writeJSON(w, http.StatusOK, leaseapi.Created{ID: st.ID, Expires: st.Expires})
	})
	mux.HandleFunc("DELETE "+leaseapi.PathLeases+"/{id}", func(w http.ResponseWriter, r *http.Request) {
		st, err := i.mgr.stop(r.Context(), r.PathValue("id"))
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	return mux
}

// decode reads a JSON body strictly; an empty body decodes to the zero value.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return apiErrorf(http.StatusBadRequest, "malformed JSON body: %v", err)
	}
	if dec.More() {
		return apiErrorf(http.StatusBadRequest, "malformed JSON body: trailing data")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	var ae *apiError
	if errors.As(err, &ae) {
		code = ae.code
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
