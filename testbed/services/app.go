package services

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/tierscope/tierscope/testbed/config"
)

// App is the application tier: POST /op/{op} burns the op's CPU, then runs its
// db calls.
type App struct {
	tier   Tier
	tracer trace.Tracer
	db     *dbCaller
	mux    *http.ServeMux
}

// NewApp makes an app replica that queries the db at dbURL.
func NewApp(t Tier, dbURL string) (*App, error) {
	if dbURL == "" {
		return nil, errors.New("app: a db URL is required")
	}
	a := &App{tier: t, tracer: t.tracer()}
	a.db = &dbCaller{tracer: a.tracer, url: strings.TrimRight(dbURL, "/"), client: newPooledClient(t.dial()),
		drop: t.Config.Dropped(config.App, config.DB), dial: t.dial()}
	a.mux = http.NewServeMux()
	a.mux.HandleFunc("POST /op/{op}", a.serveOp)
	a.mux.HandleFunc("GET /healthz", healthz)
	return a, nil
}

// Handler serves the tier.
func (a *App) Handler() http.Handler { return a.mux }

// Close releases idle connections.
func (a *App) Close() { a.db.client.CloseIdleConnections() }

func (a *App) serveOp(rw http.ResponseWriter, r *http.Request) {
	name := r.PathValue("op")
	op, ok := a.tier.Config.Ops[name]
	if !ok {
		http.NotFound(rw, r)
		return
	}
	route := "/op/" + name
	ctx, span := serverSpan(a.tracer, r, "POST "+route, route)
	sw := &statusWriter{ResponseWriter: rw}
	defer endServer(span, sw)

	cfg := a.tier.Config
	Burn(cfg.BusyTime(op.CPUMC) + cfg.Extra(config.App, a.tier.Version, name))
	if err := a.db.run(ctx, op); err != nil {
		fail(sw, span, http.StatusBadGateway, err)
		return
	}
	sw.Header().Set("Content-Type", "application/json")
	_, _ = sw.Write([]byte(`{"ok":true}` + "\n"))
}

// dbCaller runs an op's db calls (app and worker share it).
type dbCaller struct {
	tracer trace.Tracer
	url    string
	client *http.Client
	drop   bool
	dial   DialFunc
}

func (d *dbCaller) run(ctx context.Context, op config.Op) error {
	for _, call := range op.DB {
		c := outCall{
			tracer: d.tracer, kind: trace.SpanKindClient,
			name: "POST /query/" + call.Query, url: d.url + "/query/" + call.Query,
			drop: d.drop, dial: d.dial,
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
