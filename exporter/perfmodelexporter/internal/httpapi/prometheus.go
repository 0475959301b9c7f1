package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/query"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/timegrid"
	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/model"
)

// The model as Prometheus metrics, written by client_golang. Latencies are in
// seconds and the edge labels are the servicegraph connector's (client,
// server, connection_type), so its dashboards' queries carry over; the
// standard service-graph counters themselves come from the servicegraph
// connector (examples/testbed.yaml).
var (
	descWindowStart = prometheus.NewDesc("tierscope_window_start_seconds",
		"Start of the last complete window, which the window metrics describe (Unix seconds).", nil, nil)
	descServiceRequests = prometheus.NewDesc("tierscope_service_window_requests",
		"Spans served by each service (SERVER spans, or calls to an uninstrumented back end) in the last complete window.",
		[]string{"service"}, nil)
	descServiceErrors = prometheus.NewDesc("tierscope_service_window_errors",
		"Of those, spans with status ERROR.", []string{"service"}, nil)
	descServiceLatency = prometheus.NewDesc("tierscope_service_latency_seconds",
		"Latency of each service's served spans in the last complete window.", []string{"service"}, nil)
	descEdgeRequests = prometheus.NewDesc("tierscope_edge_window_requests",
		"Calls on each service-graph edge in the last complete window.", []string{"client", "server", "connection_type"}, nil)
	descEdgeLatency = prometheus.NewDesc("tierscope_edge_latency_seconds",
		"Latency of each edge's calls as the caller sees them (for an async edge, the delay) in the last complete window.",
		[]string{"client", "server", "connection_type"}, nil)
	descPathInstances = prometheus.NewDesc("tierscope_path_window_instances",
		"Instances of each causal path pattern in the last complete window.", []string{"signature"}, nil)
	descWorkFactor = prometheus.NewDesc("tierscope_work_factor_megacycles",
		"CPU work factor of each flow over the last hour (paper 002), standard megacycles per request.",
		[]string{"host_name", "flow"}, nil)
	descServiceTime = prometheus.NewDesc("tierscope_service_time_seconds",
		"Load-independent service time of each transaction over the last hour (paper 004).",
		[]string{"service_name", "service_version", "transaction"}, nil)
	gradientLabels = []string{"element", "transaction", "side"}
	descGradient   = prometheus.NewDesc("tierscope_gradient",
		"Newest measured d(response time of transaction)/d(element) (papers 000, 003); side is below or above the operating point of a capacity measured on both.",
		gradientLabels, nil)
	descGradientLower = prometheus.NewDesc("tierscope_gradient_ci95_lower", "Lower end of the gradient's 95% confidence interval.", gradientLabels, nil)
	descGradientUpper = prometheus.NewDesc("tierscope_gradient_ci95_upper", "Upper end of the gradient's 95% confidence interval.", gradientLabels, nil)
	descGradientSNR   = prometheus.NewDesc("tierscope_gradient_snr", "The gradient's spectral peak over the noise.", gradientLabels, nil)
)

// metricsTimeout bounds the store queries of one scrape.
const metricsTimeout = 20 * time.Second

// connectionType maps an edge kind to the servicegraph connector's
// connection_type label.
func connectionType(kind string) string {
	switch kind {
	case "async":
		return "messaging_system"
	case "database":
		return "database"
	}
	return ""
}

// modelCollector reads the model on every scrape.
type modelCollector struct{ q *query.Reader }

func (c modelCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descWindowStart, descServiceRequests, descServiceErrors, descServiceLatency,
		descEdgeRequests, descEdgeLatency, descPathInstances, descWorkFactor, descServiceTime,
		descGradient, descGradientLower, descGradientUpper, descGradientSNR} {
		ch <- d
	}
}

func (c modelCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), metricsTimeout)
	defer cancel()
	q := c.q
	window := q.Window()
	last := timegrid.AlignDown(q.Now().Unix(), window) - window
	tr := api.TimeRange{From: last, To: last + window}
	ch <- prometheus.MustNewConstMetric(descWindowStart, prometheus.GaugeValue, float64(last))

	if nodes, err := q.Query(ctx, model.KindGraphNode, tr); err != nil {
		ch <- prometheus.NewInvalidMetric(descServiceRequests, err)
	} else {
		for name, v := range nodes {
			cs := v.(*model.CallStats)
			ch <- prometheus.MustNewConstMetric(descServiceRequests, prometheus.GaugeValue, float64(cs.Requests), name)
			ch <- prometheus.MustNewConstMetric(descServiceErrors, prometheus.GaugeValue, float64(cs.Errors), name)
			if m, ok := latencySummary(descServiceLatency, &cs.Latency, name); ok {
				ch <- m
			}
		}
	}
	if edges, err := q.Query(ctx, model.KindGraphEdge, tr); err != nil {
		ch <- prometheus.NewInvalidMetric(descEdgeRequests, err)
	} else {
		for key, v := range edges {
			k, ok := model.ParseEdgeKey(key)
			if !ok {
				continue
			}
			cs := v.(*model.CallStats)
			labels := []string{k.Source, k.Target, connectionType(k.Kind)}
			ch <- prometheus.MustNewConstMetric(descEdgeRequests, prometheus.GaugeValue, float64(cs.Requests), labels...)
			if m, ok := latencySummary(descEdgeLatency, &cs.Latency, labels...); ok {
				ch <- m
			}
		}
	}
	if paths, err := q.Query(ctx, model.KindPath, tr); err != nil {
		ch <- prometheus.NewInvalidMetric(descPathInstances, err)
	} else {
		for sig, v := range paths {
			ch <- prometheus.MustNewConstMetric(descPathInstances, prometheus.GaugeValue, float64(v.(*model.PatternStats).Count), sig)
		}
	}
	c.collectModels(ctx, ch)
	c.collectGradients(ctx, ch)
}

// collectGradients adds the newest gradient of each element, transaction and side.
func (c modelCollector) collectGradients(ctx context.Context, ch chan<- prometheus.Metric) {
	gradients, err := c.q.StoredGradients(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descGradient, err)
		return
	}
	seen := map[[3]string]bool{}
	for _, g := range gradients {
		side := ""
		if g.Basis != nil {
			side = g.Basis.Side
		}
		labels := []string{g.Element, g.Transaction, side}
		if key := [3]string(labels); !seen[key] {
			seen[key] = true
			ch <- prometheus.MustNewConstMetric(descGradient, prometheus.GaugeValue, g.Gradient, labels...)
			ch <- prometheus.MustNewConstMetric(descGradientLower, prometheus.GaugeValue, g.CI95[0], labels...)
			ch <- prometheus.MustNewConstMetric(descGradientUpper, prometheus.GaugeValue, g.CI95[1], labels...)
			ch <- prometheus.MustNewConstMetric(descGradientSNR, prometheus.GaugeValue, g.SNR, labels...)
		}
	}
}

// collectModels adds the work factors and service times of the last hour.
// The signatures are computed once: the work factors' cross-check reuses them.
func (c modelCollector) collectModels(ctx context.Context, ch chan<- prometheus.Metric) {
	q := c.q
	tr := q.LastHour()
	sigs, sigErr := q.AppSignatures(ctx, tr)
	if sigErr != nil {
		sigs = nil // the work factors then try on their own
	}
	if v, err := q.WorkFactors(ctx, tr, "", sigs); err == nil {
		seen := map[[2]string]bool{}
		for _, m := range v.Machines {
			for _, f := range m.Flows {
				// A machine's flows are unique; guard anyway, as a
				// duplicate series would fail the whole scrape.
				if key := [2]string{m.Machine, f.Flow}; !seen[key] {
					seen[key] = true
					ch <- prometheus.MustNewConstMetric(descWorkFactor, prometheus.GaugeValue, f.WorkFactor, m.Machine, f.Flow)
				}
			}
		}
	}
	if sigErr == nil {
		for _, s := range sigs {
			for _, t := range s.Transactions {
				if t.OK() {
					ch <- prometheus.MustNewConstMetric(descServiceTime, prometheus.GaugeValue, *t.ServiceTimeMs/1000,
						s.Service, s.Version, t.Transaction)
				}
			}
		}
	}
}

// latencySummary is a histogram's count, sum and quantiles in seconds.
func latencySummary(desc *prometheus.Desc, h *model.Hist, labels ...string) (prometheus.Metric, bool) {
	if h.N == 0 {
		return nil, false
	}
	quantiles := map[float64]float64{}
	for _, q := range []float64{0.5, 0.9, 0.99} {
		quantiles[q] = h.QuantileMs(q) / 1000
	}
	m, err := prometheus.NewConstSummary(desc, h.N, float64(h.SumNs)/1e9, quantiles, labels...)
	return m, err == nil
}

// prometheusHandler serves the model's metrics; a failing part is left out
// of the scrape and reported in it rather than failing the others.
func (e *server) prometheusHandler() http.Handler {
	registry := prometheus.NewRegistry()
	registry.MustRegister(modelCollector{q: e.q})
	return promhttp.HandlerFor(registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
