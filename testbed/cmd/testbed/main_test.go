package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/tierscope/tierscope/testbed/config"
)

func runCmd(ctx context.Context, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageAndErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("cpu_mhz: 1\ntransactions: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{nil, exitBadUsage, "usage:"},
		{[]string{"help"}, exitOK, "commands:"},
		{[]string{"nope"}, exitBadUsage, `unknown command "nope"`},
		{[]string{"up"}, exitBadUsage, "--otlp is required"},
		{[]string{"up", "--otlp", "x:1", "--version", "v9"}, exitBadUsage, `--version "v9"`},
		{[]string{"up", "--otlp", "x:1", "--base-port", "0"}, exitBadUsage, "--base-port"},
		{[]string{"up", "--otlp", "x:1", "extra"}, exitBadUsage, `unexpected argument "extra"`},
		{[]string{"web", "--listen", "nohost", "--app", "http://a:1", "--queue", "http://q:1", "--otlp", "x:1"}, exitBadUsage, "--listen"},
		{[]string{"web", "--listen", ":0", "--app", "a:1", "--queue", "http://q:1", "--otlp", "x:1"}, exitBadUsage, "--app"},
		{[]string{"app", "--listen", ":0", "--otlp", "x:1"}, exitBadUsage, "--db is required"},
		{[]string{"db", "--listen", ":0", "--otlp", "x:1"}, exitBadUsage, "--data is required"},
		{[]string{"queue", "--listen", ":0", "--capacity", "0"}, exitBadUsage, "--capacity"},
		{[]string{"worker", "--queue", "http://q:1", "--otlp", "x:1"}, exitBadUsage, "--db is required"},
		{[]string{"load"}, exitBadUsage, "--target is required"},
		{[]string{"load", "--target", "http://x:1", "--mix", "lunch"}, exitBadUsage, "--mix"},
		{[]string{"truth", "--config", bad}, exitFailure, "transactions"},
		{[]string{"truth", "--config", filepath.Join(t.TempDir(), "missing.yaml")}, exitFailure, "no such file"},
		{[]string{"truth", "-h"}, exitOK, "usage: testbed truth"},
	} {
		code, _, stderr := runCmd(ctx, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, tc.code, tc.msg)
		}
	}
}

func TestTruthJSON(t *testing.T) {
	code, out, stderr := runCmd(context.Background(), "truth")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var truth config.Truth
	if err := json.Unmarshal([]byte(out), &truth); err != nil {
		t.Fatal(err)
	}
	if len(truth.Transactions) != 6 || truth.Transactions[0].Name != "Home" || len(truth.Transactions[0].Edges) == 0 {
		t.Errorf("truth: %s", out)
	}
}

// collector is a minimal OTLP/gRPC trace receiver.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu       sync.Mutex
	services map[string]int // spans per service.name
}

func (c *collector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		name := ""
		for _, kv := range rs.Resource.GetAttributes() {
			if kv.Key == "service.name" {
				name = kv.Value.GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			c.services[name] += len(ss.Spans)
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// freeBase finds n consecutive free loopback ports.
func freeBase(t *testing.T, n int) int {
	t.Helper()
	for try := 0; try < 50; try++ {
		base := 20000 + rand.IntN(40000)
		var lns []net.Listener
		ok := true
		for i := 0; i < n; i++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				ok = false
				break
			}
			lns = append(lns, ln)
		}
		for _, ln := range lns {
			ln.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free port range")
	return 0
}

// TestUpLoadAndFlush runs `up`, drives it with `load`, stops it as a signal would
// and checks that every tier's spans reached the collector.
func TestUpLoadAndFlush(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{services: map[string]int{}}
	gs := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(gs, col)
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()

	base := freeBase(t, 6)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"up", "--otlp", ln.Addr().String(), "--base-port", fmt.Sprint(base), "--version", "v2"}, io.Discard, &stderr)
	}()

	web := fmt.Sprintf("http://127.0.0.1:%d", base)
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := hc.Get(web + "/txn/PutBid")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("web never answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	code, out, lerr := runCmd(context.Background(), "load", "--target", web, "--mode", "open", "--rate", "20", "--duration", "1s", "--mix", "ordering")
	if code != exitOK {
		t.Fatalf("load: exit %d: %s", code, lerr)
	}
	var stats struct {
		Requests, Errors int64
	}
	if err := json.Unmarshal([]byte(out), &stats); err != nil || stats.Requests == 0 || stats.Errors != 0 {
		t.Errorf("load stats %+v (%v): %s", stats, err, out)
	}

	// The worker's span comes after the response: wait for its message to be
	// consumed before stopping, so the flush has it to send.
	deadline = time.Now().Add(10 * time.Second)
	for !queueDrained(t, hc, base+5) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("up: exit %d: %s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("up did not stop")
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, svc := range []string{"web", "app", "db", "worker"} {
		if col.services[svc] == 0 {
			t.Errorf("no %s spans exported (got %v)", svc, col.services)
		}
	}
}

func queueDrained(t *testing.T, hc *http.Client, port int) bool {
	resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/stats", port))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var stats map[string]struct{ Depth, Published, Consumed int }
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil {
		t.Fatal(err)
	}
	st, ok := stats["notify"]
	return ok && st.Depth == 0 && st.Consumed > 0
}
