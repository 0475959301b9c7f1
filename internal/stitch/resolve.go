package stitch

import (
	"net/url"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// maxAttrLen is the longest attribute value used as an endpoint; longer values are
// ignored (and counted), so one huge attribute cannot bloat the address map.
const maxAttrLen = 512

// peer is what a CLIENT or PRODUCER span says about the process it calls.
type peer struct {
	service string // a service name given outright (service.peer.name, peer.service)
	address string // host:port, RPC service or messaging destination, learnable
	label   string // the node name for paths when the peer is not resolved
	// database marks a call to a database: it reaches no instrumented service, so
	// it can never be the parent of a SERVER span.
	database bool
}

// peerOf reads the peer of a CLIENT/PRODUCER span, current semantic conventions
// first and the legacy names as a fallback.
func peerOf(a *spanAttrs, j *joiner) peer {
	var p peer
	p.service = a.get(aServicePeerName, aPeerService)
	if sys := a.get(aDBSystemName, aDBSystem); sys != "" {
		p.database = true
		p.label = sys
		if ns := a.get(aDBNamespace, aDBName); ns != "" {
			p.label = j.concat(sys, "/", ns)
		}
	}
	if rpc := a.get(aRPCService); rpc != "" {
		p.address = j.concat("rpc:", rpc, "")
	} else if m := a.get(aRPCMethod); strings.Contains(m, "/") {
		p.address = j.concat("rpc:", m[:strings.LastIndexByte(m, '/')], "")
	}
	if dest := a.get(aMessagingDestinationName); dest != "" && p.address == "" {
		p.address = j.concat("msg:"+a.get(aMessagingSystem), "/", dest)
	}
	if p.address == "" {
		p.address = hostPort(a.get(aServerAddress, aNetPeerName), a.get(aServerPort, aNetPeerPort), j)
	}
	if p.address == "" {
		if u := a.get(aURLFull, aHTTPURL); u != "" {
			if parsed, err := url.Parse(u); err == nil && parsed.Host != "" {
				p.address = parsed.Host
			}
		}
	}
	if p.address == "" {
		p.address = hostPort(a.get(aNetworkPeerAddress, aNetSockPeerAddr), a.get(aNetworkPeerPort, aNetSockPeerPort), j)
	}
	switch {
	case p.label != "":
	case p.service != "":
		p.label = p.service
	case p.address != "":
		p.label = p.address
	}
	return p
}

func hostPort(host, port string, j *joiner) string {
	if host == "" {
		return ""
	}
	if port == "" {
		return host
	}
	return j.concat(host, ":", port)
}

// AddressBook learns which service answers at an address or operation, and
// resolves the CLIENT spans that name only those. It learns from intact
// CLIENT → SERVER links, as the servicegraph connector learns its edges, and
// with no context at all from the server side's own attributes (the address it
// answered on, the operation it served). A key learned for two services is
// ambiguous and resolves to nothing. It is bounded: beyond max entries the
// oldest is forgotten.
type AddressBook struct {
	max     int
	entries map[string]string
	order   []string // insertion order, for eviction
}

// ambiguous marks a key that two services answered.
const ambiguous = "\x00"

// NewAddressBook returns an empty book holding at most max addresses.
func NewAddressBook(max int) *AddressBook {
	return &AddressBook{max: max, entries: make(map[string]string)}
}

// Learn records that service answers at address (or operation key).
func (b *AddressBook) Learn(address, service string) {
	if address == "" || service == "" || b.max <= 0 {
		return
	}
	old, ok := b.entries[address]
	if !ok {
		if len(b.entries) >= b.max {
			oldest := b.order[0]
			b.order = b.order[1:]
			delete(b.entries, oldest)
		}
		b.order = append(b.order, address)
		b.entries[address] = service
		return
	}
	if old != service {
		b.entries[address] = ambiguous
	}
}

// Resolve returns the service learned for address, or "" when unknown or
// ambiguous.
func (b *AddressBook) Resolve(address string) string {
	if s := b.entries[address]; s != ambiguous {
		return s
	}
	return ""
}

// PeerNode names the callee of a CLIENT or PRODUCER span for paths and the
// service graph when no SERVER span answers it (a database or an
// uninstrumented back end), with the same resolution the stitcher uses, and
// reports whether it is a database.
func PeerNode(attrs pcommon.Map) (name string, database bool) {
	name, _, database = PeerOf(attrs)
	return name, database
}

// PeerOf is PeerNode plus the address the span called (host:port, RPC service
// or messaging destination), which an AddressBook resolves to the service that
// answers there.
func PeerOf(attrs pcommon.Map) (name, address string, database bool) {
	var a spanAttrs
	readAttrs(attrs, &a, nil)
	p := peerOf(&a, nil)
	return p.label, p.address, p.database
}
