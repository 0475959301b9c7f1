package main

import (
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tierscope/tierscope/internal/nezha"
	"github.com/tierscope/tierscope/internal/otlpjsonl"
)

// The two real TrainTicket captures of the Nezha dataset, kept gzipped in
// testdata.
const nezhaDataDir = "../../testdata/nezha"

var nezhaCaptures = []string{"2023-01-29_08_50_trace.csv", "2023-01-30_11_39_trace.csv"}

const nezhaExcerpt = "../../testdata/nezha/excerpt.csv"

// nezhaCapture returns the path of an uncompressed copy of a capture, since
// convert reads plain CSV (as the dataset ships it).
func nezhaCapture(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(nezhaDataDir, name+".gz"))
	if err != nil {
		t.Fatalf("Nezha capture missing: %v", err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, name, string(data))
}

// csvRow is a row of the input, read independently of the converter.
type csvRow struct {
	trace, parent, pod, op, start, end string
}

func readCSVRows(t *testing.T, path string) (map[string]csvRow, []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]csvRow{}
	var order []string
	for _, r := range recs[1:] {
		parent := r[2]
		if parent == "root" {
			parent = ""
		}
		rows[r[1]] = csvRow{trace: r[0], parent: parent, pod: r[3], op: r[4], start: r[5], end: r[6]}
		order = append(order, r[1])
	}
	return rows, order
}

// outSpan is a converted span with its resource.
type outSpan struct {
	span     ptrace.Span
	resource pcommon.Map
}

func (s outSpan) attr(k string) (string, bool) {
	v, ok := s.span.Attributes().Get(k)
	if !ok {
		return "", false
	}
	return v.AsString(), true
}

func (s outSpan) res(k string) string {
	if v, ok := s.resource.Get(k); ok {
		return v.AsString()
	}
	return ""
}

// convertNezha runs the command and returns the spans by span id, the output
// bytes and the summary line.
func convertNezha(t *testing.T, in string, args ...string) (map[string]outSpan, []byte, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "spans.jsonl")
	argv := append([]string{"convert", "--from", "nezha", "--in", in, "--out", out}, args...)
	code, stdout, errs := runCLI(t, "", argv...)
	if code != 0 || stdout != "" {
		t.Fatalf("convert %v: exit %d, stdout %q, stderr %s", args, code, stdout, errs)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	td, _, err := otlpjsonl.Read(bytes.NewReader(data), out)
	if err != nil {
		t.Fatal(err)
	}
	spans := map[string]outSpan{}
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		if rs.ScopeSpans().Len() != 1 || rs.ScopeSpans().At(0).Scope().Name() != nezha.Scope {
			t.Fatalf("want one ScopeSpans named %s per resource", nezha.Scope)
		}
		ss := rs.ScopeSpans().At(0).Spans()
		for j := 0; j < ss.Len(); j++ {
			id := ss.At(j).SpanID().String()
			if _, dup := spans[id]; dup {
				t.Fatalf("span %s written twice", id)
			}
			spans[id] = outSpan{ss.At(j), rs.Resource().Attributes()}
		}
	}
	return spans, data, strings.TrimSpace(errs)
}

// Without stripping, every row becomes one span with its ids, times, name and pod,
// and the kinds agree with the structure (see the comment at the top of
// convert.go). The counts per rule are pinned so that a change in the rules shows.
func TestConvertNezhaNone(t *testing.T) {
	want := map[string]string{
		nezhaCaptures[0]: "db-client=1044 hibernate=719 http-client=783 http-server=854 internal=1490 messaging-consumer=0 messaging-producer=0",
		nezhaCaptures[1]: "db-client=939 hibernate=725 http-client=726 http-server=788 internal=1402 messaging-consumer=10 messaging-producer=5",
	}
	for _, name := range nezhaCaptures {
		t.Run(name, func(t *testing.T) {
			in := nezhaCapture(t, name)
			rows, _ := readCSVRows(t, in)
			spans, _, summary := convertNezha(t, in)
			if len(spans) != len(rows) {
				t.Fatalf("%d spans out, %d rows in", len(spans), len(rows))
			}
			byRule := map[string]int{}
			children := map[string][]outSpan{}
			for id, r := range rows {
				s, ok := spans[id]
				if !ok {
					t.Fatalf("span %s missing", id)
				}
				sp := s.span
				if sp.TraceID().String() != r.trace || sp.ParentSpanID().String() != r.parent || sp.Name() != r.op ||
					fmt.Sprint(uint64(sp.StartTimestamp())) != r.start || fmt.Sprint(uint64(sp.EndTimestamp())) != r.end {
					t.Fatalf("span %s does not match its row %+v", id, r)
				}
				svc, _ := nezha.ServiceFromPod(r.pod)
				if s.res("service.name") != svc || s.res("service.instance.id") != r.pod || s.res("k8s.pod.name") != r.pod || !strings.HasPrefix(r.pod, svc+"-") {
					t.Fatalf("span %s: resource %v for pod %s", id, s.resource.AsRaw(), r.pod)
				}
				if _, ok := s.attr(attrTruthParent); ok {
					t.Fatalf("span %s: truth attributes without --strip", id)
				}
				c := nezha.Classify(r.op)
				if sp.Kind() != c.Kind {
					t.Fatalf("span %s %q: kind %v, want %v", id, r.op, sp.Kind(), c.Kind)
				}
				byRule[c.Rule]++
				children[r.parent] = append(children[r.parent], s)
			}
			var got []string
			for _, rule := range []string{"db-client", "hibernate", "http-client", "http-server", "internal", "messaging-consumer", "messaging-producer"} {
				got = append(got, fmt.Sprintf("%s=%d", rule, byRule[rule]))
			}
			if strings.Join(got, " ") != want[name] {
				t.Errorf("spans per rule:\n got %s\nwant %s", strings.Join(got, " "), want[name])
			}
			t.Logf("%s: %s", name, summary)

			// The kinds against the ground-truth structure.
			crossPod := 0
			for id, r := range rows {
				s := spans[id]
				kids := children[id]
				switch kind := s.span.Kind(); {
				case r.parent == "":
					if kind != ptrace.SpanKindServer {
						t.Errorf("root %s %q is %v, want SERVER", id, r.op, kind)
					}
				case rows[r.parent].pod != r.pod:
					crossPod++
					pk := spans[r.parent].span.Kind()
					if !(pk == ptrace.SpanKindClient && kind == ptrace.SpanKindServer) && !(pk == ptrace.SpanKindProducer && kind == ptrace.SpanKindConsumer) {
						t.Errorf("cross-pod link %v %q -> %v %q", pk, rows[r.parent].op, kind, r.op)
					}
				case kind == ptrace.SpanKindServer || kind == ptrace.SpanKindConsumer:
					t.Errorf("%v span %s %q has a parent in its own pod", kind, id, r.op)
				}
				if _, isDB := s.attr("db.system.name"); isDB && len(kids) != 0 {
					t.Errorf("database CLIENT span %s %q has %d children", id, r.op, len(kids))
				}
				// Hibernate's statement spans wrap exactly one JDBC call, which is why
				// they are INTERNAL: as CLIENT spans they would count it twice.
				if c := nezha.Classify(r.op); c.Rule == "hibernate" && !strings.Contains(r.op, ".") {
					if len(kids) != 1 || kids[0].span.Kind() != ptrace.SpanKindClient || kids[0].res("k8s.pod.name") != r.pod {
						t.Errorf("Hibernate span %s %q: want exactly one JDBC CLIENT child in its pod, got %d", id, r.op, len(kids))
					} else if _, ok := kids[0].attr("db.system.name"); !ok {
						t.Errorf("Hibernate span %s %q: child %q is no database call", id, r.op, kids[0].span.Name())
					}
				}
				if _, isHTTP := s.attr("http.request.method"); isHTTP {
					if len(kids) != 1 || kids[0].span.Kind() != ptrace.SpanKindServer || kids[0].res("k8s.pod.name") == r.pod {
						t.Errorf("HTTP CLIENT span %s: want exactly one SERVER child in another pod, got %d", id, len(kids))
					}
				}
			}
			if !strings.Contains(summary, fmt.Sprintf("%d cross-pod links, 0 links broken", crossPod)) {
				t.Errorf("summary %q, want %d cross-pod links", summary, crossPod)
			}
		})
	}
}

func TestConvertNezhaStripAll(t *testing.T) {
	for _, name := range nezhaCaptures {
		t.Run(name, func(t *testing.T) {
			in := nezhaCapture(t, name)
			rows, _ := readCSVRows(t, in)
			spans, data, summary := convertNezha(t, in, "--strip", "all")
			if len(spans) != len(rows) {
				t.Fatalf("%d spans out, %d rows in", len(spans), len(rows))
			}
			traces := map[pcommon.TraceID]bool{}
			withParent := 0
			for id, r := range rows {
				s := spans[id]
				if !s.span.ParentSpanID().IsEmpty() {
					t.Fatalf("span %s kept parent %s", id, s.span.ParentSpanID())
				}
				traces[s.span.TraceID()] = true
				checkTruth(t, s, id, r)
				if r.parent != "" {
					withParent++
				}
			}
			if len(traces) != len(rows) {
				t.Fatalf("%d distinct trace ids for %d spans", len(traces), len(rows))
			}
			if !strings.Contains(summary, fmt.Sprintf("%d links broken", withParent)) {
				t.Errorf("summary %q, want %d links broken", summary, withParent)
			}
			// Reproducible: the fresh ids are derived, not random.
			if _, again, _ := convertNezha(t, in, "--strip", "all"); !bytes.Equal(data, again) {
				t.Fatal("two runs differ")
			}
		})
	}
}

func checkTruth(t *testing.T, s outSpan, id string, r csvRow) {
	t.Helper()
	p, ok1 := s.attr(attrTruthParent)
	tr, ok2 := s.attr(attrTruthTrace)
	if !ok1 || !ok2 || p != r.parent || tr != r.trace {
		t.Fatalf("span %s: truth parent %q trace %q, want %q %q", id, p, tr, r.parent, r.trace)
	}
}

func TestConvertNezhaStripCrossService(t *testing.T) {
	for _, name := range nezhaCaptures {
		t.Run(name, func(t *testing.T) {
			in := nezhaCapture(t, name)
			rows, _ := readCSVRows(t, in)
			spans, _, summary := convertNezha(t, in, "--strip", "cross-service")
			if len(spans) != len(rows) {
				t.Fatalf("%d spans out, %d rows in", len(spans), len(rows))
			}
			cut, roots := 0, 0
			traces := map[pcommon.TraceID]bool{}
			for id, r := range rows {
				s := spans[id].span
				checkTruth(t, spans[id], id, r)
				traces[s.TraceID()] = true
				switch {
				case r.parent == "":
					roots++
					if !s.ParentSpanID().IsEmpty() || s.TraceID().String() != r.trace {
						t.Fatalf("root %s changed: parent %s trace %s", id, s.ParentSpanID(), s.TraceID())
					}
				case rows[r.parent].pod != r.pod:
					cut++
					if !s.ParentSpanID().IsEmpty() || s.TraceID().String() == r.trace {
						t.Fatalf("cross-pod span %s kept its context: parent %s trace %s", id, s.ParentSpanID(), s.TraceID())
					}
				default:
					if s.ParentSpanID().String() != r.parent || s.TraceID() != spans[r.parent].span.TraceID() {
						t.Fatalf("same-pod span %s: parent %s trace %s, want parent %s in its parent's trace %s",
							id, s.ParentSpanID(), s.TraceID(), r.parent, spans[r.parent].span.TraceID())
					}
				}
			}
			// One trace per true root and one per cut, all distinct.
			if len(traces) != roots+cut {
				t.Fatalf("%d traces, want %d roots + %d cuts", len(traces), roots, cut)
			}
			if !strings.Contains(summary, fmt.Sprintf("%d cross-pod links, %d links broken", cut, cut)) {
				t.Errorf("summary %q, want %d links broken", summary, cut)
			}
		})
	}
}

// The excerpt in testdata: fast, from standard input, in several batches.
func TestConvertNezhaExcerptBatches(t *testing.T) {
	data, err := os.ReadFile(nezhaExcerpt)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, string(data), "convert", "--from", "nezha", "--in", "-", "--batch", "10", "--strip", "cross-service")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := "tierscope convert <stdin>: 83 spans, 4 traces (16 after --strip cross-service), 12 services on 12 pods; kinds server=16 client=26 producer=0 consumer=0 internal=41; 12 cross-pod links, 12 links broken; 0 duration mismatches\n"
	if errs != want {
		t.Errorf("summary\n got %q\nwant %q", errs, want)
	}
	r := otlpjsonl.NewReader(strings.NewReader(out), "out")
	lines, spans := 0, 0
	var prevLast pcommon.Timestamp // the latest end on the previous line
	for {
		td, _, err := r.Next()
		if err != nil {
			break
		}
		lines++
		pods := map[string]bool{}
		first, last := pcommon.Timestamp(1<<63), pcommon.Timestamp(0)
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			pod, _ := rs.Resource().Attributes().Get("k8s.pod.name")
			if pods[pod.Str()] {
				t.Fatalf("line %d: pod %s has two ResourceSpans", lines, pod.Str())
			}
			pods[pod.Str()] = true
			ss := rs.ScopeSpans().At(0).Spans()
			for j := 0; j < ss.Len(); j++ {
				spans++
				first, last = min(first, ss.At(j).EndTimestamp()), max(last, ss.At(j).EndTimestamp())
			}
		}
		if first < prevLast {
			t.Fatalf("line %d has a span that ended before one on the previous line", lines)
		}
		prevLast = last
	}
	if lines != 9 || spans != 83 {
		t.Fatalf("%d lines, %d spans; want 9 lines of up to 10 spans, 83 in all", lines, spans)
	}
}

func TestConvertNezhaBadInput(t *testing.T) {
	const header = "TraceID,SpanID,ParentID,PodName,OperationName,StartTimeUnixNano,EndTimeUnixNano,Duration\n"
	const good = "898fbabdd1894463575af052c4cd7982,233d5101e107e112,root,ts-gateway-service-6f6cfc45b-h5m2n,/*,1674982159219000000,1674982159247160439,28160\n"
	const child = "898fbabdd1894463575af052c4cd7982,f613c6a34f920926,233d5101e107e112,ts-gateway-service-6f6cfc45b-h5m2n,FilteringWebHandler.handle,1674982159219813595,1674982159246951110,27137\n"
	cases := []struct {
		name, content, strip, want string
	}{
		{"short", header + good + "898fbabdd1894463575af052c4cd7982,f613c6a34f920926,root\n", "none", "short.csv:3: 3 fields, want 8 (TraceID,SpanID,"},
		{"badtrace", header + good + strings.Replace(child, "898fbabdd", "898fbabdz", 1), "none", "badtrace.csv:3: TraceID"},
		{"shorttrace", header + strings.Replace(good, "898fbabdd1894463575af052c4cd7982", "898fbabdd1894463575af052c4cd798", 1), "none", "shorttrace.csv:2: TraceID"},
		{"badspan", header + good + strings.Replace(child, "f613c6a34f920926", "f613c6a34f92092", 1), "none", "badspan.csv:3: SpanID"},
		{"zerospan", header + strings.Replace(good, "233d5101e107e112", "0000000000000000", 1), "none", `zerospan.csv:2: SpanID "0000000000000000" is all zeros`},
		{"longspan", header + strings.Replace(good, "233d5101e107e112", "233d5101e107e1120", 1), "none", `longspan.csv:2: SpanID "233d5101e107e1120" is not 16 hex digits`},
		{"badparent", header + good + strings.Replace(child, ",233d5101e107e112,", ",none,", 1), "none", "badparent.csv:3: ParentID"},
		{"start", header + good + strings.Replace(child, "1674982159219813595", "12:00", 1), "none", "start.csv:3: StartTimeUnixNano"},
		{"end", header + good + strings.Replace(child, "1674982159246951110", "-5", 1), "none", "end.csv:3: EndTimeUnixNano"},
		{"backwards", header + good + strings.Replace(child, "1674982159246951110", "1674982159219813594", 1), "none", "backwards.csv:3: EndTimeUnixNano 1674982159219813594 is before"},
		{"dup", header + good + child + child, "none", "dup.csv:4: duplicate SpanID f613c6a34f920926 (first on line 3)"},
		{"header", "TraceID,SpanID,Parent\n" + good, "none", "header.csv:1: missing column ParentID"},
		{"empty", "", "none", "empty.csv:1: empty input"},
		{"quote", header + good + `"abc,` + "\n", "none", "quote.csv:3:"},
		{"cycle", header +
			"898fbabdd1894463575af052c4cd7982,1111111111111111,2222222222222222,p,a,1,2,0\n" +
			"898fbabdd1894463575af052c4cd7982,2222222222222222,1111111111111111,p,b,1,2,0\n", "cross-service", "cycle.csv:3: span 2222222222222222 is its own ancestor"},
	}
	for _, c := range cases {
		in := writeFile(t, c.name+".csv", c.content)
		out := filepath.Join(filepath.Dir(in), "out.jsonl")
		code, stdout, errs := runCLI(t, "", "convert", "--from", "nezha", "--in", in, "--strip", c.strip, "--out", out)
		if code != 1 || stdout != "" {
			t.Errorf("%s: exit %d, stdout %q; want exit 1", c.name, code, stdout)
		}
		if !strings.Contains(errs, filepath.Dir(in)+"/"+c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%s: error %q, want one line containing %q", c.name, errs, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: a failed run left %s behind", c.name, out)
		}
	}
}

// Duration is only a consistency check: a wrong or missing value is counted.
func TestConvertNezhaDurationMismatch(t *testing.T) {
	in := writeFile(t, "d.csv", "TraceID,SpanID,ParentID,PodName,OperationName,StartTimeUnixNano,EndTimeUnixNano,Duration\n"+
		"898fbabdd1894463575af052c4cd7982,233d5101e107e112,root,pod,/*,1000000,3000000,2000\n"+
		"898fbabdd1894463575af052c4cd7982,f613c6a34f920926,233d5101e107e112,pod,x,1000000,3000000,7\n"+
		"898fbabdd1894463575af052c4cd7982,f613c6a34f920927,233d5101e107e112,pod,y,1000000,3000000,\n")
	code, out, errs := runCLI(t, "", "convert", "--from", "nezha", "--in", in)
	if code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	if !strings.Contains(errs, "1 services on 1 pods (1 pod names fit no rule") || !strings.HasSuffix(errs, "; 2 duration mismatches\n") {
		t.Fatalf("summary %q", errs)
	}
}

func TestConvertUsage(t *testing.T) {
	for _, args := range [][]string{
		{"convert", "--in", nezhaExcerpt},
		{"convert", "--from", "jaeger", "--in", nezhaExcerpt},
		{"convert", "--from", "nezha", "--in", nezhaExcerpt, "--strip", "some"},
		{"convert", "--from", "nezha", "--in", nezhaExcerpt, "--batch", "0"},
		{"convert", "--from", "nezha"},
		{"convert", "--from", "nezha", nezhaExcerpt},
	} {
		if code, _, errs := runCLI(t, "", args...); code != 2 || !regexp.MustCompile(`^tierscope convert: .*\n$`).MatchString(errs) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line", args, code, errs)
		}
	}
}

// A parent outside the file (a capture cut mid-trace) is an orphan already:
// cross-service keeps the link since we cannot tell where the parent ran, all
// removes it, and both record the truth.
func TestConvertNezhaParentNotInFile(t *testing.T) {
	in := writeFile(t, "p.csv", "TraceID,SpanID,ParentID,PodName,OperationName,StartTimeUnixNano,EndTimeUnixNano,Duration\n"+
		"898fbabdd1894463575af052c4cd7982,f613c6a34f920926,233d5101e107e112,a-6f6cfc45b-h5m2n,x,1000000,3000000,2000\n"+
		"898fbabdd1894463575af052c4cd7982,f613c6a34f920927,f613c6a34f920926,a-6f6cfc45b-h5m2n,y,1000000,3000000,2000\n")
	const id, parent, trace = "f613c6a34f920926", "233d5101e107e112", "898fbabdd1894463575af052c4cd7982"
	truth := csvRow{parent: parent, trace: trace}

	spans, _, summary := convertNezha(t, in, "--strip", "cross-service")
	s := spans[id].span
	checkTruth(t, spans[id], id, truth)
	if s.ParentSpanID().String() != parent || s.TraceID().String() != trace ||
		!strings.Contains(summary, "; 0 cross-pod links, 0 links broken, 1 parents not in the file;") {
		t.Errorf("--strip cross-service: parent %s trace %s, summary %q", s.ParentSpanID(), s.TraceID(), summary)
	}

	spans, _, summary = convertNezha(t, in, "--strip", "all")
	s = spans[id].span
	checkTruth(t, spans[id], id, truth)
	if !s.ParentSpanID().IsEmpty() || s.TraceID() != derivedTraceID(s.SpanID()) ||
		!strings.Contains(summary, "; 0 cross-pod links, 2 links broken, 1 parents not in the file;") {
		t.Errorf("--strip all: parent %s trace %s, summary %q", s.ParentSpanID(), s.TraceID(), summary)
	}
}

// A gzip capture converts as its decompressed text does, from a file or from
// standard input, and a corrupt one is refused with its name.
func TestConvertGzipInput(t *testing.T) {
	gz := filepath.Join(nezhaDataDir, nezhaCaptures[1]+".gz")
	plain := nezhaCapture(t, nezhaCaptures[1])
	_, want, _ := runCLI(t, "", "convert", "--from", "nezha", "--in", plain, "--strip", "all")
	code, got, errs := runCLI(t, "", "convert", "--from", "nezha", "--in", gz, "--strip", "all")
	if code != 0 || got != want {
		t.Fatalf("gzip file: exit %d, same output %v: %s", code, got == want, errs)
	}
	data, err := os.ReadFile(gz)
	if err != nil {
		t.Fatal(err)
	}
	if code, got, errs = runCLI(t, string(data), "convert", "--from", "nezha", "--in", "-", "--strip", "all"); code != 0 || got != want {
		t.Fatalf("gzip on stdin: exit %d, same output %v: %s", code, got == want, errs)
	}
	corrupt := writeFile(t, "corrupt.csv.gz", "\x1f\x8bnot gzip")
	if code, _, errs = runCLI(t, "", "convert", "--from", "nezha", "--in", corrupt); code == 0 || !strings.Contains(errs, "corrupt.csv.gz") {
		t.Fatalf("corrupt gzip: exit %d: %s", code, errs)
	}
}
