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
	conv   conv
	apps   []string
	grpc   []*appClient // per app replica, in the order of apps; nil without grpc steps
	pub    *publisher
	client *http.Client
	next   atomic.Uint64 // round-robin over apps
	mux    *http.ServeMux
}

// NewWeb makes the web tier, balancing app calls round-robin over apps. A grpc
// step needs WithAppGRPC.
func NewWeb(t Tier, apps []string, queue string, opts ...Option) (*Web, error) {
	if len(apps) == 0 {
		return nil, errors.New("web: at least one app URL is required")
	}
	o := collect(opts)
	w := &Web{tier: t, tracer: t.tracer(), conv: conv{legacy: t.Config.Legacy(config.Web)}, client: newPooledClient(t.dial())}
	w.pub = &publisher{tracer: w.tracer, conv: w.conv, url: strings.TrimRight(queue, "/"), client: w.client,
		instance: t.Instance, drop: t.Config.Dropped(config.Web, config.Worker)}
	for _, a := range apps {
		w.apps = append(w.apps, strings.TrimRight(a, "/"))
	}
	if t.Config.UsesGRPC() {
		if len(o.appGRPC) != len(apps) {
			return nil, fmt.Errorf("web: grpc steps need the gRPC address of each of the %d app replicas, got %d", len(apps), len(o.appGRPC))
		}
		for _, addr := range o.appGRPC {
			c, err := newAppClient(t, w.tracer, w.conv, addr)
			if err != nil {
				w.Close()
				return nil, err
			}
			w.grpc = append(w.grpc, c)
		}
	}
	w.mux = http.NewServeMux()
	w.mux.HandleFunc("GET /txn/{name}", w.serveTxn)
	w.mux.HandleFunc("GET /healthz", healthz)
	return w, nil
}

// Handler serves the tier.
func (w *Web) Handler() http.Handler { return w.mux }

// Close releases idle connections.
func (w *Web) Close() {
	w.client.CloseIdleConnections()
	for _, c := range w.grpc {
		_ = c.conn.Close()
	}
}

func (w *Web) serveTxn(rw http.ResponseWriter, r *http.Request) {
	txn, ok := w.tier.Config.Transaction(r.PathValue("name"))
	if !ok {
		http.NotFound(rw, r)
		return
	}
	route := "/txn/" + txn.Name
	ctx, span := serverSpan(w.tracer, w.conv, r, "GET "+route, route)
	sw := &statusWriter{ResponseWriter: rw}
	defer endServer(span, w.conv, sw)

	cfg := w.tier.Config
	Burn(cfg.BusyTime(txn.Web.CPUMC) + cfg.Extra(config.Web, w.tier.Version, txn.Name))
	for _, s := range txn.Steps {
		var err error
		if s.Publish != "" {
			err = fanOut(ctx, s.Pattern, s.Count, func(ctx context.Context) error { return w.pub.publish(ctx, s.Publish) })
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
	i := (w.next.Add(1) - 1) % uint64(len(w.apps))
	drop := w.tier.Config.Dropped(config.Web, config.App)
	if s.Transport == config.TransportGRPC {
		return w.grpc[i].call(ctx, s.Op, drop)
	}
	app := w.apps[i]
	c := outCall{
		tracer: w.tracer, kind: trace.SpanKindClient,
		name: "POST /op/" + s.Op, url: app + "/op/" + s.Op,
		drop: drop, dial: w.tier.dial(), conv: w.conv,
	}
	if s.Connection == config.ConnPooled {
		c.pooled = w.client
	}
	_, err := c.do(ctx)
	return err
}

// publish sends a message to the queue under a PRODUCER span whose context the
// message carries, so the worker's CONSUMER span joins the trace.
func (p *publisher) publish(ctx context.Context, topic string) error {
	c := outCall{
		tracer: p.tracer, kind: trace.SpanKindProducer,
		name: "publish " + topic, url: p.url + "/publish/" + topic,
		pooled: p.client, conv: p.conv,
		attrs: []attribute.KeyValue{
			attribute.String("messaging.system", MessagingSystem),
			attribute.String("messaging.destination.name", topic),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.operation.name", "publish"),
		},
		body: func(ctx context.Context) ([]byte, error) {
			m := Message{Topic: topic, Headers: map[string]string{}, Body: fmt.Sprintf("published by %s", p.instance)}
			if !p.drop {
				propagator.Inject(ctx, propagation.MapCarrier(m.Headers))
			}
			return json.Marshal(m)
		},
	}
	_, err := c.do(ctx)
	return err
}
