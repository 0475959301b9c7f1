// Package loadgen generates realistic spans of a three-tier shop (web → app →
// PostgreSQL) in which trace context can be lost on the web → app hop, with the
// ground truth of who called whom. The end-to-end tests replay the plans through
// the OpenTelemetry SDK; the benchmark load generator (cmd/loadgen) turns them
// into OTLP requests directly.
//
// A plan is pure data: the same Config gives the same traces. Timing is explicit,
// so nothing ever sleeps.
//
// # The scenario
//
// Each trace is one user request:
//
//	web SERVER  "GET /products/{id}"          (service web, instance web-N)
//	└─ web CLIENT "GET"  → http://app:8080/…  (server.address app, server.port 8080)
//	   └─ app SERVER "GET /api/products/{id}" (service app, instance app-N)
//	      └─ app CLIENT "SELECT shop.products" (db.system.name postgresql, server.address db)
//	         … one or two queries depending on the route
//
// With probability Config.DropFraction the app SERVER span lost its context: it
// starts a new trace with no parent (ContextDropped), as when a proxy strips the
// traceparent header. Its true parent is still the web CLIENT span.
//
// # Overlap without ambiguity
//
// Requests overlap (a new one starts every MinGap..MaxGap while each web → app
// call lasts MinCall..MaxCall, so several are in flight at once), but the calls
// are spaced so that the true parent is the only web CLIENT span whose interval
// contains an app SERVER span, even with clock skew: successive calls start at
// least Separation apart and also end at least Separation apart, and network
// delays are at most 1 ms each way. Hence containment stays unique for any skew
// tolerance below Separation − 1 ms (11 ms with the 12 ms default, twice the
// 5 ms skew window of the examples). Tests of stitching can then demand the
// exact truth; accuracy under real ambiguity is the job of internal/causal's tests.
package loadgen

import (
	"errors"
	"fmt"
	"math/rand"
	"time"
)

// SpanKind is the OpenTelemetry span kind of a planned span.
type SpanKind uint8

// Span kinds used by the scenario.
const (
	KindServer SpanKind = iota + 1
	KindClient
)

func (k SpanKind) String() string {
	switch k {
	case KindServer:
		return "SERVER"
	case KindClient:
		return "CLIENT"
	}
	return fmt.Sprintf("SpanKind(%d)", uint8(k))
}

// Attr is a span attribute: a string, or an integer when IsInt.
type Attr struct {
	Key   string
	Str   string
	Int   int64
	IsInt bool
}

// S makes a string attribute.
func S(k, v string) Attr { return Attr{Key: k, Str: v} }

// I makes an integer attribute.
func I(k string, v int64) Attr { return Attr{Key: k, Int: v, IsInt: true} }

// Positions of the fixed spans in Trace.Spans; database calls follow from DBFirst.
const (
	WebServer = 0
	WebClient = 1
	AppServer = 2
	DBFirst   = 3
)

// PlannedSpan is one span the load generator plans (not a span model: it becomes OTLP).
type PlannedSpan struct {
	Service  string // service.name
	Instance string // service.instance.id
	Kind     SpanKind
	Name     string
	Start    time.Time
	End      time.Time
	// Parent is the index in Trace.Spans of the causal parent, -1 for the root.
	Parent int
	// ContextDropped: the parent's context did not reach this span, so it is
	// the root of a new trace although Parent names its true parent.
	ContextDropped bool
	Attrs          []Attr
}

// Trace is one request through the tiers. Spans are in start order and a
// parent always comes before its children.
type Trace struct {
	Route string // the web route, e.g. "GET /products/{id}"
	Spans []PlannedSpan
}

// Config shapes the generated load.
type Config struct {
	Seed  int64
	Start time.Time // the first request starts a few milliseconds after Start
	// DropFraction is the share of requests whose app SERVER span lost its
	// context (0 = all propagate, 1 = none does).
	DropFraction float64
	WebInstances int
	AppInstances int
	// Gap between the starts of successive web → app calls.
	MinGap, MaxGap time.Duration
	// Duration of a web → app call (the web CLIENT span).
	MinCall, MaxCall time.Duration
	// Separation is the least distance between the starts, and between the
	// ends, of successive web → app calls (see the package documentation).
	Separation time.Duration
}

// DefaultConfig is a busy but unambiguous shop: a request every 12–24 ms, each
// web → app call 40–120 ms long, so three to eight are in flight at once.
func DefaultConfig() Config {
	return Config{
		Seed:         1,
		Start:        time.Unix(1_700_000_000, 0),
		DropFraction: 1,
		WebInstances: 2,
		AppInstances: 2,
		MinGap:       12 * time.Millisecond,
		MaxGap:       24 * time.Millisecond,
		MinCall:      40 * time.Millisecond,
		MaxCall:      120 * time.Millisecond,
		Separation:   12 * time.Millisecond,
	}
}

// Validate reports a configuration the generator cannot honour.
func (c Config) Validate() error {
	switch {
	case c.DropFraction < 0 || c.DropFraction > 1:
		return errors.New("loadgen: DropFraction must be in [0,1]")
	case c.WebInstances < 1 || c.AppInstances < 1:
		return errors.New("loadgen: need at least one web and one app instance")
	case c.MinGap <= 0 || c.MaxGap < c.MinGap:
		return errors.New("loadgen: need 0 < MinGap <= MaxGap")
	case c.MinCall < 20*time.Millisecond || c.MaxCall < c.MinCall:
		return errors.New("loadgen: need 20ms <= MinCall <= MaxCall")
	case c.Separation < 2*time.Millisecond:
		return errors.New("loadgen: Separation must be at least 2ms")
	}
	return nil
}

type query struct {
	op, table, text string
}

type route struct {
	method   string
	webRoute string // http.route at the web tier
	appRoute string // http.route at the app tier
	weight   int
	withID   bool
	queries  []query
}

var routes = []route{
	{method: "GET", webRoute: "/products/{id}", appRoute: "/api/products/{id}", weight: 60, withID: true,
		queries: []query{{"SELECT", "products", "SELECT id, name, price FROM products WHERE id = $1"}}},
	{method: "POST", webRoute: "/cart", appRoute: "/api/cart/items", weight: 25,
		queries: []query{
			{"SELECT", "products", "SELECT price, stock FROM products WHERE id = $1"},
			{"INSERT", "cart_items", "INSERT INTO cart_items (cart_id, product_id, qty) VALUES ($1, $2, $3)"},
		}},
	{method: "GET", webRoute: "/orders", appRoute: "/api/orders", weight: 15,
		queries: []query{{"SELECT", "orders", "SELECT id, total, created_at FROM orders WHERE customer_id = $1"}}},
}

// Generator produces an endless, reproducible stream of requests.
type Generator struct {
	cfg       Config
	rng       *rand.Rand
	nextStart time.Time // start of the next web → app call
	lastEnd   time.Time // end of the previous web → app call
	weightSum int
}

// NewGenerator validates cfg and returns a generator positioned at cfg.Start.
func NewGenerator(cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Generator{cfg: cfg, rng: rand.New(rand.NewSource(cfg.Seed)), nextStart: cfg.Start.Add(5 * time.Millisecond)}
	for _, r := range routes {
		g.weightSum += r.weight
	}
	return g, nil
}

// Generate returns the first n requests of cfg.
func Generate(cfg Config, n int) ([]Trace, error) {
	g, err := NewGenerator(cfg)
	if err != nil {
		return nil, err
	}
	return g.Next(n), nil
}

func (g *Generator) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(g.rng.Int63n(int64(hi-lo)+1))
}

func (g *Generator) pickRoute() route {
	x := g.rng.Intn(g.weightSum)
	for _, r := range routes {
		if x < r.weight {
			return r
		}
		x -= r.weight
	}
	return routes[0]
}

// Next returns the next n requests, continuing the timeline of earlier calls.
func (g *Generator) Next(n int) []Trace {
	out := make([]Trace, 0, n)
	for range n {
		out = append(out, g.one())
	}
	return out
}

func (g *Generator) one() Trace {
	c := g.cfg
	r := g.pickRoute()
	web := 1 + g.rng.Intn(c.WebInstances)
	app := 1 + g.rng.Intn(c.AppInstances)
	webInst, appInst := fmt.Sprintf("web-%d", web), fmt.Sprintf("app-%d", app)
	webIP, appIP := fmt.Sprintf("10.0.1.%d", 10+web), fmt.Sprintf("10.0.2.%d", 10+app)

	// The web → app call; see the package documentation for the spacing rules.
	callStart := g.nextStart
	callEnd := callStart.Add(g.between(c.MinCall, c.MaxCall))
	if !g.lastEnd.IsZero() && callEnd.Before(g.lastEnd.Add(c.Separation)) {
		callEnd = g.lastEnd.Add(c.Separation)
	}
	g.lastEnd = callEnd
	g.nextStart = callStart.Add(max(g.between(c.MinGap, c.MaxGap), c.Separation))

	appStart := callStart.Add(g.between(200*time.Microsecond, time.Millisecond))
	appEnd := callEnd.Add(-g.between(200*time.Microsecond, time.Millisecond))
	webStart := callStart.Add(-g.between(500*time.Microsecond, 3*time.Millisecond))
	webEnd := callEnd.Add(g.between(300*time.Microsecond, 2*time.Millisecond))

	webPath, appPath := r.webRoute, r.appRoute
	if r.withID {
		id := fmt.Sprint(1000 + g.rng.Intn(9000))
		webPath = "/products/" + id
		appPath = "/api/products/" + id
	}
	status := int64(200)
	if r.method == "POST" {
		status = 201
	}

	spans := []PlannedSpan{
		WebServer: {
			Service: "web", Instance: webInst, Kind: KindServer, Name: r.method + " " + r.webRoute,
			Start: webStart, End: webEnd, Parent: -1,
			Attrs: []Attr{
				S("http.request.method", r.method), S("http.route", r.webRoute), S("url.path", webPath),
				S("url.scheme", "https"), S("server.address", "shop.example.com"), I("server.port", 443),
				S("client.address", fmt.Sprintf("203.0.113.%d", 1+g.rng.Intn(250))),
				S("network.protocol.version", "1.1"), I("http.response.status_code", status),
			},
		},
		WebClient: {
			Service: "web", Instance: webInst, Kind: KindClient, Name: r.method,
			Start: callStart, End: callEnd, Parent: WebServer,
			Attrs: []Attr{
				S("http.request.method", r.method), S("url.full", "http://app:8080"+appPath),
				S("server.address", "app"), I("server.port", 8080),
				S("network.peer.address", appIP), I("network.peer.port", 8080),
				I("http.response.status_code", status),
			},
		},
		AppServer: {
			Service: "app", Instance: appInst, Kind: KindServer, Name: r.method + " " + r.appRoute,
			Start: appStart, End: appEnd, Parent: WebClient,
			ContextDropped: g.rng.Float64() < c.DropFraction,
			Attrs: []Attr{
				S("http.request.method", r.method), S("http.route", r.appRoute), S("url.path", appPath),
				S("url.scheme", "http"), S("server.address", "app"), I("server.port", 8080),
				S("client.address", webIP), S("network.peer.address", webIP),
				I("http.response.status_code", status),
			},
		},
	}

	// Database calls, one after the other inside the app SERVER span.
	cursor := appStart.Add(g.between(500*time.Microsecond, 2*time.Millisecond))
	limit := appEnd.Add(-500 * time.Microsecond)
	per := limit.Sub(cursor)/time.Duration(len(r.queries)) - time.Millisecond
	for _, q := range r.queries {
		d := min(g.between(1500*time.Microsecond, 12*time.Millisecond), per)
		spans = append(spans, PlannedSpan{
			Service: "app", Instance: appInst, Kind: KindClient, Name: q.op + " shop." + q.table,
			Start: cursor, End: cursor.Add(d), Parent: AppServer,
			Attrs: []Attr{
				S("db.system.name", "postgresql"), S("db.namespace", "shop"),
				S("db.operation.name", q.op), S("db.collection.name", q.table), S("db.query.text", q.text),
				S("server.address", "db"), I("server.port", 5432),
				S("network.peer.address", "10.0.3.10"), I("network.peer.port", 5432),
			},
		})
		cursor = cursor.Add(d + g.between(200*time.Microsecond, 800*time.Microsecond))
	}
	return Trace{Route: r.method + " " + r.webRoute, Spans: spans}
}

// End is the latest end time of the trace's spans.
func (t Trace) End() time.Time {
	var e time.Time
	for _, s := range t.Spans {
		if s.End.After(e) {
			e = s.End
		}
	}
	return e
}
