package model

import "github.com/tierscope/tierscope/internal/span"

// TraceID is a trace's 16-byte id.
type TraceID [16]byte

// Assembler gathers the spans of each trace until Wait has passed since its
// first span, as the tail-sampling processor's decision wait does, because a trace's spans arrive from many
// processes in many batches. It is bounded: at most MaxTraces traces are open
// (the oldest is completed early when another arrives) and at most MaxSpans
// spans are kept per trace (later ones are dropped). Both are counted.
type Assembler struct {
	Wait      int64 // nanoseconds
	MaxTraces int
	MaxSpans  int

	open  map[TraceID]*openTrace
	fifo  []TraceID // by first arrival; ids of completed traces are skipped
	head  int
	spare [][]span.Span

	// Counters.
	CompletedEarly int64 // traces completed before Wait because MaxTraces were open
	DroppedSpans   int64 // spans beyond MaxSpans in one trace
}

type openTrace struct {
	first int64
	spans []span.Span
}

// emit functions receive a trace's spans and must not keep the slice: it is
// reused.

// NewAssembler returns an assembler with the given wait and bounds.
func NewAssembler(wait int64, maxTraces, maxSpans int) *Assembler {
	return &Assembler{Wait: wait, MaxTraces: maxTraces, MaxSpans: maxSpans, open: make(map[TraceID]*openTrace)}
}

// Open is the number of traces being assembled.
func (a *Assembler) Open() int { return len(a.open) }

// Add adds one span received at now. If it opens a trace while MaxTraces are
// open, the oldest trace is completed through emit first.
func (a *Assembler) Add(id TraceID, s span.Span, now int64, emit func([]span.Span)) {
	t, ok := a.open[id]
	if !ok {
		for len(a.open) >= a.MaxTraces && a.popOldest(emit) {
			a.CompletedEarly++
		}
		t = &openTrace{first: now}
		if n := len(a.spare); n > 0 {
			t.spans, a.spare = a.spare[n-1][:0], a.spare[:n-1]
		}
		a.open[id] = t
		a.fifo = append(a.fifo, id)
	}
	if len(t.spans) >= a.MaxSpans {
		a.DroppedSpans++
		return
	}
	t.spans = append(t.spans, s)
}

// Expire completes, through emit, every trace whose wait has passed at now.
func (a *Assembler) Expire(now int64, emit func([]span.Span)) {
	for a.head < len(a.fifo) {
		t, ok := a.open[a.fifo[a.head]]
		if ok && now-t.first < a.Wait {
			break
		}
		a.popOldest(emit)
	}
}

// Reintern moves the names of the open traces' spans from the table from into
// to (span.Span.Reintern), in the order the traces opened.
func (a *Assembler) Reintern(from, to *span.Names) {
	for _, id := range a.fifo[a.head:] {
		if t, ok := a.open[id]; ok {
			for i := range t.spans {
				t.spans[i].Reintern(from, to)
			}
		}
	}
}

// Flush completes every open trace.
func (a *Assembler) Flush(emit func([]span.Span)) {
	for a.popOldest(emit) {
	}
}

func (a *Assembler) popOldest(emit func([]span.Span)) bool {
	for a.head < len(a.fifo) {
		id := a.fifo[a.head]
		a.head++
		if a.head > 1024 && a.head > len(a.fifo)/2 {
			n := copy(a.fifo, a.fifo[a.head:])
			a.fifo, a.head = a.fifo[:n], 0
		}
		t, ok := a.open[id]
		if !ok {
			continue
		}
		delete(a.open, id)
		emit(t.spans)
		if len(a.spare) < 1024 {
			a.spare = append(a.spare, t.spans)
		}
		return true
	}
	a.fifo, a.head = a.fifo[:0], 0
	return false
}
