package injector

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/extension/extensiontest"

	"github.com/tierscope/tierscope/injector/internal/metadata"
	"github.com/tierscope/tierscope/internal/authtest"
	"github.com/tierscope/tierscope/internal/leaseapi"
	"github.com/tierscope/tierscope/internal/nfqdelay"
	"github.com/tierscope/tierscope/internal/wave"
)

var sweeps atomic.Int32

// Tests never touch the host's iptables: go test runs packages in parallel,
// and nfqdelay's own tests hold tagged rules.
func init() {
	sweepStale = func() (int, error) { sweeps.Add(1); return 0, nil }
	startWatchdogFn = func(string) (*watchdog, error) { return nil, nil } // TestWatchdog* start their own
}

// fakeClock fires timers only when advanced.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*fakeTimer]struct{}
}

type fakeTimer struct {
	c        *fakeClock
	deadline time.Time
	ch       chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), timers: map[*fakeTimer]struct{}{}}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) wave.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, deadline: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
	} else {
		c.timers[t] = struct{}{}
	}
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, ok := t.c.timers[t]
	delete(t.c.timers, t)
	return ok
}

func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t := range c.timers {
		if !t.deadline.After(c.now) {
			t.ch <- c.now
			delete(c.timers, t)
		}
	}
}

// waitTimers waits until n timers are pending, so an Advance reaches them.
func (c *fakeClock) waitTimers(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return c.pending() >= n }, 5*time.Second, time.Millisecond)
}

// fakeDelay stands in for nfqdelay. Like the real Delayer, its Done is
// closed when it stops, which Restore does.
type fakeDelay struct {
	mu       sync.Mutex
	values   []float64
	restored int
	done     chan struct{}
	cause    error
}

// ruleGone stops the fake as nfqdelay stops when its rule is deleted.
func (f *fakeDelay) ruleGone() {
	f.mu.Lock()
	f.cause = nfqdelay.ErrRuleGone
	f.mu.Unlock()
	close(f.done)
}

func (f *fakeDelay) Cause() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cause
}

func newFakeDelay() *fakeDelay { return &fakeDelay{done: make(chan struct{})} }

func (f *fakeDelay) Done() <-chan struct{} { return f.done }

func (f *fakeDelay) Apply(v float64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.values = append(f.values, v)
	return nil
}

func (f *fakeDelay) Restore() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restored++
	if f.restored == 1 && f.cause == nil {
		// The Delayer closes Done first, then takes a grace period to
		// accept late packets before its Stop returns.
		close(f.done)
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

func (f *fakeDelay) Stats() any { return leaseapi.DelayStats{Count: 7, MeanMs: 5} }

func (f *fakeDelay) last() (float64, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.values) == 0 {
		return -1, f.restored
	}
	return f.values[len(f.values)-1], f.restored
}

type testHost struct {
	ext map[component.ID]component.Component
}

func (h testHost) GetExtensions() map[component.ID]component.Component { return h.ext }

type env struct {
	t     *testing.T
	url   string
	inj   *injector
	clock *fakeClock
	delay []*fakeDelay
	mu    sync.Mutex
	hdr   string
}

func (e *env) fakes() []*fakeDelay {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*fakeDelay(nil), e.delay...)
}

// start runs an injector on a free loopback port with a fake clock and a
// fake delay backend; sysfs and cgroup roots are fake trees.
func start(t *testing.T, mutate func(*Config)) *env {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.NetAddr.Endpoint = "127.0.0.1:0"
	cfg.Allowlist = Allowlist{
		Links:   []string{"10.1.0.0/16"},
		Ports:   []uint16{8080, 5432},
		Cgroups: []string{"tierscope.slice"},
		CPUs:    []int{0, 1},
	}
	cfg.SysfsRoot = fakeSysfs(t, 2)
	cfg.CgroupRoot = fakeCgroup(t, "tierscope.slice/app")
	cfg.Insecure = true
	cfg.StateDir = t.TempDir()
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	e := &env{t: t, clock: newFakeClock()}
	e.inj = newInjector(extensiontest.NewNopSettings(metadata.Type), cfg)
	e.inj.mgr.clock = e.clock
	e.inj.mgr.openers[kindDelay] = func(*leaseRequest, int) (actuator, error) {
		f := newFakeDelay()
		e.mu.Lock()
		e.delay = append(e.delay, f)
		e.mu.Unlock()
		return f, nil
	}
	authID := component.MustNewID("tokenauth")
	host := testHost{ext: map[component.ID]component.Component{authID: authtest.Token{}}}
	if cfg.Auth.HasValue() {
		e.hdr = authtest.Header
	}
	require.NoError(t, e.inj.Start(context.Background(), host))
	t.Cleanup(func() { _ = e.inj.Shutdown(context.Background()) })
	e.inj.mu.Lock()
	e.url = "http://" + e.inj.addr
	e.inj.mu.Unlock()
	return e
}

func (e *env) do(method, path, body string) (int, map[string]any) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	require.NoError(e.t, err)
	if e.hdr != "" {
		req.Header.Set("Authorization", e.hdr)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

func (e *env) state(id string) string {
	_, st := e.do("GET", "/v1/leases/"+id, "")
	s, _ := st["state"].(string)
	return s
}

// fakeSysfs builds n CPUs on the ondemand governor at 2 GHz.
func fakeSysfs(t *testing.T, n int) string {
	root := t.TempDir()
	for cpu := range n {
		dir := filepath.Join(root, fmt.Sprintf("cpu%d", cpu), "cpufreq")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for name, v := range map[string]string{
			"scaling_available_governors": "performance powersave userspace ondemand",
			"scaling_governor":            "ondemand",
			"cpuinfo_min_freq":            "800000",
			"cpuinfo_max_freq":            "3000000",
			"scaling_cur_freq":            "2000000",
			"scaling_setspeed":            "<unsupported>",
		} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644))
		}
	}
	return root
}

// fakeCgroup builds a cgroup v2 directory rel with an unlimited quota.
func fakeCgroup(t *testing.T, rel string) string {
	root := t.TempDir()
	dir := filepath.Join(root, rel)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cpu.max"), []byte("max 100000\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cpu.stat"), []byte("usage_usec 10\nnr_periods 3\nnr_throttled 1\nthrottled_usec 2500\n"), 0o644))
	return root
}

func readFile(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

const delayBody = `{"kind":"delay","target":{"link":{"proto":"tcp","dst":"10.1.2.3","dst_port":8080}},"wave":{"amplitude":5,"period":"200ms"},"duration":"1s"}`

func TestAuth(t *testing.T) {
	e := start(t, func(c *Config) {
		c.Insecure = false
		c.Auth = configoptional.Some(confighttp.AuthConfig{Config: configauth.Config{AuthenticatorID: component.MustNewID("tokenauth")}})
	})
	code, _ := e.do("GET", "/v1/health", "")
	require.Equal(t, http.StatusOK, code)
	e.hdr = ""
	code, _ = e.do("GET", "/v1/health", "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = e.do("POST", "/v1/leases", delayBody)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Empty(t, e.fakes())
	e.hdr = "Bearer wrong"
	code, _ = e.do("GET", "/v1/health", "")
	require.Equal(t, http.StatusUnauthorized, code)
	require.Positive(t, sweeps.Load(), "Start sweeps stale rules")
}

func TestRequestErrors(t *testing.T) {
	e := start(t, nil)
	for name, tc := range map[string]struct {
		body string
		code int
	}{
		"malformed":       {`{"kind":`, http.StatusBadRequest},
		"unknown field":   {`{"kind":"delay","bogus":1}`, http.StatusBadRequest},
		"unknown kind":    {`{"kind":"tea","target":{"cpus":[0]},"wave":{"amplitude":1,"period":"1s"}}`, http.StatusBadRequest},
		"bad period":      {`{"kind":"cpufreq","target":{"cpus":[0]},"wave":{"amplitude":1,"period":"soon"}}`, http.StatusBadRequest},
		"short period":    {`{"kind":"cpufreq","target":{"cpus":[0]},"wave":{"amplitude":1,"period":"1ms"}}`, http.StatusBadRequest},
		"two targets":     {`{"kind":"cpufreq","target":{"cpus":[0],"cgroup":"tierscope.slice"},"wave":{"amplitude":1,"period":"1s"}}`, http.StatusBadRequest},
		"bad proto":       {`{"kind":"delay","target":{"link":{"proto":"sctp","dst":"10.1.2.3","dst_port":8080}},"wave":{"amplitude":5,"period":"1s"}}`, http.StatusBadRequest},
		"link outside":    {`{"kind":"delay","target":{"link":{"proto":"tcp","dst":"10.2.2.3","dst_port":8080}},"wave":{"amplitude":5,"period":"1s"}}`, http.StatusForbidden},
		"wide link":       {`{"kind":"delay","target":{"link":{"proto":"tcp","dst":"10.0.0.0/8","dst_port":8080}},"wave":{"amplitude":5,"period":"1s"}}`, http.StatusForbidden},
		"port outside":    {`{"kind":"delay","target":{"link":{"proto":"tcp","dst":"10.1.2.3","dst_port":22}},"wave":{"amplitude":5,"period":"1s"}}`, http.StatusForbidden},
		"cpu outside":     {`{"kind":"cpufreq","target":{"cpus":[0,7]},"wave":{"amplitude":1,"period":"1s"}}`, http.StatusForbidden},
		"cgroup outside":  {`{"kind":"capacity","target":{"cgroup":"system.slice"},"wave":{"amplitude":0.1,"period":"1s"}}`, http.StatusForbidden},
		"cgroup escape":   {`{"kind":"capacity","target":{"cgroup":"tierscope.slice/../x"},"wave":{"amplitude":0.1,"period":"1s"}}`, http.StatusBadRequest},
		"delay over cap":  {`{"kind":"delay","target":{"link":{"proto":"tcp","dst":"10.1.2.3","dst_port":8080}},"wave":{"amplitude":101,"period":"1s"}}`, http.StatusUnprocessableEntity},
		"freq over cap":   {`{"kind":"cpufreq","target":{"cpus":[0]},"wave":{"amplitude":600000,"period":"1s"}}`, http.StatusUnprocessableEntity},
		"negative floor":  {`{"kind":"delay","target":{"link":{"proto":"tcp","dst":"10.1.2.3","dst_port":8080}},"wave":{"amplitude":5,"period":"1s","floor":-1}}`, http.StatusBadRequest},
		"floor on cpus":   {`{"kind":"cpufreq","target":{"cpus":[0]},"wave":{"amplitude":1,"period":"1s","floor":0.3}}`, http.StatusBadRequest},
		"floor over cap":  {`{"kind":"delay","target":{"link":{"proto":"tcp","dst":"10.1.2.3","dst_port":8080}},"wave":{"amplitude":99,"period":"1s","floor":2}}`, http.StatusUnprocessableEntity},
		"whole capacity":  {`{"kind":"capacity","target":{"cgroup":"tierscope.slice/app"},"wave":{"amplitude":1,"period":"1s"}}`, http.StatusUnprocessableEntity},
		"lease over cap":  {`{"kind":"cpufreq","target":{"cpus":[0]},"wave":{"amplitude":1,"period":"1s"},"duration":"11m"}`, http.StatusUnprocessableEntity},
		"quota under min": {`{"kind":"capacity","target":{"cgroup":"tierscope.slice/app"},"wave":{"amplitude":0.999999,"period":"1s"}}`, http.StatusUnprocessableEntity},
		"floor under -1":  {`{"kind":"capacity","target":{"cgroup":"tierscope.slice/app"},"wave":{"amplitude":0.2,"period":"1s","floor":-1.5}}`, http.StatusBadRequest},
		"floor withholds": {`{"kind":"capacity","target":{"cgroup":"tierscope.slice/app"},"wave":{"amplitude":0.5,"period":"1s","floor":0.5}}`, http.StatusUnprocessableEntity},
		"grant unlimited": {`{"kind":"capacity","target":{"cgroup":"tierscope.slice/app"},"wave":{"amplitude":0.2,"period":"1s","floor":-0.1}}`, http.StatusUnprocessableEntity},
	} {
		code, body := e.do("POST", "/v1/leases", tc.body)
		require.Equal(t, tc.code, code, "%s: %v", name, body)
		require.NotEmpty(t, body["error"], name)
	}
	require.Empty(t, e.fakes())

	for _, r := range [][2]string{{"GET", "/v1/leases/nope"}, {"DELETE", "/v1/leases/nope"}, {"POST", "/v1/leases/nope/renew"}} {
		code, _ := e.do(r[0], r[1], "")
		require.Equal(t, http.StatusNotFound, code, r)
	}

	code, body := e.do("POST", "/v1/leases", delayBody)
	require.Equal(t, http.StatusCreated, code, body)
	// Same link, and an overlapping one (all ports of a /24 around it).
	code, _ = e.do("POST", "/v1/leases", delayBody)
	require.Equal(t, http.StatusConflict, code)
	// The other direction of the same link would hold its packets twice.
	code, _ = e.do("POST", "/v1/leases", strings.Replace(delayBody, `"dst_port":8080`, `"dst_port":8080,"direction":"in"`, 1))
	require.Equal(t, http.StatusConflict, code)
	// Another port is another link.
	code, _ = e.do("POST", "/v1/leases", strings.Replace(delayBody, "8080", "5432", 1))
	require.Equal(t, http.StatusCreated, code)
	code, _ = e.do("POST", "/v1/leases/"+body["id"].(string)+"/renew", `{"duration":"1h"}`)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	code, _ = e.do("POST", "/v1/leases/"+body["id"].(string)+"/renew", `{"duration":"x"}`)
	require.Equal(t, http.StatusBadRequest, code)
}

// A wave that runs all its cycles ends its lease as completed, although
// restoring the delay backend stops it (closes its Done), as a backstop
// would. A coordinator killed mid-window leaves its lease to end this way.
func TestDelayWaveCompletesAsCompleted(t *testing.T) {
	e := start(t, nil)
	code, body := e.do("POST", "/v1/leases", `{"kind":"delay","target":{"link":{"proto":"tcp","dst":"10.1.2.3","dst_port":8080}},"wave":{"amplitude":5,"period":"200ms","cycles":2},"duration":"10s"}`)
	require.Equal(t, http.StatusCreated, code, body)
	id := body["id"].(string)
	for range 4 { // the two cycles' edges
		e.clock.waitTimers(t, 2) // the next edge and the expiry
		e.clock.Advance(100 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return e.state(id) != stateActive }, 5*time.Second, time.Millisecond)
	_, st := e.do("GET", "/v1/leases/"+id, "")
	require.Equal(t, stateCompleted, st["state"], st)
	require.Empty(t, st["error"])
	_, restored := e.fakes()[0].last()
	require.Equal(t, 1, restored)
}

func TestDelayLeaseExpiresAndRenews(t *testing.T) {
	e := start(t, nil)
	code, body := e.do("POST", "/v1/leases", delayBody)
	require.Equal(t, http.StatusCreated, code, body)
	id := body["id"].(string)
	exp, err := time.Parse(time.RFC3339Nano, body["expires"].(string))
	require.NoError(t, err)
	require.Equal(t, e.clock.Now().Add(time.Second), exp)

	f := e.fakes()[0]
	require.Eventually(t, func() bool { v, _ := f.last(); return v == 5 }, 5*time.Second, time.Millisecond, "on-phase applied at start")
	e.clock.waitTimers(t, 2) // the wave's next edge and the expiry
	e.clock.Advance(100 * time.Millisecond)
	require.Eventually(t, func() bool { v, _ := f.last(); return v == 0 }, 5*time.Second, time.Millisecond, "off-phase")

	_, st := e.do("GET", "/v1/leases/"+id, "")
	require.Equal(t, stateActive, st["state"])
	require.Equal(t, float64(7), st["stats"].(map[string]any)["count"])

	// Renew for 1s at t=100ms: the lease now expires at 1.1s.
	code, body = e.do("POST", "/v1/leases/"+id+"/renew", "")
	require.Equal(t, http.StatusOK, code, body)
	e.clock.waitTimers(t, 2)
	e.clock.Advance(900 * time.Millisecond) // t = 1s: would have expired
	e.clock.waitTimers(t, 2)
	require.Equal(t, stateActive, e.state(id))

	// At exactly the expiry the lease ends without any further time passing.
	e.clock.Advance(100 * time.Millisecond)
	require.Eventually(t, func() bool { return e.state(id) == stateExpired }, 5*time.Second, time.Millisecond)
	v, restored := f.last()
	require.Equal(t, float64(0), v)
	require.Equal(t, 1, restored)

	code, _ = e.do("POST", "/v1/leases/"+id+"/renew", "")
	require.Equal(t, http.StatusConflict, code)
	// The target is free again.
	code, _ = e.do("POST", "/v1/leases", delayBody)
	require.Equal(t, http.StatusCreated, code)
	// DELETE forgets an ended lease.
	code, _ = e.do("DELETE", "/v1/leases/"+id, "")
	require.Equal(t, http.StatusOK, code)
	code, _ = e.do("GET", "/v1/leases/"+id, "")
	require.Equal(t, http.StatusNotFound, code)
}

// TestLeaseFailsWhenItsRuleGoes: a delay lease whose rule another process
// deleted reports failed at once, naming why, and frees its target.
func TestLeaseFailsWhenItsRuleGoes(t *testing.T) {
	e := start(t, nil)
	code, body := e.do("POST", "/v1/leases", delayBody)
	require.Equal(t, http.StatusCreated, code, body)
	id := body["id"].(string)
	require.Equal(t, stateActive, e.state(id))
	e.fakes()[0].ruleGone()
	require.Eventually(t, func() bool { return e.state(id) == stateFailed }, 5*time.Second, time.Millisecond)
	_, st := e.do("GET", "/v1/leases/"+id, "")
	require.Contains(t, st["error"], "deleted by another process")
	code, _ = e.do("POST", "/v1/leases", delayBody)
	require.Equal(t, http.StatusCreated, code)
}

func TestCPUFreqLeaseShutdownRestores(t *testing.T) {
	e := start(t, nil)
	cpu := func(n int, f string) string {
		return readFile(t, filepath.Join(e.inj.cfg.SysfsRoot, fmt.Sprintf("cpu%d", n), "cpufreq", f))
	}
	code, body := e.do("POST", "/v1/leases", `{"kind":"cpufreq","target":{"cpus":[0,1]},"wave":{"amplitude":200000,"period":"1s","cycles":3}}`)
	require.Equal(t, http.StatusCreated, code, body)
	id := body["id"].(string)
	require.Eventually(t, func() bool { return cpu(0, "scaling_setspeed") == "1800000" }, 5*time.Second, time.Millisecond)
	require.Equal(t, "userspace", cpu(1, "scaling_governor"))
	// The fake sysfs file is truncated, then written: poll, as for cpu0, rather
	// than catch a write half done.
	require.Eventually(t, func() bool { return cpu(1, "scaling_setspeed") == "1800000" }, 5*time.Second, time.Millisecond)

	code, _ = e.do("POST", "/v1/leases", `{"kind":"cpufreq","target":{"cpus":[1]},"wave":{"amplitude":1,"period":"1s"}}`)
	require.Equal(t, http.StatusConflict, code)

	e.clock.waitTimers(t, 2)
	e.clock.Advance(500 * time.Millisecond)
	require.Eventually(t, func() bool { return cpu(0, "scaling_setspeed") == "2000000" }, 5*time.Second, time.Millisecond)
	_, st := e.do("GET", "/v1/leases/"+id, "")
	require.Equal(t, float64(2000000), st["stats"].(map[string]any)["base_khz"])
	require.Equal(t, float64(200000), st["stats"].(map[string]any)["step_khz"], "the step the on-phases took")

	require.NoError(t, e.inj.Shutdown(context.Background()))
	for n := range 2 {
		require.Equal(t, "ondemand", cpu(n, "scaling_governor"))
	}
	require.Equal(t, stateStopped, e.inj.mgr.leases[id].status().State)
}

func TestCapacityLeaseRestoresOnDelete(t *testing.T) {
	e := start(t, nil)
	cpuMax := filepath.Join(e.inj.cfg.CgroupRoot, "tierscope.slice", "app", "cpu.max")
	code, body := e.do("POST", "/v1/leases", `{"kind":"capacity","target":{"cgroup":"tierscope.slice/app"},"wave":{"amplitude":0.25,"period":"400ms"}}`)
	require.Equal(t, http.StatusCreated, code, body)
	id := body["id"].(string)
	// Poll until a quota parses: the fake file is truncated, then written.
	var quota, period int
	require.Eventually(t, func() bool {
		_, err := fmt.Sscanf(readFile(t, cpuMax), "%d %d", &quota, &period)
		return err == nil
	}, 5*time.Second, time.Millisecond)
	require.Equal(t, 100000, period)
	require.InDelta(t, 0.75*100000*float64(runtime.NumCPU()), quota, 1)

	e.clock.waitTimers(t, 2)
	e.clock.Advance(200 * time.Millisecond)
	require.Eventually(t, func() bool { return readFile(t, cpuMax) == "max 100000" }, 5*time.Second, time.Millisecond, "off-phase restores")
	e.clock.waitTimers(t, 2)
	e.clock.Advance(200 * time.Millisecond)
	require.Eventually(t, func() bool {
		var q, p int
		_, err := fmt.Sscanf(readFile(t, cpuMax), "%d %d", &q, &p)
		return err == nil
	}, 5*time.Second, time.Millisecond, "on again")

	// A lease on the parent cgroup conflicts.
	code, _ = e.do("POST", "/v1/leases", `{"kind":"capacity","target":{"cgroup":"tierscope.slice"},"wave":{"amplitude":0.25,"period":"400ms"}}`)
	require.Equal(t, http.StatusConflict, code)

	code, st := e.do("DELETE", "/v1/leases/"+id, "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, stateStopped, st["state"])
	require.Equal(t, float64(1), st["stats"].(map[string]any)["nr_throttled"])
	require.Equal(t, "max 100000", readFile(t, cpuMax))
}

// A centered capacity wave: the on-phases withhold a/2 of the saved quota,
// the off-phases grant a/2 above it, and the quota is back when it ends.
// A grant needs a quota to grant above and CPUs to grant.
func TestCapacityLeaseGrantsInTheOffPhases(t *testing.T) {
	e := start(t, nil)
	cpuMax := filepath.Join(e.inj.cfg.CgroupRoot, "tierscope.slice", "app", "cpu.max")
	require.NoError(t, os.WriteFile(cpuMax, []byte("50000 100000\n"), 0o644)) // 0.5 CPU
	code, body := e.do("POST", "/v1/leases", `{"kind":"capacity","target":{"cgroup":"tierscope.slice/app"},"wave":{"amplitude":0.2,"period":"400ms","floor":-0.1}}`)
	require.Equal(t, http.StatusCreated, code, body)
	id := body["id"].(string)
	require.Eventually(t, func() bool { return readFile(t, cpuMax) == "45000 100000" }, 5*time.Second, time.Millisecond, "on: 0.5·(1 − 0.1)")
	e.clock.waitTimers(t, 2)
	e.clock.Advance(200 * time.Millisecond)
	require.Eventually(t, func() bool { return readFile(t, cpuMax) == "55000 100000" }, 5*time.Second, time.Millisecond, "off: 0.5·(1 + 0.1)")
	e.clock.waitTimers(t, 2)
	e.clock.Advance(200 * time.Millisecond)
	require.Eventually(t, func() bool { return readFile(t, cpuMax) == "45000 100000" }, 5*time.Second, time.Millisecond, "on again")
	code, st := e.do("DELETE", "/v1/leases/"+id, "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, -0.1, st["stats"].(map[string]any)["floor"])
	require.Equal(t, "50000 100000", readFile(t, cpuMax), "the saved quota is back")

	// Granting past the host's CPUs is refused before anything is written.
	all := fmt.Sprintf("%d 100000", 100000*runtime.NumCPU())
	require.NoError(t, os.WriteFile(cpuMax, []byte(all+"\n"), 0o644))
	code, body = e.do("POST", "/v1/leases", `{"kind":"capacity","target":{"cgroup":"tierscope.slice/app"},"wave":{"amplitude":0.2,"period":"400ms","floor":-0.1}}`)
	require.Equal(t, http.StatusUnprocessableEntity, code, body)
	require.Contains(t, body["error"], "wave.floor")
	require.Equal(t, all, readFile(t, cpuMax))
}

func TestBackendFailure(t *testing.T) {
	e := start(t, nil)
	code, body := e.do("POST", "/v1/leases", `{"kind":"cpufreq","target":{"cpus":[0]},"wave":{"amplitude":500000,"period":"1s"}}`)
	require.Equal(t, http.StatusCreated, code, body)
	id := body["id"].(string)
	dir := filepath.Join(e.inj.cfg.SysfsRoot, "cpu0", "cpufreq")
	require.Eventually(t, func() bool { return readFile(t, filepath.Join(dir, "scaling_setspeed")) == "1500000" }, 5*time.Second, time.Millisecond)
	// The speed file turns unwritable: the next phase fails the lease.
	require.NoError(t, os.Remove(filepath.Join(dir, "scaling_setspeed")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "scaling_setspeed"), 0o755))
	e.clock.waitTimers(t, 2)
	e.clock.Advance(500 * time.Millisecond)
	require.Eventually(t, func() bool { return e.state(id) == stateFailed }, 5*time.Second, time.Millisecond)
	_, st := e.do("GET", "/v1/leases/"+id, "")
	require.Contains(t, st["error"], "scaling_setspeed")
	require.Equal(t, "ondemand", readFile(t, filepath.Join(dir, "scaling_governor")), "the governor is restored")

	// A backend that cannot open is a 500, and nothing is left reserved.
	e2 := start(t, func(c *Config) { c.SysfsRoot = filepath.Join(t.TempDir(), "missing") })
	code, body = e2.do("POST", "/v1/leases", `{"kind":"cpufreq","target":{"cpus":[0]},"wave":{"amplitude":1,"period":"1s"}}`)
	require.Equal(t, http.StatusInternalServerError, code, body)
	require.Contains(t, body["error"], "backend")
	require.Empty(t, e2.inj.mgr.leases)
}

func TestHealth(t *testing.T) {
	e := start(t, nil)
	code, body := e.do("GET", "/v1/health", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", body["status"])
	code, _ = e.do("POST", "/v1/leases", delayBody)
	require.Equal(t, http.StatusCreated, code)
	_, body = e.do("GET", "/v1/health", "")
	require.Equal(t, float64(1), body["active_leases"])
}
