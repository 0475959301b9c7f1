//go:build long

package perfmodelexporter

// A link experiment end to end through a real injector with real NFQUEUE
// delays on loopback: its ±10% accuracy needs a quiet machine (it passed 2 of
// 4 runs beside other builds on 2 cores), so it runs in `make e2e-long`.

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tierscope/tierscope/internal/api"
)

// TestExperimentMeasuresLinkGradientThroughRealInjector runs one link
// experiment through the API against the injector extension delaying real
// packets with NFQUEUE: the transaction that crosses the link once has
// gradient 1, the one that does not has none.
func TestExperimentMeasuresLinkGradientThroughRealInjector(t *testing.T) {
	te, inj, echo, front := linkSetup(t, 3290, 8, 3, 64, 80)

	begun := time.Now()
	phases := map[string]bool{}
	var lastETA float64
	ex := te.awaitExperiment(`{"element":"link:front->back"}`, 90*time.Second, func(ex api.Experiment) {
		if !phases[ex.Phase] {
			t.Logf("%5.1fs phase %s %.0f%% eta %.1fs", time.Since(begun).Seconds(), ex.Phase, ex.Percent, ex.ETASeconds)
		}
		phases[ex.Phase] = true
		if ex.Phase == "active" {
			lastETA = ex.ETASeconds
		}
	})
	wall := time.Since(begun)
	t.Logf("one link experiment: %v wall; last active-phase ETA %.1fs; front failures %d", wall.Round(100*time.Millisecond), lastETA, front.failures)
	require.Equal(t, "done", ex.Phase, ex.Reason)
	require.True(t, phases["training"] && phases["adaptive"] && phases["active"], "phases seen: %v", phases)
	require.Equal(t, 100.0, ex.Percent)

	byTx := map[string]api.Gradient{}
	for _, g := range ex.Gradients {
		byTx[g.Transaction] = g
		t.Logf("%s: gradient %.3f ci95 [%.3f, %.3f] snr %.1f perturbation %.2f ms", g.Transaction, g.Gradient, g.CI95[0], g.CI95[1], g.SNR, g.PerturbationMs)
	}
	g := byTx["GET /front"]
	require.InDelta(t, 1, g.Gradient, 0.1, "link gradient of the transaction crossing the link once")
	if s, ok := byTx["GET /static"]; ok {
		require.Less(t, s.CI95[0], 0.1, "the transaction that never crosses the link")
	}

	// Stored: the gradients endpoint and the list serve them.
	var gs api.Gradients
	require.Equal(t, http.StatusOK, te.send("GET", api.PathGradients+"?transaction=GET%20/front", "", &gs))
	require.Len(t, gs.Gradients, 1)
	require.Equal(t, "link:front->back", gs.Gradients[0].Element)
	require.Equal(t, g.Gradient, gs.Gradients[0].Gradient)
	var list api.Experiments
	require.Equal(t, http.StatusOK, te.send("GET", api.PathExperiments, "", &list))
	require.Len(t, list.Experiments, 1)
	require.Equal(t, "done", list.Experiments[0].Phase)

	require.Zero(t, inj.activeLeases(), "no lease after the experiment")
	require.Zero(t, taggedRules(t, echo), "no tagged rule after the experiment")
}
