package msgtrace_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/tierscope/tierscope/internal/causal"
	"github.com/tierscope/tierscope/internal/msgtrace"
)

const benchLines = 200_000

// benchTrace is a realistic trace of benchLines messages: call/return pairs between
// seven nodes, a unique id per call, a path id per four calls, microsecond spacing
// at a current epoch time.
func benchTrace() *causal.Trace {
	nodes := [][]byte{
		[]byte("web-frontend-1"), []byte("web-frontend-2"), []byte("auth.svc"),
		[]byte("app-server-a"), []byte("app-server-b"), []byte("db.primary"), []byte("cache-01"),
	}
	b := causal.NewTraceBuilder()
	t := int64(1_700_000_000_123_456_789)
	for i := 0; b.Len() < benchLines; i++ {
		from, to := nodes[i%len(nodes)], nodes[(i*3+1)%len(nodes)]
		id := b.CallID(fmt.Appendf(nil, "c%06d", i))
		path := b.PathID(fmt.Appendf(nil, "p%05d", i/4))
		b.Add(causal.Message{Time: t, Op: causal.OpCall, Sender: b.Node(from), Receiver: b.Node(to), CallID: id, PathID: path})
		b.Add(causal.Message{Time: t + 734_512, Op: causal.OpReturn, Sender: b.Node(to), Receiver: b.Node(from), CallID: id, PathID: path})
		t += 1_013_337
	}
	return b.Trace()
}

func reportLines(b *testing.B) {
	b.ReportMetric(float64(benchLines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

func BenchmarkRead(b *testing.B) {
	var buf bytes.Buffer
	if err := msgtrace.Write(&buf, benchTrace()); err != nil {
		b.Fatal(err)
	}
	input := buf.Bytes()
	b.SetBytes(int64(len(input)))
	b.ReportAllocs()
	for b.Loop() {
		tr, err := msgtrace.Read(bytes.NewReader(input), "bench")
		if err != nil || len(tr.Messages) != benchLines {
			b.Fatal(err, len(tr.Messages))
		}
	}
	reportLines(b)
}

func BenchmarkWrite(b *testing.B) {
	tr := benchTrace()
	var counter countingWriter
	if err := msgtrace.Write(&counter, tr); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(counter))
	b.ReportAllocs()
	for b.Loop() {
		if err := msgtrace.Write(io.Discard, tr); err != nil {
			b.Fatal(err)
		}
	}
	reportLines(b)
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

// BenchmarkReadCallPairs is the reader of `tierscope paths`: parsing on every
// processor, and call matching as it goes.
func BenchmarkReadCallPairs(b *testing.B) {
	var buf bytes.Buffer
	if err := msgtrace.Write(&buf, benchTrace()); err != nil {
		b.Fatal(err)
	}
	input := buf.Bytes()
	b.SetBytes(int64(len(input)))
	b.ReportAllocs()
	for b.Loop() {
		cp, err := msgtrace.ReadCallPairs(bytes.NewReader(input), "bench", 0, msgtrace.ReadOptions{SkipPathIDs: true})
		if err != nil || cp.Messages != benchLines {
			b.Fatal(err)
		}
	}
	reportLines(b)
}
