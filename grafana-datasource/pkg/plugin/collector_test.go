package plugin

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/freeport"
)

// repoRoot is the Tierscope repository this module sits in.
const repoRoot = "../../.."

func freeTCPPort(t *testing.T) int {
	t.Helper()
	port, err := freeport.TCP()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// freeTCPRange returns a port p such that p … p+n−1 are all free and none of
// them is in taken: the testbed listens on a run of ports from its base, and
// the kernel hands out ephemeral ports in sequence, so base+1 is often the
// next port another of the test's listeners was given.
func freeTCPRange(t *testing.T, n int, taken ...int) int {
	t.Helper()
	for range 100 {
		base := freeTCPPort(t)
		var held []net.Listener
		ok := base+n <= 65535
		for p := base; ok && p < base+n; p++ {
			ok = !slices.Contains(taken, p)
			if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); ok && err == nil {
				held = append(held, l)
			} else {
				ok = false
			}
		}
		for _, l := range held {
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatalf("no run of %d free ports", n)
	return 0
}

// startProcess runs name with args and env, its output in dir/log, and stops
// it (SIGTERM, then SIGKILL) at cleanup.
func startProcess(t *testing.T, dir, log string, env []string, name string, args ...string) *exec.Cmd {
	t.Helper()
	out, err := os.Create(filepath.Join(dir, log))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); out.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, log)); err == nil {
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				t.Logf("%s (tail):\n%s", log, strings.Join(lines[max(0, len(lines)-30):], "\n"))
			}
		}
	})
	return cmd
}

func waitTCP(t *testing.T, addr string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s after %v", addr, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDashboardOnTheTestbedCollector: `make run` as a test. The collector of
// examples/testbed.yaml, freshly started, and the testbed (its web → app hop
// losing context) under load for 20 s; then every panel of the provisioned
// dashboard, through the backend with its variables from the catalog, shows
// data or a notice saying why not. The paths, the service graph and the
// latency over time must show data; the experiment panels, with no
// experiment run, must say how to start one.
func TestDashboardOnTheTestbedCollector(t *testing.T) {
	collector := os.Getenv("TIERSCOPE_OTELCOL")
	if collector == "" {
		collector = filepath.Join(repoRoot, "build", "otelcol-tierscope", "otelcol-tierscope")
	}
	if _, err := os.Stat(collector); err != nil {
		t.Fatalf("the collector %s is missing: build it first with `make build-otelcol` (or set $TIERSCOPE_OTELCOL)", collector)
	}
	dir := t.TempDir()
	testbed := filepath.Join(dir, "testbed")
	build := exec.Command("go", "build", "-o", testbed, "./testbed/cmd/testbed")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the testbed: %v\n%s", err, out)
	}

	otlp, apiPort, prom, inj := freeTCPPort(t), freeTCPPort(t), freeTCPPort(t), freeTCPPort(t)
	base := freeTCPRange(t, 10, otlp, apiPort, prom, inj)
	apiAddr := fmt.Sprintf("127.0.0.1:%d", apiPort)
	token := make([]byte, 16)
	_, _ = rand.Read(token)
	env := []string{
		fmt.Sprintf("TIERSCOPE_OTLP_PORT=%d", otlp),
		"TIERSCOPE_SPANS_FILE=" + filepath.Join(dir, "spans.jsonl"),
		"TIERSCOPE_API=" + apiAddr,
		"TIERSCOPE_DB=" + filepath.Join(dir, "perfmodel.db"),
		fmt.Sprintf("TIERSCOPE_PROMETHEUS=127.0.0.1:%d", prom),
		fmt.Sprintf("TIERSCOPE_INJECTOR=127.0.0.1:%d", inj),
		"TIERSCOPE_INJECTOR_STATE=" + filepath.Join(dir, "injector"),
		"INJECTOR_TOKEN=" + hex.EncodeToString(token),
	}
	started := time.Now()
	startProcess(t, dir, "collector.log", env, collector, "--config", filepath.Join(repoRoot, "examples", "testbed.yaml"))
	waitTCP(t, fmt.Sprintf("127.0.0.1:%d", otlp), 30*time.Second)
	startProcess(t, dir, "testbed.log", nil, testbed, "up", "--otlp", fmt.Sprintf("127.0.0.1:%d", otlp),
		"--base-port", fmt.Sprint(base), "--drop-context", "web->app")
	waitTCP(t, fmt.Sprintf("127.0.0.1:%d", base), 30*time.Second)
	load := exec.Command(testbed, "load", "--target", fmt.Sprintf("http://127.0.0.1:%d", base), "--mode", "closed",
		"--mix", "nonstationary", "--users", "10", "--duration", "20s")
	if out, err := load.CombinedOutput(); err != nil {
		t.Fatalf("load: %v\n%s", err, out)
	}

	// A trace reaches the models some 35 s after its request (the SDK's
	// batch, causalpath's wait and the exporter's trace_wait).
	deadline := time.Now().Add(90 * time.Second)
	for {
		var g api.Graph
		resp, err := http.Get("http://" + apiAddr + api.PathGraph)
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&g)
			resp.Body.Close()
		}
		if err == nil && len(g.Edges) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service graph has %d edges 90 s after the load (%v)", len(g.Edges), err)
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("the service graph is in the API %v after the collector started", time.Since(started).Round(time.Second))

	ds, err := NewDatasourceForURL("http://"+apiAddr+"/api/v1/", "")
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Dispose()
	outcome := checkDashboard(t, ds, backend.TimeRange{From: started.Add(-time.Minute), To: time.Now()})
	for title, o := range outcome {
		t.Logf("%s: %s", title, o)
	}
	for _, title := range []string{"Causal paths", "Service graph · link gradients of $transaction", "Latency over time · $service", "Path patterns"} {
		if outcome[title] != "data" {
			t.Errorf("panel %q: %s", title, outcome[title])
		}
	}
	for _, title := range []string{"Experiments", "Gradients", "Experiment spectrum"} {
		if !strings.Contains(outcome[title], "tierscope experiment start") {
			t.Errorf("panel %q does not say how to start an experiment: %s", title, outcome[title])
		}
	}
}
