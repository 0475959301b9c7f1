//go:build scaleout

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/tierscope/tierscope/internal/store/pgtest"
)

// otelcol is one collector process of the scale-out test, which may be
// killed and started again.
type otelcol struct {
	t       *testing.T
	name    string
	bin     string
	cfgFile string
	logFile string
	wait    string // host:port that accepts connections once it is ready
	cmd     *exec.Cmd
	exited  chan struct{}
}

// startOtelcol writes cfg and runs the collector until it accepts
// connections on ready; it is stopped (SIGINT) at cleanup.
func startOtelcol(t *testing.T, bin, dir, name string, cfg map[string]any, ready string) *otelcol {
	t.Helper()
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &otelcol{t: t, name: name, bin: bin, cfgFile: filepath.Join(dir, name+".yaml"), logFile: filepath.Join(dir, name+".log"), wait: ready}
	if err := os.WriteFile(c.cfgFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c.start()
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", name, tailFile(c.logFile, 30))
		}
	})
	return c
}

// rewrite replaces the configuration the next start reads.
func (c *otelcol) rewrite(cfg map[string]any) {
	b, err := yaml.Marshal(cfg)
	if err == nil {
		err = os.WriteFile(c.cfgFile, b, 0o644)
	}
	if err != nil {
		c.t.Error(err)
	}
}

// start runs the process (again), appending to its log.
func (c *otelcol) start() {
	c.t.Helper()
	logf, err := os.OpenFile(c.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	c.cmd = exec.Command(c.bin, "--config", c.cfgFile)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", c.name, err)
	}
	exited := make(chan struct{})
	c.exited = exited
	cmd := c.cmd
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	waitListening(c.t, c.name, c.wait, exited, func() string { return tailFile(c.logFile, 30) })
}

// kill ends the process with SIGKILL: nothing is flushed.
func (c *otelcol) kill() {
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// stop asks the process to shut down, flushing its pipelines.
func (c *otelcol) stop() {
	stopProcess(c.t, c.name, c.cmd, c.exited)
}

func tailFile(path string, n int) string {
	c := &Collector{LogFile: path}
	return c.logTail(n)
}

// scaleoutPostgres is the test's PostgreSQL: $TIERSCOPE_TEST_POSTGRES_DSN,
// else a throwaway cluster of the installed PostgreSQL on loopback (pgtest,
// as the store's tests use), with a fresh schema.
func scaleoutPostgres(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := pgtest.Start(ctx)
	if err != nil {
		t.Fatalf("PostgreSQL for the analyzers: %v (install Debian's postgresql, as .ci/run does)", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	dsn, cleanup, err := srv.NewSchema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return dsn
}

// apiGet decodes GET base+path into out.
func apiGet(t *testing.T, base, path string, out any) {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", base, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s%s: %d %s", base, path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s%s: %v", base, path, err)
	}
}

// apiGetStatus is apiGet for a goroutine: it returns the status and body
// instead of failing the test.
func apiGetStatus(base, path string, out any) (int, string) {
	resp, err := http.Get(base + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return 0, err.Error()
		}
	}
	return resp.StatusCode, string(b)
}

// apiPost posts a JSON body; out, when set, takes a 2xx answer.
func apiPost(base, path, body string, out any) (int, string) {
	resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode < 300 && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return 0, err.Error()
		}
	}
	return resp.StatusCode, string(b)
}

func loopback(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }

func soOTLP(port int) map[string]any {
	return map[string]any{"protocols": map[string]any{"grpc": map[string]any{"endpoint": loopback(port)}}}
}
