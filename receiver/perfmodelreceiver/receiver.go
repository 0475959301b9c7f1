package perfmodelreceiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/receiver/perfmodelreceiver/internal/metadata"
)

// The metrics emitted. Names follow the OpenTelemetry conventions (dotted,
// units apart); a Prometheus exporter turns them into tierscope_workfactor,
// tierscope_signature_service_time_seconds and tierscope_gradient_ratio.
const (
	MetricWorkFactor  = "tierscope.workfactor"
	MetricServiceTime = "tierscope.signature.service_time"
	MetricGradient    = "tierscope.gradient"

	// AttrTransaction is the transaction (the SERVER span's name, e.g. an
	// http.route) a flow, signature or gradient is of; AttrElement is what
	// a gradient is with respect to (link:web->app, capacity:<machine>, …).
	AttrTransaction = "tierscope.transaction"
	AttrElement     = "tierscope.element"
)

type perfmodelReceiver struct {
	set    receiver.Settings
	cfg    *Config
	next   consumer.Metrics
	client *http.Client
	base   *url.URL
	stop   chan struct{}
	done   sync.WaitGroup
	now    func() time.Time
}

func newReceiver(set receiver.Settings, cfg *Config, next consumer.Metrics) *perfmodelReceiver {
	return &perfmodelReceiver{set: set, cfg: cfg, next: next, now: time.Now}
}

func (r *perfmodelReceiver) Start(ctx context.Context, host component.Host) error {
	base, err := url.Parse(r.cfg.Endpoint)
	if err != nil {
		return err
	}
	base.Path, base.RawPath = api.Root(base.Path), ""
	r.base = base
	if r.client, err = r.cfg.ToClient(ctx, host.GetExtensions(), r.set.TelemetrySettings); err != nil {
		return err
	}
	r.stop = make(chan struct{})
	r.done.Add(1)
	go r.loop()
	return nil
}

func (r *perfmodelReceiver) Shutdown(context.Context) error {
	if r.stop != nil {
		close(r.stop)
		r.done.Wait()
		r.stop = nil
	}
	if r.client != nil {
		r.client.CloseIdleConnections()
	}
	return nil
}

func (r *perfmodelReceiver) loop() {
	defer r.done.Done()
	t := time.NewTicker(r.cfg.CollectionInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-r.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		md, err := r.scrape(ctx)
		if err != nil {
			r.set.Logger.Warn("perfmodel receiver: reading the models", zap.Error(err))
		}
		if md.DataPointCount() > 0 {
			if err := r.next.ConsumeMetrics(ctx, md); err != nil {
				r.set.Logger.Warn("perfmodel receiver: passing the models on", zap.Error(err))
			}
		}
		cancel()
	}
}

// scrape reads the models over the last Range and turns them into metrics.
// What could be read is kept when another endpoint fails.
func (r *perfmodelReceiver) scrape(ctx context.Context) (pmetric.Metrics, error) {
	now := r.now()
	q := url.Values{}
	q.Set("from", strconv.FormatInt(now.Add(-r.cfg.Range).Unix(), 10))
	q.Set("to", strconv.FormatInt(now.Unix(), 10))
	var (
		wf    api.WorkFactors
		sigs  api.Signatures
		grads api.Gradients
	)
	errWF := r.get(ctx, api.PathWorkFactors, q, &wf)
	errSig := r.get(ctx, api.PathSignatures, q, &sigs)
	errGrad := r.get(ctx, api.PathGradients, nil, &grads)
	return toMetrics(pcommon.NewTimestampFromTime(now), wf, sigs, grads), errors.Join(errWF, errSig, errGrad)
}

func (r *perfmodelReceiver) get(ctx context.Context, path string, q url.Values, out any) error {
	u := *r.base
	u.Path += path
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, out)
}

// toMetrics converts the API's documents into gauges, one data point per
// flow, transaction or gradient, at ts. Attributes use the semantic
// conventions where one exists (service.name, service.version, host.name,
// process.executable.name) and the tierscope namespace otherwise.
func toMetrics(ts pcommon.Timestamp, wf api.WorkFactors, sigs api.Signatures, grads api.Gradients) pmetric.Metrics {
	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(metadata.ScopeName)
	// gauge returns a function adding a point to the named gauge, which it
	// creates with its first point: a model with no value has no metric.
	gauge := func(name, unit, desc string) func(v float64) pcommon.Map {
		var dps *pmetric.NumberDataPointSlice
		return func(v float64) pcommon.Map {
			if dps == nil {
				m := sm.Metrics().AppendEmpty()
				m.SetName(name)
				m.SetUnit(unit)
				m.SetDescription(desc)
				d := m.SetEmptyGauge().DataPoints()
				dps = &d
			}
			dp := dps.AppendEmpty()
			dp.SetTimestamp(ts)
			dp.SetDoubleValue(v)
			return dp.Attributes()
		}
	}

	workFactor := gauge(MetricWorkFactor, "{megacycle}", "CPU megacycles per request of the flow (paper 002's work factor)")
	for _, m := range wf.Machines {
		for _, f := range m.Flows {
			a := workFactor(f.WorkFactor)
			service, tx, _ := strings.Cut(f.Flow, " ")
			a.PutStr("service.name", service)
			a.PutStr(AttrTransaction, tx)
			putMachine(a, m.Machine)
		}
	}
	serviceTime := gauge(MetricServiceTime, "s", "the transaction's service time with the load taken out (paper 004's signature)")
	for _, s := range sigs.Signatures {
		for _, t := range s.Transactions {
			if t.ServiceTimeMs == nil {
				continue // insufficient data: no number rather than a wrong one
			}
			a := serviceTime(*t.ServiceTimeMs / 1e3)
			a.PutStr("service.name", s.Service)
			if s.Version != "" {
				a.PutStr("service.version", s.Version)
			}
			a.PutStr(AttrTransaction, t.Transaction)
		}
	}
	gradient := gauge(MetricGradient, "1", "change of the transaction's mean response time per unit change of the element (paper 000's gradient)")
	for _, g := range grads.Gradients {
		a := gradient(g.Gradient)
		a.PutStr(AttrElement, g.Element)
		a.PutStr(AttrTransaction, g.Transaction)
	}
	return md
}

// putMachine sets host.name, and process.executable.name for a per-process
// regression ("host/process"); a regression over several machines names
// none of them.
func putMachine(a pcommon.Map, machine string) {
	if machine == "" || strings.Contains(machine, ",") {
		return
	}
	host, process, ok := strings.Cut(machine, "/")
	a.PutStr("host.name", host)
	if ok && process != "" {
		a.PutStr("process.executable.name", process)
	}
}
