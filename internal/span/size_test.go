package span

import (
	"testing"
	"unsafe"
)

// Stitching reads spans by the million, so their size is its throughput. A
// field added to Span is weighed against BenchmarkProcessor and
// BenchmarkIngest, and this bound moved with it.
func TestSpanSize(t *testing.T) {
	if got := unsafe.Sizeof(Span{}); got > 104 {
		t.Fatalf("span.Span is %d bytes, want at most 104", got)
	}
}
