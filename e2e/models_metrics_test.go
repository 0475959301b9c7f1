package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/testbed/config"
)

// modelMetricsPipelines adds to servicegraphPipelines what examples/testbed.yaml
// runs for the models: the perfmodel exporter fed the repaired traces and the
// machine's CPU (hostmetrics), and the perfmodel receiver reading its models
// into the metrics pipeline the prometheus exporter publishes.
func modelMetricsPipelines(promEndpoint, apiEndpoint, dbPath string) func(cfg map[string]any) {
	return func(cfg map[string]any) {
		servicegraphPipelines(promEndpoint)(cfg)
		receivers := cfg["receivers"].(map[string]any)
		receivers["hostmetrics"] = map[string]any{"collection_interval": "1s", "scrapers": map[string]any{"cpu": map[string]any{
			"metrics": map[string]any{"system.cpu.utilization": map[string]any{"enabled": true}},
		}}}
		receivers["perfmodel"] = map[string]any{"endpoint": "http://" + apiEndpoint, "collection_interval": "1s", "range": "5m"}
		exporters := cfg["exporters"].(map[string]any)
		exporters["perfmodel"] = map[string]any{
			// trace_wait longer than causalpath's wait (5 s), as the README asks.
			"endpoint": apiEndpoint, "window": "1s", "flush_interval": "1s", "trace_wait": "6s",
			// The tiers' resources and hostmetrics name no host: one name joins them.
			"host_name":    "e2e-host",
			"capacity_mhz": float64(runtime.NumCPU()) * config.Default().MHz(),
			"storage":      map[string]any{"dsn": "sqlite://" + dbPath},
		}
		pipelines := cfg["service"].(map[string]any)["pipelines"].(map[string]any)
		traces := pipelines["traces"].(map[string]any)
		traces["exporters"] = append(traces["exporters"].([]string), "perfmodel")
		pipelines["metrics"] = map[string]any{"receivers": []string{"hostmetrics"}, "exporters": []string{"perfmodel"}}
		sg := pipelines["metrics/servicegraph"].(map[string]any)
		sg["receivers"] = append(sg["receivers"].([]string), "perfmodel")
	}
}

// The models as metrics: the testbed through the collector of
// examples/testbed.yaml, whose perfmodel receiver reads the exporter's work
// factors and signatures into the pipeline of the prometheus exporter. Every
// flow the API has a work factor of is on the Prometheus endpoint under
// tierscope_workfactor, with the semantic conventions' attribute names, and
// every signature the API computed under
// tierscope_signature_service_time_seconds, in seconds.
func TestModelMetricsOfTheTestbed(t *testing.T) {
	bin := collectorBinary(t)
	requireComponent(t, bin, "receivers", "perfmodel")
	requireComponent(t, bin, "exporters", "prometheus")
	promEndpoint := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	apiEndpoint := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	c := StartCollectorExtended(t, []Processor{Causalpath("reparent"), Batch()},
		modelMetricsPipelines(promEndpoint, apiEndpoint, t.TempDir()+"/perfmodel.db"))
	// A varying load: a regression needs request rates that move.
	runTestbedLoadMix(t, c.Endpoint, []string{"web->app"}, 30*time.Second, "nonstationary", 4)

	url := "http://" + promEndpoint + "/metrics"
	var wf api.WorkFactors
	var samples []promSample
	deadline := time.Now().Add(60 * time.Second)
	for {
		readAPI(t, "http://"+apiEndpoint+api.PathWorkFactors, &wf)
		samples = scrape(t, url)
		if len(wf.Machines) > 0 && len(wf.Machines[0].Flows) > 0 && hasSample(samples, "tierscope_workfactor") {
			break
		}
		if time.Now().After(deadline) {
			var c api.Catalog
			readAPI(t, "http://"+apiEndpoint+api.PathCatalog, &c)
			t.Fatalf("after 60 s: %d machines with work factors in the API (machines with CPU: %v, services: %d); tierscope_workfactor on the endpoint: %v",
				len(wf.Machines), c.Machines, len(c.Services), hasSample(samples, "tierscope_workfactor"))
		}
		time.Sleep(time.Second)
	}
	// The receiver and this read may see different windows: the flows, not
	// the values, must match.
	got := map[string]promSample{}
	for _, s := range samples {
		if s.name == "tierscope_workfactor" {
			got[s.labels["service_name"]+" "+s.labels["tierscope_transaction"]] = s
		}
	}
	for _, f := range wf.Machines[0].Flows {
		s, ok := got[f.Flow]
		if !ok {
			t.Errorf("flow %q has a work factor in the API (%.2f Mc) but none on the endpoint; there: %v", f.Flow, f.WorkFactor, keys(got))
			continue
		}
		if s.labels["host_name"] != "e2e-host" || !(s.value > 0) {
			t.Errorf("tierscope_workfactor of %q: host_name %q, value %v", f.Flow, s.labels["host_name"], s.value)
		}
	}
	if _, ok := got["web /txn/Home"]; !ok {
		t.Errorf("no work factor of web's Home transaction; flows: %v", keys(got))
	}
	t.Logf("tierscope_workfactor: %d flows on %s, R² %.2f", len(got), wf.Machines[0].Machine, wf.Machines[0].R2)

	var sigs api.Signatures
	readAPI(t, "http://"+apiEndpoint+api.PathSignatures, &sigs)
	samples = scrape(t, url)
	ok := 0
	for _, s := range sigs.Signatures {
		for _, tx := range s.Transactions {
			if tx.ServiceTimeMs == nil {
				continue
			}
			ok++
			if !hasSample(samples, "tierscope_signature_service_time_seconds", "service_name", s.Service,
				"service_version", s.Version, "tierscope_transaction", tx.Transaction) {
				t.Errorf("the signature of %s %s %s (%.2f ms) is not on the endpoint", s.Service, s.Version, tx.Transaction, *tx.ServiceTimeMs)
			}
		}
	}
	t.Logf("signatures with a service time: %d (each on the endpoint in seconds)", ok)
	// Beside them, the service graph under the servicegraph connector's names.
	if !hasSample(samples, "traces_service_graph_request_total", "client", "web", "server", "app") {
		t.Error("the service graph's web → app edge is not on the endpoint beside the models")
	}
}

func readAPI(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// hasSample says whether a sample of name has the given label values
// (pairs of name and value).
func hasSample(samples []promSample, name string, labels ...string) bool {
	for _, s := range samples {
		if s.name != name {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			match = match && s.labels[labels[i]] == labels[i+1]
		}
		if match {
			return true
		}
	}
	return false
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
