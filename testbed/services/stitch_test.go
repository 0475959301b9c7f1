package services

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierscope/tierscope/testbed/config"
)

// The stitching configuration's span shapes: gRPC spans named as gRPC names
// them on both sides, the app's legacy attribute names beside web's current
// ones, in-process redis and postgresql clients under their own service.name
// (redis sharing the app's pid, postgresql only its host, neither with a
// service.instance.id), async tasks and publishes under the app's SERVER span,
// and distinct fake processes.
func TestStitchConfigSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	var (
		mu  sync.Mutex
		tps []*sdktrace.TracerProvider
		ids []Identity
	)
	st, err := StartStack(StackOptions{
		Config: config.Stitch(), Version: "v1", DataDir: t.TempDir(),
		Reporter: func(id Identity) trace.TracerProvider {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec),
				sdktrace.WithResource(resource.NewSchemaless(id.Attributes()...)))
			mu.Lock()
			defer mu.Unlock()
			tps, ids = append(tps, tp), append(ids, id)
			return tp
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := &testStack{Stack: st, rec: rec, cfg: config.Stitch()}
	for _, txn := range []string{"Home", "Home", "Home", "Browse", "ViewItem", "PutBid", "Login", "Search"} {
		s.get(t, txn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Closing waits for the async tasks and lets the worker finish its messages.
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tp := range tps {
		_ = tp.Shutdown(ctx)
	}

	// Reporters: 6 tiers, and redis and postgresql in each app and the worker.
	pids := map[int]string{}
	clients := 0
	for _, id := range ids {
		if id.Client != "" {
			clients++
			continue
		}
		if other, ok := pids[id.PID]; ok || id.PID == 0 || id.HostName == "" || len(id.ContainerID) != 64 {
			t.Errorf("tier %s: pid %d (also %q), host %q, container %q", id.Instance, id.PID, other, id.HostName, id.ContainerID)
		}
		pids[id.PID] = id.Instance
	}
	if len(pids) != 6 || clients != 6 {
		t.Errorf("%d tier and %d client reporters, want 6 and 6", len(pids), clients)
	}

	spans := rec.Ended()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		byID[sp.SpanContext().SpanID()] = sp
	}
	parent := func(sp sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan { return byID[sp.Parent().SpanID()] }
	seen := map[string]int{}
	for _, sp := range spans {
		p := parent(sp)
		if sp.Parent().IsValid() && p == nil {
			t.Errorf("span %q (%s): parent not recorded", sp.Name(), service(sp))
			continue
		}
		name := AppGRPCService + "/" + GRPCMethod("catalog")
		switch {
		case sp.Name() == name && sp.SpanKind() == trace.SpanKindClient:
			seen["grpc client"]++
			if v, _ := attr(sp, "rpc.system"); v.AsString() != "grpc" || !has(sp, "server.address") || has(sp, "net.peer.name") {
				t.Errorf("web's gRPC CLIENT span (current conventions): %v", sp.Attributes())
			}
		case sp.Name() == name && sp.SpanKind() == trace.SpanKindServer:
			seen["grpc server"]++
			if p.SpanKind() != trace.SpanKindClient || service(p) != config.Web || !has(sp, "net.host.name") || has(sp, "server.address") {
				t.Errorf("app's gRPC SERVER span (legacy conventions, under web's CLIENT): %v", sp.Attributes())
			}
		case service(sp) == config.App && sp.SpanKind() == trace.SpanKindServer && !has(sp, "rpc.system"):
			seen["app http server"]++
			for _, k := range []string{"http.method", "http.target", "http.route", "net.host.name", "net.host.port", "http.status_code"} {
				if !has(sp, k) {
					t.Errorf("app's SERVER span %q: no %s (legacy)", sp.Name(), k)
				}
			}
		case service(sp) == "redis":
			seen["redis"]++
			if resAttr(sp, "service.instance.id") != "" || resAttr(sp, "host.name") != resAttr(p, "host.name") ||
				pid(sp) == "" || pid(sp) != pid(p) {
				t.Errorf("redis span %q: resource %v, its parent's %v", sp.Name(), sp.Resource().Attributes(), p.Resource().Attributes())
			}
			if sp.SpanKind() != trace.SpanKindClient || !has(sp, "db.system") && !has(sp, "db.system.name") {
				t.Errorf("redis span %q: %s %v", sp.Name(), sp.SpanKind(), sp.Attributes())
			}
		case service(sp) == "postgresql":
			seen["postgresql"]++
			if resAttr(sp, "service.instance.id") != "" || resAttr(sp, "host.name") != resAttr(p, "host.name") || pid(sp) != "" {
				t.Errorf("postgresql span %q: resource %v, its parent's %v", sp.Name(), sp.Resource().Attributes(), p.Resource().Attributes())
			}
			if has(sp, "http.method") || has(sp, "http.url") || !has(sp, "db.statement") {
				t.Errorf("postgresql span %q (a driver's, legacy): %v", sp.Name(), sp.Attributes())
			}
		case sp.Name() == "warm catalog":
			seen["task"]++
			if sp.SpanKind() != trace.SpanKindInternal || p.SpanKind() != trace.SpanKindServer || service(p) != config.App {
				t.Errorf("task %q: %s under %s %q", sp.Name(), sp.SpanKind(), service(p), p.Name())
			}
			if sp.EndTime().After(p.EndTime()) {
				seen["task outlived"]++
			}
		case sp.Name() == "publish audit":
			seen["app publish"]++
			if sp.SpanKind() != trace.SpanKindProducer || service(p) != config.App || !has(sp, "net.peer.name") {
				t.Errorf("async publish: %s under %s, %v", sp.SpanKind(), service(p), sp.Attributes())
			}
		case sp.Name() == "process audit":
			if service(p) == config.App && p.Name() == "publish audit" {
				seen["audit consumed"]++
			}
		}
	}
	for _, k := range []string{"grpc client", "grpc server", "app http server", "redis", "postgresql", "task", "task outlived", "app publish", "audit consumed"} {
		if seen[k] == 0 {
			t.Errorf("no %s span (%v)", k, seen)
		}
	}
}

// pid is the resource's process.pid (an int), "" when absent.
func pid(sp sdktrace.ReadOnlySpan) string {
	for _, kv := range sp.Resource().Attributes() {
		if kv.Key == "process.pid" {
			return kv.Value.Emit()
		}
	}
	return ""
}

func has(sp sdktrace.ReadOnlySpan, key string) bool {
	_, ok := attr(sp, key)
	return ok
}

func TestGRPCMethod(t *testing.T) {
	for op, want := range map[string]string{"catalog": "Catalog", "get_item": "GetItem", "a-b_c": "ABC", "x": "X"} {
		if got := GRPCMethod(op); got != want {
			t.Errorf("GRPCMethod(%q) = %q, want %q", op, got, want)
		}
	}
}

// The cache speaks enough RESP for redis-cli, answers errors without dropping
// the connection, and a client whose pooled connection the server closed
// retries once on a fresh one.
func TestCacheProtocol(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache()
	c.Serve(ln)
	addr := ln.Addr().String()

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	for _, tc := range []struct{ send, want string }{
		{"*1\r\n$4\r\nPING\r\n", "+PONG\r\n"},
		{"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nv1\r\n", "+OK\r\n"},
		{"*2\r\n$3\r\nget\r\n$1\r\nk\r\n", "$2\r\nv1\r\n"},
		{"*2\r\n$3\r\nGET\r\n$1\r\nx\r\n", "$-1\r\n"},
		{"*3\r\n$3\r\nDEL\r\n$1\r\nk\r\n$1\r\nx\r\n", ":1\r\n"},
		{"*1\r\n$4\r\nINCR\r\n", "-ERR unknown command 'INCR'\r\n"},
		{"*1\r\n$3\r\nGET\r\n", "-ERR wrong number of arguments for 'GET' command\r\n"},
	} {
		if _, err := io.WriteString(conn, tc.send); err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		for !strings.HasSuffix(got.String(), "\r\n") || (strings.HasPrefix(tc.want, "$2") && strings.Count(got.String(), "\r\n") < 2) {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("%q: %v", tc.send, err)
			}
			got.WriteString(line)
		}
		if got.String() != tc.want {
			t.Errorf("%q: got %q, want %q", tc.send, got.String(), tc.want)
		}
	}
	// A protocol error closes the connection after saying why.
	_, _ = io.WriteString(conn, "hello\r\n")
	if line, _ := r.ReadString('\n'); !strings.HasPrefix(line, "-ERR protocol error") {
		t.Errorf("inline command: %q", line)
	}
	conn.Close()

	rec := tracetest.NewSpanRecorder()
	tier := Tier{Config: config.Stitch(), Instance: "app-1", TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))}
	cc := newCacheClient(tier, config.App, addr)
	defer cc.close()
	call := config.CacheCall{Command: "SET", Key: "item:{1-9}", Pattern: config.PatternSync, Count: 1}
	if err := cc.do(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	// Restart the cache on the same address: the pooled connection is dead.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c2 := NewCache()
	c2.Serve(ln2)
	defer c2.Close()
	if err := cc.do(context.Background(), call); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	if c2.Len() != 1 {
		t.Errorf("the restarted cache has %d keys, want 1", c2.Len())
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	for _, sp := range spans {
		v, _ := attr(sp, "db.system")
		st, _ := attr(sp, "db.statement")
		if sp.Name() != "SET" || sp.SpanKind() != trace.SpanKindClient || v.AsString() != "redis" || !strings.HasPrefix(st.AsString(), "SET item:") {
			t.Errorf("span %q %s: %v", sp.Name(), sp.SpanKind(), sp.Attributes())
		}
	}
}
