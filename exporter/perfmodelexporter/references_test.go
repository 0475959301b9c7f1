package perfmodelexporter

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierscope/tierscope/internal/gradient"
)

// TestReferenceRequestsThroughInjector: a front balancing over two back
// ends, one link delayed by the real injector. With reference_requests the
// calls to the other back end, told apart by their CLIENT spans' addresses,
// adjust the window of the transaction that calls; the one that never calls
// has no reference.
func TestReferenceRequestsThroughInjector(t *testing.T) {
	needRoot(t)
	back1, back2 := udpEcho(t), udpEcho(t)
	inj := startInjector(t, 3330, back1, back2)
	te := startLiveEngine(t, "sqlite://"+filepath.Join(t.TempDir(), "p.db"), func(c *Config) {
		c.Experiments.Injector = inj.url
		c.Experiments.Links = map[string]ExperimentLink{
			"front->back1": {Address: fmt.Sprintf("udp://127.0.0.1:%d", back1)},
			"front->back2": {Address: fmt.Sprintf("udp://127.0.0.1:%d", back2)},
		}
		c.Experiments.Train.K, c.Experiments.Train.N, c.Experiments.Train.Chunks, c.Experiments.Train.Scale = 8, 64, 3, 80
		c.Experiments.References = true
	})
	front := startBalancedFront(t, te.engine, 400, back1, back2)

	begun := time.Now()
	ex := te.awaitExperiment(`{"element":"link:front->back1"}`, 3*time.Minute, nil)
	t.Logf("one link of two replicas: %v wall; front failures %d", time.Since(begun).Round(100*time.Millisecond), front.failures)
	require.Equal(t, "done", ex.Phase, ex.Reason)
	var res gradient.Result
	require.NoError(t, json.Unmarshal(ex.Detail, &res))
	el := res.Elements[0]
	require.Equal(t, "done", el.Status, el.Error)
	g := el.Transactions["GET /front"]
	resp := el.ReferenceResponse["GET /front"]
	t.Logf("GET /front: %.3f [%.3f, %.3f] SNR %.1f, noise after/before the reference %.2f; A_d′ %.3f ms (injected %.3f); referenced %v, rejected %v (reference's response %.3f, SNR %.1f)",
		g.Gradient, g.CI95[0], g.CI95[1], g.SNR, g.CovariateNoiseRatio, el.Amplitude, el.Injected,
		el.Referenced, el.ReferenceRejected, resp.Gradient, resp.SNR)
	// The calling transaction has a reference and the static one none. On a
	// busy host the wave may reach the other back end's calls through the
	// CPU the injector shares with them; then the element rightly rejects
	// the reference and keeps the estimate without it.
	require.Equal(t, []string{"GET /front"}, append(slices.Clone(el.Referenced), el.ReferenceRejected...),
		"the calling transaction, not the static one")
	require.Contains(t, el.ReferenceResponse, "GET /front", "the reference's own response is recorded")
	if len(el.Referenced) == 1 {
		require.Greater(t, g.CovariateNoiseRatio, 0.0)
		require.Less(t, g.CovariateNoiseRatio, 1.0, "the fit can only take noise away")
	} else {
		require.True(t, resp.Significant, "a reference is rejected only for a significant response")
		require.Contains(t, el.Unreferenced, "GET /front")
		require.Equal(t, el.Unreferenced["GET /front"].Gradient, g.Gradient, "a rejected reference: the estimate is the one without it")
	}
	// Loose, as in TestExperimentMeasuresSeveralElementsAfterOneTraining: a
	// busy CI host sets the precision; half the calls cross the link.
	require.Greater(t, g.Gradient, 0.2)
	require.Less(t, g.Gradient, 0.8)
	require.Zero(t, inj.activeLeases(), "no lease after the experiment")
}
