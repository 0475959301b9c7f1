package blackboxreceiver

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/metadata"
)

// Attributes the receiver writes besides the semantic conventions.
const (
	attrSource        = "tierscope.blackbox.source" // capture, tracefile, accesslog
	attrGap           = "tierscope.capture.gap"     // bytes of the call were lost
	attrRequestBytes  = "tierscope.request.bytes"
	attrResponseBytes = "tierscope.response.bytes"
	attrTruthPath     = "tierscope.truth.path_id"
	scopeName         = "github.com/tierscope/tierscope/receiver/blackboxreceiver"
)

// batch collects spans grouped by node (one ResourceSpans per node). A batch
// may instead carry build, which makes its spans on the emitter's goroutine
// (n is then the number of spans it will make), so that a capture goroutine
// only frames packets.
type batch struct {
	td    ptrace.Traces
	nodes map[node]ptrace.SpanSlice
	n     int
	rng   *rand.Rand
	build func() *batch
}

func newBatch(rng *rand.Rand) *batch {
	return &batch{td: ptrace.NewTraces(), nodes: map[node]ptrace.SpanSlice{}, rng: rng}
}

// span appends a span of node n with fresh ids: no trace context, a trace of
// its own, no parent (causalpath infers it).
func (b *batch) span(n node, name string, kind ptrace.SpanKind, start, end int64) ptrace.Span {
	ss, ok := b.nodes[n]
	if !ok {
		rs := b.td.ResourceSpans().AppendEmpty()
		attrs := rs.Resource().Attributes()
		attrs.PutStr("service.name", n.service)
		attrs.PutStr("service.instance.id", n.instance)
		sc := rs.ScopeSpans().AppendEmpty()
		sc.Scope().SetName(scopeName)
		ss = sc.Spans()
		b.nodes[n] = ss
	}
	sp := ss.AppendEmpty()
	var tid [16]byte
	var sid [8]byte
	binary.LittleEndian.PutUint64(tid[:8], b.rng.Uint64())
	binary.LittleEndian.PutUint64(tid[8:], b.rng.Uint64()|1)
	binary.LittleEndian.PutUint64(sid[:], b.rng.Uint64()|1)
	sp.SetTraceID(pcommon.TraceID(tid))
	sp.SetSpanID(pcommon.SpanID(sid))
	sp.SetName(name)
	sp.SetKind(kind)
	sp.SetStartTimestamp(pcommon.Timestamp(start))
	sp.SetEndTimestamp(pcommon.Timestamp(max(end, start)))
	b.n++
	return sp
}

// emitter hands batches to the next consumer from one goroutine, through a
// bounded queue: a slow pipeline drops batches (counted) instead of stalling a
// source.
type emitter struct {
	next   consumer.Traces
	tb     *metadata.TelemetryBuilder
	logger *zap.Logger
	queue  chan *batch
	wg     sync.WaitGroup
	closed atomic.Bool
	mu     sync.Mutex // guards closing the queue against sends
}

func newEmitter(next consumer.Traces, tb *metadata.TelemetryBuilder, logger *zap.Logger, depth int) *emitter {
	e := &emitter{next: next, tb: tb, logger: logger, queue: make(chan *batch, depth)}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for b := range e.queue {
			ctx := context.Background()
			if b.build != nil {
				b = b.build()
			}
			if err := e.next.ConsumeTraces(ctx, b.td); err != nil {
				e.tb.ReceiverBlackboxSpansDropped.Add(ctx, int64(b.n))
				e.logger.Debug("next consumer refused spans", zap.Int("spans", b.n), zap.Error(err))
				continue
			}
			e.tb.ReceiverBlackboxSpans.Add(ctx, int64(b.n))
		}
	}()
	return e
}

// send queues b, or drops it (counted) when the queue is full.
func (e *emitter) send(b *batch) {
	if b == nil || b.n == 0 {
		return
	}
	if !e.trySend(b) {
		e.tb.ReceiverBlackboxSpansDropped.Add(context.Background(), int64(b.n))
	}
}

func (e *emitter) trySend(b *batch) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return false
	}
	select {
	case e.queue <- b:
		return true
	default:
		return false
	}
}

// sendWait queues b, waiting for room: replays must not lose spans.
func (e *emitter) sendWait(ctx context.Context, b *batch) {
	if b == nil || b.n == 0 {
		return
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !e.trySend(b) {
		if e.closed.Load() {
			e.tb.ReceiverBlackboxSpansDropped.Add(context.Background(), int64(b.n))
			return
		}
		select {
		case <-ctx.Done():
			e.tb.ReceiverBlackboxSpansDropped.Add(context.Background(), int64(b.n))
			return
		case <-t.C:
		}
	}
}

// close drains the queue.
func (e *emitter) close() {
	e.mu.Lock()
	if !e.closed.Swap(true) {
		close(e.queue)
	}
	e.mu.Unlock()
	e.wg.Wait()
}
