package ingest

import (
	"maps"
	"slices"
	"strings"
)

// Bounds of the link book: how many caller→callee links it remembers, how
// many addresses per link, how many front transactions it counts requests
// of, how many (link, address, transaction) call counts and how many
// (service, transaction) server counts it keeps, and how many hops deep it
// follows a transaction's calls.
const (
	maxBookLinks        = 4096
	MaxLinkAddresses    = 8 // exported for the exporter's telemetry tests
	maxCallTransactions = 256
	maxLinkCallCounts   = 16384
	maxServerCounts     = 4096
	maxCallDepth        = 16
)

type linkKey struct{ caller, callee string }

// linkCall is one caller→callee link, at one address, on the paths of one
// front transaction.
type linkCall struct {
	link    linkKey
	address string
	tx      string
}

// serviceTx is one service on the paths of one front transaction.
type serviceTx struct{ service, tx string }

// linkBook remembers, per caller→callee link of the service graph, the
// addresses the caller's CLIENT spans called it at (server.address and
// server.port) and those of the connection inventory, so that a link experiment needs no address in the
// configuration: the delay goes on packets to that address. It is bounded;
// links and addresses past the bounds are counted, not kept.
//
// It also counts, per front transaction, the calls per request on each link
// of the request's synchronous path: they bound a link's gradient before any
// wave (a delay d on each of n calls adds at most n·d), which keeps an
// experiment's first pulse within its perturbation bound
// (gradient.Element.PriorGradients). Spans of one service reach the
// collector apart from the others', so a trace may lack a callee's subtree;
// the calls are therefore counted per hop, as fan-outs per SERVER span of
// the caller, and multiplied along the paths from the front (visits), as the
// causal paths do: a missing subtree then counts neither its calls nor its
// server spans.
type linkBook struct {
	links    map[linkKey]map[string]int64
	requests map[serviceTx]int64 // front SERVER spans: the requests
	servers  map[serviceTx]int64 // SERVER spans on the paths, the front's included
	calls    map[linkCall]int64  // CLIENT spans on the paths
	overflow int64               // entries refused, in all
	reported int64               // of overflow, already added to the telemetry
}

func newLinkBook() *linkBook {
	return &linkBook{links: map[linkKey]map[string]int64{}, requests: map[serviceTx]int64{},
		servers: map[serviceTx]int64{}, calls: map[linkCall]int64{}}
}

// takeOverflow returns the entries refused since it was last called.
func (b *linkBook) takeOverflow() int64 {
	n := b.overflow - b.reported
	b.reported = b.overflow
	return n
}

// countBounded adds one to m[k] unless m is full and lacks k, which it
// counts in *overflow; it reports whether it added.
func countBounded[K comparable](m map[K]int64, k K, limit int, overflow *int64) bool {
	if len(m) >= limit { // look before adding only when full
		if _, ok := m[k]; !ok {
			*overflow++
			return false
		}
	}
	m[k]++
	return true
}

// countRequest counts one request of a front transaction served by front;
// it reports false when the book is full and the request's spans must not be
// counted.
func (b *linkBook) countRequest(front, tx string) bool {
	return countBounded(b.requests, serviceTx{front, tx}, maxCallTransactions, &b.overflow)
}

// countServer counts one SERVER span of service on the path of a request of
// tx (the front span included).
func (b *linkBook) countServer(service, tx string) {
	countBounded(b.servers, serviceTx{service, tx}, maxServerCounts, &b.overflow)
}

// countCall counts one synchronous call on caller→callee at address within
// a request of tx.
func (b *linkBook) countCall(caller, callee, address, tx string) {
	if caller == "" || callee == "" || caller == callee {
		return
	}
	countBounded(b.calls, linkCall{linkKey{caller, callee}, address, tx}, maxLinkCallCounts, &b.overflow)
}

// callsPerRequest is, per front transaction whose requests call on
// caller→callee synchronously, its mean number of such calls per request.
func (b *linkBook) callsPerRequest(caller, callee string) map[string]float64 {
	link := linkKey{caller, callee}
	return b.perRequest(func(k linkCall) bool { return k.link == link })
}

// callsPerRequestTo is the same for the calls to one address, by any
// caller: what a delay on the packets to that address acts on.
func (b *linkBook) callsPerRequestTo(address string) map[string]float64 {
	return b.perRequest(func(k linkCall) bool { return k.address == address })
}

// perRequest sums, per transaction, the matching calls' visits·fan-out.
func (b *linkBook) perRequest(match func(linkCall) bool) map[string]float64 {
	byTx := map[string][]linkCall{}
	for k := range b.calls {
		byTx[k.tx] = append(byTx[k.tx], k)
	}
	out := map[string]float64{}
	for tx, ks := range byTx {
		visits := b.visits(tx, ks)
		sum := 0.0
		for _, k := range ks {
			if match(k) {
				sum += visits[k.link.caller] * b.fanOut(k)
			}
		}
		if sum > 0 {
			out[tx] = sum
		}
	}
	return out
}

// fanOut is a link's calls per SERVER span of its caller on tx's paths.
func (b *linkBook) fanOut(k linkCall) float64 {
	n := b.servers[serviceTx{k.link.caller, k.tx}]
	if n == 0 {
		return 0
	}
	return float64(b.calls[k]) / float64(n)
}

// visits is how many times per request of tx each service serves on its
// paths: the front's share of the requests, plus each caller's visits times
// its fan-out to the service, followed at most maxCallDepth hops.
func (b *linkBook) visits(tx string, calls []linkCall) map[string]float64 {
	var total float64
	base := map[string]float64{}
	for k, n := range b.requests {
		if k.tx == tx {
			base[k.service] += float64(n)
			total += float64(n)
		}
	}
	for service := range base {
		base[service] /= total // total > 0: requests are counted from 1
	}
	visits := maps.Clone(base)
	for range maxCallDepth {
		next := maps.Clone(base)
		for _, k := range calls {
			next[k.link.callee] += visits[k.link.caller] * b.fanOut(k)
		}
		if maps.Equal(next, visits) {
			break
		}
		visits = next
	}
	return visits
}

// learn counts one call from caller to callee at address (e.mu held; no
// allocation once the link and address are known).
func (b *linkBook) learn(caller, callee, address string) { b.learnN(caller, callee, address, 1) }

// learnN counts n uses (calls, or open connections from the inventory).
func (b *linkBook) learnN(caller, callee, address string, n int64) {
	if caller == "" || callee == "" || address == "" || caller == callee ||
		strings.HasPrefix(address, "rpc:") || strings.HasPrefix(address, "msg:") { // no host:port to delay
		return
	}
	k := linkKey{caller, callee}
	addrs, ok := b.links[k]
	if !ok {
		if len(b.links) >= maxBookLinks {
			b.overflow++
			return
		}
		addrs = map[string]int64{}
		b.links[k] = addrs
	}
	if _, ok := addrs[address]; !ok && len(addrs) >= MaxLinkAddresses {
		b.overflow++
		return
	}
	addrs[address] += n
}

// addresses returns the addresses of caller→callee, the most called first.
func (b *linkBook) addresses(caller, callee string) []string {
	addrs := b.links[linkKey{caller, callee}]
	out := make([]string, 0, len(addrs))
	for a := range addrs {
		out = append(out, a)
	}
	slices.SortFunc(out, func(x, y string) int {
		if addrs[x] != addrs[y] {
			if addrs[x] > addrs[y] {
				return -1
			}
			return 1
		}
		return strings.Compare(x, y)
	})
	return out
}

// names lists the known links as "caller->callee", sorted.
func (b *linkBook) names() []string {
	out := make([]string, 0, len(b.links))
	for k := range b.links {
		out = append(out, k.caller+"->"+k.callee)
	}
	slices.Sort(out)
	return out
}
