package stitcheval

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Draw is one application drawn by RandomParams: every knob at once, at an
// overlap of its own.
type Draw struct {
	Params      Params
	Concurrency float64
}

// RandomParams draws every knob of the generated application at once, each
// from the range real applications span (hops of 50 µs to 5 ms, clocks 0 to
// 10 ms apart, 4 to 15 services, async work, brokers, dropped spans, spans
// without a kind, millisecond clocks, threads, identifiers), deterministically
// for draw i. The one-knob figures cannot show how the knobs interact; a
// search over draws sorted by precision does.
func RandomParams(i int) Draw {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	pick := func(v ...float64) float64 { return v[r.IntN(len(v))] }
	p := DefaultParams()
	p.Services = 4 + r.IntN(12)
	p.Depth = 1 + r.IntN(min(4, p.Services-1))
	p.MaxCalls = 1 + r.IntN(6)
	p.Async = pick(0, 0.1, 0.3, 0.5)
	p.AsyncWork = pick(0, 0.5, 1)
	p.QueueWorkers = int(pick(0, 1, 4))
	p.Drop = pick(0, 0, 0.02, 0.05)
	p.Skew = time.Duration(pick(0, 0.5, 3, 10) * float64(time.Millisecond))
	p.Unkinded = pick(0, 0, 0.25)
	p.CoarseClock = pick(0, 0, 0.25)
	p.ThreadIDs = pick(0, 0.5, 1)
	p.EventLoop = pick(0, 0, 0.5)
	p.TargetIDs = pick(0, 0.5)
	p.MessageIDs = pick(0, 1)
	p.GRPC = pick(0, 0.3, 0.7)
	p.Internal = pick(0.3, 0.7, 1)
	p.DB = pick(0.3, 0.6, 0.9)
	p.Noise = pick(0.25, 0.5, 1)
	p.HopDelay = time.Duration(pick(0.05, 0.5, 5) * float64(time.Millisecond))
	c := pick(2, 4, 8)
	p.Concurrency = c
	return Draw{Params: p, Concurrency: c}
}

// String names a draw's knobs, for a table row.
func (d Draw) String() string {
	p := d.Params
	return fmt.Sprintf("overlap %v, %d services, ≤ %d calls, async %.0f%% (work %.0f%%), broker %d, drop %.0f%%, skew %v, unkinded %.0f%%, ms clocks %.0f%%, threads %.0f%% (reactive %.0f%%), target ids %.0f%%, message ids %.0f%%, gRPC %.0f%%, noise %.2f, hop %v",
		d.Concurrency, p.Services, p.MaxCalls, 100*p.Async, 100*p.AsyncWork, p.QueueWorkers, 100*p.Drop, p.Skew, 100*p.Unkinded, 100*p.CoarseClock,
		100*p.ThreadIDs, 100*p.EventLoop, 100*p.TargetIDs, 100*p.MessageIDs, 100*p.GRPC, p.Noise, p.HopDelay)
}
