//go:build long

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/tierscope/tierscope/testbed/config"
)

// modelsCollectorBinary is the shipped distribution (collectorBinary), which
// must hold the components the model checks use.
func modelsCollectorBinary(t *testing.T) string {
	t.Helper()
	bin := collectorBinary(t)
	for _, c := range [][2]string{{"receivers", "hostmetrics"}, {"receivers", "otlp"}, {"exporters", "perfmodel"}} {
		requireComponent(t, bin, c[0], c[1])
	}
	return bin
}

// startModelsCollector runs bin with cfg and waits until the perfmodel API on
// apiAddr answers; it is stopped at cleanup (the log is printed on failure).
func startModelsCollector(t *testing.T, bin string, cfg map[string]any, apiAddr string) *Collector {
	t.Helper()
	dir := t.TempDir()
	c := &Collector{LogFile: filepath.Join(dir, "collector.log"), exited: make(chan struct{})}
	cfgYAML, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgFile, cfgYAML, 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(c.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	c.cmd = exec.Command(bin, "--config", cfgFile)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		logf.Close()
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.Stop(t)
		if t.Failed() {
			t.Logf("collector config:\n%s", cfgYAML)
			t.Logf("collector log (tail):\n%s", c.logTail(40))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-c.exited:
			t.Fatalf("collector exited before it was ready (%v); log:\n%s", c.waitErr, c.logTail(40))
		default:
		}
		if resp, err := http.Get("http://" + apiAddr + "/api/v1/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("perfmodel API %s not up within 30s; log:\n%s", apiAddr, c.logTail(40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// getBody returns GET url's body, failing the test on any error status.
func getBody(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v: %s", url, resp.Status, err, body)
	}
	return body
}

// getJSON decodes GET url into out, failing the test on any error status.
func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	body := getBody(t, url)
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, body)
	}
}

var (
	testbedBinOnce sync.Once
	testbedBin     string
	testbedBinErr  error
)

// testbedBinary builds the testbed command once per test binary run.
func testbedBinary(t *testing.T) string {
	t.Helper()
	testbedBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tierscope-e2e-testbed-")
		if err != nil {
			testbedBinErr = err
			return
		}
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		testbedBin = filepath.Join(dir, "testbed")
		out, err := exec.Command(goBin, "build", "-o", testbedBin, "../testbed/cmd/testbed").CombinedOutput()
		if err != nil {
			testbedBinErr = fmt.Errorf("go build ./testbed/cmd/testbed: %v\n%s", err, out)
		}
	})
	if testbedBinErr != nil {
		t.Fatal(testbedBinErr)
	}
	return testbedBin
}

// tierProcess runs one testbed tier as its own process under the executable
// name exe (a hard link to the testbed binary), so that the hostmetrics process
// scraper reads its CPU apart from every other tier's. Its spans carry the same
// name as process.executable.name (through OTEL_RESOURCE_ATTRIBUTES, which the
// tiers' SDK resource reads), the key the exporter joins them on.
func tierProcess(t *testing.T, dir, exe, healthURL string, args ...string) int {
	t.Helper()
	path := filepath.Join(dir, exe)
	if err := os.Link(testbedBinary(t), path); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, exe+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), "OTEL_RESOURCE_ATTRIBUTES=process.executable.name="+exe)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", exe, tail(string(b), 2000))
		}
	})
	if healthURL == "" {
		return cmd.Process.Pid
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if resp, err := http.Get(healthURL + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cmd.Process.Pid
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := os.ReadFile(logPath)
	t.Fatalf("%s did not answer %s/healthz within 30s; log:\n%s", exe, healthURL, b)
	return 0
}

// processCPU is a process's user+system CPU time from /proc/PID/stat, in
// clock ticks of 1/100 s (USER_HZ on Linux).
func processCPU(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the parenthesised command: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	var ut, st float64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return (ut + st) / 100
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// workfactorBench is what the work-factor tests on the testbed share: the
// collector binary, the testbed configuration and the machine it runs on.
type workfactorBench struct {
	bin, cfgPath string
	cfg          *config.Config
	mhz, omega   float64 // one core's and the machine's capacity
	host         string  // the host.name of the tiers' spans and the CPU readings
	dir          string
	otlpPort     int
}

func newWorkfactorBench(t *testing.T, subdirs ...string) workfactorBench {
	t.Helper()
	b := workfactorBench{bin: modelsCollectorBinary(t), dir: t.TempDir(), otlpPort: freePort(t)}
	var err error
	if b.cfgPath, err = filepath.Abs("testdata/testbed-workfactors.yaml"); err != nil {
		t.Fatal(err)
	}
	if b.cfg, err = config.Load(b.cfgPath); err != nil {
		t.Fatal(err)
	}
	b.mhz = b.cfg.MHz()
	b.omega = float64(runtime.NumCPU()) * b.mhz
	// The tiers' SDK resource sets host.name to the machine's name: the same
	// name must key the hostmetrics readings.
	if b.host, err = os.Hostname(); err != nil {
		t.Fatal(err)
	}
	for _, d := range append(subdirs, "data") {
		if err := os.MkdirAll(filepath.Join(b.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// testbedTiers are the tiers' URLs and processes, by role.
type testbedTiers struct {
	web, queue string
	pid        map[string]int // web, app1, app2, primary, backup, worker
}

// startTiers runs one process per tier; its executable name is its CPU
// reading's key.
func (b workfactorBench) startTiers(t *testing.T) testbedTiers {
	t.Helper()
	otlp := fmt.Sprintf("127.0.0.1:%d", b.otlpPort)
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", freePort(t)) }
	web, app1, app2, db1, db2, queue := addr(), addr(), addr(), addr(), addr(), addr()
	u := func(a string) string { return "http://" + a }
	common := func(exe string) []string { return []string{"--otlp", otlp, "--config", b.cfgPath, "--instance", exe} }
	data := filepath.Join(b.dir, "data")
	pid := map[string]int{}
	pid["backup"] = tierProcess(t, b.dir, "tbdb2", u(db2), append([]string{"db", "--listen", db2, "--data", data}, common("tbdb2")...)...)
	pid["primary"] = tierProcess(t, b.dir, "tbdb1", u(db1), append([]string{"db", "--listen", db1, "--data", data, "--backup", u(db2)}, common("tbdb1")...)...)
	pid["app1"] = tierProcess(t, b.dir, "tbapp1", u(app1), append([]string{"app", "--listen", app1, "--db", u(db1)}, common("tbapp1")...)...)
	pid["app2"] = tierProcess(t, b.dir, "tbapp2", u(app2), append([]string{"app", "--listen", app2, "--db", u(db1)}, common("tbapp2")...)...)
	tierProcess(t, b.dir, "tbqueue", u(queue), "queue", "--listen", queue)
	pid["web"] = tierProcess(t, b.dir, "tbweb", u(web), append([]string{"web", "--listen", web, "--app", u(app1) + "," + u(app2), "--queue", u(queue)}, common("tbweb")...)...)
	pid["worker"] = tierProcess(t, b.dir, "tbworker", "", append([]string{"worker", "--queue", u(queue), "--db", u(db1)}, common("tbworker")...)...)
	return testbedTiers{web: u(web), queue: u(queue), pid: pid}
}
