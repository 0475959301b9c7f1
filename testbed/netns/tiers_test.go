package netns

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierscope/tierscope/testbed/config"
	"github.com/tierscope/tierscope/testbed/services"
)

// tierNode is one tier running in this process but networked from its own
// namespace: its listener was created inside the namespace, its outgoing
// calls are dialled from there, and its spans go to its own recorder.
type tierNode struct {
	host *Host
	ln   net.Listener
	rec  *tracetest.SpanRecorder
	tier services.Tier
}

// newTierNode listens on addr:0 inside h and builds the tier's Tier (own
// TracerProvider and in-memory recorder, Dial from h's namespace).
func newTierNode(t *testing.T, cfg *config.Config, h *Host, addr netip.Addr, service, instance string) *tierNode {
	t.Helper()
	ln := must[net.Listener](t)(h.Listen("tcp4", netip.AddrPortFrom(addr, 0).String()))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(rec),
		sdktrace.WithResource(resource.NewSchemaless(
			attribute.String("service.name", service),
			attribute.String("service.instance.id", instance),
			attribute.String("service.version", "v1"))))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(ctx)
	})
	return &tierNode{host: h, ln: ln, rec: rec, tier: services.Tier{
		Config: cfg, Version: "v1", Instance: instance, TracerProvider: tp, Dial: h.DialContext,
	}}
}

func (n *tierNode) url() string { return "http://" + n.ln.Addr().String() }

func (n *tierNode) port() int { return n.ln.Addr().(*net.TCPAddr).Port }

// serve serves h on the node's listener until the test ends (before the lab
// is closed: cleanups run last-registered first).
func (n *tierNode) serve(t *testing.T, h http.Handler) {
	t.Helper()
	s := services.Serve(n.ln, h)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown %s: %v", n.tier.Instance, err)
		}
	})
}

// hopPhase is what one batch of requests left in the spans of a hop web -> app.
type hopPhase struct {
	client, server, gap []time.Duration // web CLIENT span, app SERVER span, client - server
	txn                 []time.Duration // web SERVER span
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (p hopPhase) String() string {
	r := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	return fmt.Sprintf("n=%d median: web CLIENT %v, app SERVER %v, client-server %v, web SERVER %v",
		len(p.client), r(median(p.client)), r(median(p.server)), r(median(p.gap)), r(median(p.txn)))
}

// TestTierDelayInSpans is the acceptance test "a 10 ms delay that an NFQUEUE
// rule adds between two tiers appears in the spans". The web, app and db
// tiers run in this process, each networked from its own namespace (web <->
// app <-> db over veths), each with its own TracerProvider and in-memory
// span recorder. Sequential GET /txn/Home requests are driven from the web
// namespace in alternating blocks: without a delay, and with a delay loop in
// the app's namespace holding the app's packets towards web (OUTPUT, source
// port = the app's port, out of the web link) for 10 ms, stopped after each
// block. Only span durations are asserted: in the median the web's CLIENT
// span to app grows by ≈ 10 ms while the app's SERVER span for the same
// calls does not, so the delay is on the link between the two tiers.
func TestTierDelayInSpans(t *testing.T) {
	const (
		delay  = 10 * time.Millisecond
		n      = 40 // requests per phase (with / without delay)
		rounds = 4  // alternating blocks of n/rounds requests
		warmup = 2  // requests before every block, not counted
		txn    = "Home"
	)
	requireRoot(t) // fails (not skips) when not root

	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	// Fixed busy times, independent of the machine's clock, and small (Home:
	// 0.05 ms at web, 0.1 ms at app, 0.025 ms at db): the tiers' work is not
	// under test here, and on a loaded machine busy work stretches with CPU
	// contention, which would make the spans noisier than the comparison needs.
	cfg.CPUMHz = 20000
	home, ok := cfg.Transaction(txn)
	if !ok || len(home.Steps) != 1 || home.Steps[0].Call != config.App || home.Steps[0].Count != 1 {
		t.Fatalf("the default config's %s is not one call to app: %+v", txn, home)
	}
	op := home.Steps[0].Op
	hop := "POST /op/" + op // the web CLIENT span and the app SERVER span

	tiers := NewChain(t, "web", "app", "db")
	lab := tiers.Lab
	webH, appH, dbH := tiers.Hosts[0], tiers.Hosts[1], tiers.Hosts[2]
	webApp, appDB := tiers.Links[0], tiers.Links[1]

	// Tiers back to front, each listening on its end of a link.
	dbN := newTierNode(t, cfg, dbH, appDB.BAddr, config.DB, "db-primary")
	appN := newTierNode(t, cfg, appH, webApp.BAddr, config.App, "app-1")
	webN := newTierNode(t, cfg, webH, webApp.AAddr, config.Web, "web-1")

	db, err := services.NewDB(dbN.tier, t.TempDir(), "") // no backup: Home only reads
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	dbN.serve(t, db.Handler())
	app, err := services.NewApp(appN.tier, dbN.url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)
	appN.serve(t, app.Handler())
	web, err := services.NewWeb(webN.tier, []string{appN.url()}, "") // Home publishes nothing
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(web.Close)
	webN.serve(t, web.Handler())
	t.Logf("lab %s: web %s (%s) <-> app %s (%s) <-> db %s (%s)", lab.ID(),
		webN.url(), webH.Namespace(), appN.url(), appH.Namespace(), dbN.url(), dbH.Namespace())

	// The load comes from inside the web namespace, on a kept-alive connection.
	client := webH.HTTPClient()
	target := webN.url() + "/txn/" + txn
	get := func() {
		t.Helper()
		resp, err := client.Get(target)
		if err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s: %s", target, resp.Status, strings.TrimSpace(string(body)))
		}
	}

	// block runs warm-up requests, then count requests, and returns the spans
	// the count requests left. Requests are sequential and every span of a
	// request ends before its response reaches the client (the app's SERVER
	// span ends before the app writes its response, web's before web writes),
	// so the spans recorded between two snapshots belong to the requests in
	// between.
	block := func(name string, count int) hopPhase {
		t.Helper()
		for range warmup {
			get()
		}
		web0, app0 := len(webN.rec.Ended()), len(appN.rec.Ended())
		for range count {
			get()
		}
		webSpans, appSpans := webN.rec.Ended()[web0:], appN.rec.Ended()[app0:]

		servers := map[trace.SpanID]sdktrace.ReadOnlySpan{} // app SERVER spans by parent
		for _, s := range appSpans {
			if s.SpanKind() == trace.SpanKindServer && s.Name() == hop {
				servers[s.Parent().SpanID()] = s
			}
		}
		var p hopPhase
		for _, s := range webSpans {
			switch {
			case s.SpanKind() == trace.SpanKindServer && s.Name() == "GET /txn/"+txn:
				p.txn = append(p.txn, s.EndTime().Sub(s.StartTime()))
			case s.SpanKind() == trace.SpanKindClient && s.Name() == hop:
				attrs := map[attribute.Key]attribute.Value{}
				for _, kv := range s.Attributes() {
					attrs[kv.Key] = kv.Value
				}
				if a := attrs["network.peer.address"].AsString(); a != webApp.BAddr.String() {
					t.Fatalf("%s: web CLIENT span %s went to peer %q, want app's link address %s", name, hop, a, webApp.BAddr)
				}
				srv, ok := servers[s.SpanContext().SpanID()]
				if !ok || srv.SpanContext().TraceID() != s.SpanContext().TraceID() {
					t.Fatalf("%s: web CLIENT span %s (trace %s) has no app SERVER child", name, s.SpanContext().SpanID(), s.SpanContext().TraceID())
				}
				c, sv := s.EndTime().Sub(s.StartTime()), srv.EndTime().Sub(srv.StartTime())
				p.client = append(p.client, c)
				p.server = append(p.server, sv)
				p.gap = append(p.gap, c-sv)
			}
		}
		if len(p.client) != count || len(servers) != count || len(p.txn) != count {
			t.Fatalf("%s: %d requests left %d web CLIENT spans %s (paired), %d app SERVER spans, %d web SERVER spans; want %d each",
				name, count, len(p.client), hop, len(servers), len(p.txn), count)
		}
		t.Logf("%-20s %v", name+":", p)
		return p
	}
	merge := func(into *hopPhase, p hopPhase) {
		into.client = append(into.client, p.client...)
		into.server = append(into.server, p.server...)
		into.gap = append(into.gap, p.gap...)
		into.txn = append(into.txn, p.txn...)
	}

	// Blocks without and with the delay alternate, so that a drift of the
	// machine's load between them does not pass for (or hide) the delay; the
	// blocks after a Stop also show that Stop removes the delay (if it did
	// not, the two medians would not differ).
	var base, delayed hopPhase
	var loops []DelayStats
	for round := 1; round <= rounds; round++ {
		merge(&base, block(fmt.Sprintf("round %d without", round), n/rounds))
		d, err := appH.StartDelay(DelayOptions{
			Chain: "OUTPUT", SrcPort: appN.port(), OutIface: webApp.BIface,
			Delay: delay, Lease: 30 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		if round == 1 {
			t.Logf("iptables backend %s; rule in %s: -A %s", d.Backend(), appH, strings.Join(d.Rule(), " "))
		}
		merge(&delayed, block(fmt.Sprintf("round %d with delay", round), n/rounds))
		st, err := d.Stop()
		if err != nil {
			t.Fatalf("stopping the delay loop: %v", err)
		}
		loops = append(loops, st)
	}
	merge(&base, block("after the last Stop", n/rounds))
	t.Logf("without delay (all blocks): %v", base)
	t.Logf("with delay (all blocks):    %v", delayed)

	// The loops' own measurements, pooled.
	var st DelayStats
	var sum float64
	for i, s := range loops {
		t.Logf("delay loop %d (arrival in the loop -> verdict, per packet): %v", i+1, s)
		if i == 0 || s.Min < st.Min {
			st.Min = s.Min
		}
		st.Max = max(st.Max, s.Max)
		st.Count += s.Count
		st.Flushed += s.Flushed
		st.Errors += s.Errors
		sum += float64(s.Mean) * float64(s.Count)
	}
	if st.Count > 0 {
		st.Mean = time.Duration(sum / float64(st.Count))
	}
	r := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	t.Logf("delay loops, all %d: packets %d, mean %v, min %v, max %v, flushed %d, errors %d",
		len(loops), st.Count, r(st.Mean), r(st.Min), r(st.Max), st.Flushed, st.Errors)

	addClient := median(delayed.client) - median(base.client)
	addServer := median(delayed.server) - median(base.server)
	addGap := median(delayed.gap) - median(base.gap)
	addTxn := median(delayed.txn) - median(base.txn)
	t.Logf("added median by %v on app -> web: web CLIENT %s %v, app SERVER %s %v, client-server (paired) %v, web SERVER GET /txn/%s %v",
		delay, hop, r(addClient), hop, r(addServer), r(addGap), txn, r(addTxn))

	if addClient < 8*time.Millisecond || addClient > 20*time.Millisecond {
		t.Errorf("the web CLIENT span %s grew by %v in the median (%v -> %v); want the %v delay, 8-20 ms",
			hop, r(addClient), r(median(base.client)), r(median(delayed.client)), delay)
	}
	if addServer.Abs() >= 3*time.Millisecond {
		t.Errorf("the app SERVER span %s changed by %v in the median (%v -> %v); want < 3 ms: the delay is on the link, not in the app",
			hop, r(addServer), r(median(base.server)), r(median(delayed.server)))
	}
	if st.Errors != 0 {
		t.Errorf("delay loop errors: %d", st.Errors)
	}
	if st.Count < n {
		t.Errorf("the delay loops held %d packets, want ≥ %d (one response per request)", st.Count, n)
	}
}
