package causal

import (
	"slices"
)

// TraceBuilder accumulates messages and interns their strings. Lookups by []byte do
// not allocate for names that were seen before, which keeps readers of large traces
// allocation-free per line.
type TraceBuilder struct {
	trace   Trace
	nodes   map[string]NodeID
	callIDs *internTable
	pathIDs *internTable
}

// NewTraceBuilder returns an empty builder.
func NewTraceBuilder() *TraceBuilder {
	b := &TraceBuilder{
		trace: Trace{CallIDs: []string{""}, PathIDs: []string{""}},
		nodes: make(map[string]NodeID),
	}
	b.callIDs = newInternTable(&b.trace.CallIDs)
	b.pathIDs = newInternTable(&b.trace.PathIDs)
	return b
}

// Grow reserves room for about n more messages, each with its own call id, so
// that a reader that knows its input's size avoids repeated copying while growing.
func (b *TraceBuilder) Grow(n int) {
	if n <= 0 {
		return
	}
	b.trace.Messages = slices.Grow(b.trace.Messages, n)
	b.callIDs.reserve(n / 2)
	b.trace.CallIDs = slices.Grow(b.trace.CallIDs, n/2)
}

// Node interns a node name.
func (b *TraceBuilder) Node(name []byte) NodeID {
	if id, ok := b.nodes[string(name)]; ok {
		return id
	}
	s := string(name)
	id := NodeID(len(b.trace.Nodes))
	b.trace.Nodes = append(b.trace.Nodes, s)
	b.nodes[s] = id
	return id
}

// CallID interns a call id; "-" and the empty id map to NoID.
func (b *TraceBuilder) CallID(id []byte) uint32 {
	return internID(id, b.callIDs)
}

// PathID interns a ground-truth path id; "-" and the empty id map to NoID.
func (b *TraceBuilder) PathID(id []byte) uint32 {
	return internID(id, b.pathIDs)
}

func internID(id []byte, table *internTable) uint32 {
	if len(id) == 0 || (len(id) == 1 && id[0] == '-') {
		return NoID
	}
	return table.intern(id)
}

// Add appends a message whose ids were interned by this builder.
func (b *TraceBuilder) Add(m Message) { b.trace.Messages = append(b.trace.Messages, m) }

// Len is the number of messages added so far.
func (b *TraceBuilder) Len() int { return len(b.trace.Messages) }

// Trace returns the trace with its messages sorted by time. Messages with equal
// timestamps keep the order in which they were added, so a file that is already
// sorted is read back exactly as written.
func (b *TraceBuilder) Trace() *Trace {
	t := b.trace
	SortMessages(t.Messages)
	return &t
}

// SortMessages sorts messages by time, stably.
func SortMessages(msgs []Message) {
	if slices.IsSortedFunc(msgs, cmpTime) {
		return
	}
	slices.SortStableFunc(msgs, cmpTime)
}

func cmpTime(a, b Message) int {
	switch {
	case a.Time < b.Time:
		return -1
	case a.Time > b.Time:
		return 1
	}
	return 0
}
