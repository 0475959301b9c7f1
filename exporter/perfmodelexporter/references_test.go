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
	"github.com/tierscope/tierscope/internal/model"
)

// A request is a reference of a link only when its trace proves it did
// not cross: the caller called, every call at a known address, none at
// the delayed one, which other traces have shown. Anything less counts as
// crossed.
func TestElementRouteCrossedBy(t *testing.T) {
	app1 := elementRoute{caller: "web", address: "10.0.0.2:8081"}
	front := model.Span{SpanID: 1, Service: "web", Kind: model.KindServer, Transaction: "Home"}
	call := func(id uint64, service, address string) model.Span {
		return model.Span{SpanID: id, ParentID: 1, Service: service, Kind: model.KindClient, PeerAddress: address}
	}
	other := []model.Span{front, call(2, "web", "10.0.0.3:8082")}
	require.True(t, app1.crossedBy(other), "before any trace has shown the delayed address, the spans may name it otherwise")
	require.True(t, app1.crossedBy([]model.Span{front, call(2, "web", "10.0.0.2:8081")}))
	require.True(t, app1.seen)
	for name, tc := range map[string]struct {
		spans   []model.Span
		crossed bool
	}{
		"called the delayed address":            {[]model.Span{front, call(2, "web", "10.0.0.2:8081")}, true},
		"called the other replica only":         {[]model.Span{front, call(2, "web", "10.0.0.3:8082")}, false},
		"both replicas":                         {[]model.Span{front, call(2, "web", "10.0.0.3:8082"), call(3, "web", "10.0.0.2:8081")}, true},
		"another caller at the delayed address": {[]model.Span{front, call(2, "web", "10.0.0.3:8082"), call(3, "app", "10.0.0.2:8081")}, true},
		"a call at an unknown address":          {[]model.Span{front, call(2, "web", "10.0.0.3:8082"), call(3, "web", "")}, true},
		"no call from the caller":               {[]model.Span{front, call(2, "app", "10.0.0.9:5432")}, true},
		"the front alone":                       {[]model.Span{front}, true},
	} {
		require.Equal(t, tc.crossed, app1.crossedBy(tc.spans), name)
	}
	notLink := elementRoute{}
	require.True(t, notLink.crossedBy(other), "not a link: never a reference")

	r := &runner{routes: []elementRoute{app1, {caller: "web", address: "10.0.0.3:8082", seen: true}, {}}}
	require.Equal(t, gradient.Crossings(0b101), r.crossings([]model.Span{front, call(2, "web", "10.0.0.2:8081")}),
		"crossed app-1, not app-2; the non-link element counts as crossed")
}

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

// BenchmarkCrossings is the per-trace cost reference_requests adds while an
// experiment runs: a 20-span trace against four link elements.
func BenchmarkCrossings(b *testing.B) {
	spans := []model.Span{{SpanID: 1, Service: "web", Kind: model.KindServer, Transaction: "Home"}}
	for i := range 19 {
		kind, service, address := model.KindClient, "app", "10.0.0.9:5432"
		if i%4 == 0 {
			service, address = "web", "10.0.0.3:8082"
		}
		if i%2 == 1 {
			kind, address = model.KindServer, ""
		}
		spans = append(spans, model.Span{SpanID: uint64(i + 2), ParentID: 1, Service: service, Kind: kind, PeerAddress: address})
	}
	r := &runner{routes: []elementRoute{
		{caller: "web", address: "10.0.0.2:8081", seen: true}, {caller: "web", address: "10.0.0.3:8082", seen: true},
		{caller: "app", address: "10.0.0.9:5432", seen: true}, {caller: "worker", address: "10.0.0.9:5432", seen: true},
	}}
	b.ReportAllocs()
	var c gradient.Crossings
	for b.Loop() {
		c |= r.crossings(spans)
	}
	if c == 0 {
		b.Fatal("no crossing")
	}
}
