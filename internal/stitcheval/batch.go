package stitcheval

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Batching is how an SDK's batch span processor groups spans for export: per
// resource, in end-time order, a request when MaxSpans spans are queued or
// Interval after the first of them ended.
type Batching struct {
	MaxSpans int
	Interval time.Duration
}

// DefaultBatching is the OpenTelemetry SDKs' default (512 spans, 5 s).
func DefaultBatching() Batching { return Batching{MaxSpans: 512, Interval: 5 * time.Second} }

// Validate names the field that cannot be used.
func (b Batching) Validate() error { return b.validate("stitcheval: Batching") }

func (b Batching) validate(prefix string) error {
	if b.MaxSpans < 1 {
		return fmt.Errorf("%s.MaxSpans = %d, want ≥ 1", prefix, b.MaxSpans)
	}
	if b.Interval <= 0 {
		return fmt.Errorf("%s.Interval = %v, want > 0", prefix, b.Interval)
	}
	return nil
}

// rebatch copies the spans, shifted by shift[i] nanoseconds (nil: none), into
// export requests as an exporter would have sent them: one ResourceSpans per
// export request of each resource and scope, requests in the order they leave
// (their last span's end), spans in end-time order.
func rebatch(recs []spanRec, shift []int64, b Batching) ptrace.Traces {
	type group struct {
		key   string
		first int // a span of the group, for its resource and scope
		spans []int
	}
	var groups []*group
	byKey := map[string]*group{}
	keyOf := map[int]string{} // resource index -> key prefix
	for i, r := range recs {
		rk, ok := keyOf[r.resource]
		if !ok {
			rk = canonical(r.rs.Resource().Attributes())
			keyOf[r.resource] = rk
		}
		k := rk + "\x00" + r.scope.Name() + "\x00" + r.scope.Version()
		g, ok := byKey[k]
		if !ok {
			g = &group{key: k, first: i}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.spans = append(g.spans, i)
	}
	slices.SortFunc(groups, func(a, c *group) int { return strings.Compare(a.key, c.key) })
	sh := func(i int) int64 {
		if shift == nil {
			return 0
		}
		return shift[i]
	}
	end := func(i int) int64 { return int64(recs[i].span.EndTimestamp()) + sh(i) }
	start := func(i int) int64 { return int64(recs[i].span.StartTimestamp()) + sh(i) }
	type chunk struct {
		g      *group
		spans  []int
		export int64
	}
	var chunks []chunk
	for _, g := range groups {
		slices.SortStableFunc(g.spans, func(a, c int) int {
			if x := cmp.Compare(end(a), end(c)); x != 0 {
				return x
			}
			return cmp.Compare(start(a), start(c))
		})
		for lo := 0; lo < len(g.spans); {
			hi := lo + 1
			for hi < len(g.spans) && hi-lo < b.MaxSpans && end(g.spans[hi]) <= end(g.spans[lo])+int64(b.Interval) {
				hi++
			}
			chunks = append(chunks, chunk{g, g.spans[lo:hi], end(g.spans[hi-1])})
			lo = hi
		}
	}
	slices.SortStableFunc(chunks, func(a, c chunk) int { return cmp.Compare(a.export, c.export) })
	out := ptrace.NewTraces()
	for _, c := range chunks {
		rs := out.ResourceSpans().AppendEmpty()
		src := recs[c.g.first]
		src.rs.Resource().CopyTo(rs.Resource())
		rs.SetSchemaUrl(src.rs.SchemaUrl())
		ss := rs.ScopeSpans().AppendEmpty()
		src.scope.CopyTo(ss.Scope())
		spans := ss.Spans()
		spans.EnsureCapacity(len(c.spans))
		for _, i := range c.spans {
			sp := spans.AppendEmpty()
			recs[i].span.CopyTo(sp)
			if d := sh(i); d != 0 {
				sp.SetStartTimestamp(pcommon.Timestamp(start(i)))
				sp.SetEndTimestamp(pcommon.Timestamp(end(i)))
			}
		}
	}
	return out
}

// canonical is a resource's attributes as a sorted string, its identity.
func canonical(m pcommon.Map) string {
	kv := make([]string, 0, m.Len())
	for k, v := range m.All() {
		kv = append(kv, k+"="+v.AsString())
	}
	slices.Sort(kv)
	return strings.Join(kv, "\x01")
}

// Requests splits td into one ptrace.Traces per ResourceSpans, in order: the
// export requests a collector receives. The spans are moved, td is left empty.
func Requests(td ptrace.Traces) []ptrace.Traces {
	rss := td.ResourceSpans()
	out := make([]ptrace.Traces, 0, rss.Len())
	for i := 0; i < rss.Len(); i++ {
		r := ptrace.NewTraces()
		rss.At(i).MoveTo(r.ResourceSpans().AppendEmpty())
		out = append(out, r)
	}
	rss.RemoveIf(func(ptrace.ResourceSpans) bool { return true })
	return out
}
