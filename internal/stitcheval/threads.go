package stitcheval

import (
	"cmp"
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Threads. A share of the services (Params.ThreadIDs) record on every span the
// thread that started it (thread.id, thread.name), as the Java agent does by
// default. Each process serves requests on a pool of worker threads, taking the
// lowest-numbered idle one (as Tomcat's executor does) for the request's
// whole handler, and consumes messages on a pool of its own. A synchronous
// child starts on its parent's thread; a parallel call and @Async work start
// on a thread of an executor pool. Thread ids are reused by later requests.
// A share of the recording services (Params.EventLoop) are reactive instead:
// every span starts on whichever of a few event-loop threads runs the
// continuation, so a child's thread says little of its parent.

// Thread pools of a process, and the first thread id of each.
const (
	poolServer = iota
	poolExecutor
	poolConsumer
	pools
)

var poolName = [pools]string{"http-nio-8080-exec-%d", "task-%d", "kafka-listener-%d"}

// eventLoops is how many event-loop threads a reactive process runs.
const eventLoops = 4

type threadRef struct{ pool, n int }

// threads writes the thread attributes of the recording services' spans, once
// every request is placed in time.
func (g *generator) threads() {
	if g.p.ThreadIDs == 0 {
		return
	}
	records, reactive := make([]bool, len(g.svcs)), make([]bool, len(g.svcs))
	for i := range records {
		records[i], reactive[i] = chance(g.thread, g.p.ThreadIDs), chance(g.thread, g.p.EventLoop)
	}
	at := func(i int32) int64 { return g.spans[i].start + g.offset[g.spans[i].req] }
	order := make([]int32, len(g.spans))
	for i := range order {
		order[i] = int32(i)
	}
	// Parents start no later than their children, and come first at a tie.
	slices.SortFunc(order, func(a, b int32) int { return cmp.Or(cmp.Compare(at(a), at(b)), cmp.Compare(a, b)) })
	thread := make([]threadRef, len(g.spans))
	busy := make([][pools][]int64, len(g.procs)) // each thread's busy-until time
	for _, i := range order {
		sp := &g.spans[i]
		pi := g.res[sp.res].proc
		if reactive[g.procs[pi].svc] {
			thread[i] = threadRef{-1, 1 + g.thread.IntN(eventLoops)}
			continue
		}
		pool := -1
		switch {
		case sp.kind == ptrace.SpanKindConsumer:
			pool = poolConsumer
		case sp.parent < 0 || g.res[g.spans[sp.parent].res].proc != pi:
			pool = poolServer
		case sp.ownThread:
			pool = poolExecutor
		}
		if pool < 0 {
			thread[i] = thread[sp.parent]
			continue
		}
		threads := busy[pi][pool]
		t := slices.IndexFunc(threads, func(until int64) bool { return until <= at(i) })
		if t < 0 {
			t = len(threads)
			threads = append(threads, 0)
		}
		threads[t] = sp.end + g.offset[sp.req]
		busy[pi][pool] = threads
		thread[i] = threadRef{pool, t + 1}
	}
	for i := range g.spans {
		sp := &g.spans[i]
		if !records[g.res[sp.res].svc] {
			continue
		}
		id, name := 20+thread[i].n, fmt.Sprintf("reactor-http-epoll-%d", thread[i].n)
		if p := thread[i].pool; p >= 0 {
			id, name = 100*(p+1)+thread[i].n, fmt.Sprintf(poolName[p], thread[i].n)
		}
		sp.attrs = append(slices.Clip(sp.attrs), num("thread.id", id), str("thread.name", name))
	}
}
