package services

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierscope/tierscope/testbed/config"
)

// Option gives a tier what the configuration's optional features need beyond
// its required arguments: the cache's address for cache calls, the queue for an
// op's async publish, the app replicas' gRPC addresses for grpc steps.
type Option func(*options)

type options struct {
	queue   string
	cache   string
	appGRPC []string
}

// WithQueue is the queue's base URL, for async publishes from an op.
func WithQueue(url string) Option { return func(o *options) { o.queue = strings.TrimRight(url, "/") } }

// WithCache is the cache tier's host:port.
func WithCache(addr string) Option { return func(o *options) { o.cache = addr } }

// WithAppGRPC are the app replicas' gRPC host:port, in the order of their HTTP
// URLs, for web steps with transport grpc.
func WithAppGRPC(addrs ...string) Option {
	return func(o *options) { o.appGRPC = append([]string(nil), addrs...) }
}

func collect(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// opRunner runs an op's (or a topic's) work: busy time, cache calls, db calls,
// and its async tasks, which it waits for only on close.
type opRunner struct {
	tier   Tier
	tracer trace.Tracer
	db     *dbCaller
	cache  *cacheClient // nil when no op calls the cache
	pub    *publisher   // nil when no op publishes
	tasks  sync.WaitGroup
}

func newOpRunner(t Tier, service, dbURL string, o options, ops map[string]config.Op) (*opRunner, error) {
	r := &opRunner{tier: t, tracer: t.tracer(), db: newDBCaller(t, service, dbURL)}
	var cacheBy, pubBy string
	for _, name := range sortedNames(ops) {
		op := ops[name]
		if len(op.Cache) > 0 && cacheBy == "" {
			cacheBy = name
		}
		for _, a := range op.Async {
			if len(a.Cache) > 0 && cacheBy == "" {
				cacheBy = name
			}
			if a.Publish != "" && pubBy == "" {
				pubBy = name
			}
		}
	}
	if cacheBy != "" {
		if o.cache == "" {
			return nil, fmt.Errorf("%s: %s calls the cache, and no cache address was given", service, cacheBy)
		}
		r.cache = newCacheClient(t, service, o.cache)
	}
	if pubBy != "" {
		if o.queue == "" {
			return nil, fmt.Errorf("%s: %s publishes, and no queue URL was given", service, pubBy)
		}
		r.pub = &publisher{tracer: r.tracer, conv: conv{legacy: t.Config.Legacy(service)}, url: o.queue,
			client: newPooledClient(t.dial()), instance: t.Instance, drop: t.Config.Dropped(service, config.Worker)}
	}
	return r, nil
}

// run does op inside the caller's span: async tasks marked begin, busy, the
// cache and db calls, then the async tasks marked end.
func (r *opRunner) run(ctx context.Context, op config.Op, busy time.Duration) error {
	r.launch(ctx, op.Async, config.StartBegin)
	Burn(busy)
	if err := r.cacheCalls(ctx, op.Cache); err != nil {
		return err
	}
	if err := r.db.run(ctx, op); err != nil {
		return err
	}
	r.launch(ctx, op.Async, config.StartEnd)
	return nil
}

func (r *opRunner) cacheCalls(ctx context.Context, calls []config.CacheCall) error {
	for _, c := range calls {
		err := fanOut(ctx, c.Pattern, c.Count, func(ctx context.Context) error { return r.cache.do(ctx, c) })
		if err != nil {
			return err
		}
	}
	return nil
}

// launch starts the tasks whose start is at this point, fire and forget: each
// keeps the request's span as parent but not its cancellation, so it may end
// after the request has been answered.
func (r *opRunner) launch(ctx context.Context, tasks []config.Async, start string) {
	for _, a := range tasks {
		if a.Start != start {
			continue
		}
		actx := context.WithoutCancel(ctx)
		r.tasks.Add(1)
		go func() {
			defer r.tasks.Done()
			if a.Publish != "" {
				_ = r.pub.publish(actx, a.Publish) // the error is on the span
				return
			}
			r.task(actx, a)
		}()
	}
}

// task is an in-process background job (an audit record, a cache warm-up)
// under an INTERNAL span.
func (r *opRunner) task(ctx context.Context, a config.Async) {
	ctx, span := r.tracer.Start(ctx, a.Task, trace.WithSpanKind(trace.SpanKindInternal))
	defer span.End()
	Burn(r.tier.Config.BusyTime(a.CPUMC))
	if w := a.Wait.Draw(rand.NormFloat64()); w > 0 {
		time.Sleep(w)
	}
	if err := r.cacheCalls(ctx, a.Cache); err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}

// close waits for the async tasks and releases idle connections.
func (r *opRunner) close() {
	r.tasks.Wait()
	r.db.client.CloseIdleConnections()
	if r.cache != nil {
		r.cache.close()
	}
	if r.pub != nil {
		r.pub.client.CloseIdleConnections()
	}
}

// publisher sends messages to the queue under PRODUCER spans (web's publish
// steps, an op's async publish).
type publisher struct {
	tracer   trace.Tracer
	conv     conv
	url      string
	client   *http.Client
	instance string
	drop     bool // the message carries no trace context
}

func sortedNames[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
