// Package nezha reads the trace CSVs of the Nezha dataset
// (github.com/IntelligentDDS/Nezha, MIT) and rebuilds them as OTLP spans with
// their full context, for `tierscope convert` and the stitching evaluation.
//
// Nezha has one CSV per capture with the columns TraceID,SpanID,ParentID,
// PodName,OperationName,StartTimeUnixNano,EndTimeUnixNano,Duration, produced by
// the OpenTelemetry Java agent on TrainTicket. It has no span kind, no
// attributes and no service name, so they are rebuilt from the operation and
// pod names by the rules below (Classify, ServiceFromPod). On the two
// TrainTicket captures those rules agree with the parent/child structure: every
// edge between two pods goes from an HTTP CLIENT span to a SERVER span or from a
// PRODUCER to a CONSUMER, every SERVER span is a trace root or the only child of
// an HTTP CLIENT span in another pod, and the database CLIENT spans are leaves
// (cmd/tierscope/convert_test.go checks all of this).
package nezha

import (
	"cmp"
	"compress/gzip"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Scope is the instrumentation scope name of the spans built here.
const Scope = "tierscope/convert/nezha"

// Row is one CSV row, a span as the capture records it; rows become OTLP
// spans, not the span model (internal/span).
type Row struct {
	Line    int
	Trace   pcommon.TraceID
	ID      pcommon.SpanID
	Parent  pcommon.SpanID // zero for a root
	Pod, Op string
	Start   uint64
	End     uint64
}

// Data is one capture.
type Data struct {
	Name  string
	Spans []Row
	Index map[pcommon.SpanID]int // span id -> position in Spans
	// DurationMismatches counts rows whose Duration column (microseconds) does not
	// match End-Start; it is reported, never fatal.
	DurationMismatches int
}

var columns = []string{"TraceID", "SpanID", "ParentID", "PodName", "OperationName", "StartTimeUnixNano", "EndTimeUnixNano"}

// ReadFile reads a capture from a file, gunzipping it when the name ends in .gz
// (the repository keeps the captures compressed).
func ReadFile(path string) (*Data, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer z.Close()
		r = z
	}
	return Read(r, path)
}

// Read parses and validates a Nezha trace CSV. Errors read "NAME:LINE: msg".
func Read(r io.Reader, name string) (*Data, error) {
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
		return nil, fmt.Errorf("%s:1: empty input, want the header %s,Duration", name, strings.Join(columns, ","))
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
	for i, c := range columns {
		j, ok := col[c]
		if !ok {
			return nil, fmt.Errorf("%s:1: missing column %s (want %s,Duration)", name, c, strings.Join(columns, ","))
		}
		idx[i] = j
	}
	durCol, hasDur := col["Duration"]
	width := len(header)

	d := &Data{Name: name, Index: map[pcommon.SpanID]int{}}
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
		s := Row{Line: line, Pod: rec[idx[3]], Op: rec[idx[4]]}
		if msg := decodeID(s.Trace[:], rec[idx[0]]); msg != "" {
			return nil, bad("TraceID %q %s", rec[idx[0]], msg)
		}
		if msg := decodeID(s.ID[:], rec[idx[1]]); msg != "" {
			return nil, bad("SpanID %q %s", rec[idx[1]], msg)
		}
		if p := rec[idx[2]]; p != "root" {
			if msg := decodeID(s.Parent[:], p); msg != "" {
				return nil, bad(`ParentID %q is not "root" and %s`, p, msg)
			}
			if s.Parent == s.ID {
				return nil, bad("span %s is its own parent", s.ID)
			}
		}
		if s.Pod == "" {
			return nil, bad("empty PodName")
		}
		if s.Start, err = strconv.ParseUint(rec[idx[5]], 10, 64); err != nil {
			return nil, bad("StartTimeUnixNano %q is not a whole number of nanoseconds", rec[idx[5]])
		}
		if s.End, err = strconv.ParseUint(rec[idx[6]], 10, 64); err != nil {
			return nil, bad("EndTimeUnixNano %q is not a whole number of nanoseconds", rec[idx[6]])
		}
		if s.End < s.Start {
			return nil, bad("EndTimeUnixNano %d is before StartTimeUnixNano %d", s.End, s.Start)
		}
		// Duration is End-Start in microseconds, truncated (true of every row of the
		// TrainTicket captures); allow one unit for rounding.
		if hasDur {
			us, err := strconv.ParseInt(strings.TrimSpace(rec[durCol]), 10, 64)
			if diff := us - int64((s.End-s.Start)/1000); err != nil || diff < -1 || diff > 1 {
				d.DurationMismatches++
			}
		}
		if prev, dup := d.Index[s.ID]; dup {
			// A parent id would be ambiguous, and so would the truth we record.
			return nil, bad("duplicate SpanID %s (first on line %d)", s.ID, d.Spans[prev].Line)
		}
		d.Index[s.ID] = len(d.Spans)
		d.Spans = append(d.Spans, s)
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

// ServiceFromPod returns the workload name of a pod, the usual service.name in
// Kubernetes: ts-gateway-service-6f6cfc45b-h5m2n -> ts-gateway-service. The
// second result says which rule matched: "deployment", "statefulset", or "" when
// none did and the pod name itself is used.
func ServiceFromPod(pod string) (string, string) {
	if m := deploymentPod.FindStringSubmatch(pod); m != nil {
		return m[1], "deployment"
	}
	if m := statefulSetPod.FindStringSubmatch(pod); m != nil {
		return m[1], "statefulset"
	}
	return pod, ""
}

// OpClass is what the operation name tells us about a span.
type OpClass struct {
	Rule  string
	Kind  ptrace.SpanKind
	Attrs [][2]string
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

// Classify returns the kind and attributes an operation name implies.
func Classify(op string) OpClass {
	if m := httpClientOp.FindStringSubmatch(op); m != nil {
		if httpMethods[m[1]] {
			return OpClass{"http-client", ptrace.SpanKindClient, [][2]string{{"http.request.method", m[1]}}}
		}
		return OpClass{"http-client", ptrace.SpanKindClient, [][2]string{{"http.request.method", "_OTHER"}, {"http.request.method_original", m[1]}}}
	}
	if strings.HasPrefix(op, "/") {
		// The method is not in the data, so http.request.method is left out.
		return OpClass{"http-server", ptrace.SpanKindServer, [][2]string{{"http.route", op}}}
	}
	if m := jdbcOp.FindStringSubmatch(op); m != nil {
		return OpClass{"db-client", ptrace.SpanKindClient, [][2]string{
			{"db.system.name", "mysql"}, // TrainTicket's services all use MySQL
			{"db.namespace", m[2]},
			{"db.collection.name", m[3]},
			{"db.operation.name", m[1]},
			{"db.query.summary", op},
		}}
	}
	if hibernateOp.MatchString(op) {
		return OpClass{"hibernate", ptrace.SpanKindInternal, nil}
	}
	if m := messagingOp.FindStringSubmatch(op); m != nil {
		dest := m[1]
		if dest == "<default>" {
			dest = ""
		}
		attrs := [][2]string{{"messaging.system", "rabbitmq"}, {"messaging.destination.name", dest}, {"messaging.operation.name", m[2]}}
		if m[2] == "send" || m[2] == "publish" {
			return OpClass{"messaging-producer", ptrace.SpanKindProducer, append(attrs, [2]string{"messaging.operation.type", "send"})}
		}
		return OpClass{"messaging-consumer", ptrace.SpanKindConsumer, append(attrs, [2]string{"messaging.operation.type", m[2]})}
	}
	return OpClass{"internal", ptrace.SpanKindInternal, nil}
}

// Emit builds the spans with their full context and hands them to emit as OTLP
// requests, one by one: spans in end-time order (the order an exporter sends
// them), batch spans per request, one ResourceSpans per pod in each.
func (d *Data) Emit(batch int, emit func(ptrace.Traces) error) error {
	if batch < 1 {
		return fmt.Errorf("nezha: batch must be ≥ 1, got %d", batch)
	}
	order := make([]int, len(d.Spans))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(d.Spans[a].End, d.Spans[b].End) })

	classes := map[string]OpClass{}
	for lo := 0; lo < len(order); lo += batch {
		td := ptrace.NewTraces()
		byPod := map[string]ptrace.SpanSlice{}
		for _, i := range order[lo:min(lo+batch, len(order))] {
			s := d.Spans[i]
			spans, ok := byPod[s.Pod]
			if !ok {
				rs := td.ResourceSpans().AppendEmpty()
				svc, rule := ServiceFromPod(s.Pod)
				ra := rs.Resource().Attributes()
				ra.PutStr("service.name", svc)
				ra.PutStr("service.instance.id", s.Pod)
				ra.PutStr("k8s.pod.name", s.Pod)
				switch rule {
				case "deployment":
					ra.PutStr("k8s.deployment.name", svc)
				case "statefulset":
					ra.PutStr("k8s.statefulset.name", svc)
				}
				ss := rs.ScopeSpans().AppendEmpty()
				ss.Scope().SetName(Scope)
				spans = ss.Spans()
				byPod[s.Pod] = spans
			}
			c, ok := classes[s.Op]
			if !ok {
				c = Classify(s.Op)
				classes[s.Op] = c
			}
			sp := spans.AppendEmpty()
			sp.SetName(s.Op)
			sp.SetKind(c.Kind)
			sp.SetTraceID(s.Trace)
			sp.SetSpanID(s.ID)
			sp.SetParentSpanID(s.Parent)
			sp.SetStartTimestamp(pcommon.Timestamp(s.Start))
			sp.SetEndTimestamp(pcommon.Timestamp(s.End))
			attrs := sp.Attributes()
			for _, kv := range c.Attrs {
				attrs.PutStr(kv[0], kv[1])
			}
		}
		if err := emit(td); err != nil {
			return err
		}
	}
	return nil
}

// Traces returns every span with its full context in one ptrace.Traces, as the
// requests Emit makes one after the other (batch spans each).
func (d *Data) Traces(batch int) (ptrace.Traces, error) {
	out := ptrace.NewTraces()
	err := d.Emit(batch, func(td ptrace.Traces) error {
		td.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
		return nil
	})
	return out, err
}
