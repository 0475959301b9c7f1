package blackboxreceiver

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/framing"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/procnet"
)

// node is a service and the process (instance) it runs in.
type node struct {
	service, instance string
	named             bool // from the services map, not an address
	// independent: the node is a pool of independent clients (users, a load
	// generator, anything unnamed): every call it makes is a root, so each
	// gets an instance of its own and nests in none of the node's other calls.
	independent bool
}

// services resolves endpoints to nodes: an exact IP:port first, then the IP,
// then the longest matching prefix, else the IP itself.
type services struct {
	byAddrPort map[netip.AddrPort]node
	byAddr     map[netip.Addr]node
	prefixes   []prefixNode // longest first
}

type prefixNode struct {
	p netip.Prefix
	n node
}

func parseServices(m map[string]string) (*services, error) {
	s := &services{byAddrPort: map[netip.AddrPort]node{}, byAddr: map[netip.Addr]node{}}
	for k, v := range m {
		n, err := parseNode(v)
		if err != nil {
			return nil, fmt.Errorf("services[%s]: %w", k, err)
		}
		if ap, err := netip.ParseAddrPort(k); err == nil {
			s.byAddrPort[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())] = n
			continue
		}
		if a, err := netip.ParseAddr(k); err == nil {
			s.byAddr[a.Unmap()] = n
			continue
		}
		if p, err := netip.ParsePrefix(k); err == nil {
			s.prefixes = append(s.prefixes, prefixNode{p.Masked(), n})
			continue
		}
		return nil, fmt.Errorf("services: key %q is not an IP address, IP:port or CIDR prefix", k)
	}
	slices.SortFunc(s.prefixes, func(a, b prefixNode) int { return b.p.Bits() - a.p.Bits() })
	return s, nil
}

func parseNode(v string) (node, error) {
	service, instance, _ := strings.Cut(v, "/")
	if service == "" {
		return node{}, fmt.Errorf("empty service name in %q", v)
	}
	independent := instance == "*"
	if instance == "" || independent {
		instance = service
	}
	return node{service: service, instance: instance, named: true, independent: independent}, nil
}

// server names the node answering at ap.
func (s *services) server(ap netip.AddrPort) node {
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if n, ok := s.byAddrPort[ap]; ok {
		return n
	}
	return s.host(ap.Addr())
}

// host names the node at an address (a client: its port is ephemeral).
func (s *services) host(a netip.Addr) node {
	a = a.Unmap()
	if n, ok := s.byAddr[a]; ok {
		return n
	}
	for _, p := range s.prefixes {
		if p.p.Contains(a) {
			return p.n
		}
	}
	str := a.String()
	return node{service: str, instance: str, independent: true}
}

// client names the node calling from ap: its node, or for a pool of
// independent clients an instance of the call's own (seq numbers the calls).
func (s *services) client(ap netip.AddrPort, seq uint64) node {
	n := s.host(ap.Addr())
	if n.independent {
		n.instance = n.service + "@" + netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String() + "#" + strconv.FormatUint(seq, 10)
	}
	return n
}

// route is a URL path template: literal segments and {name} wildcards.
type route struct {
	template string
	segs     []string // "" for a wildcard
}

func compileRoutes(ts []string) ([]route, error) {
	var out []route
	for _, t := range ts {
		if !strings.HasPrefix(t, "/") {
			return nil, fmt.Errorf("routes: %q must start with /", t)
		}
		r := route{template: t}
		for _, seg := range strings.Split(t[1:], "/") {
			if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") && len(seg) > 2 {
				r.segs = append(r.segs, "")
			} else if strings.ContainsAny(seg, "{}") {
				return nil, fmt.Errorf("routes: %q: a segment is either literal or a whole {name}", t)
			} else {
				r.segs = append(r.segs, seg)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// matchRoute returns the first template that path matches, or "".
func matchRoute(routes []route, path string) string {
	if len(routes) == 0 || !strings.HasPrefix(path, "/") {
		return ""
	}
	segs := strings.Split(path[1:], "/")
	for _, r := range routes {
		if len(r.segs) != len(segs) {
			continue
		}
		ok := true
		for i, s := range r.segs {
			if s != "" && s != segs[i] || s == "" && segs[i] == "" {
				ok = false
				break
			}
		}
		if ok {
			return r.template
		}
	}
	return ""
}

func parseFraming(s string) (framing.Protocol, bool) { return framing.ParseProtocol(s) }

func parseRange(s string) (procnet.PortRange, error) {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		return procnet.PortRange{}, fmt.Errorf("ephemeral_ports %q: want LO-HI", s)
	}
	l, err := strconv.ParseUint(strings.TrimSpace(lo), 10, 16)
	h, err2 := strconv.ParseUint(strings.TrimSpace(hi), 10, 16)
	if err != nil || err2 != nil || l > h {
		return procnet.PortRange{}, fmt.Errorf("ephemeral_ports %q: want LO-HI with LO ≤ HI", s)
	}
	return procnet.PortRange{Lo: uint16(l), Hi: uint16(h)}, nil
}
