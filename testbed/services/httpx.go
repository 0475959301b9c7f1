package services

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tierscope/tierscope/testbed/config"
)

// CallTimeout bounds every HTTP call a tier makes.
const CallTimeout = 5 * time.Second

// maxBody bounds every request and response body a tier reads.
const maxBody = 1 << 20

const tracerName = "github.com/tierscope/tierscope/testbed/services"

// propagator is W3C trace context only: the testbed tests propagation itself, so
// nothing else (baggage, global state) may carry context across a hop.
var propagator = propagation.TraceContext{}

// Tier is what every tier needs.
type Tier struct {
	Config   *config.Config
	Version  string // service.version; selects the extra time in Config.Versions
	Instance string // service.instance.id
	// TracerProvider is the tier's own provider (its resource names the tier); nil
	// means no spans.
	TracerProvider trace.TracerProvider
	// Dial opens the tier's outgoing connections; nil dials from the process's
	// own network namespace. The namespace harness sets it so that a tier's calls
	// leave from the tier's namespace.
	Dial DialFunc
	// Clients are the providers of the tier's in-process client libraries that
	// report under their back end's service.name (config clients: "cache",
	// "db"); a missing one reports under TracerProvider.
	Clients map[string]trace.TracerProvider
}

// clientTracer is the tracer of an in-process client library.
func (t Tier) clientTracer(client string) trace.Tracer {
	if tp := t.Clients[client]; tp != nil {
		return tp.Tracer(tracerName)
	}
	return t.tracer()
}

// DialFunc opens a connection, as net.Dialer.DialContext does.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// dial returns the tier's dialer.
func (t Tier) dial() DialFunc {
	if t.Dial != nil {
		return t.Dial
	}
	return dialer().DialContext
}

// TruthParentHeader carries, on a hop whose context is dropped on purpose, the
// span id the callee's span would have had as its parent. The callee records it
// as the attribute tierscope.truth.parent_span_id (AttrTruthParent of package
// internal/stitch), so that inference can be scored; it is not trace context and
// no instrumentation reads it.
const (
	TruthParentHeader = "X-Tierscope-Truth-Parent"
	attrTruthParent   = "tierscope.truth.parent_span_id"
)

func (t Tier) tracer() trace.Tracer {
	if t.TracerProvider == nil {
		return noop.NewTracerProvider().Tracer(tracerName)
	}
	return t.TracerProvider.Tracer(tracerName)
}

func dialer() *net.Dialer { return &net.Dialer{Timeout: CallTimeout, KeepAlive: 30 * time.Second} }

// newPooledClient is the keep-alive client a tier shares for "pooled" connections.
// Proxy is deliberately unset: loopback and namespace traffic must never go through
// an environment proxy.
func newPooledClient(dial DialFunc) *http.Client {
	return &http.Client{
		Timeout: CallTimeout,
		Transport: &http.Transport{
			DialContext:         dial,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
		},
	}
}

// outCall is one outgoing HTTP POST with its CLIENT or PRODUCER span.
type outCall struct {
	tracer trace.Tracer
	kind   trace.SpanKind
	name   string
	url    string
	attrs  []attribute.KeyValue
	// pooled is the shared keep-alive client; nil means a fresh transport without
	// keep-alive for this call alone (connection: new).
	pooled *http.Client
	// drop sends without trace context: the callee then starts a new trace.
	drop bool
	// dial opens a fresh connection when pooled is nil.
	dial DialFunc
	// body builds the request body inside the span, so a message can carry the
	// span's context; nil means an empty body.
	body func(ctx context.Context) ([]byte, error)
	// conv names the span's attributes.
	conv conv
	// notHTTP: the span stands for a database driver's call (config clients.db),
	// so it names the server but carries no HTTP attributes.
	notHTTP bool
}

// do performs the call and returns the response body; any non-2xx is an error.
func (c outCall) do(ctx context.Context) ([]byte, error) {
	u, err := url.Parse(c.url)
	if err != nil {
		return nil, err
	}
	var attrs []attribute.KeyValue
	if c.notHTTP {
		attrs = c.conv.serverAddr(u.Hostname(), portOf(u))
	} else {
		attrs = c.conv.clientHTTP(http.MethodPost, c.url, u.Hostname(), portOf(u))
	}
	attrs = append(attrs, c.attrs...)
	ctx, span := c.tracer.Start(ctx, c.name, trace.WithSpanKind(c.kind), trace.WithAttributes(attrs...))
	defer span.End()
	body, err := c.post(ctx)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return body, err
}

func (c outCall) post(ctx context.Context) ([]byte, error) {
	span := trace.SpanFromContext(ctx)
	var payload []byte
	if c.body != nil {
		var err error
		if payload, err = c.body(ctx); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	if len(payload) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.kind == trace.SpanKindClient {
		if c.drop {
			req.Header.Set(TruthParentHeader, span.SpanContext().SpanID().String())
		} else {
			propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
		}
	}
	// The socket peer, as the connection inventory sees it.
	var peer net.Addr
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { peer = info.Conn.RemoteAddr() },
	}))
	client := c.pooled
	if client == nil {
		dial := c.dial
		if dial == nil {
			dial = dialer().DialContext
		}
		tr := &http.Transport{DialContext: dial, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		client = &http.Client{Timeout: CallTimeout, Transport: tr}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if !c.notHTTP {
		span.SetAttributes(c.conv.status(resp.StatusCode))
	}
	span.SetAttributes(c.conv.peer(peer)...)
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return data, fmt.Errorf("POST %s: %s: %s", c.url, resp.Status, bytes.TrimSpace(data))
	}
	return data, nil
}

func portOf(u *url.URL) int {
	if p := u.Port(); p != "" {
		n, _ := strconv.Atoi(p)
		return n
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// fanOut runs f count times: in order for sync and serial (stopping at the first
// error), all at once for parallel.
func fanOut(ctx context.Context, pattern string, count int, f func(context.Context) error) error {
	if pattern != config.PatternParallel {
		for i := 0; i < count; i++ {
			if err := f(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, count)
	var wg sync.WaitGroup
	for i := 0; i < count; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// statusWriter remembers the status code for the SERVER span.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// serverSpan starts the SERVER span of a request, continuing the caller's trace
// when the request carries one. end must be called with the handler's writer.
func serverSpan(tr trace.Tracer, cv conv, r *http.Request, name, route string) (context.Context, trace.Span) {
	ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	attrs := cv.serverHTTP(r.Method, route, r.URL.Path)
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if host, port, ok := splitHostPort(local.String()); ok {
			attrs = append(attrs, cv.localAddr(host, port)...)
		}
	}
	if truth := r.Header.Get(TruthParentHeader); truth != "" {
		attrs = append(attrs, attribute.String(attrTruthParent, truth))
	}
	if host, port, ok := splitHostPort(r.RemoteAddr); ok {
		if !cv.legacy {
			attrs = append(attrs, attribute.String("client.address", host))
		}
		attrs = append(attrs, cv.peer(&net.TCPAddr{IP: net.ParseIP(host), Port: port})...)
	}
	return tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// endServer records the outcome on a SERVER span and ends it.
func endServer(span trace.Span, cv conv, w *statusWriter) {
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	span.SetAttributes(cv.status(status))
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// fail answers an error; 502 because a tier's failures are its dependencies'.
func fail(w http.ResponseWriter, span trace.Span, code int, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	http.Error(w, err.Error(), code)
}

// sleepCtx waits d or until ctx is done (retry backoff, never synchronisation).
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "ok\n")
}
