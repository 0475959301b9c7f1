package services

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierscope/tierscope/testbed/config"
)

// App is the application tier: POST /op/{op} (or the gRPC method of the op,
// GRPCServer) burns the op's CPU, then runs its cache and db calls.
type App struct {
	tier   Tier
	tracer trace.Tracer
	conv   conv
	run    *opRunner
	mux    *http.ServeMux
}

// NewApp makes an app replica that queries the db at dbURL. An op with cache
// calls needs WithCache, one with an async publish WithQueue.
func NewApp(t Tier, dbURL string, opts ...Option) (*App, error) {
	if dbURL == "" {
		return nil, errors.New("app: a db URL is required")
	}
	o := collect(opts)
	a := &App{tier: t, tracer: t.tracer(), conv: conv{legacy: t.Config.Legacy(config.App)}}
	var err error
	if a.run, err = newOpRunner(t, config.App, dbURL, o, t.Config.Ops); err != nil {
		return nil, err
	}
	a.mux = http.NewServeMux()
	a.mux.HandleFunc("POST /op/{op}", a.serveOp)
	a.mux.HandleFunc("GET /healthz", healthz)
	return a, nil
}

// Handler serves the tier.
func (a *App) Handler() http.Handler { return a.mux }

// Close waits for the async tasks still running (each call bounded by its
// timeout) and releases idle connections. Call it after the servers stopped.
func (a *App) Close() { a.run.close() }

func (a *App) serveOp(rw http.ResponseWriter, r *http.Request) {
	name := r.PathValue("op")
	op, ok := a.tier.Config.Ops[name]
	if !ok {
		http.NotFound(rw, r)
		return
	}
	route := "/op/" + name
	ctx, span := serverSpan(a.tracer, a.conv, r, "POST "+route, route)
	sw := &statusWriter{ResponseWriter: rw}
	defer endServer(span, a.conv, sw)

	if err := a.runOp(ctx, name, op); err != nil {
		fail(sw, span, http.StatusBadGateway, err)
		return
	}
	sw.Header().Set("Content-Type", "application/json")
	_, _ = sw.Write([]byte(`{"ok":true}` + "\n"))
}

// runOp is an op's work inside its SERVER span, whatever the transport.
func (a *App) runOp(ctx context.Context, name string, op config.Op) error {
	cfg := a.tier.Config
	return a.run.run(ctx, op, cfg.BusyTime(op.CPUMC)+cfg.Extra(config.App, a.tier.Version, name))
}

// dbCaller runs an op's db calls (app and worker share it).
type dbCaller struct {
	tracer trace.Tracer
	url    string
	client *http.Client
	drop   bool
	dial   DialFunc
	conv   conv
	// system is set when the calls stand for a database driver's (config
	// clients.db): the CLIENT span is then named by the query's summary and
	// carries db.* instead of http.* attributes.
	system string
	// queries resolves a query's SQL for the driver-style span.
	queries map[string]config.Query
}

func newDBCaller(t Tier, service, dbURL string) *dbCaller {
	d := &dbCaller{url: strings.TrimRight(dbURL, "/"), client: newPooledClient(t.dial()),
		drop: t.Config.Dropped(service, config.DB), dial: t.dial(),
		conv: conv{legacy: t.Config.Legacy(service)}, queries: t.Config.Queries}
	d.tracer = t.tracer()
	if cl, ok := t.Config.Clients[config.ClientDB]; ok {
		d.tracer = t.clientTracer(config.ClientDB)
		d.system = cl.ServiceName
	}
	return d
}

func (d *dbCaller) run(ctx context.Context, op config.Op) error {
	for _, call := range op.DB {
		c := outCall{
			tracer: d.tracer, kind: trace.SpanKindClient,
			name: "POST /query/" + call.Query, url: d.url + "/query/" + call.Query,
			drop: d.drop, dial: d.dial, conv: d.conv,
		}
		if d.system != "" {
			sqlText := d.queries[call.Query].SQL
			verb, table := summarize(sqlText)
			c.name = strings.TrimSpace(verb + " " + table)
			c.notHTTP = true
			c.attrs = d.conv.db(d.system, "", verb, table, sqlText)
			if !d.conv.legacy { // the legacy conventions had no summary
				c.attrs = append(c.attrs, attribute.String("db.query.summary", c.name))
			}
		}
		if op.Connection == config.ConnPooled {
			c.pooled = d.client
		}
		err := fanOut(ctx, call.Pattern, call.Count, func(ctx context.Context) error {
			_, err := c.do(ctx)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}
