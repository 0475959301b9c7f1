package perfmodelexporter

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/model"
)

// prometheus exposes derived gauges of the last complete window in the
// Prometheus text format, so existing dashboards and alerts can use the model.
func (e *engine) prometheus(w http.ResponseWriter, r *http.Request) {
	last := alignDown(e.now().Unix(), e.window) - e.window
	tr := api.TimeRange{From: last, To: last + e.window}
	var b strings.Builder
	nodes, err := e.query(r.Context(), model.KindGraphNode, tr)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	edges, err := e.query(r.Context(), model.KindGraphEdge, tr)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	paths, err := e.query(r.Context(), model.KindPath, tr)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	fmt.Fprintf(&b, "# HELP tierscope_window_start_seconds Start of the window the gauges describe.\n# TYPE tierscope_window_start_seconds gauge\ntierscope_window_start_seconds %d\n", last)
	b.WriteString("# HELP tierscope_service_requests Spans served by each service (SERVER spans, or calls to an uninstrumented back end) in the window.\n# TYPE tierscope_service_requests gauge\n")
	b.WriteString("# HELP tierscope_service_errors Of those, spans with status ERROR.\n# TYPE tierscope_service_errors gauge\n")
	b.WriteString("# HELP tierscope_service_latency_ms Latency quantiles of each service in the window.\n# TYPE tierscope_service_latency_ms gauge\n")
	for _, name := range sortedKeys(nodes) {
		cs := nodes[name].(*model.CallStats)
		l := fmt.Sprintf(`service="%s"`, escapeLabel(name))
		fmt.Fprintf(&b, "tierscope_service_requests{%s} %d\ntierscope_service_errors{%s} %d\n", l, cs.Requests, l, cs.Errors)
		writeQuantiles(&b, "tierscope_service_latency_ms", l, &cs.Latency)
	}
	b.WriteString("# HELP tierscope_edge_requests Calls on each service-graph edge in the window.\n# TYPE tierscope_edge_requests gauge\n")
	b.WriteString("# HELP tierscope_edge_latency_ms Latency quantiles of each edge's calls in the window.\n# TYPE tierscope_edge_latency_ms gauge\n")
	for _, key := range sortedKeys(edges) {
		k, ok := model.ParseEdgeKey(key)
		if !ok {
			continue
		}
		cs := edges[key].(*model.CallStats)
		l := fmt.Sprintf(`source="%s",target="%s",kind="%s"`, escapeLabel(k.Source), escapeLabel(k.Target), k.Kind)
		fmt.Fprintf(&b, "tierscope_edge_requests{%s} %d\n", l, cs.Requests)
		writeQuantiles(&b, "tierscope_edge_latency_ms", l, &cs.Latency)
	}
	b.WriteString("# HELP tierscope_path_instances Instances of each causal path pattern in the window.\n# TYPE tierscope_path_instances gauge\n")
	for _, sig := range sortedKeys(paths) {
		ps := paths[sig].(*model.PatternStats)
		fmt.Fprintf(&b, "tierscope_path_instances{signature=\"%s\"} %d\n", escapeLabel(sig), ps.Count)
	}
	e.modelGauges(r, &b)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

func writeQuantiles(b *strings.Builder, name, labels string, h *model.Hist) {
	if h.N == 0 {
		return
	}
	for _, q := range []float64{0.5, 0.9, 0.99} {
		fmt.Fprintf(b, "%s{%s,quantile=\"%g\"} %g\n", name, labels, q, h.QuantileMs(q))
	}
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }

// modelGauges adds the work factors and service times of the last hour. The
// signatures are computed once: the work factors' cross-check reuses them.
func (e *engine) modelGauges(r *http.Request, b *strings.Builder) {
	q := url.Values{}
	tr, err := e.timeRange(q)
	if err != nil {
		return
	}
	sigs, sigErr := e.appSignatures(r.Context(), tr)
	if sigErr != nil {
		sigs = nil // the work factors then try on their own
	}
	if v, err := e.workFactorsWith(r.Context(), q, tr, sigs); err == nil {
		b.WriteString("# HELP tierscope_work_factor_megacycles CPU work factor of each flow over the last hour (paper 002), standard megacycles per request.\n# TYPE tierscope_work_factor_megacycles gauge\n")
		for _, m := range v.Machines {
			for _, f := range m.Flows {
				fmt.Fprintf(b, "tierscope_work_factor_megacycles{flow=\"%s\"} %g\n", escapeLabel(f.Flow), f.WorkFactor)
			}
		}
	}
	if sigErr == nil {
		b.WriteString("# HELP tierscope_service_time_ms Load-independent service time of each transaction over the last hour (paper 004).\n# TYPE tierscope_service_time_ms gauge\n")
		for _, s := range sigs {
			for _, t := range s.Transactions {
				if t.OK() {
					fmt.Fprintf(b, "tierscope_service_time_ms{service=\"%s\",version=\"%s\",transaction=\"%s\"} %g\n",
						escapeLabel(s.Service), escapeLabel(s.Version), escapeLabel(t.Transaction), *t.ServiceTimeMs)
				}
			}
		}
	}
}
