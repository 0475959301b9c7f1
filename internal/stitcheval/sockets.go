package stitcheval

import (
	"cmp"
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Caller sockets. A share of the services (Params.CallerSocket) record on their
// SERVER spans where each request came from, as the SDKs do: the peer's
// address and port (network.peer.*, net.sock.peer.* in the legacy style). A
// caller process keeps a pool of connections to each callee process, reused
// one request at a time (HTTP/1.1 keep-alive); a gRPC caller multiplexes all
// its calls on one connection. Behind a sidecar proxy (a quarter of the
// recording services) every request comes from 127.0.0.6, on the proxy's own
// connections, whoever the caller: the address then says nothing.

// addressOf is the IP address of a process's host (its pod, container or
// machine).
func (g *generator) addressOf(pi int, hosts map[string]string) string {
	h := g.procs[pi].host
	if a, ok := hosts[h]; ok {
		return a
	}
	a := fmt.Sprintf("10.%d.%d.%d", 1+len(hosts)/65025, 1+len(hosts)/255%255, 1+len(hosts)%255)
	hosts[h] = a
	return a
}

// callerSockets writes the caller socket attributes of the recording services'
// SERVER spans, once every request is placed in time.
func (g *generator) callerSockets() {
	if g.p.CallerSocket == 0 {
		return
	}
	r := g.sock
	records, proxied := make([]bool, len(g.svcs)), make([]bool, len(g.svcs))
	for i := range g.svcs {
		records[i], proxied[i] = chance(r, g.p.CallerSocket), chance(r, 0.25)
	}
	// Each pool's calls in time order: the CLIENT span of every recorded call.
	type pool struct{ caller, callee int }
	calls := map[pool][]int32{}
	for i := range g.spans {
		sp := &g.spans[i]
		if sp.kind != ptrace.SpanKindServer || sp.parent < 0 || g.spans[sp.parent].kind != ptrace.SpanKindClient {
			continue
		}
		callee := g.res[sp.res].proc
		if !records[g.procs[callee].svc] {
			continue
		}
		caller := g.res[g.spans[sp.parent].res].proc
		if proxied[g.procs[callee].svc] {
			caller = -1 - callee // the sidecar: one pool for every caller
		}
		calls[pool{caller, callee}] = append(calls[pool{caller, callee}], int32(i))
	}
	hosts := map[string]string{}
	keys := make([]pool, 0, len(calls))
	for k := range calls {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b pool) int { return cmp.Or(cmp.Compare(a.caller, b.caller), cmp.Compare(a.callee, b.callee)) })
	for _, k := range keys {
		l := calls[k]
		at := func(i int32) (int64, int64) {
			cl := &g.spans[g.spans[i].parent]
			return cl.start + g.offset[cl.req], cl.end + g.offset[cl.req]
		}
		slices.SortFunc(l, func(a, b int32) int { sa, _ := at(a); sb, _ := at(b); return cmp.Compare(sa, sb) })
		address, multiplexed := "127.0.0.6", false
		if k.caller >= 0 {
			address, multiplexed = g.addressOf(k.caller, hosts), g.svcs[g.procs[k.callee].svc].grpc
		}
		var free []int64 // each open connection's busy-until time
		var ports []int
		for _, i := range l {
			start, end := at(i)
			c := -1
			for j, until := range free {
				if multiplexed || until <= start {
					c = j
					break
				}
			}
			if c < 0 {
				c = len(free)
				free, ports = append(free, 0), append(ports, 32768+r.IntN(28000))
			}
			free[c] = max(free[c], end)
			g.recordCaller(i, address, ports[c])
		}
	}
}

func (g *generator) recordCaller(i int32, address string, port int) {
	sp := &g.spans[i]
	attrs := slices.Clip(sp.attrs)
	if g.svcs[g.res[sp.res].svc].legacy {
		sp.attrs = append(attrs, str("net.sock.peer.addr", address), num("net.sock.peer.port", port))
		return
	}
	sp.attrs = append(attrs, str("network.peer.address", address), num("network.peer.port", port), str("client.address", address))
}
