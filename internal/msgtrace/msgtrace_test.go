package msgtrace_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/tierscope/tierscope/internal/causal"
	"github.com/tierscope/tierscope/internal/msgtrace"
)

// row is a message spelled out with its strings, for building and comparing traces.
type row struct {
	time     int64
	op       causal.Op
	from, to string
	id, path string // "" for none
}

func (r row) String() string {
	return fmt.Sprintf("%d %v %q>%q id=%q path=%q", r.time, r.op, r.from, r.to, r.id, r.path)
}

// build interns rows in order, as Read does for a file in that order.
func build(rows []row) *causal.Trace {
	b := causal.NewTraceBuilder()
	for _, r := range rows {
		b.Add(causal.Message{
			Time:     r.time,
			Op:       r.op,
			Sender:   b.Node([]byte(r.from)),
			Receiver: b.Node([]byte(r.to)),
			CallID:   b.CallID([]byte(r.id)),
			PathID:   b.PathID([]byte(r.path)),
		})
	}
	return b.Trace()
}

// rows resolves the messages of t back to strings.
func rows(t *causal.Trace) []row {
	out := make([]row, 0, len(t.Messages))
	for _, m := range t.Messages {
		out = append(out, row{m.Time, m.Op, t.Nodes[m.Sender], t.Nodes[m.Receiver], t.CallIDs[m.CallID], t.PathIDs[m.PathID]})
	}
	return out
}

func mustRead(t *testing.T, input string) *causal.Trace {
	t.Helper()
	tr, err := msgtrace.Read(strings.NewReader(input), "trace.tsv")
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return tr
}

func assertRows(t *testing.T, got *causal.Trace, want []row) {
	t.Helper()
	if g := rows(got); !reflect.DeepEqual(g, want) && !(len(g) == 0 && len(want) == 0) {
		t.Errorf("messages:\ngot  %v\nwant %v", g, want)
	}
}

func TestRoundTrip(t *testing.T) {
	const s = int64(1e9)
	tests := []struct {
		name     string
		rows     []row
		withPath bool
	}{
		{"empty", nil, false},
		{"no paths", []row{
			{1047680084*s + 482205000, causal.OpCall, "nodeA", "nodeB", "id37", ""},
			{1047680084*s + 483575000, causal.OpReturn, "nodeB", "nodeA", "id37", ""},
			{1047680084*s + 490000000, causal.OpMessage, "nodeB", "nodeC", "", ""},
		}, false},
		{"paths", []row{
			{0, causal.OpCall, "web 1", "app", "c1", "p1"},
			{1, causal.OpCall, "app", "db", "c2", "p1"},
			{1, causal.OpReturn, "db", "app", "c2", "p1"}, // equal times keep their order
			{2, causal.OpReturn, "app", "web 1", "c1", ""},
			{math.MaxInt64, causal.OpMessage, "app", "web 1", "", "p2"},
		}, true},
		{"unusual names", []row{
			{5, causal.OpCall, "-", "#x", "é\x00\r", ""},
			{6, causal.OpReturn, "#x", "  ", "id\rx", ""},
		}, true}, // an id ending in CR forces the path column so the CR survives
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := build(tc.rows)
			var buf bytes.Buffer
			if err := msgtrace.Write(&buf, want); err != nil {
				t.Fatalf("Write: %v", err)
			}
			header, _, _ := strings.Cut(buf.String(), "\n")
			if hasPath := strings.HasSuffix(header, "\tpath"); hasPath != tc.withPath {
				t.Errorf("header %q: path column = %v, want %v", header, hasPath, tc.withPath)
			}
			got, err := msgtrace.Read(&buf, "trace.tsv")
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip:\ngot  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestWriteFormat(t *testing.T) {
	tr := build([]row{
		{1047680084482205000, causal.OpCall, "nodeA", "nodeB", "id37", "p1"},
		{1047680084483575001, causal.OpReturn, "nodeB", "nodeA", "id37", ""},
		{7, causal.OpMessage, "nodeB", "nodeC", "", ""},
	})
	var buf bytes.Buffer
	if err := msgtrace.Write(&buf, tr); err != nil {
		t.Fatal(err)
	}
	// Slice order, not time order: Write does not sort.
	want := "# timestamp\toperation\tsender\treceiver\tid\tpath\n" +
		"0.000000007\tMSG_SENT\tnodeB\tnodeC\t-\t-\n" +
		"1047680084.482205000\tCALL_SENT\tnodeA\tnodeB\tid37\tp1\n" +
		"1047680084.483575001\tRET_SENT\tnodeB\tnodeA\tid37\t-\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestWriteRejects(t *testing.T) {
	valid := func() *causal.Trace {
		return build([]row{{1, causal.OpCall, "a", "b", "c1", "p1"}})
	}
	tests := []struct {
		name   string
		mutate func(*causal.Trace)
		want   string
	}{
		{"tab in node", func(t *causal.Trace) { t.Nodes[0] = "a\tb" }, "tab or newline"},
		{"newline in node", func(t *causal.Trace) { t.Nodes[1] = "a\nb" }, "tab or newline"},
		{"empty node", func(t *causal.Trace) { t.Nodes[0] = "" }, "empty"},
		{"tab in call id", func(t *causal.Trace) { t.CallIDs[1] = "c\t1" }, "tab or newline"},
		{"dash call id", func(t *causal.Trace) { t.CallIDs[1] = "-" }, "no id"},
		{"newline in path", func(t *causal.Trace) { t.PathIDs[1] = "p\n" }, "tab or newline"},
		{"path ends in CR", func(t *causal.Trace) { t.PathIDs[1] = "p\r" }, "carriage return"},
		{"negative time", func(t *causal.Trace) { t.Messages[0].Time = -1 }, "negative time"},
		{"bad op", func(t *causal.Trace) { t.Messages[0].Op = 9 }, "unknown operation"},
		{"sender range", func(t *causal.Trace) { t.Messages[0].Sender = 5 }, "sender 5 out of range"},
		{"receiver range", func(t *causal.Trace) { t.Messages[0].Receiver = -1 }, "receiver -1 out of range"},
		{"call id range", func(t *causal.Trace) { t.Messages[0].CallID = 2 }, "call id 2 out of range"},
		{"path id range", func(t *causal.Trace) { t.Messages[0].PathID = 2 }, "path id 2 out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := valid()
			tc.mutate(tr)
			var buf bytes.Buffer
			err := msgtrace.Write(&buf, tr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Write error = %v, want one containing %q", err, tc.want)
			}
			if buf.Len() != 0 {
				t.Errorf("Write wrote %d bytes before failing", buf.Len())
			}
		})
	}
}

func TestReadSorts(t *testing.T) {
	input := "3\tCALL_SENT\ta\tb\tc3\n" +
		"1\tCALL_SENT\ta\tb\tfirst\n" +
		"2\tCALL_SENT\ta\tb\tc2\n" +
		"1\tRET_SENT\tb\ta\tsecond\n" +
		"1\tMSG_SENT\tb\ta\tthird\n"
	const s = int64(1e9)
	assertRows(t, mustRead(t, input), []row{
		{1 * s, causal.OpCall, "a", "b", "first", ""},
		{1 * s, causal.OpReturn, "b", "a", "second", ""},
		{1 * s, causal.OpMessage, "b", "a", "third", ""},
		{2 * s, causal.OpCall, "a", "b", "c2", ""},
		{3 * s, causal.OpCall, "a", "b", "c3", ""},
	})
}

func TestReadSyntax(t *testing.T) {
	const s = int64(1e9)
	call := row{1 * s, causal.OpCall, "a", "b", "c1", ""}
	tests := []struct {
		name  string
		input string
		want  []row
	}{
		{"empty input", "", nil},
		{"only comments and blanks", "# header\n\n   \n\t \t\n#\tx\n", nil},
		{"no final newline", "1\tCALL_SENT\ta\tb\tc1", []row{call}},
		{"CRLF", "# c\r\n\r\n1\tCALL_SENT\ta\tb\tc1\r\n2\tRET_SENT\tb\ta\tc1\tp\r\n",
			[]row{call, {2 * s, causal.OpReturn, "b", "a", "c1", "p"}}},
		{"stray CRs at line end", "1\tCALL_SENT\ta\tb\tc1\r\r\n", []row{call}},
		{"CR inside a field is kept", "1\tCALL_SENT\ta\rx\tb\tc1\n",
			[]row{{1 * s, causal.OpCall, "a\rx", "b", "c1", ""}}},
		{"dash ids", "1\tMSG_SENT\ta\tb\t-\n2\tMSG_SENT\ta\tb\t-\t-\n",
			[]row{{1 * s, causal.OpMessage, "a", "b", "", ""}, {2 * s, causal.OpMessage, "a", "b", "", ""}}},
		{"5 and 6 columns mixed", "1\tCALL_SENT\ta\tb\tc1\n2\tCALL_SENT\ta\tb\tc2\tp9\n",
			[]row{call, {2 * s, causal.OpCall, "a", "b", "c2", "p9"}}},
		{"spaces belong to names", "1\tCALL_SENT\t a \tb b\t c1\n",
			[]row{{1 * s, causal.OpCall, " a ", "b b", " c1", ""}}},
		{"comment only at line start", "# 1\tCALL_SENT\ta\tb\tc1\n1\tCALL_SENT\t#a\tb\tc1\n",
			[]row{{1 * s, causal.OpCall, "#a", "b", "c1", ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertRows(t, mustRead(t, tc.input), tc.want)
		})
	}
}

func TestReadEmptyInput(t *testing.T) {
	tr := mustRead(t, "")
	if len(tr.Messages) != 0 || len(tr.Nodes) != 0 {
		t.Errorf("got %d messages, %d nodes; want none", len(tr.Messages), len(tr.Nodes))
	}
	if len(tr.CallIDs) != 1 || len(tr.PathIDs) != 1 {
		t.Errorf("id tables %q %q, want just the none entry", tr.CallIDs, tr.PathIDs)
	}
}

func TestReadErrors(t *testing.T) {
	const ok = "1\tCALL_SENT\ta\tb\tc1\n"
	tests := []struct {
		name  string
		input string
		line  int
		msg   string
	}{
		{"truncated", ok + "1\tCALL_SENT\ta\n", 2, "truncated line: 3 columns, want 5 or 6"},
		{"one column", "12345\n", 1, "truncated line: 1 columns, want 5 or 6"},
		{"too many columns", "# c\n\n" + "1\tCALL_SENT\ta\tb\tc\tp\tx\ty\n", 3, "too many columns: 8, want 5 or 6"},
		{"trailing tab after path", "1\tCALL_SENT\ta\tb\tc\tp\t\n", 1, "too many columns: 7, want 5 or 6"},
		{"empty timestamp", "\tCALL_SENT\ta\tb\tc\n", 1, "empty timestamp (column 1)"},
		{"empty sender", ok + ok + "1\tCALL_SENT\t\tb\tc\n", 3, "empty sender (column 3)"},
		{"empty receiver", "1\tCALL_SENT\ta\t\tc\n", 1, "empty receiver (column 4)"},
		{"empty id", "1\tCALL_SENT\ta\tb\t\r\n", 1, "empty id (column 5)"},
		{"empty path", "1\tCALL_SENT\ta\tb\tc\t\n", 1, "empty path (column 6)"},
		{"unknown operation", ok + "1\tCALL\ta\tb\tc\n", 2, `unknown operation "CALL", want CALL_SENT, RET_SENT or MSG_SENT`},
		{"lower-case operation", "1\tcall_sent\ta\tb\tc\n", 1, `unknown operation "call_sent", want CALL_SENT, RET_SENT or MSG_SENT`},
		{"bad timestamp", strings.Repeat(ok, 11) + "12x\tCALL_SENT\ta\tb\tc\n", 12, `bad timestamp "12x": not a decimal number`},
		{"negative timestamp", "-1\tCALL_SENT\ta\tb\tc\n", 1, `bad timestamp "-1": negative`},
		{"NaN timestamp", "NaN\tCALL_SENT\ta\tb\tc\n", 1, `bad timestamp "NaN": not a finite number`},
		{"Inf timestamp", "+Inf\tCALL_SENT\ta\tb\tc\n", 1, `bad timestamp "+Inf": not a finite number`},
		{"huge timestamp", "1e400\tCALL_SENT\ta\tb\tc\n", 1, `bad timestamp "1e400": out of range (max 9223372036.854775807 seconds)`},
		{"long bad field is shortened", strings.Repeat("9", 100) + "x\tCALL_SENT\ta\tb\tc\n", 1,
			`bad timestamp "` + strings.Repeat("9", 64) + `"...: not a decimal number`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertParseError(t, tc.input, tc.line, tc.msg)
		})
	}
}

func assertParseError(t *testing.T, input string, line int, msg string) {
	t.Helper()
	_, err := msgtrace.Read(strings.NewReader(input), "trace.tsv")
	var pe *msgtrace.ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("Read error = %v (%T), want a *ParseError", err, err)
	}
	if pe.File != "trace.tsv" || pe.Line != line || pe.Msg != msg {
		t.Errorf("got  %s:%d: %s\nwant trace.tsv:%d: %s", pe.File, pe.Line, pe.Msg, line, msg)
	}
	if want := fmt.Sprintf("trace.tsv:%d: %s", line, msg); err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

func TestReadTimestamps(t *testing.T) {
	tests := []struct {
		in   string
		want int64 // nanoseconds, when err is ""
		err  string
	}{
		{"1700000000.123456789", 1700000000123456789, ""},
		{"1047680084.482205", 1047680084482205000, ""},
		{"0", 0, ""},
		{"007", 7e9, ""},
		{"5.", 5e9, ""},
		{".5", 5e8, ""},
		{"1.1234567899", 1123456789, ""},            // the 10th digit is truncated...
		{"0.0000000009999", 0, ""},                  // ...never rounded up
		{"9223372036.854775807", math.MaxInt64, ""}, // the largest time
		{"9223372036.8547758079", math.MaxInt64, ""},
		{"1.047e9", 1047000000e9, ""},
		{"1.700000000123456789E9", 1700000000123456789, ""}, // exponents are exact too
		{"1047680084482205e-6", 1047680084482205000, ""},
		{"15e+2", 1500e9, ""},
		{"1e-9", 1, ""},
		{"1e-10", 0, ""},
		{"1e-400", 0, ""},
		{"0e999999999999999999999", 0, ""},
		{"abc", 0, "not a decimal number"},
		{"+1", 0, "not a decimal number"},
		{" 1", 0, "not a decimal number"},
		{"1 ", 0, "not a decimal number"},
		{".", 0, "not a decimal number"},
		{"1.2.3", 0, "not a decimal number"},
		{"1e", 0, "not a decimal number"},
		{"e5", 0, "not a decimal number"},
		{"0x10", 0, "not a decimal number"},
		{"1_000", 0, "not a decimal number"},
		{"-1", 0, "negative"},
		{"-0.5e3", 0, "negative"},
		{"NaN", 0, "not a finite number"},
		{"Inf", 0, "not a finite number"},
		{"-infinity", 0, "not a finite number"},
		{"1e400", 0, "out of range (max 9223372036.854775807 seconds)"},
		{"9223372036.854775808", 0, "out of range (max 9223372036.854775807 seconds)"},
		{"9223372037", 0, "out of range (max 9223372036.854775807 seconds)"},
		{"1e99999999999999999999", 0, "out of range (max 9223372036.854775807 seconds)"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			input := tc.in + "\tCALL_SENT\ta\tb\tc\n"
			if tc.err != "" {
				assertParseError(t, input, 1, fmt.Sprintf("bad timestamp %q: %s", tc.in, tc.err))
				return
			}
			if got := mustRead(t, input).Messages[0].Time; got != tc.want {
				t.Errorf("time = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestReadOperations keeps Read's operation names in step with causal.ParseOp.
func TestReadOperations(t *testing.T) {
	for _, name := range []string{"CALL_SENT", "RET_SENT", "MSG_SENT"} {
		want, ok := causal.ParseOp(name)
		if !ok {
			t.Fatalf("causal.ParseOp(%q) failed", name)
		}
		if got := mustRead(t, "1\t"+name+"\ta\tb\tc\n").Messages[0].Op; got != want {
			t.Errorf("%s read as %v, want %v", name, got, want)
		}
	}
}

func TestReadLineCap(t *testing.T) {
	const ok = "1\tCALL_SENT\ta\tb\tc1\n"
	// A line of exactly MaxLineLen bytes before its newline is accepted.
	prefix := "1\tCALL_SENT\ta\tb\t"
	longest := prefix + strings.Repeat("x", msgtrace.MaxLineLen-len(prefix))
	if tr := mustRead(t, ok+longest+"\n"); len(tr.CallIDs[2]) != msgtrace.MaxLineLen-len(prefix) {
		t.Errorf("longest allowed line lost its id")
	}
	if tr := mustRead(t, ok+longest); len(tr.Messages) != 2 {
		t.Errorf("longest allowed unterminated line not read")
	}
	tooLong := fmt.Sprintf("line longer than %d bytes", msgtrace.MaxLineLen)
	assertParseError(t, ok+longest+"x\n", 2, tooLong)
	assertParseError(t, ok+longest+"x", 2, tooLong)
	assertParseError(t, ok+ok+longest+"\r\n", 3, tooLong) // the CR counts

	// An endless line ends in an error after about MaxLineLen bytes, not in a hang.
	_, err := msgtrace.Read(io.MultiReader(strings.NewReader(ok), endless{}), "stdin")
	var pe *msgtrace.ParseError
	if !errors.As(err, &pe) || pe.Line != 2 || pe.Msg != tooLong {
		t.Errorf("endless line: error = %v", err)
	}
}

// endless is a reader of unlimited 'x' bytes and no newline.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

func TestReadIOError(t *testing.T) {
	errDisk := errors.New("disk on fire")
	r := io.MultiReader(strings.NewReader("1\tCALL_SENT\ta\tb\tc1\n2\tRET"), errReader{errDisk})
	_, err := msgtrace.Read(r, "big.tsv")
	if !errors.Is(err, errDisk) {
		t.Fatalf("error = %v, want it to wrap %v", err, errDisk)
	}
	if want := "big.tsv: reading line 2: disk on fire"; err.Error() != want {
		t.Errorf("error = %q, want %q", err.Error(), want)
	}
	var pe *msgtrace.ParseError
	if errors.As(err, &pe) {
		t.Errorf("an I/O error must not be a *ParseError")
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// TestReadAllocsPerLine checks that lines whose strings are already interned do not
// allocate: ten times the lines may cost only the message slice's growth.
func TestReadAllocsPerLine(t *testing.T) {
	line := "1047680084.482205\tCALL_SENT\tnodeA\tnodeB\tid37\tp1\n"
	allocs := func(lines int) float64 {
		input := []byte(strings.Repeat(line, lines))
		return testing.AllocsPerRun(5, func() {
			if _, err := msgtrace.Read(bytes.NewReader(input), "x"); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(1000), allocs(10000)
	if extra := large - small; extra > 15 {
		t.Errorf("9000 more lines cost %.0f more allocations (%.0f vs %.0f), want only slice growth", extra, large, small)
	}
}

func TestWriteIOError(t *testing.T) {
	errFull := errors.New("disk full")
	tr := build([]row{{1, causal.OpCall, "a", "b", "c1", ""}})
	// One message fails at the final flush; many overflow the buffer mid-way.
	for _, count := range []int{1, 10_000} {
		many := &causal.Trace{Nodes: tr.Nodes, CallIDs: tr.CallIDs, PathIDs: tr.PathIDs}
		for range count {
			many.Messages = append(many.Messages, tr.Messages...)
		}
		if err := msgtrace.Write(failingWriter{errFull}, many); !errors.Is(err, errFull) {
			t.Errorf("%d messages: error = %v, want %v", count, err, errFull)
		}
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

func TestReadSkipPathIDs(t *testing.T) {
	in := "1.0\tCALL_SENT\tA\tB\tx\tp1\n2.0\tRET_SENT\tB\tA\tx\tp1\n"
	tr, err := msgtrace.ReadWithOptions(strings.NewReader(in), "t.tsv", msgtrace.ReadOptions{SkipPathIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Messages) != 2 || tr.Messages[0].PathID != causal.NoID || len(tr.PathIDs) != 1 {
		t.Fatalf("path ids were interned: %+v %v", tr.Messages, tr.PathIDs)
	}
	if _, err := msgtrace.ReadWithOptions(strings.NewReader("1.0\tCALL_SENT\tA\tB\tx\tp\textra\n"), "t.tsv", msgtrace.ReadOptions{SkipPathIDs: true}); err == nil {
		t.Fatal("a seventh column was accepted")
	}
}
