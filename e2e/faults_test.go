//go:build faults

// The fault suite (`make e2e-faults`, root): each test reproduces, against
// the real collector, a way the injector or the pipeline used to fail unsafely
// (issue 36) and asserts the safe outcome. docs/threat-model.md says what each
// one guards against.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tierscope/tierscope/testbed/netns"
)

func requireFaultRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the fault suite needs root (cgroups, network namespaces, iptables, NFQUEUE): run `make e2e-faults` as root")
	}
}

// faultProc is one collector process of a fault test.
type faultProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startFaultCollector writes cfg (JSON is YAML) to dir/name.yaml and runs the
// collector on it, inside h's network namespace when h is not nil.
func startFaultCollector(t *testing.T, dir, name string, cfg map[string]any, h *netns.Host, env ...string) *faultProc {
	t.Helper()
	bin := collectorBinary(t)
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	if h != nil {
		cmd = h.Command(context.Background(), bin, "--config", cfgPath)
	} else {
		cmd = exec.Command(bin, "--config", cfgPath)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &faultProc{t: t, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
	t.Cleanup(func() { p.stop() })
	return p
}

func (p *faultProc) pid() int { return p.cmd.Process.Pid }

// stop ends the collector gracefully (after a SIGCONT, should it be stopped).
func (p *faultProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(p.pid(), syscall.SIGCONT)
	_ = syscall.Kill(p.pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.done
	}
}

// kill9 kills the collector alone (not its watchdog) with SIGKILL.
func (p *faultProc) kill9() {
	_ = syscall.Kill(p.pid(), syscall.SIGKILL)
	<-p.done
}

// exitsWith waits for the collector to exit by itself and returns its log.
func (p *faultProc) exitsWith(timeout time.Duration) (bool, string) {
	select {
	case <-p.done:
	case <-time.After(timeout):
		return false, p.output()
	}
	return true, p.output()
}

func (p *faultProc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

func waitHealthy(t *testing.T, p *faultProc, hc *http.Client, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("the collector exited before %s answered:\n%s", url, p.output())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not answer within 30 s:\n%s", url, p.output())
}

func postJSON(t *testing.T, hc *http.Client, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return doJSON(t, hc, req)
}

func getJSONStatus(t *testing.T, hc *http.Client, url string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return doJSON(t, hc, req)
}

func doJSON(t *testing.T, hc *http.Client, req *http.Request) (int, map[string]any) {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

// injectorOnly is a collector config with the injector extension and the
// smallest pipeline the collector accepts.
func injectorOnly(t *testing.T, inj map[string]any, extra map[string]any) map[string]any {
	exts := map[string]any{"injector": inj}
	names := []string{"injector"}
	for k, v := range extra {
		exts[k] = v
		names = append([]string{k}, names...)
	}
	return map[string]any{
		"extensions": exts,
		"receivers": map[string]any{"otlp": map[string]any{"protocols": map[string]any{
			"grpc": map[string]any{"endpoint": fmt.Sprintf("127.0.0.1:%d", freePort(t))}}}},
		"exporters": map[string]any{"debug": map[string]any{}},
		"service": map[string]any{
			"extensions": names,
			"telemetry":  map[string]any{"metrics": map[string]any{"level": "none"}},
			"pipelines":  map[string]any{"traces": map[string]any{"receivers": []string{"otlp"}, "exporters": []string{"debug"}}},
		},
	}
}

// TestFaultTokenGoesOnlyToConfiguredInjectors: the perfmodel API used to let
// a caller name any injector URL and then sent the injector token there.
// Now a request naming an unconfigured URL is refused with 403 and the URL
// never sees a request; experiments off loopback need auth; an injector
// without auth, and the example without a token, refuse to start.
func TestFaultTokenGoesOnlyToConfiguredInjectors(t *testing.T) {
	requireFaultRoot(t)
	dir := t.TempDir()
	var stolen, toInjector atomic.Int32
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen.Add(1)
		t.Errorf("the thief received %s %s with Authorization %q", r.Method, r.URL, r.Header.Get("Authorization"))
	}))
	defer thief.Close()
	inj := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		toInjector.Add(1)
		http.Error(w, "not in this test", http.StatusServiceUnavailable)
	}))
	defer inj.Close()

	perfmodel := func(endpoint string) map[string]any {
		return map[string]any{
			"receivers": map[string]any{"otlp": map[string]any{"protocols": map[string]any{
				"grpc": map[string]any{"endpoint": fmt.Sprintf("127.0.0.1:%d", freePort(t))}}}},
			"exporters": map[string]any{"perfmodel": map[string]any{
				"endpoint": endpoint,
				"storage":  map[string]any{"dsn": "sqlite://" + filepath.Join(dir, "pm.db")},
				"experiments": map[string]any{
					"injector": inj.URL, "token": "fault-token",
					"links": map[string]any{"a->b": map[string]any{"address": "tcp://127.0.0.1:9"}},
				},
			}},
			"service": map[string]any{
				"telemetry": map[string]any{"metrics": map[string]any{"level": "none"}},
				"pipelines": map[string]any{"traces": map[string]any{"receivers": []string{"otlp"}, "exporters": []string{"perfmodel"}}},
			},
		}
	}
	apiPort := freePort(t)
	api := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	col := startFaultCollector(t, dir, "perfmodel", perfmodel(fmt.Sprintf("127.0.0.1:%d", apiPort)), nil)
	waitHealthy(t, col, http.DefaultClient, api+"/api/v1/health")
	for _, u := range []string{thief.URL, thief.URL + "/", strings.Replace(thief.URL, "127.0.0.1", "localhost", 1)} {
		code, body := postJSON(t, http.DefaultClient, api+"/api/v1/experiments", fmt.Sprintf(`{"element":"link:a->b","injector":%q}`, u))
		t.Logf("POST experiments naming %s: %d %v", u, code, body["error"])
		if code != http.StatusForbidden {
			t.Errorf("naming %s: %d, want 403", u, code)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if n := stolen.Load(); n != 0 {
		t.Errorf("the unconfigured URL received %d requests", n)
	}
	col.stop()

	// Experiments on an API reachable from the network, without auth: refused.
	open := startFaultCollector(t, dir, "perfmodel-open", perfmodel(fmt.Sprintf("0.0.0.0:%d", freePort(t))), nil)
	if exited, log := open.exitsWith(30 * time.Second); !exited || !strings.Contains(log, "auth") {
		t.Errorf("experiments on 0.0.0.0 without auth: exited %v, log:\n%s", exited, log)
	}
	// An injector without auth (and without insecure) refuses to start.
	noAuth := startFaultCollector(t, dir, "injector-noauth", injectorOnly(t, map[string]any{
		"endpoint": fmt.Sprintf("127.0.0.1:%d", freePort(t)), "state_dir": filepath.Join(dir, "state")}, nil), nil)
	if exited, log := noAuth.exitsWith(30 * time.Second); !exited || !strings.Contains(log, "auth") {
		t.Errorf("injector without auth: exited %v, log:\n%s", exited, log)
	}
	// insecure: true off loopback is refused too.
	wide := startFaultCollector(t, dir, "injector-wide", injectorOnly(t, map[string]any{
		"endpoint": fmt.Sprintf("0.0.0.0:%d", freePort(t)), "insecure": true, "state_dir": filepath.Join(dir, "state")}, nil), nil)
	if exited, log := wide.exitsWith(30 * time.Second); !exited || !strings.Contains(log, "loopback") {
		t.Errorf("insecure injector on 0.0.0.0: exited %v, log:\n%s", exited, log)
	}
	// The example ships no token: without INJECTOR_TOKEN it does not validate.
	cmd := exec.Command(collectorBinary(t), "validate", "--config", filepath.Join("..", "examples", "injector.yaml"))
	cmd.Env = append(os.Environ(), "INJECTOR_TOKEN=")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "token") {
		t.Errorf("examples/injector.yaml validated without INJECTOR_TOKEN (%v):\n%s", err, out)
	}
}

// fakeCgroupV2 builds a cgroup v2 directory root/rel whose cpu.max is max.
func fakeCgroupV2(t *testing.T, rel, max string) (root, cpuMax string) {
	root = t.TempDir()
	d := filepath.Join(root, rel)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	cpuMax = filepath.Join(d, "cpu.max")
	for name, v := range map[string]string{"cpu.max": max, "cpu.stat": "usage_usec 1\nnr_periods 1\nnr_throttled 0\nthrottled_usec 0\n"} {
		if err := os.WriteFile(filepath.Join(d, name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, cpuMax
}

// fakeSysfsCPU0 builds one CPU on the ondemand governor at 2 GHz.
func fakeSysfsCPU0(t *testing.T) (root, governor string) {
	root = t.TempDir()
	d := filepath.Join(root, "cpu0", "cpufreq")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{
		"scaling_available_governors": "performance powersave userspace ondemand",
		"scaling_governor":            "ondemand",
		"cpuinfo_min_freq":            "800000",
		"cpuinfo_max_freq":            "3000000",
		"scaling_cur_freq":            "2000000",
		"scaling_setspeed":            "<unsupported>",
	} {
		if err := os.WriteFile(filepath.Join(d, name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, filepath.Join(d, "scaling_governor")
}

func readTrim(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func waitFile(t *testing.T, p, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for readTrim(t, p) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s is %q after %v, want %q", p, readTrim(t, p), timeout, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func journalEntries(t *testing.T, dir string) []string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	return names
}

// TestFaultCrashRestoresQuotaAndFrequency: a kill -9 during a capacity or
// cpufreq lease used to leave the cgroup throttled (or the CPU on userspace)
// for good: the saved value lived only in memory. Now the injector journals
// it first and the next start restores it, for the cgroup v1 backend (a
// real cgroup), the v2 backend and the cpufreq backend (fake trees: this
// host has no v2 cpu controller nor cpufreq).
func TestFaultCrashRestoresQuotaAndFrequency(t *testing.T) {
	requireFaultRoot(t)
	type backend struct {
		inj      map[string]any // injector config beyond endpoint and state_dir
		lease    string
		file     string // the value the lease changes
		original string
		changed  string
	}
	cases := map[string]func(t *testing.T) backend{
		"cgroup-v1": func(t *testing.T) backend {
			const v1 = "/sys/fs/cgroup/cpu"
			name := fmt.Sprintf("tierscope-fault-%d", os.Getpid())
			dir := filepath.Join(v1, name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatalf("a real cgroup v1 cpu controller at %s is needed: %v", v1, err)
			}
			t.Cleanup(func() {
				for i := 0; i < 50 && syscall.Rmdir(dir) != nil; i++ {
					time.Sleep(20 * time.Millisecond)
				}
			})
			quota := filepath.Join(dir, "cpu.cfs_quota_us")
			if err := os.WriteFile(quota, []byte("50000"), 0o644); err != nil {
				t.Fatal(err)
			}
			return backend{
				inj:   map[string]any{"cgroup_root": v1, "allowlist": map[string]any{"cgroups": []string{name}}},
				lease: fmt.Sprintf(`{"kind":"capacity","target":{"cgroup":%q},"wave":{"amplitude":0.6,"period":"4s"},"duration":"60s"}`, name),
				file:  quota, original: "50000", changed: "20000",
			}
		},
		"cgroup-v2": func(t *testing.T) backend {
			root, cpuMax := fakeCgroupV2(t, "app", "50000 100000")
			return backend{
				inj:   map[string]any{"cgroup_root": root, "allowlist": map[string]any{"cgroups": []string{"app"}}},
				lease: `{"kind":"capacity","target":{"cgroup":"app"},"wave":{"amplitude":0.6,"period":"4s"},"duration":"60s"}`,
				file:  cpuMax, original: "50000 100000", changed: "20000 100000",
			}
		},
		"cpufreq": func(t *testing.T) backend {
			root, gov := fakeSysfsCPU0(t)
			return backend{
				inj:   map[string]any{"sysfs_root": root, "allowlist": map[string]any{"cpus": []int{0}}},
				lease: `{"kind":"cpufreq","target":{"cpus":[0]},"wave":{"amplitude":100000,"period":"4s"},"duration":"60s"}`,
				file:  gov, original: "ondemand", changed: "userspace",
			}
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			b := setup(t)
			dir, state := t.TempDir(), t.TempDir()
			port := freePort(t)
			inj := map[string]any{"endpoint": fmt.Sprintf("127.0.0.1:%d", port), "insecure": true, "state_dir": state}
			for k, v := range b.inj {
				inj[k] = v
			}
			cfg := injectorOnly(t, inj, nil)
			base := fmt.Sprintf("http://127.0.0.1:%d", port)
			col := startFaultCollector(t, dir, "injector", cfg, nil)
			waitHealthy(t, col, http.DefaultClient, base+"/v1/health")
			code, body := postJSON(t, http.DefaultClient, base+"/v1/leases", b.lease)
			if code != http.StatusCreated {
				t.Fatalf("lease: %d %v", code, body)
			}
			waitFile(t, b.file, b.changed, 5*time.Second)
			if n := len(journalEntries(t, state)); n != 1 {
				t.Fatalf("%d journal entries during the lease, want 1", n)
			}
			col.kill9()
			time.Sleep(300 * time.Millisecond)
			if got := readTrim(t, b.file); got != b.changed {
				t.Fatalf("after kill -9 %s is %q: nothing should have restored it yet", b.file, got)
			}
			t.Logf("kill -9 mid-lease left %s at %q (was %q)", filepath.Base(b.file), b.changed, b.original)
			started := time.Now()
			col = startFaultCollector(t, dir, "injector", cfg, nil)
			waitHealthy(t, col, http.DefaultClient, base+"/v1/health")
			if got := readTrim(t, b.file); got != b.original {
				t.Errorf("after the restart %s is %q, want the original %q", b.file, got, b.original)
			}
			if n := journalEntries(t, state); len(n) != 0 {
				t.Errorf("journal entries left after the restore: %v", n)
			}
			t.Logf("the restart restored %q within %v", b.original, time.Since(started).Round(time.Millisecond))
			if !strings.Contains(col.output(), "restored the quotas and frequencies") {
				t.Errorf("the restart did not log the restore:\n%s", col.output())
			}
		})
	}
}

// faultLab is a client and a server namespace joined by a link, an HTTP
// server on the server side and an injector-bearing collector on the client.
type faultLab struct {
	lab      *netns.Lab
	cli, srv *netns.Host
	link     *netns.Link
	port     int
	target   string // http://server:port/
	hc       *http.Client
}

func newFaultLab(t *testing.T) *faultLab {
	t.Helper()
	c := netns.NewChain(t, "client", "server")
	lab, cli, srv, lk := c.Lab, c.Hosts[0], c.Hosts[1], c.Links[0]
	ln, err := srv.Listen("tcp4", netip.AddrPortFrom(lk.BAddr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	return &faultLab{lab: lab, cli: cli, srv: srv, link: lk, port: port,
		target: fmt.Sprintf("http://%s/", netip.AddrPortFrom(lk.BAddr, uint16(port))),
		hc:     &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: cli.DialContext, DisableKeepAlives: true}}}
}

// injector runs a collector with an injector in the client namespace.
func (l *faultLab) injector(t *testing.T, dir, name string, queueBase int) (*faultProc, string) {
	t.Helper()
	port := freePort(t)
	cfg := injectorOnly(t, map[string]any{
		"endpoint": fmt.Sprintf("127.0.0.1:%d", port), "insecure": true, "state_dir": filepath.Join(dir, "state-"+name),
		"allowlist":  map[string]any{"links": []string{l.lab.Block().String()}, "ports": []int{l.port}},
		"queue_base": queueBase, "hang_timeout": "1s", "rule_check_interval": "100ms",
	}, nil)
	p := startFaultCollector(t, dir, name, cfg, l.cli)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHealthy(t, p, l.hc, base+"/v1/health")
	return p, base
}

// get times one request over the link on a new connection.
func (l *faultLab) get(timeout time.Duration) (time.Duration, error) {
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: l.cli.DialContext, DisableKeepAlives: true}}
	start := time.Now()
	resp, err := c.Get(l.target)
	if err != nil {
		return time.Since(start), err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return time.Since(start), nil
}

// taggedRules lists the injector's rules in the client namespace, once each
// (iptables-save and iptables-legacy-save may be one backend).
func (l *faultLab) taggedRules(t *testing.T) []string {
	t.Helper()
	var rules []string
	seen := map[string]bool{}
	for _, bin := range []string{"iptables-save", "iptables-legacy-save", "iptables-nft-save"} {
		if _, err := exec.LookPath(bin); err != nil {
			continue
		}
		out, err := l.cli.Command(context.Background(), bin).Output()
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			if r := sc.Text(); strings.HasPrefix(r, "-A ") && strings.Contains(r, "tierscope-inj-") && !seen[r] {
				seen[r] = true
				rules = append(rules, r)
			}
		}
	}
	return rules
}

func (l *faultLab) delayLease(t *testing.T, base, wave string) string {
	t.Helper()
	body := fmt.Sprintf(`{"kind":"delay","target":{"link":{"proto":"tcp","dst":%q,"dst_port":%d}},"wave":%s,"duration":"2m"}`, l.link.BAddr, l.port, wave)
	code, out := postJSON(t, l.hc, base+"/v1/leases", body)
	if code != http.StatusCreated {
		t.Fatalf("delay lease: %d %v", code, out)
	}
	return out["id"].(string)
}

func (l *faultLab) leaseState(t *testing.T, base, id string) (string, string) {
	t.Helper()
	_, st := getJSONStatus(t, l.hc, base+"/v1/leases/"+id)
	s, _ := st["state"].(string)
	e, _ := st["error"].(string)
	return s, e
}

// TestFaultHangFailsOpen: a stopped (SIGSTOP) injector used to black-hole
// its delayed link, since --queue-bypass helps only when the process dies.
// Now its watchdog deletes the rules within the hang bound (1 s here) and
// new requests flow undelayed while it stays stopped; once it resumes, the
// lease that lost its rule reports failed.
func TestFaultHangFailsOpen(t *testing.T) {
	requireFaultRoot(t)
	dir := t.TempDir()
	l := newFaultLab(t)
	col, base := l.injector(t, dir, "injector", 17100)
	// A floor holds every packet 30 ms, so any request through the queue
	// takes ≥ 4 × 30 ms (handshake, request, answer, close).
	id := l.delayLease(t, base, `{"amplitude":5,"floor":30,"period":"4s"}`)
	if d, err := l.get(5 * time.Second); err != nil || d < 60*time.Millisecond {
		t.Fatalf("the lease does not delay the link: %v %v", d, err)
	}
	if got := len(l.taggedRules(t)); got == 0 {
		t.Fatal("no tagged rule during the lease")
	}

	stopped := time.Now()
	if err := syscall.Kill(col.pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	type result struct {
		at, took time.Duration
		err      error
	}
	var mu sync.Mutex
	var results []result
	var wg sync.WaitGroup
	for at := time.Duration(0); at < 4*time.Second; at += 100 * time.Millisecond {
		time.Sleep(time.Until(stopped.Add(at)))
		wg.Add(1)
		go func(at time.Duration) {
			defer wg.Done()
			took, err := l.get(8 * time.Second)
			mu.Lock()
			results = append(results, result{at, took, err})
			mu.Unlock()
		}(at)
	}
	wg.Wait()
	rulesDuring := len(l.taggedRules(t))
	if err := syscall.Kill(col.pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	var firstOK time.Duration = -1
	late, lateOK := 0, 0
	for _, r := range results {
		if r.err == nil && (firstOK < 0 || r.at+r.took < firstOK) {
			firstOK = r.at + r.took
		}
		// Requests started after the bound and a margin for the watchdog's
		// iptables run find the rules gone.
		if r.at >= 1500*time.Millisecond {
			late++
			if r.err == nil && r.took < 500*time.Millisecond {
				lateOK++
			}
		}
	}
	t.Logf("SIGSTOP for 4 s: first answer %v after the stop; %d/%d requests started ≥ 1.5 s after it answered within 500 ms; %d tagged rules while stopped",
		firstOK.Round(time.Millisecond), lateOK, late, rulesDuring)
	if firstOK < 0 || firstOK > 2500*time.Millisecond {
		t.Errorf("traffic did not flow within the bound: first answer %v after the stop", firstOK)
	}
	if late == 0 || lateOK != late {
		t.Errorf("%d of %d requests started after the bound answered within 500 ms", lateOK, late)
	}
	if rulesDuring != 0 {
		t.Errorf("%d tagged rules remained while the injector was stopped", rulesDuring)
	}
	// Resumed, the lease finds its rule gone and fails; no rule comes back.
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, msg := l.leaseState(t, base, id)
		if st == "failed" {
			t.Logf("after SIGCONT the lease is %s: %s", st, msg)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease still %q 5 s after SIGCONT", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d, err := l.get(5 * time.Second); err != nil || d > 50*time.Millisecond {
		t.Errorf("after the failed lease a request took %v (%v), want undelayed", d, err)
	}
}

// TestFaultSecondInjectorLeavesLiveRules: a second injector's start-up
// sweep used to delete every tagged rule, the first injector's live one
// included, while its lease kept reporting active. Now the sweep leaves a
// live owner's rules and the delay keeps applying; a lease whose rule is
// deleted by hand reports failed at once.
func TestFaultSecondInjectorLeavesLiveRules(t *testing.T) {
	requireFaultRoot(t)
	dir := t.TempDir()
	l := newFaultLab(t)
	_, baseA := l.injector(t, dir, "injector-a", 17200)
	id := l.delayLease(t, baseA, `{"amplitude":5,"floor":30,"period":"4s"}`)
	before := l.taggedRules(t)
	if len(before) == 0 {
		t.Fatal("no tagged rule for the first lease")
	}
	_, _ = l.injector(t, dir, "injector-b", 17300)
	after := l.taggedRules(t)
	if strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("the second injector's start changed the rules:\nbefore %q\nafter  %q", before, after)
	}
	if d, err := l.get(5 * time.Second); err != nil || d < 60*time.Millisecond {
		t.Errorf("after the second injector started a request took %v (%v): the first lease's delay no longer applies", d, err)
	}
	if st, _ := l.leaseState(t, baseA, id); st != "active" {
		t.Errorf("the first lease is %q, want active", st)
	}
	// Someone deletes the rule: the lease says so within a few checks. The
	// injector may take the link's probe rule with it as soon as the first
	// deletion shows, so a rule already gone is not an error.
	for _, r := range before {
		args := append([]string{"-D"}, splitSaveRule(strings.TrimPrefix(r, "-A "))...)
		if out, err := l.cli.Command(context.Background(), "iptables", args...).CombinedOutput(); err != nil && slices.Contains(l.taggedRules(t), r) {
			t.Fatalf("iptables %v: %v %s", args, err, out)
		}
	}
	deleted := time.Now()
	for {
		st, msg := l.leaseState(t, baseA, id)
		if st == "failed" {
			t.Logf("the lease turned failed %v after its rule was deleted: %s", time.Since(deleted).Round(time.Millisecond), msg)
			break
		}
		if time.Since(deleted) > 2*time.Second {
			t.Fatalf("lease still %q 2 s after its rule was deleted", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// splitSaveRule splits an iptables-save rule, honouring double quotes.
func splitSaveRule(s string) []string {
	var out []string
	var cur strings.Builder
	inQ := false
	for _, c := range s {
		switch {
		case c == '"':
			inQ = !inQ
		case c == ' ' && !inQ:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(c)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// vmHWM is a process's peak resident set (VmHWM), in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestFaultMemoryBoundedInBytes: causalpath with max_spans 1000 used to
// reach 2 GB of RSS on spans that each carry a 1 MiB attribute. With
// max_bytes the buffer holds 32 MiB of them, the rest leave early, and the
// collector's peak RSS stays within a budget.
func TestFaultMemoryBoundedInBytes(t *testing.T) {
	requireFaultRoot(t)
	const maxBytes, spans = 32 << 20, 400
	const budget = 320 << 20 // the collector's own ~100 MiB, gRPC buffers, GC headroom
	dir := t.TempDir()
	otlp := freePort(t)
	col := startFaultCollector(t, dir, "causalpath", map[string]any{
		"receivers": map[string]any{"otlp": map[string]any{"protocols": map[string]any{
			"grpc": map[string]any{"endpoint": fmt.Sprintf("127.0.0.1:%d", otlp)}}}},
		"processors": map[string]any{"causalpath": map[string]any{"wait": "60s", "max_spans": 1000, "max_bytes": maxBytes}},
		"exporters":  map[string]any{"debug": map[string]any{"verbosity": "basic"}},
		"service": map[string]any{
			"telemetry": map[string]any{"metrics": map[string]any{"level": "none"}},
			"pipelines": map[string]any{"traces": map[string]any{"receivers": []string{"otlp"}, "processors": []string{"causalpath"}, "exporters": []string{"debug"}}},
		},
	}, nil)
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", otlp), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(8<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)
	deadline := time.Now().Add(30 * time.Second)
	start := time.Unix(1700000000, 0)
	sent := 0
	for sent < spans {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "fat")
		s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		s.SetTraceID(pcommon.TraceID{1, byte(sent), byte(sent >> 8)})
		s.SetSpanID(pcommon.SpanID{2, byte(sent), byte(sent >> 8)})
		s.SetName("upload")
		s.SetKind(ptrace.SpanKindServer)
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Duration(sent) * time.Millisecond)))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Duration(sent)*time.Millisecond + time.Millisecond)))
		s.Attributes().PutStr("http.request.body", strings.Repeat(string(rune('a'+sent%26)), 1<<20))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := client.Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
		cancel()
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("export %d: %v\n%s", sent, err, col.output())
			}
			time.Sleep(200 * time.Millisecond) // not up yet
			continue
		}
		sent++
	}
	peak := vmHWM(t, col.pid())
	t.Logf("%d spans of 1 MiB (%d MiB) through causalpath max_spans 1000, max_bytes %d MiB: peak RSS %d MiB (budget %d MiB)",
		sent, sent, maxBytes>>20, peak>>20, budget>>20)
	if peak > budget {
		t.Errorf("peak RSS %d MiB is over the budget %d MiB", peak>>20, budget>>20)
	}
}

// TestFaultFileExporterAppends: examples/testbed.yaml's file exporter used
// to truncate its spans file on every restart. Two runs now leave the spans
// of both.
func TestFaultFileExporterAppends(t *testing.T) {
	requireFaultRoot(t)
	dir := t.TempDir()
	spansFile := filepath.Join(dir, "spans.jsonl")
	example, err := os.ReadFile(filepath.Join("..", "examples", "testbed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	send := func(name string) {
		otlp := freePort(t)
		env := []string{"TIERSCOPE_OTLP_PORT=" + strconv.Itoa(otlp), "TIERSCOPE_SPANS_FILE=" + spansFile,
			fmt.Sprintf("TIERSCOPE_API=127.0.0.1:%d", freePort(t)), "TIERSCOPE_DB=" + filepath.Join(dir, "pm.db"),
			fmt.Sprintf("TIERSCOPE_PROMETHEUS=127.0.0.1:%d", freePort(t)), fmt.Sprintf("TIERSCOPE_INJECTOR=127.0.0.1:%d", freePort(t)),
			"TIERSCOPE_INJECTOR_STATE=" + filepath.Join(dir, "injector-"+name), "INJECTOR_TOKEN=fault-token"}
		cfgPath := filepath.Join(dir, "testbed.yaml")
		if err := os.WriteFile(cfgPath, example, 0o644); err != nil {
			t.Fatal(err)
		}
		logf, _ := os.Create(filepath.Join(dir, name+".log"))
		cmd := exec.Command(collectorBinary(t), "--config", cfgPath)
		cmd.Env, cmd.Stdout, cmd.Stderr = append(os.Environ(), env...), logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", otlp), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", name)
		s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		s.SetTraceID(pcommon.TraceID{7})
		s.SetSpanID(pcommon.SpanID{byte(len(name))})
		s.SetName("run")
		now := time.Now()
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(now))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Millisecond)))
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := ptraceotlp.NewGRPCClient(conn).Export(ctx, ptraceotlp.NewExportRequestFromTraces(td))
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: export: %v", name, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// Shutdown stitches and flushes what causalpath holds.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		logf.Close()
	}
	send("first-run")
	send("second-run")
	b, err := os.ReadFile(spansFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"first-run", "second-run"} {
		if !strings.Contains(string(b), run) {
			t.Errorf("the spans file lacks the %s's span after two runs:\n%s", run, b)
		}
	}
}
