package perfmodelexporter

import (
	"slices"
	"strings"
)

// Bounds of the link book: how many caller→callee links it remembers, and
// how many addresses per link.
const (
	maxBookLinks     = 4096
	maxLinkAddresses = 8
)

type linkKey struct{ caller, callee string }

// linkBook remembers, per caller→callee link of the service graph, the
// addresses the caller's CLIENT spans called it at (server.address and
// server.port) and those of the connection inventory, so that a link experiment needs no address in the
// configuration: the delay goes on packets to that address. It is bounded;
// links and addresses past the bounds are counted, not kept.
type linkBook struct {
	links    map[linkKey]map[string]int64
	overflow int64
}

func newLinkBook() *linkBook { return &linkBook{links: map[linkKey]map[string]int64{}} }

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
