package perfmodelexporter

import (
	"slices"
	"strings"
)

// Bounds of the link book: how many caller→callee links it remembers, how
// many addresses per link, how many front transactions it counts requests
// of, and how many (link, address, transaction) call counts it keeps.
const (
	maxBookLinks        = 4096
	maxLinkAddresses    = 8
	maxCallTransactions = 256
	maxLinkCallCounts   = 16384
)

type linkKey struct{ caller, callee string }

// linkCall is one caller→callee link, at one address, on the paths of one
// front transaction.
type linkCall struct {
	link    linkKey
	address string
	tx      string
}

// linkBook remembers, per caller→callee link of the service graph, the
// addresses the caller's CLIENT spans called it at (server.address and
// server.port) and those of the connection inventory, so that a link experiment needs no address in the
// configuration: the delay goes on packets to that address. It is bounded;
// links and addresses past the bounds are counted, not kept.
//
// It also counts, per front transaction, the requests and the synchronous
// calls on each link: calls per request bound a link's gradient before any
// wave (a delay d on each of n calls on the request's path adds at most
// n·d), which keeps an experiment's first pulse within its perturbation
// bound (gradient.Element.PriorGradients).
type linkBook struct {
	links    map[linkKey]map[string]int64
	requests map[string]int64
	calls    map[linkCall]int64
	overflow int64
}

func newLinkBook() *linkBook {
	return &linkBook{links: map[linkKey]map[string]int64{}, requests: map[string]int64{}, calls: map[linkCall]int64{}}
}

// countRequest counts one request of a front transaction; it reports false
// when the book is full and the request's calls must not be counted.
func (b *linkBook) countRequest(tx string) bool {
	if _, ok := b.requests[tx]; !ok && len(b.requests) >= maxCallTransactions {
		b.overflow++
		return false
	}
	b.requests[tx]++
	return true
}

// countCall counts one synchronous call on caller→callee at address within
// a request of tx (counted by countRequest).
func (b *linkBook) countCall(caller, callee, address, tx string) {
	if caller == "" || callee == "" || caller == callee {
		return
	}
	k := linkCall{linkKey{caller, callee}, address, tx}
	if len(b.calls) >= maxLinkCallCounts { // look before adding only when full
		if _, ok := b.calls[k]; !ok {
			b.overflow++
			return
		}
	}
	b.calls[k]++
}

// callsPerRequest is, per front transaction whose requests called on
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

func (b *linkBook) perRequest(match func(linkCall) bool) map[string]float64 {
	out := map[string]float64{}
	for k, n := range b.calls {
		if match(k) && b.requests[k.tx] > 0 {
			out[k.tx] += float64(n) / float64(b.requests[k.tx])
		}
	}
	return out
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
	if _, ok := addrs[address]; !ok && len(addrs) >= maxLinkAddresses {
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
