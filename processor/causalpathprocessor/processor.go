package causalpathprocessor

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.uber.org/zap"

	"github.com/tierscope/tierscope/internal/stitch"
	"github.com/tierscope/tierscope/processor/causalpathprocessor/internal/metadata"
)

var sizer ptrace.ProtoMarshaler

// batch is one ConsumeTraces call waiting in the buffer.
type batch struct {
	td      ptrace.Traces
	spans   int
	bytes   int64 // OTLP size
	arrived time.Time
	// earliest and latest are the first and last span starts (ns).
	earliest, latest int64
}

// startRange returns the earliest and latest span start in td.
func startRange(td ptrace.Traces) (earliest, latest int64) {
	earliest, latest = math.MaxInt64, math.MinInt64
	stitch.ForEachSpan(td, func(sp ptrace.Span) {
		t := int64(sp.StartTimestamp())
		earliest, latest = min(earliest, t), max(latest, t)
	})
	return earliest, latest
}

type causalPathProcessor struct {
	cfg       *Config
	next      consumer.Traces
	logger    *zap.Logger
	telemetry *metadata.TelemetryBuilder
	now       func() time.Time

	// mu guards the buffer; it is held only to append or cut, never while
	// stitching, so receivers are not held up by inference.
	mu       sync.Mutex
	buffer   []batch // oldest first
	buffered int     // spans in buffer
	bytes    int64   // their OTLP size

	// stitchMu serialises stitching rounds. A round takes its batches out of the
	// buffer and snapshots the rest while holding it, so a batch is never written
	// by one round while another reads it.
	stitchMu sync.Mutex
	stitcher *stitch.Stitcher

	host     component.Host
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func newProcessor(set processor.Settings, cfg *Config, next consumer.Traces) (*causalPathProcessor, error) {
	st, err := stitch.New(cfg.stitchOptions())
	if err != nil {
		return nil, err
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &causalPathProcessor{
		cfg: cfg, next: next, logger: set.Logger, telemetry: tb, now: time.Now,
		stitcher: st, stop: make(chan struct{}), done: make(chan struct{}),
	}, nil
}

func (p *causalPathProcessor) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: true}
}

// Start runs the release loop, which wakes a few times per wait.
func (p *causalPathProcessor) Start(_ context.Context, host component.Host) error {
	p.host = host
	tick := max(p.cfg.Wait/4, 10*time.Millisecond)
	go func() {
		defer close(p.done)
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.release(context.Background(), false)
			}
		}
	}()
	return nil
}

// Shutdown stitches and forwards everything still buffered.
func (p *causalPathProcessor) Shutdown(ctx context.Context) error {
	started := p.host != nil
	p.stopOnce.Do(func() { close(p.stop) })
	if started {
		select {
		case <-p.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := p.release(ctx, true)
	p.telemetry.Shutdown()
	return err
}

// ConsumeTraces buffers td. When the buffer would exceed max_spans, the oldest
// batches leave at once, stitched with the context at hand, so memory stays
// bounded and inference degrades gracefully under a burst.
func (p *causalPathProcessor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	n := td.SpanCount()
	p.telemetry.ProcessorCausalpathSpansReceived.Add(ctx, int64(n))
	if n == 0 {
		return nil
	}
	size := int64(sizer.TracesSize(td))
	if size > p.cfg.MaxBytes {
		// One batch over the whole budget would evict everything else and
		// still not fit: it goes on as it came, unstitched.
		p.telemetry.ProcessorCausalpathReleasedUnstitched.Add(ctx, int64(n))
		return p.forward(ctx, []batch{{td: td, spans: n, bytes: size}})
	}
	earliest, latest := startRange(td)
	p.mu.Lock()
	p.buffer = append(p.buffer, batch{td: td, spans: n, bytes: size, arrived: p.now(), earliest: earliest, latest: latest})
	p.buffered += n
	p.bytes += size
	full := p.buffered > p.cfg.MaxSpans || p.bytes > p.cfg.MaxBytes
	p.mu.Unlock()
	p.telemetry.ProcessorCausalpathBuffered.Add(ctx, int64(n))
	if !full {
		return nil
	}
	// The buffer is full: this caller stitches the oldest batches out, which also
	// slows it down, the backpressure a full buffer calls for.
	ready, rep := p.stitchRound(func() int {
		cut := 0
		over, overBytes := p.buffered-p.cfg.MaxSpans, p.bytes-p.cfg.MaxBytes
		for ; (over > 0 || overBytes > 0) && cut < len(p.buffer); cut++ {
			over -= p.buffer[cut].spans
			overBytes -= p.buffer[cut].bytes
		}
		return cut
	})
	if len(ready) == 0 {
		return nil
	}
	p.telemetry.ProcessorCausalpathReleasedEarly.Add(ctx, int64(rep.Spans))
	p.record(ctx, rep)
	return p.forward(ctx, ready)
}

// release stitches the batches that have waited long enough (all of them when
// flushing), with the younger ones as context, and forwards them.
func (p *causalPathProcessor) release(ctx context.Context, flush bool) error {
	ready, rep := p.stitchRound(func() int {
		if flush {
			return len(p.buffer)
		}
		deadline := p.now().Add(-p.cfg.Wait)
		cut := 0
		for cut < len(p.buffer) && !p.buffer[cut].arrived.After(deadline) {
			cut++
		}
		return cut
	})
	if len(ready) == 0 {
		return nil
	}
	p.record(ctx, rep)
	return p.forward(ctx, ready)
}

// stitchRound takes the first cut() batches out of the buffer and stitches them
// with the batches still waiting as context. cut runs under p.mu; stitching runs
// under stitchMu only, while receivers keep appending: the stitcher writes only
// the batches it releases, and new batches are not in its snapshot.
func (p *causalPathProcessor) stitchRound(cut func() int) ([]batch, stitch.Report) {
	p.stitchMu.Lock()
	defer p.stitchMu.Unlock()
	p.mu.Lock()
	n := cut()
	if n == 0 {
		p.mu.Unlock()
		return nil, stitch.Report{}
	}
	ready := make([]batch, n)
	copy(ready, p.buffer[:n])
	clear(p.buffer[:n])
	p.buffer = p.buffer[n:]
	latest := int64(math.MinInt64)
	for _, b := range ready {
		p.buffered -= b.spans
		p.bytes -= b.bytes
		latest = max(latest, b.latest)
	}
	// Batches whose every span starts past the stitcher's reach would only be
	// scanned and passed over.
	horizon := latest + p.stitcher.ContextReach()
	var waiting []ptrace.Traces
	for _, b := range p.buffer {
		if b.earliest <= horizon {
			waiting = append(waiting, b.td)
		}
	}
	p.mu.Unlock()
	release := make([]ptrace.Traces, n)
	for i, b := range ready {
		release[i] = b.td
	}
	return ready, p.stitcher.StitchWithContext(release, waiting)
}

// record adds a stitching round to the self-metrics.
func (p *causalPathProcessor) record(ctx context.Context, rep stitch.Report) {
	t := p.telemetry
	t.ProcessorCausalpathBuffered.Add(ctx, -int64(rep.Spans))
	t.ProcessorCausalpathOrphans.Add(ctx, int64(rep.Orphans))
	t.ProcessorCausalpathInferred.Add(ctx, int64(rep.Inferred))
	t.ProcessorCausalpathAbstained.Add(ctx, int64(rep.Abstained))
	t.ProcessorCausalpathLeftOrphan.Add(ctx, int64(rep.LeftOrphan))
	t.ProcessorCausalpathUnresolved.Add(ctx, int64(rep.Unresolved))
	t.ProcessorCausalpathSkipped.Add(ctx, int64(rep.Skipped))
}

// forward merges batches into one request for the next consumer.
func (p *causalPathProcessor) forward(ctx context.Context, batches []batch) error {
	out := ptrace.NewTraces()
	spans := 0
	for _, b := range batches {
		spans += b.spans
		b.td.ResourceSpans().MoveAndAppendTo(out.ResourceSpans())
	}
	err := p.next.ConsumeTraces(ctx, out)
	if err != nil {
		p.logger.Warn("next consumer refused stitched spans", zap.Int("spans", spans), zap.Error(err))
		if p.host != nil {
			componentstatus.ReportStatus(p.host, componentstatus.NewRecoverableErrorEvent(err))
		}
		return errors.Join(errors.New("causalpath: forwarding spans"), err)
	}
	p.telemetry.ProcessorCausalpathSpansReleased.Add(ctx, int64(spans))
	return nil
}
