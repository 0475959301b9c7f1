package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"gopkg.in/yaml.v3"

	"github.com/tierscope/tierscope/internal/freeport"
)

// collectorBinary is the distribution under test: $TIERSCOPE_OTELCOL, else the
// one make build-otelcol writes. The test fails when it is missing.
func collectorBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("TIERSCOPE_OTELCOL")
	if bin == "" {
		bin = filepath.Join("..", "build", "otelcol-tierscope", "otelcol-tierscope")
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(abs); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Fatalf("collector binary %s is missing or not executable: build it first with `make build-otelcol` "+
			"(or point $TIERSCOPE_OTELCOL at an otelcol-tierscope binary)", abs)
	}
	return abs
}

// requireComponent fails the test when the binary was built without the
// component kind/type (as listed by `otelcol-tierscope components`).
func requireComponent(t *testing.T, bin, kind, typ string) {
	t.Helper()
	out, err := exec.Command(bin, "components").CombinedOutput()
	if err != nil {
		t.Fatalf("%s components: %v\n%s", bin, err, out)
	}
	var list map[string]any
	if err := yaml.Unmarshal(out, &list); err != nil {
		t.Fatalf("cannot parse `%s components`: %v", bin, err)
	}
	entries, _ := list[kind].([]any)
	for _, e := range entries {
		if m, ok := e.(map[string]any); ok && m["name"] == typ {
			return
		}
	}
	t.Fatalf("the collector %s has no %s %q: rebuild it with `make build-otelcol` once the component exists "+
		"(builder-config.yaml lists it)", bin, strings.TrimSuffix(kind, "s"), typ)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago and
// that no other call returned.
func freePort(t *testing.T) int {
	t.Helper()
	port, err := freeport.TCP()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// Processor is one entry of the traces pipeline: its component ID and config.
type Processor struct {
	ID     string
	Config map[string]any
}

// Batch is the batch processor with a short timeout.
func Batch() Processor {
	return Processor{ID: "batch", Config: map[string]any{"timeout": "200ms"}}
}

// Causalpath is our processor in the given mode with a 5 s wait: longer than
// the SDKs' batch delay even when a loaded machine stretches it.
func Causalpath(mode string) Processor {
	return Processor{ID: "causalpath", Config: map[string]any{
		"mode": mode, "wait": "5s", "max_spans": 100000, "skew_window": "5ms",
	}}
}

// Collector is a running otelcol-tierscope process.
type Collector struct {
	Endpoint string // OTLP/gRPC, host:port
	OutFile  string // what the file exporter writes (OTLP/JSON lines)
	LogFile  string
	cmd      *exec.Cmd
	exited   chan struct{}
	waitErr  error
}

// configFor is an otlp (gRPC on port) → processors → file pipeline; internal
// metrics are off so parallel collectors never compete for a port.
func configFor(port int, outFile string, procs []Processor) map[string]any {
	processors := map[string]any{}
	ids := []string{}
	for _, p := range procs {
		processors[p.ID] = p.Config
		ids = append(ids, p.ID)
	}
	pipeline := map[string]any{"receivers": []string{"otlp"}, "exporters": []string{"file"}}
	if len(ids) > 0 {
		pipeline["processors"] = ids
	}
	cfg := map[string]any{
		"receivers": map[string]any{
			"otlp": map[string]any{"protocols": map[string]any{
				"grpc": map[string]any{"endpoint": fmt.Sprintf("127.0.0.1:%d", port)},
			}},
		},
		"exporters": map[string]any{
			"file": map[string]any{"path": outFile, "format": "json", "flush_interval": "100ms"},
		},
		"service": map[string]any{
			"telemetry": map[string]any{
				"metrics": map[string]any{"level": "none"},
				"logs":    map[string]any{"level": "info"},
			},
			"pipelines": map[string]any{"traces": pipeline},
		},
	}
	if len(processors) > 0 {
		cfg["processors"] = processors
	}
	return cfg
}

// StartCollector runs the distribution with an otlp → procs → file pipeline and
// waits until its OTLP port accepts connections. It is stopped at cleanup.
func StartCollector(t *testing.T, procs ...Processor) *Collector {
	t.Helper()
	return StartCollectorExtended(t, procs, nil)
}

// StartCollectorExtended is StartCollector with extend, when not nil, adding
// components and pipelines to the configuration before it is written.
func StartCollectorExtended(t *testing.T, procs []Processor, extend func(cfg map[string]any)) *Collector {
	t.Helper()
	bin := collectorBinary(t)
	dir := t.TempDir()
	port := freePort(t)
	c := &Collector{
		Endpoint: fmt.Sprintf("127.0.0.1:%d", port),
		OutFile:  filepath.Join(dir, "spans.jsonl"),
		LogFile:  filepath.Join(dir, "collector.log"),
		exited:   make(chan struct{}),
	}
	cfg := configFor(port, c.OutFile, procs)
	if extend != nil {
		extend(cfg)
	}
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
			t.Logf("collector log (tail):\n%s", c.logTail(60))
		}
	})

	waitListening(t, "collector", c.Endpoint, c.exited, func() string { return c.logTail(40) })
	return c
}

// waitListening waits up to 30 s for a started process to accept TCP on addr,
// failing the test if it exits first or never listens.
func waitListening(t *testing.T, name, addr string, exited <-chan struct{}, logTail func() string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("%s exited before it was ready; log:\n%s", name, logTail())
		default:
		}
		if conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not open %s within 30 s; log:\n%s", name, addr, logTail())
		}
	}
}

// Stop asks the collector to shut down (flushing its pipeline) and waits.
func (c *Collector) Stop(t *testing.T) {
	stopProcess(t, "collector", c.cmd, c.exited)
}

// stopProcess asks a started process to shut down with SIGINT (flushing its
// pipelines) and waits; after 30 s it kills it and fails the test.
func stopProcess(t *testing.T, name string, cmd *exec.Cmd, exited <-chan struct{}) {
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not stop within 30 s of SIGINT; killing it", name)
		_ = cmd.Process.Kill()
		<-exited
	}
}

func (c *Collector) logTail(n int) string {
	b, _ := os.ReadFile(c.LogFile)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// OutSpan is one span read back from the file exporter's output.
type OutSpan struct {
	Service, Instance string
	Span              ptrace.Span
}

// ReadSpans parses the file exporter's output: one OTLP/JSON
// ExportTraceServiceRequest per line. A trailing partial line is ignored.
func ReadSpans(path string) ([]OutSpan, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		return nil, nil
	}
	var out []OutSpan
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	var um ptrace.JSONUnmarshaler
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		td, err := um.UnmarshalTraces(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			attrs := rs.Resource().Attributes()
			svc, inst := "", ""
			if v, ok := attrs.Get("service.name"); ok {
				svc = v.AsString()
			}
			if v, ok := attrs.Get("service.instance.id"); ok {
				inst = v.AsString()
			}
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				spans := rs.ScopeSpans().At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					out = append(out, OutSpan{Service: svc, Instance: inst, Span: spans.At(k)})
				}
			}
		}
	}
	return out, sc.Err()
}

// WaitForSpans polls the output until it holds at least want spans, then stops
// the collector (flushing anything still buffered) and returns the final output.
func (c *Collector) WaitForSpans(t *testing.T, want int, timeout time.Duration) []OutSpan {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		spans, err := ReadSpans(c.OutFile)
		if err != nil {
			t.Fatal(err)
		}
		if len(spans) >= want {
			break
		}
		select {
		case <-c.exited:
			t.Fatalf("collector exited (%v) after writing %d of %d spans", c.waitErr, len(spans), want)
		default:
		}
		if time.Now().After(deadline) {
			t.Logf("only %d of %d spans written after %v; stopping the collector to flush", len(spans), want, timeout)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.Stop(t)
	spans, err := ReadSpans(c.OutFile)
	if err != nil {
		t.Fatal(err)
	}
	return spans
}

func hexOr(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// attrString returns a span attribute as a string and whether it is present.
func attrString(sp ptrace.Span, key string) (string, bool) {
	v, ok := sp.Attributes().Get(key)
	if !ok {
		return "", false
	}
	return v.AsString(), true
}

// attrNumber returns a numeric (double or int) span attribute; ok is false
// when it is missing or of another type.
func attrNumber(sp ptrace.Span, key string) (float64, bool) {
	v, ok := sp.Attributes().Get(key)
	if !ok {
		return 0, false
	}
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		return v.Double(), true
	case pcommon.ValueTypeInt:
		return float64(v.Int()), true
	}
	return 0, false
}
