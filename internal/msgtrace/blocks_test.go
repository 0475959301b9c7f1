package msgtrace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/causal"
)

// The block reader must give what the line-by-line reader it replaced gives
// (readSequential, below): the same trace, tables in the same order, and the same
// error at the same line, whatever the block size, wherever lines and errors fall
// against block boundaries.
func TestBlocksMatchSequential(t *testing.T) {
	// Lines at the edges of the writer's shape, which plainLine takes or leaves.
	const ts = "1700000000.123456789"
	for _, input := range []string{
		ts + "\tCALL_SENT\ta\tb\tc1\n",
		ts + "\tRET_SENT\tb\ta\tc1\tp\n",
		ts + "\tMSG_SENT\ta\tb\t-\t-\n",
		ts + "\tCALL_SENT\ta\tb\tc1",                 // no newline
		ts + "\tCALL_SENT\ta\tb\tc1\r\n",             // CR
		ts + "\tCALL_SENTX\ta\tb\tc1\n",              // unknown operation
		ts + "\tCALL_SEN\ta\tb\tc1\n",                // unknown operation
		ts + "\tRET_SENTS\tb\ta\tc1\n",               // unknown operation
		ts + "\tMSG_SENT\ta\tb\n",                    // 4 columns
		ts + "\tMSG_SENT\ta\tb\tc\tp\tq\n",           // 7 columns
		ts + "\tMSG_SENT\t\tb\tc\n",                  // empty sender
		ts + "\tMSG_SENT\ta\tb\t\n",                  // empty id
		ts + "\tMSG_SENT\ta\tb\tc\t\n",               // empty path
		"9223372036.000000000\tCALL_SENT\ta\tb\tc\n", // out of range
		"9223372035.999999999\tCALL_SENT\ta\tb\tc\n",
		"17000000x0.123456789\tCALL_SENT\ta\tb\tc\n",
		"1700000000.12345678x\tCALL_SENT\ta\tb\tc\n",
		"1700000000,123456789\tCALL_SENT\ta\tb\tc\n",
		"1700000000.1234567890\tCALL_SENT\ta\tb\tc\n",
		ts + "\tCALL_SENT\ta\tb\t" + strings.Repeat("x", MaxLineLen) + "\n", // too long
	} {
		for _, size := range []int{3, blockSize} {
			want, wantErr := readSequential(strings.NewReader(input), "t.tsv", ReadOptions{})
			got, gotErr := readTrace(strings.NewReader(input), "t.tsv", ReadOptions{}, size)
			if !sameError(gotErr, wantErr) || wantErr == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("%.80q, block %d: error %v, want %v", input, size, gotErr, wantErr)
			}
		}
	}
	rng := rand.New(rand.NewPCG(21, 22))
	for trial := range 40 {
		input := randomInput(rng, 20+rng.IntN(200), trial%3 == 0)
		sizes := []int{5, 64, 1000, blockSize}
		if trial < 4 {
			sizes = append(sizes, 1) // a block per byte: every boundary
		}
		for _, size := range sizes {
			for _, opt := range []ReadOptions{{}, {SkipPathIDs: true}} {
				want, wantErr := readSequential(bytes.NewReader(input), "t.tsv", opt)
				got, gotErr := readTrace(bytes.NewReader(input), "t.tsv", opt, size)
				if !sameError(gotErr, wantErr) {
					t.Fatalf("trial %d, block %d: error %v, want %v\n%q", trial, size, gotErr, wantErr, input)
				}
				if wantErr == nil && !reflect.DeepEqual(got, want) {
					t.Fatalf("trial %d, block %d: traces differ\n%q", trial, size, input)
				}
			}
		}
	}
}

// ReadCallPairs must give the pairs of Read followed by FindCallPairs, in order and
// input out of time order included, from a seekable reader, a regular file and a
// reader that cannot rewind, with and without a skew window.
func TestReadCallPairsMatchesReadThenPair(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	dir := t.TempDir()
	for trial := range 48 {
		input := randomInput(rng, 20+rng.IntN(300), trial%4 == 0)
		if trial%2 == 0 {
			input = sortedInput(t, input)
		}
		path := filepath.Join(dir, fmt.Sprint(trial))
		if err := os.WriteFile(path, input, 0o600); err != nil {
			t.Fatal(err)
		}
		// Windows and options take turns, so that each meets sorted, unsorted
		// and malformed input.
		for _, w := range []time.Duration{[]time.Duration{0, 500 * time.Millisecond}[trial/2%2]} {
			for _, opt := range []ReadOptions{{SkipPathIDs: trial/4%2 == 1}} {
				want, wantErr := readThenPair(bytes.NewReader(input), "t.tsv", w, opt, blockSize)
				readers := map[string]func() io.Reader{
					"bytes":  func() io.Reader { return bytes.NewReader(input) },
					"stream": func() io.Reader { return struct{ io.Reader }{bytes.NewReader(input)} },
					"file": func() io.Reader {
						f, err := os.Open(path)
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { f.Close() })
						return f
					},
				}
				for name, open := range readers {
					for _, size := range []int{7, blockSize} {
						got, gotErr := readCallPairs(open(), "t.tsv", w, opt, size)
						if !sameError(gotErr, wantErr) {
							t.Fatalf("trial %d %s block %d: error %v, want %v", trial, name, size, gotErr, wantErr)
						}
						if got != nil && got.CallOrder != nil {
							// The call order, if given, is a permutation sorted by call
							// time (causal tests that it is the one Nest would sort).
							seen := make([]bool, len(got.Pairs))
							for k, i := range got.CallOrder {
								if seen[i] || k > 0 && got.Pairs[i].Call < got.Pairs[got.CallOrder[k-1]].Call {
									t.Fatalf("trial %d %s block %d: call order %v is no sorted permutation", trial, name, size, got.CallOrder)
								}
								seen[i] = true
							}
							if len(got.CallOrder) != len(got.Pairs) {
								t.Fatalf("trial %d: call order of %d pairs for %d", trial, len(got.CallOrder), len(got.Pairs))
							}
							got.CallOrder = nil
						}
						if wantErr == nil && !reflect.DeepEqual(got, want) {
							t.Fatalf("trial %d %s block %d window %v: got %d pairs %+v, want %d pairs %+v\n%q",
								trial, name, size, w, len(got.Pairs), got.Discards, len(want.Pairs), want.Discards, input)
						}
					}
				}
			}
		}
	}
}

// A reader error after some lines is reported at the line being read, after any
// malformed line before it, by every path.
func TestReadCallPairsIOError(t *testing.T) {
	errDisk := errors.New("disk on fire")
	for _, prefix := range []string{"1\tCALL_SENT\ta\tb\tc1\n2\tRET", "1\tCALL_SENT\ta\tb\tc1\n2\tRET_SENT\tb\ta\tc1\n"} {
		_, err := ReadCallPairs(io.MultiReader(strings.NewReader(prefix), errorReader{errDisk}), "big.tsv", 0, ReadOptions{})
		_, want := readSequential(io.MultiReader(strings.NewReader(prefix), errorReader{errDisk}), "big.tsv", ReadOptions{})
		if !errors.Is(err, errDisk) || !sameError(err, want) {
			t.Errorf("error %v, want %v", err, want)
		}
	}
}

// FuzzBlocks checks the block reader against the line-by-line one on any input,
// at block sizes that put boundaries everywhere, and ReadCallPairs against Read
// followed by FindCallPairs.
func FuzzBlocks(f *testing.F) {
	for _, seed := range []string{
		"",
		"1\tCALL_SENT\ta\tb\tc1\tp1\n2\tRET_SENT\tb\ta\tc1\tp1\n",
		"3\tCALL_SENT\ta\tb\tc1\tp1\r\n1\tRET_SENT\tb\ta\tc1\t-\r\n\r\n2\tMSG_SENT\ta\tb\t-\n",
		"# h\n1\tCALL_SENT\ta\tb\t-\n1\tCALL_SENT\ta\tb\t-\n2\tRET_SENT\tb\ta\t-\n2\tRET_SENT\tb\ta\t-",
		"1\tCALL_SENT\ta\n",
		"1\tCALL_SENT\ta\tb\tc\tp\tx\n",
		"12x\tCALL_SENT\ta\tb\tc\n",
		"1700000000.123456789\tCALL_SENT\tclient\tWS1\tc1\tp1\n1700000000.223456789\tRET_SENT\tWS1\tclient\tc1\tp1\n" +
			"1700000000.323456789\tMSG_SENT\tWS1\tDB\t-\n",
	} {
		f.Add([]byte(seed), uint8(3))
	}
	f.Fuzz(func(t *testing.T, input []byte, size uint8) {
		want, wantErr := readSequential(bytes.NewReader(input), "fuzz", ReadOptions{})
		for _, bs := range []int{1 + int(size), blockSize} {
			got, err := readTrace(bytes.NewReader(input), "fuzz", ReadOptions{}, bs)
			if !sameError(err, wantErr) || (err == nil && !reflect.DeepEqual(got, want)) {
				t.Fatalf("block %d: error %v, want %v; traces equal %v", bs, err, wantErr, reflect.DeepEqual(got, want))
			}
			pairs, err := readCallPairs(struct{ io.Reader }{bytes.NewReader(input)}, "fuzz", time.Millisecond, ReadOptions{}, bs)
			if !sameError(err, wantErr) {
				t.Fatalf("pairs, block %d: error %v, want %v", bs, err, wantErr)
			}
			if err == nil {
				p, d := causal.FindCallPairs(want.Messages, time.Millisecond)
				if len(pairs.Pairs) != len(p) || (len(p) > 0 && !reflect.DeepEqual(pairs.Pairs, p)) || pairs.Discards != d {
					t.Fatalf("pairs, block %d: %v %+v, want %v %+v", bs, pairs.Pairs, pairs.Discards, p, d)
				}
			}
		}
	})
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
}

// randomInput is a message trace with the format's corners: comments, blank lines,
// CRLF and stray CRs, dash and absent ids, repeated ids, equal and unordered times,
// and, when bad, a malformed line somewhere.
func randomInput(rng *rand.Rand, lines int, bad bool) []byte {
	nodes := []string{"client", "WS1", "WS2", "a-node-with-a-long-name", "DB", "x", "n6", "n7", "n8", "n9", "n10"}
	ops := []string{"CALL_SENT", "RET_SENT", "MSG_SENT"}
	var b bytes.Buffer
	t := int64(1_700_000_000_000_000_000)
	badAt := -1
	if bad {
		badAt = rng.IntN(lines)
	}
	for i := range lines {
		switch rng.IntN(20) {
		case 0:
			b.WriteString("# a comment\tline\n")
			continue
		case 1:
			b.WriteString(" \t\n")
			continue
		}
		if i == badAt {
			b.WriteString([]string{"1\tCALL_SENT\ta\n", "x1\tCALL_SENT\ta\tb\tc\n", "1\tCALL\ta\tb\tc\n", "1\tCALL_SENT\t\tb\tc\n",
				"1\tCALL_SENT\ta\tb\tc\tp\tq\n"}[rng.IntN(5)])
			continue
		}
		if rng.IntN(10) > 0 {
			t += int64(rng.IntN(5_000_000))
		} else {
			t -= int64(rng.IntN(5_000_000)) // out of order
		}
		from, to := nodes[rng.IntN(len(nodes))], nodes[rng.IntN(len(nodes))]
		id := "-"
		if rng.IntN(6) > 0 {
			id = fmt.Sprintf("c%d", rng.IntN(lines/3+1))
		}
		fmt.Fprintf(&b, "%d.%09d\t%s\t%s\t%s\t%s", t/1e9, t%1e9, ops[rng.IntN(3)], from, to, id)
		switch rng.IntN(3) {
		case 0:
			fmt.Fprintf(&b, "\tp%d", rng.IntN(20))
		case 1:
			b.WriteString("\t-")
		}
		if rng.IntN(15) == 0 {
			b.WriteString("\r")
		}
		b.WriteString("\n")
	}
	out := b.Bytes()
	if rng.IntN(4) == 0 && len(out) > 0 {
		out = out[:len(out)-1] // no final newline
	}
	return out
}

// sortedInput rewrites an input in time order, when it parses.
func sortedInput(t *testing.T, input []byte) []byte {
	tr, err := readSequential(bytes.NewReader(input), "t.tsv", ReadOptions{})
	if err != nil {
		return input
	}
	var b bytes.Buffer
	if err := Write(&b, tr); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// readSequential is ReadWithOptions as it was before blocks: bufio.ReadSlice and
// one line at a time on one goroutine.
func readSequential(r io.Reader, name string, opt ReadOptions) (*causal.Trace, error) {
	// The buffer holds the longest allowed line and its newline, so ReadSlice can
	// return every line in place and ErrBufferFull means exactly "line too long".
	in := bufio.NewReaderSize(r, MaxLineLen+1)
	builder := causal.NewTraceBuilder()
	if st, ok := r.(interface{ Stat() (os.FileInfo, error) }); ok {
		if info, err := st.Stat(); err == nil && info.Mode().IsRegular() {
			builder.Grow(int(min(info.Size(), 1<<36) / typicalLineLen))
		}
	}
	for lineNo := 1; ; lineNo++ {
		line, err := in.ReadSlice('\n')
		switch err {
		case nil, io.EOF:
		case bufio.ErrBufferFull:
			return nil, &ParseError{name, lineNo, fmt.Sprintf("line longer than %d bytes", MaxLineLen)}
		default:
			return nil, fmt.Errorf("%s: reading line %d: %w", name, lineNo, err)
		}
		if msg := parseLineSequential(line, builder, !opt.SkipPathIDs); msg != "" {
			return nil, &ParseError{name, lineNo, msg}
		}
		if err == io.EOF {
			return builder.Trace(), nil
		}
	}
}

// parseLine adds the message on line, if any, to builder. It returns "" on success
// and an error message otherwise, so that the common path builds no error value.
func parseLineSequential(line []byte, builder *causal.TraceBuilder, withPaths bool) string {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	// All trailing CRs go, not just one: a last column ending in CR could not be
	// written back distinguishably from a CRLF line ending.
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 || line[0] == '#' || isBlank(line) {
		return ""
	}

	var fields [6][]byte
	n := 0
	for rest := line; ; n++ {
		if n == len(fields) {
			return fmt.Sprintf("too many columns: %d, want 5 or 6", bytes.Count(line, []byte{'\t'})+1)
		}
		tab := bytes.IndexByte(rest, '\t')
		if tab < 0 {
			fields[n] = rest
			n++
			break
		}
		fields[n], rest = rest[:tab], rest[tab+1:]
	}
	if n < 5 {
		return fmt.Sprintf("truncated line: %d columns, want 5 or 6", n)
	}
	for i, f := range fields[:n] {
		if len(f) == 0 {
			return fmt.Sprintf("empty %s (column %d)", columnNames[i], i+1)
		}
	}

	time, msg := parseTimestamp(fields[0])
	if msg != "" {
		return fmt.Sprintf("bad timestamp %s: %s", quote(fields[0]), msg)
	}
	op, ok := parseOp(fields[1])
	if !ok {
		return fmt.Sprintf("unknown operation %s, want CALL_SENT, RET_SENT or MSG_SENT", quote(fields[1]))
	}
	m := causal.Message{
		Time:     time,
		Op:       op,
		Sender:   builder.Node(fields[2]),
		Receiver: builder.Node(fields[3]),
		CallID:   builder.CallID(fields[4]),
	}
	if n == 6 && withPaths {
		m.PathID = builder.PathID(fields[5])
	}
	builder.Add(m)
	return ""
}

// BenchmarkParseBlock is one worker's share of reading: lines to records.
func BenchmarkParseBlock(b *testing.B) {
	var in bytes.Buffer
	nodes := []string{"client", "WS1", "WS2", "AP1", "AP2", "AUTH", "DB", "web-frontend-1", "app-server-2"}
	for i := 0; in.Len() < blockSize-100; i++ {
		fmt.Fprintf(&in, "1700000000.%09d\tCALL_SENT\t%s\t%s\tc%d\tp%d\n", i*7919%1_000_000_000, nodes[i%len(nodes)], nodes[i*5%len(nodes)], i, i/4)
	}
	blk := &block{buf: in.Bytes(), index: make(map[string]uint32)}
	b.SetBytes(int64(in.Len()))
	b.ReportAllocs()
	for b.Loop() {
		blk.parse()
		if blk.errLine != 0 {
			b.Fatal(blk.errMsg)
		}
	}
	b.ReportMetric(float64(len(blk.recs))*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

// The timestamp fast paths must agree with the general parser on every input of
// their shape, digits or not.
func TestPlainTimestampAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	alphabet := []byte("0123456789./:-e+ \x00\xff")
	accepted := 0
	for range 200_000 {
		var b []byte
		switch rng.IntN(3) {
		case 0: // the writer's shape, mostly digits
			b = fmt.Appendf(nil, "%010d.%09d", rng.Int64N(1e10), rng.Int64N(1e9))
		case 1:
			b = fmt.Appendf(nil, "%d.%d", rng.Int64N(1e11), rng.Int64N(1e10))
		default:
			b = make([]byte, 1+rng.IntN(22))
			for i := range b {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
		}
		if rng.IntN(3) == 0 && len(b) > 0 {
			b[rng.IntN(len(b))] = alphabet[rng.IntN(len(alphabet))]
		}
		fast, ok := plainTimestamp(b)
		slow, msg := anyTimestamp(b)
		if ok && (msg != "" || fast != slow) {
			t.Fatalf("%q: fast path %d, general %d %q", b, fast, slow, msg)
		}
		if ok {
			accepted++
		}
	}
	if accepted < 50_000 {
		t.Fatalf("the fast path took only %d of 200000 inputs", accepted)
	}
	for _, s := range []string{"9223372035.999999999", "9223372036.854775807", "9999999999.999999999", "0000000000.000000000"} {
		fast, ok := plainTimestamp([]byte(s))
		slow, msg := anyTimestamp([]byte(s))
		if ok && (msg != "" || fast != slow) {
			t.Fatalf("%q: fast path %d, general %d %q", s, fast, slow, msg)
		}
	}
}
