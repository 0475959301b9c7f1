package stitcheval

import (
	"cmp"
	"net/url"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/stitch"
)

// StitchFunc stitches the batches in place, writing the output contract (see
// the package comment).
type StitchFunc func(batches []ptrace.Traces) error

// Stitcher is the product's stitcher: a fresh stitch.Stitcher with opt per call,
// so that runs share nothing.
func Stitcher(opt stitch.Options) StitchFunc {
	return func(batches []ptrace.Traces) error {
		s, err := stitch.New(opt)
		if err != nil {
			return err
		}
		s.Stitch(batches...)
		return nil
	}
}

// Naive is the comparator the evaluation reports beside the stitcher: the
// closest enclosing span plus an endpoint match. An orphan SERVER span takes the
// innermost CLIENT span of another resource that encloses it and, when both
// sides name an endpoint (host of server.address, net.peer.name or the URL;
// rpc.service; peer.service against service.name), names the same one; an
// orphan CONSUMER span the latest PRODUCER span of another resource on the same
// destination that started before it; any other orphan the innermost
// non-CLIENT span of its own resource that encloses it. It tolerates no skew.
// It writes the inferred attributes with confidence 1/(candidates that fit) and
// reparents (parentSpanId only; trace ids stay).
func Naive(batches []ptrace.Traces) error {
	recs := collect(batches...)
	type ref = naiveRef
	identity := make([]string, len(recs))
	idOf := map[int]string{}
	for i, r := range recs {
		id, ok := idOf[r.resource]
		if !ok {
			id = observedIdentity(r.rs.Resource().Attributes())
			idOf[r.resource] = id
		}
		identity[i] = id
	}
	byResource := map[string][]ref{}
	var clients, producers []ref
	for i, r := range recs {
		x := ref{i, int64(r.span.StartTimestamp()), int64(r.span.EndTimestamp())}
		switch r.span.Kind() {
		case ptrace.SpanKindClient:
			clients = append(clients, x)
		case ptrace.SpanKindProducer:
			producers = append(producers, x)
			byResource[identity[i]] = append(byResource[identity[i]], x)
		default:
			byResource[identity[i]] = append(byResource[identity[i]], x)
		}
	}
	byStart := func(a, b ref) int {
		if c := cmp.Compare(a.start, b.start); c != 0 {
			return c
		}
		return cmp.Compare(b.end, a.end) // outer first, so inner is met first going back
	}
	slices.SortFunc(clients, byStart)
	slices.SortFunc(producers, byStart)
	for _, l := range byResource {
		slices.SortFunc(l, byStart)
	}
	endpoints := make([][]string, len(recs))
	for i, r := range recs {
		switch r.span.Kind() {
		case ptrace.SpanKindClient, ptrace.SpanKindProducer:
			endpoints[i] = callerEndpoints(r.span.Attributes())
		case ptrace.SpanKindServer, ptrace.SpanKindConsumer:
			endpoints[i] = calleeEndpoints(r.span.Attributes(), r.rs.Resource().Attributes())
		}
	}
	for i, r := range recs {
		sp := r.span
		if !sp.ParentSpanID().IsEmpty() || sp.SpanID().IsEmpty() {
			continue
		}
		o := ref{i, int64(sp.StartTimestamp()), int64(sp.EndTimestamp())}
		var best, count int
		switch sp.Kind() {
		case ptrace.SpanKindServer:
			best, count = innermost(clients, o, func(c ref) bool {
				return c.i != i && identity[c.i] != identity[i] && c.end >= o.end && match(endpoints[c.i], endpoints[i])
			})
		case ptrace.SpanKindConsumer:
			best, count = innermost(producers, o, func(c ref) bool {
				return c.i != i && identity[c.i] != identity[i] && match(endpoints[c.i], endpoints[i])
			})
		default:
			best, count = innermost(byResource[identity[i]], o, func(c ref) bool {
				return c.i != i && c.end >= o.end && recs[c.i].span.Kind() != ptrace.SpanKindClient &&
					(c.start < o.start || c.end > o.end || c.i < i) // identical intervals: the first is the parent
			})
		}
		if best < 0 {
			continue
		}
		parent := recs[best].span.SpanID()
		sp.Attributes().PutStr(AttrInferredParent, parent.String())
		sp.Attributes().PutDouble(AttrInferredConfidence, 1/float64(count))
		sp.SetParentSpanID(parent)
	}
	return nil
}

// naiveRef is a span of the naive comparator: its index and interval.
type naiveRef struct {
	i          int
	start, end int64
}

// innermost walks back from the last span of list starting no later than the
// orphan o and returns the first that fits (latest start, innermost) and how
// many fit.
func innermost(list []naiveRef, o naiveRef, fits func(naiveRef) bool) (int, int) {
	n := len(list)
	hi, _ := slices.BinarySearchFunc(list, o.start, func(x naiveRef, t int64) int {
		if x.start <= t {
			return -1
		}
		return 1
	})
	best, count := -1, 0
	for k := min(hi, n) - 1; k >= 0; k-- {
		if fits(list[k]) {
			if best < 0 {
				best = list[k].i
			}
			count++
		}
	}
	return best, count
}

// match says whether two endpoint lists share one, or either is empty.
func match(a, b []string) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

// observedIdentity is a resource's attributes without the truth: what a
// stitcher can tell processes apart by.
func observedIdentity(m pcommon.Map) string {
	c := pcommon.NewMap()
	m.CopyTo(c)
	c.RemoveIf(func(k string, _ pcommon.Value) bool { return strings.HasPrefix(k, "tierscope.truth.") })
	return canonical(c)
}

func host(hostport string) string {
	if i := strings.LastIndexByte(hostport, ':'); i > 0 && !strings.Contains(hostport[i:], "]") {
		return hostport[:i]
	}
	return hostport
}

// callerEndpoints are the names a CLIENT or PRODUCER span gives its callee.
func callerEndpoints(attrs pcommon.Map) []string {
	var out []string
	add := func(s string) {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, k := range []string{"server.address", "net.peer.name"} {
		v, _ := strAttr(attrs, k)
		add(host(v))
	}
	for _, k := range []string{"url.full", "http.url"} {
		if v, ok := strAttr(attrs, k); ok {
			if u, err := url.Parse(v); err == nil {
				add(u.Hostname())
			}
		}
	}
	for _, k := range []string{"rpc.service", "peer.service", "service.peer.name", "messaging.destination.name", "messaging.destination"} {
		v, _ := strAttr(attrs, k)
		add(v)
	}
	return out
}

// calleeEndpoints are the names a SERVER or CONSUMER span answers to.
func calleeEndpoints(attrs, resource pcommon.Map) []string {
	var out []string
	add := func(s string) {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, k := range []string{"server.address", "net.host.name"} {
		v, _ := strAttr(attrs, k)
		add(host(v))
	}
	for _, k := range []string{"rpc.service", "messaging.destination.name", "messaging.destination"} {
		v, _ := strAttr(attrs, k)
		add(v)
	}
	if len(out) > 0 { // the service's own name is one more name, not the only one
		v, _ := strAttr(resource, "service.name")
		add(v)
	}
	return out
}
