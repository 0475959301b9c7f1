package blackboxreceiver

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/engine"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/framing"
)

// BenchmarkCallSpans measures turning one framed HTTP call into its CLIENT
// and SERVER spans.
func BenchmarkCallSpans(b *testing.B) {
	svc, _ := parseServices(map[string]string{"10.0.0.1": "users", "10.0.0.2": "shop"})
	cfg := defaultCapture()
	cfg.Routes = []string{"/txn/{name}"}
	cs, err := newCallSpans(&cfg, svc)
	if err != nil {
		b.Fatal(err)
	}
	call := engine.Call{
		Call: framing.Call{Protocol: framing.HTTP, ReqStart: 1, ReqEnd: 2, RespStart: 3, RespEnd: 4, ReqBytes: 80, RespBytes: 300,
			Method: "GET", Target: "/txn/Home?x=1", Status: 200},
		Client: netip.MustParseAddrPort("10.0.0.1:40000"), Server: netip.MustParseAddrPort("10.0.0.2:8080"),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	bt := newBatch(rng)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if bt.n >= 2000 {
			bt = newBatch(rng)
		}
		cs.add(bt, call)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}
