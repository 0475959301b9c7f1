package load

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var testClasses = map[string][]string{
	"browsing": {"Home", "ViewItem", "Search"},
	"ordering": {"PutBid", "StoreBid", "Login"},
}

func classOf(name string) string {
	for c, names := range testClasses {
		for _, n := range names {
			if n == name {
				return c
			}
		}
	}
	return ""
}

type hit struct {
	name string
	at   time.Time
}

// testServer is a loopback web tier stand-in that records what it receives.
type testServer struct {
	*httptest.Server
	delay  time.Duration
	status func(name string) int

	mu          sync.Mutex
	hits        []hit
	inflight    atomic.Int64
	maxInflight atomic.Int64
}

const maxHits = 200_000 // bounds the memory of a runaway test

func newTestServer(t *testing.T, delay time.Duration, status func(string) int) *testServer {
	s := &testServer{delay: delay, status: status}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /txn/{name}", func(w http.ResponseWriter, r *http.Request) {
		n := s.inflight.Add(1)
		defer s.inflight.Add(-1)
		for {
			m := s.maxInflight.Load()
			if n <= m || s.maxInflight.CompareAndSwap(m, n) {
				break
			}
		}
		name := r.PathValue("name")
		s.mu.Lock()
		if len(s.hits) < maxHits {
			s.hits = append(s.hits, hit{name, time.Now()})
		}
		s.mu.Unlock()
		if s.delay > 0 {
			tm := time.NewTimer(s.delay)
			select {
			case <-tm.C:
			case <-r.Context().Done():
				tm.Stop()
				return
			}
		}
		if s.status != nil {
			w.WriteHeader(s.status(name))
		}
		w.Write([]byte("ok"))
	})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func (s *testServer) snapshot() []hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]hit(nil), s.hits...)
}

// checkLeaks fails the test if the goroutine count has not returned to its
// value at the call once the test's other cleanups (servers) have run.
func checkLeaks(t *testing.T) {
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Fatalf("goroutines: %d, baseline %d\n%s", runtime.NumGoroutine(), base, buf)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func run(t *testing.T, ctx context.Context, o Options) Stats {
	t.Helper()
	if o.Classes == nil {
		o.Classes = testClasses
	}
	st, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// within reports whether the observed share of k in n is within z standard
// deviations of the binomial proportion p.
func within(k, n int, p, z float64) bool {
	return math.Abs(float64(k)/float64(n)-p) <= z*math.Sqrt(p*(1-p)/float64(n))
}

func TestChooserMixes(t *testing.T) {
	r := &runner{opt: Options{Seed: 7, Classes: testClasses, ThinkMean: 20 * time.Millisecond, SessionLength: 10}}
	const n = 100_000
	for mix, p := range browseProb {
		ch := r.chooser(p, kindUser, 0, 0, 1)
		perName := map[string]int{}
		browse, sessions := 0, 0
		var think time.Duration
		for range n {
			s := ch.next()
			if s.class != classOf(s.name) {
				t.Fatalf("%s: %s drawn as %s", mix, s.name, s.class)
			}
			perName[s.name]++
			if s.class == "browsing" {
				browse++
			}
			if s.last {
				sessions++
			}
			think += s.think
		}
		if !within(browse, n, p, 4) {
			t.Errorf("%s: browsing share %.4f, want %.2f", mix, float64(browse)/n, p)
		}
		// Uniform within the class: each of three names has 1/3 of it.
		for name, k := range perName {
			classN := browse
			if classOf(name) == "ordering" {
				classN = n - browse
			}
			if !within(k, classN, 1.0/3, 4) {
				t.Errorf("%s: %s has %d of %d %s draws", mix, name, k, classN, classOf(name))
			}
		}
		if l := float64(n) / float64(sessions); math.Abs(l-10) > 0.5 {
			t.Errorf("%s: mean session length %.2f, want 10", mix, l)
		}
		if m := think / n; math.Abs(float64(m-20*time.Millisecond)) > 0.02*float64(20*time.Millisecond) {
			t.Errorf("%s: mean think %v, want 20ms", mix, m)
		}
	}
}

func TestChooserOneClassOnly(t *testing.T) {
	r := &runner{opt: Options{Classes: map[string][]string{"browsing": {"Home"}}, ThinkMean: time.Second, SessionLength: 1}}
	ch := r.chooser(0.5, kindUser, 0)
	for range 100 {
		if s := ch.next(); s.name != "Home" || !s.last {
			t.Fatalf("got %+v", s)
		}
	}
}

func TestDeterministicStreams(t *testing.T) {
	r := &runner{opt: Options{Seed: 42, Classes: testClasses, ThinkMean: time.Second, SessionLength: 10}}
	a, b, c := r.chooser(0.8, kindUser, 0, 0, 3), r.chooser(0.8, kindUser, 0, 0, 3), r.chooser(0.8, kindUser, 0, 0, 4)
	same := 0
	for range 1000 {
		x, y, z := a.next(), b.next(), c.next()
		if x != y {
			t.Fatalf("same stream diverged: %+v vs %+v", x, y)
		}
		if x == z {
			same++
		}
	}
	if same > 10 {
		t.Errorf("users 3 and 4 share %d of 1000 steps", same)
	}
	s1, s2 := schedule(42, time.Hour, 10, 1), schedule(42, time.Hour, 10, 1)
	if len(s1) != len(s2) || s1[0] != s2[0] {
		t.Errorf("schedule not deterministic")
	}
}

func TestBaseUsersAndSchedule(t *testing.T) {
	if b, s, o := baseUsers(100); b != 20 || s != 30 || o != 50 {
		t.Errorf("baseUsers(100) = %d %d %d, want 20 30 50", b, s, o)
	}
	for u := 1; u < 50; u++ {
		if b, s, o := baseUsers(u); b+s+o != u || b < 0 || s < 0 || o < 0 {
			t.Errorf("baseUsers(%d) = %d %d %d", u, b, s, o)
		}
	}
	for seed := range uint64(20) {
		d := 3 * time.Hour
		ps := schedule(seed, d, 100, 10)
		if len(ps) < 3 {
			t.Errorf("seed %d: %d periods in %v", seed, len(ps), d)
		}
		for i, p := range ps {
			if exe := p.end - p.start; exe < 20*time.Minute || exe > 30*time.Minute {
				t.Errorf("seed %d: execution period %v outside the paper's [20m, 30m]", seed, exe)
			}
			if p.users < 150 || p.users > 700 || p.rate < 15 || p.rate > 70 {
				t.Errorf("seed %d: size %d users / %.1f/s outside [150, 700] / [15, 70]", seed, p.users, p.rate)
			}
			if i > 0 {
				if sl := p.start - ps[i-1].end; sl < 10*time.Minute || sl > 20*time.Minute {
					t.Errorf("seed %d: sleep period %v outside the paper's [10m, 20m]", seed, sl)
				}
			}
		}
		if last := ps[len(ps)-1]; last.start >= d {
			t.Errorf("seed %d: period starts after the run", seed)
		}
	}
}

func TestClosedLoopMix(t *testing.T) {
	checkLeaks(t)
	for mix, p := range browseProb {
		srv := newTestServer(t, 0, nil)
		st := run(t, t.Context(), Options{
			Target: srv.URL, Mix: mix, Users: 8, Seed: 3,
			Duration: 600 * time.Millisecond, ThinkMean: 2 * time.Millisecond,
		})
		hits := srv.snapshot()
		browse := 0
		for _, h := range hits {
			if classOf(h.name) == "browsing" {
				browse++
			}
		}
		n := len(hits)
		t.Logf("%s: %d requests, browsing %.3f", mix, n, float64(browse)/float64(n))
		if n < 200 {
			t.Fatalf("%s: only %d requests", mix, n)
		}
		if !within(browse, n, p, 4.5) {
			t.Errorf("%s: browsing share %.3f of %d, want %.2f", mix, float64(browse)/float64(n), n, p)
		}
		// The server may have seen requests whose responses the end of the
		// run cut short; there are at most Users of those.
		if d := int64(n) - st.Requests; d < 0 || d > 8 {
			t.Errorf("%s: server saw %d requests, stats say %d", mix, n, st.Requests)
		}
		if st.Classes["browsing"]+st.Classes["ordering"] != st.Requests || st.Errors != 0 {
			t.Errorf("%s: stats %+v", mix, st)
		}
		srv.Close()
	}
}

func TestClosedLoopConcurrency(t *testing.T) {
	checkLeaks(t)
	srv := newTestServer(t, 10*time.Millisecond, nil)
	st := run(t, t.Context(), Options{
		Target: srv.URL, Users: 5, Seed: 1, Duration: time.Second, ThinkMean: 5 * time.Millisecond,
	})
	m := srv.maxInflight.Load()
	t.Logf("requests %d, max concurrency %d, sessions %d", st.Requests, m, st.Sessions)
	if m > 5 {
		t.Errorf("max concurrency %d exceeds 5 users", m)
	}
	if m < 2 || st.Requests < 50 || st.Sessions < 5 {
		t.Errorf("load too low: max concurrency %d, %d requests, %d sessions", m, st.Requests, st.Sessions)
	}
}

func TestOpenLoopRate(t *testing.T) {
	checkLeaks(t)
	srv := newTestServer(t, 0, nil)
	const rate, dur = 150.0, 2 * time.Second
	st := run(t, t.Context(), Options{
		Target: srv.URL, Mode: "open", Rate: rate, Seed: 5, Duration: dur, SessionLength: 1,
	})
	want := rate * dur.Seconds()
	t.Logf("sessions %d (want %.0f), requests %d, rate %.1f/s", st.Sessions, want, st.Requests, st.Rate)
	if math.Abs(float64(st.Sessions)-want) > 0.25*want {
		t.Errorf("sessions %d, want %.0f ± 25%%", st.Sessions, want)
	}
	if st.Requests < st.Sessions-5 || st.Requests > st.Sessions || st.Refused != 0 {
		t.Errorf("one request per session: %+v", st)
	}
}

func TestOpenLoopMaxInFlight(t *testing.T) {
	checkLeaks(t)
	srv := newTestServer(t, 300*time.Millisecond, nil)
	st := run(t, t.Context(), Options{
		Target: srv.URL, Mode: "open", Rate: 200, Seed: 5, Duration: time.Second,
		SessionLength: 1, MaxInFlight: 5,
	})
	t.Logf("sessions %d, refused %d, max concurrency %d", st.Sessions, st.Refused, srv.maxInflight.Load())
	if m := srv.maxInflight.Load(); m > 5 {
		t.Errorf("max concurrency %d exceeds MaxInFlight 5", m)
	}
	if st.Refused < 50 || st.Sessions > 25 {
		t.Errorf("bound not applied: %+v", st)
	}
}

func TestNonstationaryVaries(t *testing.T) {
	checkLeaks(t)
	srv := newTestServer(t, 0, nil)
	start := time.Now()
	st := run(t, t.Context(), Options{
		Target: srv.URL, Mix: "nonstationary", Users: 4, Seed: 11,
		Duration: 3 * time.Second, ThinkMean: 20 * time.Millisecond,
	})
	if len(st.Processes) != 4 || len(st.Periods) < 2 {
		t.Fatalf("processes %+v periods %+v", st.Processes, st.Periods)
	}
	// Requests per second inside execution periods vs inside sleep periods,
	// leaving 50 ms at each edge for users ramping up and finishing.
	const margin = 0.05
	hits := srv.snapshot()
	var exeN, sleepN int
	var exeT, sleepT float64
	for i, p := range st.Periods {
		exeT += p.End - p.Start - 2*margin
		sleepEnd := st.Elapsed
		if i+1 < len(st.Periods) {
			sleepEnd = st.Periods[i+1].Start
		}
		if sleepEnd-p.End > 2*margin {
			sleepT += sleepEnd - p.End - 2*margin
		}
		for _, h := range hits {
			at := h.at.Sub(start).Seconds()
			switch {
			case at > p.Start+margin && at < p.End-margin:
				exeN++
			case at > p.End+margin && at < sleepEnd-margin:
				sleepN++
			}
		}
	}
	exeRate, sleepRate := float64(exeN)/exeT, float64(sleepN)/sleepT
	t.Logf("periods %+v; %.0f req/s executing, %.0f req/s sleeping", st.Periods, exeRate, sleepRate)
	if sleepRate == 0 || exeRate < 1.5*sleepRate {
		t.Errorf("load does not vary: %.0f req/s executing vs %.0f sleeping", exeRate, sleepRate)
	}
	if st.Classes["ordering"] == 0 || st.Errors != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestNonstationaryOpen(t *testing.T) {
	checkLeaks(t)
	srv := newTestServer(t, 0, nil)
	st := run(t, t.Context(), Options{
		Target: srv.URL, Mode: "open", Mix: "nonstationary", Rate: 20, Seed: 2,
		Duration: 900 * time.Millisecond, ThinkMean: 10 * time.Millisecond,
	})
	if len(st.Processes) != 4 || len(st.Periods) == 0 || st.Periods[0].Rate < 30 || st.Requests == 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestThinkTime(t *testing.T) {
	checkLeaks(t)
	srv := newTestServer(t, 0, nil)
	const mean = 20 * time.Millisecond
	run(t, t.Context(), Options{
		Target: srv.URL, Users: 1, Seed: 9, Duration: 2500 * time.Millisecond, ThinkMean: mean,
	})
	hits := srv.snapshot()
	if len(hits) < 50 {
		t.Fatalf("only %d requests", len(hits))
	}
	// A gap between requests of the single user is a think time plus a
	// loopback round trip and timer slack.
	var sum, sq float64
	for i := 1; i < len(hits); i++ {
		g := hits[i].at.Sub(hits[i-1].at).Seconds()
		sum += g
		sq += g * g
	}
	n := float64(len(hits) - 1)
	m := sum / n
	cv := math.Sqrt(sq/n-m*m) / m
	t.Logf("%d gaps, mean %.1fms, cv %.2f", len(hits)-1, m*1000, cv)
	if m < 0.8*mean.Seconds() || m > 1.6*mean.Seconds() {
		t.Errorf("mean gap %.1fms, want about %v", m*1000, mean)
	}
	if cv < 0.6 || cv > 1.4 { // exponential: cv 1; a constant think time gives about 0
		t.Errorf("gap coefficient of variation %.2f, want about 1", cv)
	}
}

func TestErrorsCounted(t *testing.T) {
	checkLeaks(t)
	srv := newTestServer(t, 0, func(name string) int {
		if classOf(name) == "ordering" {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	st := run(t, t.Context(), Options{
		Target: srv.URL, Mix: "ordering", Users: 4, Seed: 1, Duration: 400 * time.Millisecond, ThinkMean: 2 * time.Millisecond,
	})
	var sum int64
	for name, ts := range st.Transactions {
		sum += ts.Errors
		want := int64(0)
		if classOf(name) == "ordering" {
			want = ts.Count
		}
		if ts.Errors != want {
			t.Errorf("%s: %d errors of %d", name, ts.Errors, ts.Count)
		}
	}
	if st.Errors == 0 || st.Errors != sum || st.Errors != st.Classes["ordering"] {
		t.Errorf("errors %d, per transaction %d, ordering requests %d", st.Errors, sum, st.Classes["ordering"])
	}
}

func TestTransportErrorsCounted(t *testing.T) {
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	st := run(t, t.Context(), Options{
		Target: "http://" + addr, Users: 2, Duration: 200 * time.Millisecond, ThinkMean: 5 * time.Millisecond,
	})
	if st.Requests == 0 || st.Errors != st.Requests {
		t.Errorf("requests %d, errors %d", st.Requests, st.Errors)
	}
}

func TestStopsPromptly(t *testing.T) {
	checkLeaks(t)
	srv := newTestServer(t, 10*time.Second, nil)
	for _, mode := range []string{"closed", "open"} {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(200*time.Millisecond, cancel)
		t0 := time.Now()
		st := run(t, ctx, Options{Target: srv.URL, Mode: mode, Users: 3, Rate: 50, ThinkMean: time.Millisecond})
		if d := time.Since(t0); d > 1200*time.Millisecond {
			t.Errorf("%s: cancel took %v to stop", mode, d)
		}
		if st.Requests != 0 || st.Errors != 0 {
			t.Errorf("%s: requests cut short were counted: %+v", mode, st)
		}
		cancel()
	}
	t0 := time.Now()
	run(t, t.Context(), Options{Target: srv.URL, Users: 3, Duration: 300 * time.Millisecond, ThinkMean: time.Millisecond})
	if d := time.Since(t0); d > 1300*time.Millisecond {
		t.Errorf("Duration 300ms took %v", d)
	}
}

func TestProgressLines(t *testing.T) {
	checkLeaks(t)
	srv := newTestServer(t, 0, nil)
	var buf bytes.Buffer
	st := run(t, t.Context(), Options{
		Target: srv.URL, Users: 2, Duration: 450 * time.Millisecond, ThinkMean: 5 * time.Millisecond,
		Progress: &buf, ProgressEvery: 100 * time.Millisecond,
	})
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	t.Logf("%s", buf.String())
	if len(lines) < 4 || len(lines) > 6 {
		t.Fatalf("%d lines", len(lines))
	}
	for _, l := range lines {
		for _, f := range []string{"t=", "requests=", "rate=", "errors=", "users=", "p50="} {
			if !strings.Contains(l, f) {
				t.Errorf("line %q lacks %s", l, f)
			}
		}
	}
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "load done ") || !strings.Contains(last, "requests="+itoa(st.Requests)+" ") {
		t.Errorf("final line %q, requests %d", last, st.Requests)
	}
	b, err := json.Marshal(st)
	if err != nil || !bytes.Contains(b, []byte(`"transactions"`)) {
		t.Errorf("json: %v %s", err, b)
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestValidation(t *testing.T) {
	ok := Options{Target: "http://127.0.0.1:1", Users: 1, Classes: testClasses}
	cases := map[string]func(*Options){
		"Target":        func(o *Options) { o.Target = "127.0.0.1:1" },
		"Mode":          func(o *Options) { o.Mode = "half-open" },
		"Mix":           func(o *Options) { o.Mix = "random" },
		"Users":         func(o *Options) { o.Users = 0 },
		"Rate":          func(o *Options) { o.Mode = "open" },
		"Classes":       func(o *Options) { o.Classes = map[string][]string{"shopping": {"X"}} },
		"SessionLength": func(o *Options) { o.SessionLength = 0.5 },
		"Duration":      func(o *Options) { o.Duration = -1 },
	}
	for field, mutate := range cases {
		o := ok
		mutate(&o)
		if _, err := Run(t.Context(), o); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: error %v", field, err)
		}
	}
	if _, err := Run(t.Context(), Options{Target: ok.Target, Users: 1}); err == nil {
		t.Errorf("no Classes accepted")
	}
}
