package main

import (
	"cmp"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/otlpjsonl"
)

// convert turns third-party trace datasets into OTLP/JSON lines (FORMATS.md §4) so
// that stitch can be run and scored on real traces.
//
// Nezha (github.com/IntelligentDDS/Nezha, MIT) has one CSV per capture with the
// columns TraceID,SpanID,ParentID,PodName,OperationName,StartTimeUnixNano,
// EndTimeUnixNano,Duration, produced by the OpenTelemetry Java agent on
// TrainTicket. It has no span kind, no attributes and no service name, so they are
// rebuilt from the operation and pod names by the rules below (classifyNezha,
// serviceFromPod). On the two TrainTicket captures those rules agree with the
// parent/child structure: every edge between two pods goes from an HTTP CLIENT
// span to a SERVER span or from a PRODUCER to a CONSUMER, every SERVER span is a
// trace root or the only child of an HTTP CLIENT span in another pod, and the
// database CLIENT spans are leaves (convert_test.go checks all of this).

const nezhaScope = "tierscope/convert/nezha"

// Truth attributes written by --strip, so that stitch reports can be scored.
const (
	attrTruthParent = "tierscope.truth.parent_span_id"
	attrTruthTrace  = "tierscope.truth.trace_id"
)

// Strip modes: how much propagated context to remove, as if SDKs had not
// propagated it.
const (
	stripNone         = "none"
	stripAll          = "all"
	stripCrossService = "cross-service"
)

func runConvert(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("convert", "convert --from nezha --in trace.csv [--strip none|all|cross-service] [--batch 8192] --out spans.jsonl", stderr)
	var (
		from  = fs.String("from", "", "input dataset format: nezha (the Nezha trace CSV)")
		in    = fs.String("in", "", "input file, - for standard input")
		strip = fs.String("strip", stripNone, "context to remove: none, all (every parent link), or cross-service (links between pods); strip modes record the truth as tierscope.truth.* attributes")
		batch = fs.Int("batch", 8192, "spans per output line (request); spans are written in end-time order, as a collector would receive them")
		out   = fs.String("out", "", "output OTLP/JSON lines file (default standard output)")
	)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *from == "":
		return usagef("--from is required (supported: nezha)")
	case *from != "nezha":
		return usagef("--from %q is not supported (supported: nezha)", *from)
	case *strip != stripNone && *strip != stripAll && *strip != stripCrossService:
		return usagef("--strip must be none, all or cross-service, not %q", *strip)
	case *batch < 1:
		return usagef("--batch must be ≥ 1")
	}
	r, name, closeIn, err := input(*in, stdin)
	if err != nil {
		return err
	}
	defer closeIn()
	ds, err := readNezha(r, name)
	if err != nil {
		return err
	}
	o, err := openOutput(*out, stdout)
	if err != nil {
		return err
	}
	w := otlpjsonl.NewWriter(o)
	res, err := ds.convert(*strip, *batch, w.Write)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		o.abort()
		return err
	}
	if err := o.commit(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s convert %s: %s\n", programName, name, res.summary(*strip))
	return nil
}

// nezhaSpan is one CSV row.
type nezhaSpan struct {
	line    int
	trace   pcommon.TraceID
	span    pcommon.SpanID
	parent  pcommon.SpanID // zero for a root
	pod, op string
	start   uint64
	end     uint64
}

type nezhaData struct {
	name  string
	spans []nezhaSpan
	index map[pcommon.SpanID]int // span id -> position in spans
	// durationMismatches counts rows whose Duration column (microseconds) does not
	// match End-Start; it is reported, never fatal.
	durationMismatches int
}

var nezhaColumns = []string{"TraceID", "SpanID", "ParentID", "PodName", "OperationName", "StartTimeUnixNano", "EndTimeUnixNano"}

// readNezha parses and validates a Nezha trace CSV. Errors read "NAME:LINE: msg".
func readNezha(r io.Reader, name string) (*nezhaData, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // we report short rows ourselves, with the column names
	cr.ReuseRecord = true
	parseErr := func(err error) error {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return fmt.Errorf("%s:%d: %v", name, pe.Line, pe.Err)
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s:1: empty input, want the header %s,Duration", name, strings.Join(nezhaColumns, ","))
	}
	if err != nil {
		return nil, parseErr(err)
	}
	header = slices.Clone(header) // ReuseRecord would overwrite it
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	var idx [7]int
	for i, c := range nezhaColumns {
		j, ok := col[c]
		if !ok {
			return nil, fmt.Errorf("%s:1: missing column %s (want %s,Duration)", name, c, strings.Join(nezhaColumns, ","))
		}
		idx[i] = j
	}
	durCol, hasDur := col["Duration"]
	width := len(header)

	d := &nezhaData{name: name, index: map[pcommon.SpanID]int{}}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, parseErr(err)
		}
		line, _ := cr.FieldPos(0)
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, args...))
		}
		if len(rec) != width {
			return nil, bad("%d fields, want %d (%s)", len(rec), width, strings.Join(header, ","))
		}
		s := nezhaSpan{line: line, pod: rec[idx[3]], op: rec[idx[4]]}
		if msg := decodeID(s.trace[:], rec[idx[0]]); msg != "" {
			return nil, bad("TraceID %q %s", rec[idx[0]], msg)
		}
		if msg := decodeID(s.span[:], rec[idx[1]]); msg != "" {
			return nil, bad("SpanID %q %s", rec[idx[1]], msg)
		}
		if p := rec[idx[2]]; p != "root" {
			if msg := decodeID(s.parent[:], p); msg != "" {
				return nil, bad(`ParentID %q is not "root" and %s`, p, msg)
			}
			if s.parent == s.span {
				return nil, bad("span %s is its own parent", s.span)
			}
		}
		if s.pod == "" {
			return nil, bad("empty PodName")
		}
		if s.start, err = strconv.ParseUint(rec[idx[5]], 10, 64); err != nil {
			return nil, bad("StartTimeUnixNano %q is not a whole number of nanoseconds", rec[idx[5]])
		}
		if s.end, err = strconv.ParseUint(rec[idx[6]], 10, 64); err != nil {
			return nil, bad("EndTimeUnixNano %q is not a whole number of nanoseconds", rec[idx[6]])
		}
		if s.end < s.start {
			return nil, bad("EndTimeUnixNano %d is before StartTimeUnixNano %d", s.end, s.start)
		}
		// Duration is End-Start in microseconds, truncated (true of every row of the
		// TrainTicket captures); allow one unit for rounding.
		if hasDur {
			us, err := strconv.ParseInt(strings.TrimSpace(rec[durCol]), 10, 64)
			if diff := us - int64((s.end-s.start)/1000); err != nil || diff < -1 || diff > 1 {
				d.durationMismatches++
			}
		}
		if prev, dup := d.index[s.span]; dup {
			// A parent id would be ambiguous, and so would the truth we record.
			return nil, bad("duplicate SpanID %s (first on line %d)", s.span, d.spans[prev].line)
		}
		d.index[s.span] = len(d.spans)
		d.spans = append(d.spans, s)
	}
	return d, nil
}

// decodeID fills dst from exactly 2*len(dst) hex digits; an all-zero id is invalid
// in OTLP and refused. It returns what is wrong, or "".
func decodeID(dst []byte, s string) string {
	if len(s) != 2*len(dst) { // checked first: hex.Decode would overrun dst
		return fmt.Sprintf("is not %d hex digits", 2*len(dst))
	}
	if _, err := hex.Decode(dst, []byte(s)); err != nil {
		return fmt.Sprintf("is not %d hex digits", 2*len(dst))
	}
	for _, b := range dst {
		if b != 0 {
			return ""
		}
	}
	return "is all zeros, an invalid id in OTLP"
}

// Pod names. A Deployment's pod is DEPLOYMENT-<pod-template-hash>-<5 chars>, both
// generated in Kubernetes' alphabet without vowels (nor 0, 1, 3), which no English
// word fits. The hash is a decimal uint32 re-encoded, so 1 to 10 characters; we
// require 4 or more so that a short suffix of a real name is not taken for one.
// A StatefulSet's pod is NAME-<ordinal>.
var (
	deploymentPod  = regexp.MustCompile(`^(.+)-[bcdfghjklmnpqrstvwxz2456789]{4,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$`)
	statefulSetPod = regexp.MustCompile(`^(.+)-[0-9]+$`)
)

// serviceFromPod returns the workload name of a pod, the usual service.name in
// Kubernetes: ts-gateway-service-6f6cfc45b-h5m2n -> ts-gateway-service. The
// second result says which rule matched: "deployment", "statefulset", or "" when
// none did and the pod name itself is used.
func serviceFromPod(pod string) (string, string) {
	if m := deploymentPod.FindStringSubmatch(pod); m != nil {
		return m[1], "deployment"
	}
	if m := statefulSetPod.FindStringSubmatch(pod); m != nil {
		return m[1], "statefulset"
	}
	return pod, ""
}

// opClass is what the operation name tells us about a span.
type opClass struct {
	rule  string
	kind  ptrace.SpanKind
	attrs [][2]string
}

// The rules, first match wins. The names follow the OpenTelemetry Java agent,
// which produced the data:
//   - "HTTP GET": an HTTP client span (the agent names them by method only).
//   - "/api/v1/...", "/*": a server span named by its route.
//   - "SELECT ts.orders": a JDBC statement, "VERB database.table". These are the
//     real round trips to MySQL, and always leaves.
//   - "SELECT Order", "SELECT route", "Session.find ...", "Transaction.commit":
//     Hibernate spans. The agent makes them INTERNAL, and here they are the
//     parents of the JDBC spans (or have no child when served from the session),
//     so making them CLIENT would count each database call twice.
//   - "<default> send", "food_delivery process": RabbitMQ publish and consume
//     (TrainTicket's food delivery queue). "<default>" is the agent's name for
//     the default exchange, whose name is the empty string.
//   - anything else (controllers, repositories, the gateway's handler): INTERNAL.
var (
	httpClientOp = regexp.MustCompile(`^HTTP ([A-Z]+)$`)
	jdbcOp       = regexp.MustCompile(`^(SELECT|INSERT|UPDATE|DELETE|REPLACE|MERGE|CALL) ([A-Za-z0-9_$]+)\.([A-Za-z0-9_$]+)$`)
	hibernateOp  = regexp.MustCompile(`^((SELECT|INSERT|UPDATE|DELETE) [A-Za-z0-9_$]+|Session\.[A-Za-z]+ .+|Transaction\.(commit|rollback))$`)
	messagingOp  = regexp.MustCompile(`^(\S+) (send|publish|process|receive)$`)
	httpMethods  = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "DELETE": true, "CONNECT": true, "OPTIONS": true, "TRACE": true, "PATCH": true}
)

func classifyNezha(op string) opClass {
	if m := httpClientOp.FindStringSubmatch(op); m != nil {
		if httpMethods[m[1]] {
			return opClass{"http-client", ptrace.SpanKindClient, [][2]string{{"http.request.method", m[1]}}}
		}
		return opClass{"http-client", ptrace.SpanKindClient, [][2]string{{"http.request.method", "_OTHER"}, {"http.request.method_original", m[1]}}}
	}
	if strings.HasPrefix(op, "/") {
		// The method is not in the data, so http.request.method is left out.
		return opClass{"http-server", ptrace.SpanKindServer, [][2]string{{"http.route", op}}}
	}
	if m := jdbcOp.FindStringSubmatch(op); m != nil {
		return opClass{"db-client", ptrace.SpanKindClient, [][2]string{
			{"db.system.name", "mysql"}, // TrainTicket's services all use MySQL
			{"db.namespace", m[2]},
			{"db.collection.name", m[3]},
			{"db.operation.name", m[1]},
			{"db.query.summary", op},
		}}
	}
	if hibernateOp.MatchString(op) {
		return opClass{"hibernate", ptrace.SpanKindInternal, nil}
	}
	if m := messagingOp.FindStringSubmatch(op); m != nil {
		dest := m[1]
		if dest == "<default>" {
			dest = ""
		}
		attrs := [][2]string{{"messaging.system", "rabbitmq"}, {"messaging.destination.name", dest}, {"messaging.operation.name", m[2]}}
		if m[2] == "send" || m[2] == "publish" {
			return opClass{"messaging-producer", ptrace.SpanKindProducer, append(attrs, [2]string{"messaging.operation.type", "send"})}
		}
		return opClass{"messaging-consumer", ptrace.SpanKindConsumer, append(attrs, [2]string{"messaging.operation.type", m[2]})}
	}
	return opClass{"internal", ptrace.SpanKindInternal, nil}
}

// convertResult is the converted data and its statistics.
type convertResult struct {
	spans        int
	traces       int // distinct TraceIDs in the input
	outTraces    int // distinct trace ids written
	pods         int
	services     int
	unmatched    int // pods whose name fit no rule (service.name = pod name)
	byKind       map[ptrace.SpanKind]int
	broken       int // parent links removed
	missing      int // parents not in the file
	durMismatch  int
	crossPodEdge int // true parent in another pod
}

func (r *convertResult) summary(strip string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d spans, %d traces", r.spans, r.traces)
	if strip != stripNone {
		fmt.Fprintf(&b, " (%d after --strip %s)", r.outTraces, strip)
	}
	fmt.Fprintf(&b, ", %d services on %d pods", r.services, r.pods)
	if r.unmatched > 0 {
		fmt.Fprintf(&b, " (%d pod names fit no rule and are used as the service name)", r.unmatched)
	}
	fmt.Fprintf(&b, "; kinds server=%d client=%d producer=%d consumer=%d internal=%d",
		r.byKind[ptrace.SpanKindServer], r.byKind[ptrace.SpanKindClient], r.byKind[ptrace.SpanKindProducer],
		r.byKind[ptrace.SpanKindConsumer], r.byKind[ptrace.SpanKindInternal])
	fmt.Fprintf(&b, "; %d cross-pod links, %d links broken", r.crossPodEdge, r.broken)
	if r.missing > 0 {
		fmt.Fprintf(&b, ", %d parents not in the file", r.missing)
	}
	fmt.Fprintf(&b, "; %d duration mismatches", r.durMismatch)
	return b.String()
}

// derivedTraceID is the fresh trace id given to a span cut from its parent. It is
// a hash of the span id so that the output is reproducible.
func derivedTraceID(span pcommon.SpanID) pcommon.TraceID {
	sum := sha256.Sum256(append([]byte(nezhaScope+"/strip\x00"), span[:]...))
	var t pcommon.TraceID
	copy(t[:], sum[:16])
	return t
}

// outIDs computes each span's output trace id and parent id for a strip mode, and
// how many parent links were removed.
func (d *nezhaData) outIDs(strip string) (traces []pcommon.TraceID, parents []pcommon.SpanID, broken int, err error) {
	n := len(d.spans)
	traces = make([]pcommon.TraceID, n)
	parents = make([]pcommon.SpanID, n)
	switch strip {
	case stripNone:
		for i, s := range d.spans {
			traces[i], parents[i] = s.trace, s.parent
		}
		return traces, parents, 0, nil
	case stripAll:
		for i, s := range d.spans {
			traces[i] = derivedTraceID(s.span)
			if !s.parent.IsEmpty() {
				broken++
			}
		}
		return traces, parents, broken, nil
	}
	// cross-service: cut every link whose parent runs in another pod (process),
	// where a real SDK would have had to propagate context over the network; the
	// cut span and everything below it through same-pod links get a trace id
	// derived from the cut span. A parent missing from the file keeps its link
	// and the original trace id: we cannot tell where it ran.
	const (
		todo = iota
		visiting
		done
	)
	state := make([]uint8, n)
	var stack []int
	for i := range d.spans {
		for j := i; state[j] != done; {
			s := d.spans[j]
			p, ok := d.index[s.parent]
			switch {
			case s.parent.IsEmpty() || !ok:
				traces[j], parents[j] = s.trace, s.parent
			case d.spans[p].pod != s.pod:
				traces[j] = derivedTraceID(s.span)
				broken++
			case state[p] == done:
				traces[j], parents[j] = traces[p], s.parent
			case state[p] == visiting:
				return nil, nil, 0, fmt.Errorf("%s:%d: span %s is its own ancestor (a ParentID cycle)", d.name, s.line, s.span)
			default: // resolve the parent first
				state[j] = visiting
				stack = append(stack, j)
				j = p
				continue
			}
			state[j] = done
			if len(stack) == 0 {
				break
			}
			j, stack = stack[len(stack)-1], stack[:len(stack)-1]
		}
	}
	return traces, parents, broken, nil
}

// convert builds the OTLP requests and hands them to emit one by one: spans in
// end-time order (the order an exporter sends them), batch spans per request, one
// ResourceSpans per pod in each.
func (d *nezhaData) convert(strip string, batch int, emit func(ptrace.Traces) error) (*convertResult, error) {
	traces, parents, broken, err := d.outIDs(strip)
	if err != nil {
		return nil, err
	}
	res := &convertResult{
		spans: len(d.spans), broken: broken, durMismatch: d.durationMismatches,
		byKind: map[ptrace.SpanKind]int{},
	}
	inTraces, outTraces := map[pcommon.TraceID]bool{}, map[pcommon.TraceID]bool{}
	pods, services := map[string]bool{}, map[string]bool{}
	for i, s := range d.spans {
		inTraces[s.trace], outTraces[traces[i]] = true, true
		if !pods[s.pod] {
			pods[s.pod] = true
			svc, rule := serviceFromPod(s.pod)
			services[svc] = true
			if rule == "" {
				res.unmatched++
			}
		}
		if !s.parent.IsEmpty() {
			if p, ok := d.index[s.parent]; !ok {
				res.missing++
			} else if d.spans[p].pod != s.pod {
				res.crossPodEdge++
			}
		}
	}
	res.traces, res.outTraces, res.pods, res.services = len(inTraces), len(outTraces), len(pods), len(services)

	order := make([]int, len(d.spans))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(d.spans[a].end, d.spans[b].end) })

	classes := map[string]opClass{}
	for lo := 0; lo < len(order); lo += batch {
		td := ptrace.NewTraces()
		byPod := map[string]ptrace.SpanSlice{}
		for _, i := range order[lo:min(lo+batch, len(order))] {
			s := d.spans[i]
			spans, ok := byPod[s.pod]
			if !ok {
				rs := td.ResourceSpans().AppendEmpty()
				svc, rule := serviceFromPod(s.pod)
				ra := rs.Resource().Attributes()
				ra.PutStr("service.name", svc)
				ra.PutStr("service.instance.id", s.pod)
				ra.PutStr("k8s.pod.name", s.pod)
				switch rule {
				case "deployment":
					ra.PutStr("k8s.deployment.name", svc)
				case "statefulset":
					ra.PutStr("k8s.statefulset.name", svc)
				}
				ss := rs.ScopeSpans().AppendEmpty()
				ss.Scope().SetName(nezhaScope)
				spans = ss.Spans()
				byPod[s.pod] = spans
			}
			c, ok := classes[s.op]
			if !ok {
				c = classifyNezha(s.op)
				classes[s.op] = c
			}
			res.byKind[c.kind]++

			sp := spans.AppendEmpty()
			sp.SetName(s.op)
			sp.SetKind(c.kind)
			sp.SetTraceID(traces[i])
			sp.SetSpanID(s.span)
			sp.SetParentSpanID(parents[i])
			sp.SetStartTimestamp(pcommon.Timestamp(s.start))
			sp.SetEndTimestamp(pcommon.Timestamp(s.end))
			attrs := sp.Attributes()
			for _, kv := range c.attrs {
				attrs.PutStr(kv[0], kv[1])
			}
			if strip != stripNone {
				truthParent := ""
				if !s.parent.IsEmpty() {
					truthParent = s.parent.String()
				}
				attrs.PutStr(attrTruthParent, truthParent)
				attrs.PutStr(attrTruthTrace, s.trace.String())
			}
		}
		if err := emit(td); err != nil {
			return nil, err
		}
	}
	return res, nil
}
