package causal

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/span"
)

// TestQueueOrderResolvesWaits feeds a FIFO queue whose waits spread over
// several messages' gaps, so that the wait alone swaps neighbours (49% of the
// best candidates right, 62% of the links written above 0.9 right, before the
// queue order was learned). The order must resolve nearly all, and what is
// written must be right: a consumer chain shifted by one message, sure of
// each link given its neighbours, is capped by the share of its offset.
func TestQueueOrderResolvesWaits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	const producer, consumer, publish, process, topic = 0, 1, 2, 3, 4
	blank := span.Span{Host: -1, Peer: -1, Endpoint: -1, Op: topic, OpClass: -1, Thread: -1, Identity: -1, Parent: -1, Caller: -1, CallerAddress: -1}
	ms := func(f float64) int64 { return int64(f * float64(time.Millisecond)) }
	var spans []span.Span
	var truth []int32
	var at, free int64
	for range 600 {
		at += ms(0.2 + 1.6*r.Float64())
		p := blank
		p.Start, p.End, p.Service, p.Instance, p.Name, p.Kind = at, at+ms(0.1+0.2*r.Float64()), producer, producer, publish, span.KindProducer
		start := max(p.End+ms(0.05+0.3*r.Float64()), free)
		c := blank
		c.Start, c.End, c.Service, c.Instance, c.Name, c.Kind, c.Orphan = start, start+ms(0.6+0.6*r.Float64()), consumer, consumer, process, span.KindConsumer, true
		free = c.End
		spans = append(spans, p, c)
		truth = append(truth, -1, int32(len(spans)-2))
	}
	res, err := Stitch(spans, DefaultStitchConfig())
	if err != nil {
		t.Fatal(err)
	}
	var n, right, written, writtenRight int
	for i, want := range truth {
		if want < 0 {
			continue
		}
		n++
		if res.Parent[i] == want {
			right++
		}
		if res.Confidence[i] >= 0.9 {
			written++
			if res.Parent[i] == want {
				writtenRight++
			}
		}
	}
	wrongD := map[int32]int{}
	for i, want := range truth {
		if want >= 0 && res.Parent[i] >= 0 && res.Parent[i] != want {
			wrongD[(res.Parent[i]-want)/2]++
		}
	}
	t.Logf("wrong by producer offset: %v", wrongD)
	t.Logf("best candidate right %d/%d, written %d (%d right)", right, n, written, writtenRight)
	if float64(right) < 0.9*float64(n) {
		t.Errorf("queue order resolved %d of %d messages; want ≥ 90%%", right, n)
	}
	if float64(writtenRight) < 0.99*float64(written) {
		t.Errorf("%d of %d links written are wrong; want ≤ 1%%", written-writtenRight, written)
	}
}
