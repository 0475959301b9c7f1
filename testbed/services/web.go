package services

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierscope/tierscope/testbed/config"
)

// MessagingSystem is messaging.system on PRODUCER and CONSUMER spans.
const MessagingSystem = "tierscope-queue"

// Message is what travels through the queue; the queue never looks inside it.
type Message struct {
	Topic   string            `json:"topic"`
	Headers map[string]string `json:"headers,omitempty"` // W3C trace context
	Body    string            `json:"body"`
}

// Web is the front tier: GET /txn/{Name} runs the transaction's steps.
type Web struct {
	tier   Tier
	tracer trace.Tracer
	apps   []string
	queue  string
	client *http.Client
	next   atomic.Uint64 // round-robin over apps
	mux    *http.ServeMux
}

// NewWeb makes the web tier, balancing app calls round-robin over apps.
func NewWeb(t Tier, apps []string, queue string) (*Web, error) {
	if len(apps) == 0 {
		return nil, errors.New("web: at least one app URL is required")
	}
	w := &Web{tier: t, tracer: t.tracer(), queue: strings.TrimRight(queue, "/"), client: newPooledClient(t.dial())}
	for _, a := range apps {
		w.apps = append(w.apps, strings.TrimRight(a, "/"))
	}
	w.mux = http.NewServeMux()
	w.mux.HandleFunc("GET /txn/{name}", w.serveTxn)
	w.mux.HandleFunc("GET /healthz", healthz)
	return w, nil
}

// Handler serves the tier.
func (w *Web) Handler() http.Handler { return w.mux }

// Close releases idle connections.
func (w *Web) Close() { w.client.CloseIdleConnections() }

func (w *Web) serveTxn(rw http.ResponseWriter, r *http.Request) {
	txn, ok := w.tier.Config.Transaction(r.PathValue("name"))
	if !ok {
		http.NotFound(rw, r)
		return
	}
	route := "/txn/" + txn.Name
	ctx, span := serverSpan(w.tracer, r, "GET "+route, route)
	sw := &statusWriter{ResponseWriter: rw}
	defer endServer(span, sw)

	cfg := w.tier.Config
	Burn(cfg.BusyTime(txn.Web.CPUMC) + cfg.Extra(config.Web, w.tier.Version, txn.Name))
	for _, s := range txn.Steps {
		var err error
		if s.Publish != "" {
			err = fanOut(ctx, s.Pattern, s.Count, func(ctx context.Context) error { return w.publish(ctx, s.Publish) })
		} else {
			err = fanOut(ctx, s.Pattern, s.Count, func(ctx context.Context) error { return w.callApp(ctx, s) })
		}
		if err != nil {
			fail(sw, span, http.StatusBadGateway, err)
			return
		}
	}
	sw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(sw).Encode(map[string]any{"transaction": txn.Name, "ok": true})
}

func (w *Web) callApp(ctx context.Context, s config.Step) error {
	app := w.apps[(w.next.Add(1)-1)%uint64(len(w.apps))]
	c := outCall{
		tracer: w.tracer, kind: trace.SpanKindClient,
		name: "POST /op/" + s.Op, url: app + "/op/" + s.Op,
		drop: w.tier.Config.Dropped(config.Web, config.App), dial: w.tier.dial(),
	}
	if s.Connection == config.ConnPooled {
		c.pooled = w.client
	}
	_, err := c.do(ctx)
	return err
}

// publish sends a message to the queue under a PRODUCER span whose context the
// message carries, so the worker's CONSUMER span joins the trace.
func (w *Web) publish(ctx context.Context, topic string) error {
	drop := w.tier.Config.Dropped(config.Web, config.Worker)
	c := outCall{
		tracer: w.tracer, kind: trace.SpanKindProducer,
		name: "publish " + topic, url: w.queue + "/publish/" + topic,
		pooled: w.client,
		attrs: []attribute.KeyValue{
			attribute.String("messaging.system", MessagingSystem),
			attribute.String("messaging.destination.name", topic),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.operation.name", "publish"),
		},
		body: func(ctx context.Context) ([]byte, error) {
			m := Message{Topic: topic, Headers: map[string]string{}, Body: fmt.Sprintf("published by %s", w.tier.Instance)}
			if !drop {
				propagator.Inject(ctx, propagation.MapCarrier(m.Headers))
			}
			return json.Marshal(m)
		},
	}
	_, err := c.do(ctx)
	return err
}
