package wave

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a manual clock; Run blocks on its timers until the test
// advances it.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever timers change
}

type fakeTimer struct {
	c    *fakeClock
	at   time.Time
	ch   chan time.Time
	done bool
}

func newFakeClock(now time.Time) *fakeClock {
	return &fakeClock{now: now, changed: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	c.notifyLocked()
	return t
}

func (c *fakeClock) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.done
	t.done = true
	t.c.removeLocked(t)
	return was
}

func (c *fakeClock) removeLocked(t *fakeTimer) {
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			c.notifyLocked()
			return
		}
	}
}

// waitTimer blocks until a timer is pending and returns it, or returns nil
// when done is closed or after 5 s (reporting an error, not t.Fatal, since
// it also runs off the test goroutine).
func (c *fakeClock) waitTimer(t *testing.T, done <-chan struct{}) *fakeTimer {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		c.mu.Lock()
		if len(c.timers) > 0 {
			ft := c.timers[0]
			c.mu.Unlock()
			return ft
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			return nil
		case <-deadline:
			t.Error("no timer pending after 5s")
			return nil
		}
	}
}

// fire moves the clock to the timer's deadline and fires it.
func (c *fakeClock) fire(ft *fakeTimer) {
	if ft == nil {
		return
	}
	c.mu.Lock()
	if ft.at.After(c.now) {
		c.now = ft.at
	}
	ft.done = true
	c.removeLocked(ft)
	now := c.now
	c.mu.Unlock()
	ft.ch <- now
}

type call struct {
	at time.Time
	v  float64
}

type recorder struct {
	mu    sync.Mutex
	clock *fakeClock
	calls []call
	fail  func(n int, v float64) error
}

func (r *recorder) apply(v float64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call{r.clock.Now(), v})
	if r.fail != nil {
		return r.fail(len(r.calls), v)
	}
	return nil
}

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// drive runs w to completion, firing every timer, and returns the calls.
func drive(t *testing.T, w Wave, now time.Time, maxEdges int) ([]call, error) {
	t.Helper()
	clk := newFakeClock(now)
	rec := &recorder{clock: clk}
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = Run(context.Background(), w, clk, rec.apply)
	}()
	for i := 0; ; i++ {
		if i > maxEdges {
			t.Fatalf("more than %d edges", maxEdges)
		}
		ft := clk.waitTimer(t, done)
		if ft == nil {
			break
		}
		clk.fire(ft)
	}
	<-done
	return rec.calls, err
}

func TestValueAndNextEdge(t *testing.T) {
	w := Wave{Amplitude: 5, Period: 10 * time.Second, Cycles: 2, Start: t0}
	cases := []struct {
		dt   time.Duration
		v    float64
		next time.Duration // relative to t0; -1 means zero time
		done bool
	}{
		{-time.Second, 0, 0, false},
		{0, 5, 5 * time.Second, false},
		{4999 * time.Millisecond, 5, 5 * time.Second, false},
		{5 * time.Second, 0, 10 * time.Second, false},
		{10 * time.Second, 5, 15 * time.Second, false},
		{19 * time.Second, 0, 20 * time.Second, false},
		{20 * time.Second, 0, -1, true},
		{time.Hour, 0, -1, true},
	}
	for _, c := range cases {
		at := t0.Add(c.dt)
		if got := w.Value(at); got != c.v {
			t.Errorf("Value(%v) = %v, want %v", c.dt, got, c.v)
		}
		if got := w.Done(at); got != c.done {
			t.Errorf("Done(%v) = %v, want %v", c.dt, got, c.done)
		}
		next := w.NextEdge(at)
		if c.next < 0 {
			if !next.IsZero() {
				t.Errorf("NextEdge(%v) = %v, want zero", c.dt, next)
			}
		} else if want := t0.Add(c.next); !next.Equal(want) {
			t.Errorf("NextEdge(%v) = %v, want %v", c.dt, next.Sub(t0), c.next)
		}
	}
	// Unbounded waves never finish.
	w.Cycles = 0
	if w.Done(t0.Add(1000 * time.Hour)) {
		t.Error("unbounded wave done")
	}
}

func TestValidate(t *testing.T) {
	ok := Wave{Amplitude: 1, Period: time.Second, Start: t0}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]Wave{
		"Period":    {Amplitude: 1, Period: time.Millisecond},
		"Amplitude": {Amplitude: -1, Period: time.Second},
		"Cycles":    {Amplitude: 1, Period: time.Second, Cycles: -1},
	}
	for field, w := range cases {
		err := w.Validate()
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: got %v, want error naming the field", field, err)
		}
	}
	if err := Run(context.Background(), cases["Period"], newFakeClock(t0), func(float64) error { return nil }); err == nil {
		t.Error("Run accepted an invalid wave")
	}
}

func TestRunEdgesAndCycles(t *testing.T) {
	const period = 10 * time.Second
	start := t0.Add(3 * time.Second)
	w := Wave{Amplitude: 7, Period: period, Cycles: 3, Start: start}
	calls, err := drive(t, w, t0, 20)
	if err != nil {
		t.Fatal(err)
	}
	// 2 edges per cycle (on at k·P, off at k·P+P/2), then the restoring 0
	// at the end of the last cycle.
	if len(calls) != 2*3+1 {
		t.Fatalf("got %d calls, want 7: %v", len(calls), calls)
	}
	for k, c := range calls {
		want := start.Add(time.Duration(k) * period / 2)
		if !c.at.Equal(want) {
			t.Errorf("edge %d at %v, want %v", k, c.at.Sub(start), want.Sub(start))
		}
		wantV := 7.0
		if k%2 == 1 || k == 6 {
			wantV = 0
		}
		if c.v != wantV {
			t.Errorf("edge %d value %v, want %v", k, c.v, wantV)
		}
	}
}

func TestRunSingle(t *testing.T) {
	w := Wave{Amplitude: 2, Period: 4 * time.Second, Cycles: 5, Start: t0, Single: true}
	calls, err := drive(t, w, t0, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []call{{t0, 2}, {t0.Add(2 * time.Second), 0}}
	if len(calls) != len(want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	for i := range want {
		if !calls[i].at.Equal(want[i].at) || calls[i].v != want[i].v {
			t.Errorf("call %d = %v, want %v", i, calls[i], want[i])
		}
	}
}

func TestRunStartsMidWave(t *testing.T) {
	w := Wave{Amplitude: 1, Period: 4 * time.Second, Cycles: 1, Start: t0}
	calls, err := drive(t, w, t0.Add(time.Second), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 3 || calls[0].v != 1 || !calls[0].at.Equal(t0.Add(time.Second)) ||
		calls[1].v != 0 || !calls[1].at.Equal(t0.Add(2*time.Second)) ||
		calls[2].v != 0 || !calls[2].at.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("calls %v", calls)
	}
}

func TestRunCancelRestores(t *testing.T) {
	clk := newFakeClock(t0)
	rec := &recorder{clock: clk}
	ctx, cancel := context.WithCancel(context.Background())
	w := Wave{Amplitude: 3, Period: time.Second, Start: t0} // unbounded
	done := make(chan error, 1)
	go func() { done <- Run(ctx, w, clk, rec.apply) }()
	// Let it run two edges, then cancel during the second on-phase.
	for i := 0; i < 2; i++ {
		clk.fire(clk.waitTimer(t, nil))
	}
	clk.waitTimer(t, nil)
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if n := len(rec.calls); n != 4 || rec.calls[n-2].v != 3 || rec.calls[n-1].v != 0 {
		t.Fatalf("calls %v, want on, off, on, then restore 0", rec.calls)
	}
	clk.mu.Lock()
	defer clk.mu.Unlock()
	if len(clk.timers) != 0 {
		t.Errorf("%d timers left pending", len(clk.timers))
	}
}

func TestRunApplyErrorRestores(t *testing.T) {
	boom := errors.New("boom")
	clk := newFakeClock(t0)
	rec := &recorder{clock: clk, fail: func(n int, v float64) error {
		if n == 3 { // the second on edge
			return boom
		}
		return nil
	}}
	w := Wave{Amplitude: 3, Period: time.Second, Cycles: 10, Start: t0}
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), w, clk, rec.apply) }()
	finished := make(chan struct{})
	go func() {
		// Keep firing until Run returns.
		for {
			ft := clk.waitTimer(t, finished)
			if ft == nil {
				return
			}
			clk.fire(ft)
		}
	}()
	err := <-done
	close(finished)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if n := len(rec.calls); n != 4 || rec.calls[n-1].v != 0 {
		t.Fatalf("calls %v, want failure then restore 0", rec.calls)
	}
}

func TestRunRealClock(t *testing.T) {
	// A short real-time smoke test: two cycles of a 20 ms wave.
	var mu sync.Mutex
	var vals []float64
	w := Wave{Amplitude: 1, Period: 20 * time.Millisecond, Cycles: 2, Start: time.Now()}
	err := Run(context.Background(), w, nil, func(v float64) error {
		mu.Lock()
		defer mu.Unlock()
		vals = append(vals, v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(vals) == 0 || vals[len(vals)-1] != 0 {
		t.Fatalf("values %v, want ending in 0", vals)
	}
}
