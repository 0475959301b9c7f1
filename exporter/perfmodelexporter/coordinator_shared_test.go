package perfmodelexporter

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/store/pgtest"
)

// sharedDSN is a fresh schema on a throwaway PostgreSQL of its own (the
// package's generated TestMain cannot stop a shared one).
func sharedDSN(t *testing.T) string {
	t.Helper()
	return pgtest.OwnDSN(t)
}

// startSplitFront is startFront with its traces split by trace id over the
// engines, as the gateway's loadbalancing exporter splits them.
func startSplitFront(t *testing.T, echoPort uint16, perSecond int, engines ...*engine) *frontService {
	f := &frontService{t: t, e: engines[0], stop: make(chan struct{}), batch: ptrace.NewTraces(),
		backs: []string{fmt.Sprintf("127.0.0.1:%d", echoPort)}}
	f.split = engines
	f.wg.Add(2)
	go f.generate(perSecond)
	go f.ship()
	t.Cleanup(f.close)
	return f
}

// splitByTraceID splits td's spans over n parts by the last byte of their
// trace id (each part keeps its spans' resource).
func splitByTraceID(td ptrace.Traces, n int) []ptrace.Traces {
	parts := make([]ptrace.Traces, n)
	for i := range parts {
		parts[i] = ptrace.NewTraces()
	}
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		spans := rs.ScopeSpans().At(0).Spans()
		for k := 0; k < spans.Len(); k++ {
			sp := spans.At(k)
			tid := sp.TraceID()
			p := parts[int(tid[15])%n]
			if p.ResourceSpans().Len() == 0 {
				prs := p.ResourceSpans().AppendEmpty()
				rs.Resource().CopyTo(prs.Resource())
				prs.ScopeSpans().AppendEmpty()
			}
			sp.CopyTo(p.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty())
		}
	}
	return parts
}

// Two analyzers share a PostgreSQL and each sees half of the front requests
// (split by trace id). An experiment started on one takes the element's
// lease: the other refuses the same element, and max_concurrent counts
// across both. The coordinator measures the merged series: the other hands
// it its half through the database, so the gradient is that of all requests.
func TestSharedExperimentCoordinatedOnce(t *testing.T) {
	needRoot(t)
	dsn := sharedDSN(t)
	echo := udpEcho(t)
	inj := startInjector(t, 3350, echo)
	analyzer := func(shard string) *testEngine {
		return startLiveEngine(t, dsn, func(c *Config) {
			c.Storage.Shard = shard
			c.Experiments.Injector = inj.url
			c.Experiments.Links = map[string]ExperimentLink{"front->back": {Address: fmt.Sprintf("udp://127.0.0.1:%d", echo)}}
			c.Experiments.Train.K, c.Experiments.Train.N, c.Experiments.Train.Chunks, c.Experiments.Train.Scale = 8, 64, 3, 80
			// Below the injector's 100 ms cap with room for the delay floor:
			// an amplitude sized to max_delay plus the floor is refused (422).
			c.Experiments.MaxDelay = 50 * time.Millisecond
			// Handed-over samples arrive up to two polls later than local ones.
			c.Experiments.Lateness = c.TraceWait + 5*time.Second
		})
	}
	a, b := analyzer("analyzer-1"), analyzer("analyzer-2")
	_, _, _, shared := a.coord.SharedCounts()
	require.True(t, shared, "PostgreSQL turns shared coordination on")
	startSplitFront(t, echo, 400, a.engine, b.engine)

	var ex api.Experiment
	require.Equal(t, http.StatusCreated, a.send("POST", api.PathExperiments, `{"element":"link:front->back"}`, &ex))
	// The other analyzer refuses the element.
	require.Equal(t, http.StatusConflict, b.send("POST", api.PathExperiments, `{"element":"link:front->back"}`, nil), "the element is coordinated by analyzer-1")
	require.Zero(t, b.coord.Running(), "a refused experiment leaves nothing running")

	begun := time.Now()
	for deadline := time.Now().Add(3 * time.Minute); ex.Finished == 0; {
		require.True(t, time.Now().Before(deadline), "experiment still %s after 3 min", ex.Phase)
		time.Sleep(500 * time.Millisecond)
		id := ex.ID
		ex = api.Experiment{}
		require.Equal(t, http.StatusOK, a.send("GET", api.PathExperiments+"/"+id, "", &ex))
	}
	handed, _, droppedB, _ := b.coord.SharedCounts()
	_, taken, droppedA, _ := a.coord.SharedCounts()
	t.Logf("experiment %s in %v: analyzer-2 handed %d front samples, analyzer-1 took %d (dropped %d, %d)",
		ex.Phase, time.Since(begun).Round(time.Second), handed, taken, droppedB, droppedA)
	require.Equal(t, "done", ex.Phase, ex.Reason)
	require.Positive(t, handed)
	// What the other analyzer handed over after the experiment ended (until
	// its next poll saw the lease gone) was deleted with the lease.
	require.LessOrEqual(t, taken, handed)
	require.Greater(t, float64(taken), 0.9*float64(handed), "the handed-over samples reached the coordinator")
	var g *api.Gradient
	for i := range ex.Gradients {
		t.Logf("%s %s: gradient %.3f ci95 [%.3f, %.3f] snr %.1f", ex.Gradients[i].Element, ex.Gradients[i].Transaction, ex.Gradients[i].Gradient, ex.Gradients[i].CI95[0], ex.Gradients[i].CI95[1], ex.Gradients[i].SNR)
		if ex.Gradients[i].Transaction == "GET /front" {
			g = &ex.Gradients[i]
		}
	}
	require.NotNil(t, g)
	// One call per request crosses the link: the gradient is 1; loose as in
	// TestExperimentMeasuresSeveralElementsAfterOneTraining on a busy host.
	require.Greater(t, g.Gradient, 0.5)
	require.Less(t, g.Gradient, 2.0)

	// The lease is released as the experiment's goroutine ends, just after
	// its record says finished: then the other analyzer may coordinate it.
	var second api.Experiment
	for deadline := time.Now().Add(10 * time.Second); b.send("POST", api.PathExperiments, `{"element":"link:front->back"}`, &second) != http.StatusCreated; time.Sleep(200 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the lease was not released within 10 s of the end")
	}
	require.Equal(t, http.StatusConflict, a.send("POST", api.PathExperiments, `{"element":"link:front->back"}`, nil))
	require.Equal(t, http.StatusOK, b.send("DELETE", api.PathExperiments+"/"+second.ID, "", &second))
	require.Equal(t, "aborted", second.Phase)
	require.Zero(t, inj.activeLeases())
	// Both analyzers list both experiments from the shared store.
	var list api.Experiments
	require.Equal(t, http.StatusOK, a.send("GET", api.PathExperiments, "", &list))
	ids := []string{}
	for _, x := range list.Experiments {
		ids = append(ids, x.ID+" "+x.Phase)
	}
	require.Len(t, list.Experiments, 2, strings.Join(ids, ", "))
}
