package services

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierscope/tierscope/testbed/config"
)

// DefaultWorkerConcurrency is how many messages of one topic a worker processes at
// once.
const DefaultWorkerConcurrency = 2

// Worker consumes every configured topic from the queue and runs the topic's op
// under a CONSUMER span that continues the trace the message carries.
type Worker struct {
	tier        Tier
	tracer      trace.Tracer
	queue       string
	poll        *http.Client
	run         *opRunner
	concurrency int
}

// NewWorker makes a worker; concurrency <= 0 means DefaultWorkerConcurrency. A
// topic with cache calls needs WithCache.
func NewWorker(t Tier, queueURL, dbURL string, concurrency int, opts ...Option) (*Worker, error) {
	if queueURL == "" || dbURL == "" {
		return nil, errors.New("worker: queue and db URLs are required")
	}
	if concurrency <= 0 {
		concurrency = DefaultWorkerConcurrency
	}
	w := &Worker{tier: t, tracer: t.tracer(), queue: strings.TrimRight(queueURL, "/"),
		poll: newPooledClient(t.dial()), concurrency: concurrency}
	var err error
	if w.run, err = newOpRunner(t, config.Worker, dbURL, collect(opts), t.Config.Topics); err != nil {
		return nil, err
	}
	return w, nil
}

// Run consumes until ctx is done, then finishes the messages in hand and returns.
func (w *Worker) Run(ctx context.Context) {
	topics := make([]string, 0, len(w.tier.Config.Topics))
	for t := range w.tier.Config.Topics {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	var wg sync.WaitGroup
	for _, t := range topics {
		for i := 0; i < w.concurrency; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.loop(ctx, t)
			}()
		}
	}
	wg.Wait()
	w.poll.CloseIdleConnections()
	w.run.close()
}

func (w *Worker) loop(ctx context.Context, topic string) {
	for ctx.Err() == nil {
		msg, err := w.consume(ctx, topic)
		if err != nil {
			if ctx.Err() == nil {
				sleepCtx(ctx, 200*time.Millisecond) // queue down: retry without spinning
			}
			continue
		}
		if msg != nil {
			// A message taken is finished even during shutdown.
			w.process(context.WithoutCancel(ctx), topic, msg)
		}
	}
}

// consume long-polls one message; nil when none arrived in time.
func (w *Worker) consume(ctx context.Context, topic string) (*Message, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.queue+"/consume/"+topic, nil)
	if err != nil {
		return nil, err
	}
	resp, err := w.poll.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMessage))
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusNoContent:
		return nil, nil
	case http.StatusOK:
		var m Message
		if err := json.NewDecoder(bytes.NewReader(body)).Decode(&m); err != nil {
			return nil, fmt.Errorf("bad message on %s: %w", topic, err)
		}
		return &m, nil
	default:
		return nil, fmt.Errorf("consume %s: %s", topic, resp.Status)
	}
}

func (w *Worker) process(ctx context.Context, topic string, m *Message) {
	op, ok := w.tier.Config.Topics[topic]
	if !ok {
		return
	}
	ctx = propagator.Extract(ctx, propagation.MapCarrier(m.Headers))
	ctx, span := w.tracer.Start(ctx, "process "+topic, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("messaging.system", MessagingSystem),
		attribute.String("messaging.destination.name", topic),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.operation.name", "process"),
		attribute.Int("messaging.message.body.size", len(m.Body)),
	))
	defer span.End()
	cfg := w.tier.Config
	if err := w.run.run(ctx, op, cfg.BusyTime(op.CPUMC)+cfg.Extra(config.Worker, w.tier.Version, topic)); err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}
