package perfmodelexporter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierscope/tierscope/internal/api"
)

const coordinatorChildEnv = "TIERSCOPE_PERFMODEL_COORDINATOR_CHILD"

// coordinatorChild is the killed process of
// TestKilledCoordinatorLeavesNoInjection: a coordinator with load that
// starts a link experiment through the injector at the URL it is given and
// runs until it is killed. Its store lives in the directory the parent
// gives, since a killed child cannot remove a TempDir of its own.
func coordinatorChild(t *testing.T, arg string) {
	args := strings.Fields(arg)
	require.Len(t, args, 3, "%s=%q: want the injector URL, the echo port and a directory", coordinatorChildEnv, arg)
	injectorURL := args[0]
	echo, err := strconv.Atoi(args[1])
	require.NoError(t, err)
	te := startLiveEngine(t, "sqlite://"+filepath.Join(args[2], "p.db"), func(c *Config) {
		c.Experiments.Injector = injectorURL
		c.Experiments.Links = map[string]ExperimentLink{"front->back": {Address: fmt.Sprintf("udp://127.0.0.1:%d", echo)}}
		c.Experiments.Train.K, c.Experiments.Train.N, c.Experiments.Train.Chunks, c.Experiments.Train.Scale = 4, 32, 2, 30
	})
	startFront(t, te.engine, uint16(echo), 400)
	var ex api.Experiment
	require.Equal(t, http.StatusCreated, te.send("POST", api.PathExperiments, `{"element":"link:front->back"}`, &ex))
	fmt.Printf("EXPERIMENT %s\n", ex.ID)
	time.Sleep(3 * time.Minute) // killed long before; ends by itself if orphaned
}

// leaseCyclesKey carries a lease request's wave cycles to its response.
type leaseCyclesKey struct{}

// leaseGrant is a lease the coordinator obtained, as the proxy saw it.
type leaseGrant struct {
	id      string
	expires time.Time
	cycles  int
}

// recordingProxy forwards to the injector and reports every lease granted.
func recordingProxy(t *testing.T, injectorURL string) (string, <-chan leaseGrant) {
	t.Helper()
	target, err := url.Parse(injectorURL)
	require.NoError(t, err)
	grants := make(chan leaseGrant, 16)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method != http.MethodPost || resp.Request.URL.Path != "/v1/leases" || resp.StatusCode != http.StatusCreated {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		var granted struct {
			ID      string    `json:"id"`
			Expires time.Time `json:"expires"`
		}
		if err := json.Unmarshal(body, &granted); err != nil {
			return err
		}
		g := leaseGrant{id: granted.ID, expires: granted.Expires}
		if c, ok := resp.Request.Context().Value(leaseCyclesKey{}).(int); ok {
			g.cycles = c
		}
		select {
		case grants <- g:
		default:
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/leases" {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				Wave struct {
					Cycles int `json:"cycles"`
				} `json:"wave"`
			}
			_ = json.Unmarshal(body, &req)
			r = r.WithContext(context.WithValue(r.Context(), leaseCyclesKey{}, req.Wave.Cycles))
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, grants
}

// SIGKILL of the collector that runs the coordinator, mid active window: no
// request can release the lease any more, and the injector ends it by itself
// (the wave completes, or the lease expires), removing its NFQUEUE rule by
// the lease's own expiry at the latest. The injector is the guarantee, not
// the coordinator.
func TestKilledCoordinatorLeavesNoInjection(t *testing.T) {
	if arg, ok := os.LookupEnv(coordinatorChildEnv); ok {
		coordinatorChild(t, arg)
		return
	}
	needRoot(t)
	echo := udpEcho(t)
	inj := startInjector(t, 3320, echo)
	proxyURL, grants := recordingProxy(t, inj.url)

	cmd := reexecAsChild(t, coordinatorChildEnv, fmt.Sprintf("%s %d %s", proxyURL, echo, t.TempDir()))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		for sc := bufio.NewScanner(out); sc.Scan(); {
			t.Log("child: " + sc.Text())
		}
	}()
	// The child's output is logged to its end, which comes before the test's.
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-logged; _ = cmd.Wait() })

	// The active window's lease runs k_d+1 cycles; the adaptive cycle's one.
	var active leaseGrant
	deadline := time.After(90 * time.Second)
	for active.id == "" {
		select {
		case g := <-grants:
			t.Logf("lease %s granted: %d cycles, expires %s", g.id, g.cycles, g.expires.Format(time.RFC3339Nano))
			if g.cycles > 1 {
				active = g
			}
		case <-deadline:
			t.Fatal("the coordinator started no active window within 90 s")
		}
	}
	time.Sleep(200 * time.Millisecond) // into the wave
	require.Equal(t, "active", leaseState(t, inj.url, active.id))
	require.Positive(t, taggedRules(t, echo), "the lease's NFQUEUE rule is in place")

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	<-logged // the pipe is read to its end before Wait closes it
	_ = cmd.Wait()
	killed := time.Now()
	require.Greater(t, time.Until(active.expires), time.Second, "the lease outlives its coordinator")
	require.Equal(t, "active", leaseState(t, inj.url, active.id), "nothing released the lease at the kill")

	var state string
	for state = leaseState(t, inj.url, active.id); state == "active"; state = leaseState(t, inj.url, active.id) {
		require.True(t, time.Now().Before(active.expires.Add(2*time.Second)), "the lease outlived its expiry")
		time.Sleep(50 * time.Millisecond)
	}
	ended := time.Now()
	t.Logf("coordinator killed %.1f s before the lease's expiry; the injector ended it (%s) %.1f s after the kill, %.2f s before its expiry",
		active.expires.Sub(killed).Seconds(), state, ended.Sub(killed).Seconds(), active.expires.Sub(ended).Seconds())
	require.Contains(t, []string{"completed", "expired"}, state, "the injector, not a release, ended the lease")
	require.Zero(t, inj.activeLeases())
	require.Zero(t, taggedRules(t, echo), "no NFQUEUE rule is left")
	require.Less(t, udpRoundTrip(t, echo), 5*time.Millisecond, "the link is undelayed")
}

func leaseState(t *testing.T, injectorURL, id string) string {
	t.Helper()
	resp, err := http.Get(injectorURL + "/v1/leases/" + id)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var st struct {
		State string `json:"state"`
		Error string `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	if st.Error != "" {
		t.Logf("lease %s: %s: %s", id, st.State, st.Error)
	}
	return st.State
}

// udpRoundTrip is the best of five round trips to the echo port.
func udpRoundTrip(t *testing.T, port uint16) time.Duration {
	t.Helper()
	conn, err := net.Dial("udp4", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err)
	defer conn.Close()
	best := time.Hour
	buf := make([]byte, 16)
	for range 5 {
		start := time.Now()
		_, err := conn.Write([]byte("ping"))
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(time.Second)))
		_, err = conn.Read(buf)
		require.NoError(t, err)
		best = min(best, time.Since(start))
	}
	return best
}
