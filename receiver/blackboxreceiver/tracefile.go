package blackboxreceiver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/tierscope/tierscope/internal/causal"
	"github.com/tierscope/tierscope/internal/msgtrace"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/metadata"
)

// traceFileSource replays a message trace (docs/formats.md §1): every call pair
// (paper 001 §5.1.1.1) becomes a CLIENT span of the caller and a SERVER span
// of the callee over [call, return], sent when the return is due.
type traceFileSource struct {
	cfg    *TraceFileConfig
	em     *emitter
	tb     *metadata.TelemetryBuilder
	logger *zap.Logger
	now    func() time.Time
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *traceFileSource) start() error {
	// Fail at start on an unreadable file rather than later in a goroutine.
	f, err := os.Open(s.cfg.Path)
	if err != nil {
		return fmt.Errorf("blackbox tracefile: %w", err)
	}
	_ = f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	go func() {
		defer close(s.done)
		for {
			if err := s.replay(ctx); err != nil {
				s.logger.Error("tracefile replay failed", zap.String("path", s.cfg.Path), zap.Error(err))
				return
			}
			if !s.cfg.Loop || ctx.Err() != nil {
				return
			}
		}
	}()
	return nil
}

func (s *traceFileSource) replay(ctx context.Context) error {
	f, err := os.Open(s.cfg.Path)
	if err != nil {
		return err
	}
	tr, err := msgtrace.Read(f, s.cfg.Path)
	_ = f.Close()
	if err != nil {
		return err
	}
	pairs, disc := causal.FindCallPairs(tr.Messages, 0)
	s.tb.ReceiverBlackboxTracefileDiscarded.Add(ctx, int64(disc.Total()))
	if len(pairs) == 0 {
		return nil
	}
	slices.SortStableFunc(pairs, func(a, b causal.CallPair) int {
		switch {
		case a.Return < b.Return:
			return -1
		case a.Return > b.Return:
			return 1
		}
		return 0
	})
	t0 := tr.Messages[0].Time
	wall := s.now()
	speed := s.cfg.Speed
	mapTime := func(ts int64) int64 {
		if !s.cfg.Rebase {
			return ts
		}
		if speed > 0 {
			return wall.UnixNano() + int64(float64(ts-t0)/speed)
		}
		return wall.UnixNano() + (ts - t0)
	}
	rng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	b := newBatch(rng)
	lastFlush := s.now()
	flush := func() {
		s.em.sendWait(ctx, b)
		b = newBatch(rng)
		lastFlush = s.now()
	}
	for _, p := range pairs {
		if speed > 0 {
			due := wall.Add(time.Duration(float64(p.Return-t0) / speed))
			if wait := due.Sub(s.now()); wait > 0 {
				if b.n > 0 {
					flush()
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(time.Until(due)):
				}
			}
		} else if ctx.Err() != nil {
			return nil
		}
		caller, callee := tr.Nodes[p.Caller], tr.Nodes[p.Callee]
		start, end := mapTime(p.Call), mapTime(p.Return)
		cn, sn := node{service: caller, instance: caller, named: true}, node{service: callee, instance: callee, named: true}
		cl := b.span(cn, "call "+callee, ptrace.SpanKindClient, start, end)
		cl.Attributes().PutStr("service.peer.name", callee)
		sv := b.span(sn, "call "+callee, ptrace.SpanKindServer, start, end)
		if s.cfg.PairSpans {
			sv.SetTraceID(cl.TraceID())
			sv.SetParentSpanID(cl.SpanID())
		}
		for _, sp := range []ptrace.Span{cl, sv} {
			sp.Attributes().PutStr(attrSource, "tracefile")
			if p.PathID != causal.NoID {
				sp.Attributes().PutStr(attrTruthPath, tr.PathIDs[p.PathID])
			}
		}
		if b.n >= 2000 || s.now().Sub(lastFlush) >= 200*time.Millisecond {
			flush()
		}
	}
	flush()
	return nil
}

func (s *traceFileSource) shutdown(ctx context.Context) error {
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
