package otlpjsonl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// batch builds a request with one resource and n spans whose ids start at first.
func batch(service string, first, n int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("test")
	for i := first; i < first+n; i++ {
		s := ss.Spans().AppendEmpty()
		s.SetName(fmt.Sprintf("op%d", i))
		s.SetTraceID(pcommon.TraceID{15: byte(i), 0: 1})
		s.SetSpanID(pcommon.SpanID{7: byte(i), 0: 2})
		s.SetParentSpanID(pcommon.SpanID{7: byte(i + 1), 0: 3})
		s.SetKind(ptrace.SpanKindServer)
		s.SetStartTimestamp(pcommon.Timestamp(1_000_000 * i))
		s.SetEndTimestamp(pcommon.Timestamp(1_000_000*i + 500))
		s.Attributes().PutStr("http.route", "/a\nb") // a newline inside a string must stay escaped
	}
	return td
}

func write(t *testing.T, tds ...ptrace.Traces) string {
	t.Helper()
	var b bytes.Buffer
	w := NewWriter(&b)
	for _, td := range tds {
		if err := w.Write(td); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestRoundTrip(t *testing.T) {
	a, b := batch("a", 1, 3), batch("b", 10, 2)
	text := write(t, a, b)
	if got := strings.Count(text, "\n"); got != 2 {
		t.Fatalf("want 2 lines, got %d:\n%s", got, text)
	}
	r := NewReader(strings.NewReader(text), "x.jsonl")
	for i, want := range []ptrace.Traces{a, b} {
		td, line, err := r.Next()
		if err != nil || line != i+1 {
			t.Fatalf("request %d: line %d, err %v", i, line, err)
		}
		m := ptrace.JSONMarshaler{}
		gotJSON, _ := m.MarshalTraces(td)
		wantJSON, _ := m.MarshalTraces(want)
		if !bytes.Equal(gotJSON, wantJSON) {
			t.Fatalf("request %d differs:\n got %s\nwant %s", i, gotJSON, wantJSON)
		}
	}
	if _, _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("want EOF, got %v", err)
	}

	all, n, err := Read(strings.NewReader(text), "x.jsonl")
	if err != nil || n != 2 || all.ResourceSpans().Len() != 2 || all.SpanCount() != 5 {
		t.Fatalf("Read: n=%d resources=%d spans=%d err=%v", n, all.ResourceSpans().Len(), all.SpanCount(), err)
	}
	if got := all.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().AsRaw()["http.route"]; got != "/a\nb" {
		t.Fatalf("attribute %q", got)
	}
}

func TestErrorNamesFileAndLine(t *testing.T) {
	good := strings.TrimSuffix(write(t, batch("a", 1, 1)), "\n")
	for _, tc := range []struct{ name, text, want string }{
		{"garbage", good + "\n\n" + "{not json\n" + good + "\n", "spans.jsonl:3: invalid OTLP/JSON"},
		{"bad trace id", good + "\n" + `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"xyz"}]}]}]}`, "spans.jsonl:2: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Read(strings.NewReader(tc.text), "spans.jsonl")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("want error starting %q, got %v", tc.want, err)
			}
			// The error is sticky.
			r := NewReader(strings.NewReader(tc.text), "spans.jsonl")
			var first error
			for first == nil {
				_, _, first = r.Next()
			}
			if _, _, again := r.Next(); again != first {
				t.Fatalf("error not sticky: %v then %v", first, again)
			}
		})
	}
}

func TestBlankLinesAndCRLF(t *testing.T) {
	one := strings.TrimSuffix(write(t, batch("a", 1, 2)), "\n")
	text := "\n  \n" + one + "\r\n\t\r\n\n" + one // no final newline
	r := NewReader(strings.NewReader(text), "x")
	var lines []int
	for {
		td, line, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if td.SpanCount() != 2 {
			t.Fatalf("line %d: %d spans", line, td.SpanCount())
		}
		lines = append(lines, line)
	}
	if fmt.Sprint(lines) != "[3 6]" {
		t.Fatalf("lines %v, want [3 6]", lines)
	}
}

func TestEmptyInput(t *testing.T) {
	for _, text := range []string{"", "\n", "\n \n\r\n"} {
		td, n, err := Read(strings.NewReader(text), "x")
		if err != nil || n != 0 || td.SpanCount() != 0 {
			t.Fatalf("%q: n=%d spans=%d err=%v", text, n, td.SpanCount(), err)
		}
	}
}

func TestHugeLine(t *testing.T) {
	// About 20 MB on one line: far beyond bufio's default 64 KiB and 4 MiB limits.
	td := batch("big", 0, 1)
	s := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	s.Attributes().PutStr("blob", strings.Repeat("x", 20<<20))
	text := write(t, td, batch("small", 1, 1))
	got, n, err := Read(strings.NewReader(text), "x")
	if err != nil || n != 2 || got.SpanCount() != 2 {
		t.Fatalf("n=%d spans=%d err=%v", n, got.SpanCount(), err)
	}
	blob, _ := got.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().Get("blob")
	if len(blob.Str()) != 20<<20 {
		t.Fatalf("blob has %d bytes", len(blob.Str()))
	}

	// Past the cap: a clear error naming the line, with or without a final newline.
	firstLen := strings.IndexByte(text, '\n')
	for _, limit := range []int{firstLen - 1, 1 << 16} {
		for _, tail := range []string{text, text[:firstLen]} {
			r := NewReader(strings.NewReader(tail), "big.jsonl")
			r.MaxLineBytes = limit
			_, _, err := r.Next()
			want := fmt.Sprintf("big.jsonl:1: line longer than %d bytes", limit)
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("limit %d: want %q, got %v", limit, want, err)
			}
		}
	}
	// Exactly at the cap is fine.
	r := NewReader(strings.NewReader(text), "big.jsonl")
	r.MaxLineBytes = firstLen
	if _, _, err := r.Next(); err != nil {
		t.Fatalf("line of exactly the limit: %v", err)
	}
	r = NewReader(strings.NewReader(text[:firstLen]), "big.jsonl")
	r.MaxLineBytes = firstLen
	if _, _, err := r.Next(); err != nil {
		t.Fatalf("last line of exactly the limit: %v", err)
	}
}

// WriteFile writes what NewWriter writes, one line per batch, and fails
// naming a path it cannot create.
func TestWriteFile(t *testing.T) {
	a, b := batch("a", 1, 3), batch("b", 10, 2)
	path := filepath.Join(t.TempDir(), "spans.jsonl")
	if err := WriteFile(path, a, b); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := write(t, a, b); string(got) != want {
		t.Fatalf("file differs from the writer's output:\n got %s\nwant %s", got, want)
	}
	bad := filepath.Join(t.TempDir(), "missing", "spans.jsonl")
	if err := WriteFile(bad, a); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("want an error naming %s, got %v", bad, err)
	}
}
