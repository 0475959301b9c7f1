package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestInjectClient(t *testing.T) {
	type seen struct {
		method, path, auth string
		body               map[string]any
	}
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{method: r.Method, path: r.URL.Path, auth: r.Header.Get("Authorization")}
		data, _ := io.ReadAll(r.Body)
		if len(data) > 0 {
			if err := json.Unmarshal(data, &s.body); err != nil {
				t.Errorf("bad JSON: %s", data)
			}
		}
		got = append(got, s)
		switch {
		case r.URL.Path == "/v1/leases/nope":
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":"no lease nope"}`)
		case r.Method == http.MethodPost && r.URL.Path == "/v1/leases":
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"id":"l1","expires":"2030-01-01T00:00:00Z"}`)
		default:
			io.WriteString(w, `{"id":"l1","state":"active"}`)
		}
	}))
	defer srv.Close()
	t.Setenv("INJECTOR_TOKEN", "s3cret")

	code, out, errs := runCLI(t, "", "inject", "delay", "--endpoint", srv.URL, "--link", "10.0.0.2:3306", "--amplitude", "5ms", "--period", "8s", "--cycles", "4")
	if code != 0 || !strings.Contains(out, `"id":"l1"`) {
		t.Fatalf("delay: exit %d, out %q, err %q", code, out, errs)
	}
	req := got[0]
	if req.method != http.MethodPost || req.path != "/v1/leases" || req.auth != "Bearer s3cret" {
		t.Fatalf("request %+v", req)
	}
	wave := req.body["wave"].(map[string]any)
	link := req.body["target"].(map[string]any)["link"].(map[string]any)
	if req.body["kind"] != "delay" || wave["amplitude"] != 5.0 || wave["period"] != "8s" || wave["cycles"] != 4.0 ||
		link["dst"] != "10.0.0.2" || link["dst_port"] != 3306.0 || link["proto"] != "tcp" {
		t.Fatalf("lease request %+v", req.body)
	}

	if code, _, errs := runCLI(t, "", "inject", "capacity", "--endpoint", srv.URL, "--cgroup", "app", "--amplitude", "0.2"); code != 0 {
		t.Fatalf("capacity: exit %d: %s", code, errs)
	}
	if got[1].body["target"].(map[string]any)["cgroup"] != "app" {
		t.Fatalf("capacity request %+v", got[1].body)
	}
	if _, has := got[1].body["wave"].(map[string]any)["floor"]; has {
		t.Fatalf("no --floor, no floor: %+v", got[1].body)
	}
	if code, _, errs := runCLI(t, "", "inject", "capacity", "--endpoint", srv.URL, "--cgroup", "app", "--amplitude", "0.2", "--floor", "-0.1"); code != 0 {
		t.Fatalf("centered capacity: exit %d: %s", code, errs)
	}
	if f := got[2].body["wave"].(map[string]any)["floor"]; f != -0.1 {
		t.Fatalf("capacity --floor -0.1 sent floor %v", f)
	}
	if code, _, errs := runCLI(t, "", "inject", "delay", "--endpoint", srv.URL, "--link", "10.0.0.2:3306", "--amplitude", "5ms", "--floor", "300us"); code != 0 {
		t.Fatalf("delay floor: exit %d: %s", code, errs)
	}
	if f := got[3].body["wave"].(map[string]any)["floor"]; f != 0.3 {
		t.Fatalf("delay --floor 300us sent floor %v", f)
	}
	for _, c := range []struct{ sub, method, path string }{
		{"status", http.MethodGet, "/v1/leases/l1"},
		{"renew", http.MethodPost, "/v1/leases/l1/renew"},
		{"stop", http.MethodDelete, "/v1/leases/l1"},
	} {
		if code, _, errs := runCLI(t, "", "inject", c.sub, "l1", "--endpoint", srv.URL); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.sub, code, errs)
		}
		if last := got[len(got)-1]; last.method != c.method || last.path != c.path {
			t.Fatalf("%s sent %s %s", c.sub, last.method, last.path)
		}
	}
	if code, _, errs := runCLI(t, "", "inject", "status", "--endpoint", srv.URL, "nope"); code != 1 || !strings.Contains(errs, "no lease nope") {
		t.Fatalf("unknown lease: exit %d: %s", code, errs)
	}
	for _, args := range [][]string{
		{"inject"},
		{"inject", "warp"},
		{"inject", "delay", "--link", "nohost", "--amplitude", "5ms"},
		{"inject", "delay", "--link", "10.0.0.2:1", "--amplitude", "fast"},
		{"inject", "cpufreq", "--amplitude", "100000"},
		{"inject", "status"},
		{"inject", "cpufreq", "--cpus", "0", "--amplitude", "100000", "--floor", "1"},
		{"inject", "capacity", "--cgroup", "app", "--amplitude", "0.2", "--floor", "half"},
	} {
		if code, _, _ := runCLI(t, "", args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}
