package causal

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/span"
)

// callerPairs makes pairs of concurrent, identically timed calls from two
// processes to one server, whose delays alone cannot tell the pairs' callees
// apart; when record is set, the server spans say which address and
// connection each request came from. It returns the spans and the true parent
// of each.
func callerPairs(pairs int, record bool, seed uint64) ([]span.Span, []int32) {
	r := rand.New(rand.NewPCG(seed, 1))
	const callerA, callerB, server, clientName, serverName = 0, 1, 2, 3, 4
	connA, connB, addrA, addrB := int32(-1), int32(-1), int32(-1), int32(-1)
	if record {
		connA, connB, addrA, addrB = 10, 11, 12, 13
	}
	blank := span.Span{Host: -1, Peer: -1, Endpoint: -1, Op: -1, OpClass: -1, Thread: -1, Identity: -1, Parent: -1, Caller: -1, CallerAddress: -1}
	var spans []span.Span
	var truth []int32
	ms := func(f float64) int64 { return int64(f * float64(time.Millisecond)) }
	for k := range pairs {
		t := int64(k) * ms(40)
		// Both callers span both callees: only who called from where tells.
		// Every fourth pair runs one call after the other, which timing
		// resolves, so that there is something to learn the addresses from.
		clStart, clEnd := t, t+ms(10)
		for i, who := range []int32{callerA, callerB} {
			if k%4 == 0 && i == 1 {
				t += ms(15)
				clStart, clEnd = t, t+ms(10)
			}
			in := t + ms(1+3*r.Float64())
			cl := blank
			cl.Start, cl.End, cl.Service, cl.Instance, cl.Name, cl.Kind = clStart+ms(0.3*r.Float64()), clEnd+ms(0.3*r.Float64()), who, who, clientName, span.KindClient
			sv := blank
			sv.Start, sv.End, sv.Service, sv.Instance, sv.Name, sv.Kind, sv.Orphan = in, in+ms(2+3*r.Float64()), server, server, serverName, span.KindServer, true
			sv.Caller, sv.CallerAddress = []int32{connA, connB}[i], []int32{addrA, addrB}[i]
			spans = append(spans, cl, sv)
			truth = append(truth, -1, int32(len(spans)-2))
		}
	}
	return spans, truth
}

// TestCallerAddressTellsConcurrentCallsApart checks that the caller's address
// on a SERVER span resolves calls that timing cannot, and that a server that
// records no address is stitched as before.
func TestCallerAddressTellsConcurrentCallsApart(t *testing.T) {
	right := func(record bool) (float64, float64) {
		spans, truth := callerPairs(300, record, 7)
		res, err := Stitch(spans, DefaultStitchConfig())
		if err != nil {
			t.Fatal(err)
		}
		var n, ok, written, writtenOK int
		for i, want := range truth {
			if want < 0 {
				continue
			}
			n++
			if res.Parent[i] == want {
				ok++
			}
			if res.Confidence[i] >= 0.9 {
				written++
				if res.Parent[i] == want {
					writtenOK++
				}
			}
		}
		return float64(ok) / float64(n), float64(writtenOK) / float64(max(written, 1))
	}
	blind, _ := right(false)
	seen, precision := right(true)
	t.Logf("parents right: %.3f without caller addresses, %.3f with (precision at 0.9: %.3f)", blind, seen, precision)
	if blind > 0.8 {
		t.Fatalf("the scenario should be ambiguous by timing alone; got %.3f right", blind)
	}
	if seen < 0.97 || precision < 0.99 {
		t.Fatalf("with caller addresses: %.3f right, precision %.3f; want ≥ 0.97 and ≥ 0.99", seen, precision)
	}
}
