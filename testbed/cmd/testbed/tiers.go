package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tierscope/tierscope/testbed/config"
	"github.com/tierscope/tierscope/testbed/services"
)

// shutdownTimeout bounds the drain of requests in flight and the span flush.
const shutdownTimeout = 5 * time.Second

// tierFlags are the flags every tier shares.
type tierFlags struct {
	config, version, otlp, instance string
}

func addTierFlags(fs *flag.FlagSet, tf *tierFlags, instance string) {
	fs.StringVar(&tf.config, "config", "", "configuration file (default: the embedded testbed.yaml)")
	fs.StringVar(&tf.version, "version", "v1", "service.version, which selects the version's extra time")
	fs.StringVar(&tf.otlp, "otlp", "", "OTLP/gRPC endpoint host:port (insecure), e.g. 127.0.0.1:4317")
	if instance != "" {
		fs.StringVar(&tf.instance, "instance", instance, "service.instance.id")
	}
}

// load reads the configuration; an invalid file is a runtime error (exit 1), an
// undeclared version a usage error.
func (tf *tierFlags) load() (*config.Config, error) {
	cfg, err := config.Load(tf.config)
	if err != nil {
		return nil, err
	}
	if !cfg.HasVersion(tf.version) {
		return nil, usagef("--version %q is not declared under versions in the configuration", tf.version)
	}
	return cfg, nil
}

// newTracerProvider is one tier's provider: its resource names the tier, and a
// batch processor exports OTLP/gRPC without TLS (collectors on the testbed's
// own hosts).
func newTracerProvider(ctx context.Context, endpoint, service, instance, version string) (*sdktrace.TracerProvider, error) {
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(endpoint), otlptracegrpc.WithInsecure())
	if err != nil {
		return nil, fmt.Errorf("otlp exporter for %s: %w", instance, err)
	}
	host, _ := os.Hostname()
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attrString("service.name", service),
		attrString("service.instance.id", instance),
		attrString("service.version", version),
		attrString("host.name", host),
	))
	if err != nil {
		return nil, err
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// newReporterProvider is the provider of a reporter of `up` when the
// configuration has in-process clients: its resource is the identity's (fake
// per-process host.name, process.pid and container.id), so that tiers look like
// separate processes and the clients share with them what the configuration says.
func newReporterProvider(ctx context.Context, endpoint string, id services.Identity) (*sdktrace.TracerProvider, error) {
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(endpoint), otlptracegrpc.WithInsecure())
	if err != nil {
		return nil, fmt.Errorf("otlp exporter for %s in %s: %w", id.Service, id.Process, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(id.Attributes()...))
	if err != nil {
		return nil, err
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// checkURL refuses anything but an http base URL.
func checkURL(flagName, s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return usagef("--%s %q: want an http://host:port base URL", flagName, s)
	}
	return nil
}

func checkListen(s string) error {
	if _, _, err := net.SplitHostPort(s); err != nil {
		return usagef("--listen %q: want host:port", s)
	}
	return nil
}

// serveTier serves one tier until a signal, then drains it, releases it and
// flushes its spans.
func serveTier(e env, name, listen string, h http.Handler, tp *sdktrace.TracerProvider, endpoint string, release func() error) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := services.Serve(ln, h)
	fmt.Fprintf(e.stderr, "testbed %s: listening on %s\n", name, srv.URL())
	var serveErr error
	select {
	case <-e.ctx.Done():
	case serveErr = <-srv.Done():
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	errs := []error{serveErr}
	if serveErr == nil {
		errs = append(errs, srv.Shutdown(ctx))
	}
	if release != nil {
		errs = append(errs, release())
	}
	if tp != nil {
		errs = append(errs, flushAll(endpoint, []*sdktrace.TracerProvider{tp}))
	}
	return errors.Join(errs...)
}

func runWeb(e env, args []string) error {
	fs := newFlagSet("web --listen ADDR --app URL[,URL] --queue URL --otlp ADDR [--instance web-1] [--config FILE] [--version v1]", e.stderr)
	var tf tierFlags
	var listen, apps, queue string
	fs.StringVar(&listen, "listen", "", "address to serve on, host:port")
	fs.StringVar(&apps, "app", "", "app replica base URLs, comma-separated, balanced round-robin")
	fs.StringVar(&queue, "queue", "", "queue base URL")
	addTierFlags(fs, &tf, "web-1")
	if err := parseFlags(fs, args, "listen", "app", "queue", "otlp"); err != nil {
		return err
	}
	if err := checkListen(listen); err != nil {
		return err
	}
	appURLs := strings.Split(apps, ",")
	for _, u := range appURLs {
		if err := checkURL("app", u); err != nil {
			return err
		}
	}
	if err := checkURL("queue", queue); err != nil {
		return err
	}
	cfg, err := tf.load()
	if err != nil {
		return err
	}
	tp, err := newTracerProvider(e.ctx, tf.otlp, config.Web, tf.instance, tf.version)
	if err != nil {
		return err
	}
	w, err := services.NewWeb(services.Tier{Config: cfg, Version: tf.version, Instance: tf.instance, TracerProvider: tp}, appURLs, queue)
	if err != nil {
		return err
	}
	return serveTier(e, "web", listen, w.Handler(), tp, tf.otlp, func() error { w.Close(); return nil })
}

func runApp(e env, args []string) error {
	fs := newFlagSet("app --listen ADDR --db URL --otlp ADDR [--instance app-1] [--config FILE] [--version v1]", e.stderr)
	var tf tierFlags
	var listen, db string
	fs.StringVar(&listen, "listen", "", "address to serve on, host:port")
	fs.StringVar(&db, "db", "", "db primary base URL")
	addTierFlags(fs, &tf, "app-1")
	if err := parseFlags(fs, args, "listen", "db", "otlp"); err != nil {
		return err
	}
	if err := checkListen(listen); err != nil {
		return err
	}
	if err := checkURL("db", db); err != nil {
		return err
	}
	cfg, err := tf.load()
	if err != nil {
		return err
	}
	tp, err := newTracerProvider(e.ctx, tf.otlp, config.App, tf.instance, tf.version)
	if err != nil {
		return err
	}
	a, err := services.NewApp(services.Tier{Config: cfg, Version: tf.version, Instance: tf.instance, TracerProvider: tp}, db)
	if err != nil {
		return err
	}
	return serveTier(e, "app", listen, a.Handler(), tp, tf.otlp, func() error { a.Close(); return nil })
}

func runDB(e env, args []string) error {
	fs := newFlagSet("db --listen ADDR --data DIR [--backup URL] --otlp ADDR [--instance db-primary] [--config FILE] [--version v1]", e.stderr)
	var tf tierFlags
	var listen, data, backup string
	fs.StringVar(&listen, "listen", "", "address to serve on, host:port")
	fs.StringVar(&data, "data", "", "directory of the SQLite file (<instance>.sqlite)")
	fs.StringVar(&backup, "backup", "", "backup base URL: this db is the primary and replicates its writes there")
	addTierFlags(fs, &tf, "db-primary")
	if err := parseFlags(fs, args, "listen", "data", "otlp"); err != nil {
		return err
	}
	if err := checkListen(listen); err != nil {
		return err
	}
	if backup != "" {
		if err := checkURL("backup", backup); err != nil {
			return err
		}
	}
	cfg, err := tf.load()
	if err != nil {
		return err
	}
	tp, err := newTracerProvider(e.ctx, tf.otlp, config.DB, tf.instance, tf.version)
	if err != nil {
		return err
	}
	d, err := services.NewDB(services.Tier{Config: cfg, Version: tf.version, Instance: tf.instance, TracerProvider: tp}, data, backup)
	if err != nil {
		_ = flushAll(tf.otlp, []*sdktrace.TracerProvider{tp})
		return err
	}
	return serveTier(e, "db", listen, d.Handler(), tp, tf.otlp, d.Close)
}

func runQueue(e env, args []string) error {
	fs := newFlagSet("queue --listen ADDR [--capacity 1000]", e.stderr)
	var listen string
	var capacity int
	fs.StringVar(&listen, "listen", "", "address to serve on, host:port")
	fs.IntVar(&capacity, "capacity", services.DefaultQueueCapacity, "messages held per topic; more are dropped")
	if err := parseFlags(fs, args, "listen"); err != nil {
		return err
	}
	if err := checkListen(listen); err != nil {
		return err
	}
	if capacity < 1 {
		return usagef("--capacity %d: want at least 1", capacity)
	}
	return serveTier(e, "queue", listen, services.NewQueue(capacity).Handler(), nil, "", nil)
}

func runWorker(e env, args []string) error {
	fs := newFlagSet("worker --queue URL --db URL --otlp ADDR [--instance worker-1] [--config FILE] [--version v1]", e.stderr)
	var tf tierFlags
	var queue, db string
	var concurrency int
	fs.StringVar(&queue, "queue", "", "queue base URL")
	fs.StringVar(&db, "db", "", "db primary base URL")
	fs.IntVar(&concurrency, "concurrency", services.DefaultWorkerConcurrency, "messages processed at once per topic")
	addTierFlags(fs, &tf, "worker-1")
	if err := parseFlags(fs, args, "queue", "db", "otlp"); err != nil {
		return err
	}
	for name, u := range map[string]string{"queue": queue, "db": db} {
		if err := checkURL(name, u); err != nil {
			return err
		}
	}
	if concurrency < 1 || concurrency > 256 {
		return usagef("--concurrency %d: want 1 to 256", concurrency)
	}
	cfg, err := tf.load()
	if err != nil {
		return err
	}
	tp, err := newTracerProvider(e.ctx, tf.otlp, config.Worker, tf.instance, tf.version)
	if err != nil {
		return err
	}
	w, err := services.NewWorker(services.Tier{Config: cfg, Version: tf.version, Instance: tf.instance, TracerProvider: tp}, queue, db, concurrency)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "testbed worker: consuming from %s\n", queue)
	w.Run(e.ctx)
	return flushAll(tf.otlp, []*sdktrace.TracerProvider{tp})
}

func runUp(e env, args []string) error {
	fs := newFlagSet("up --otlp ADDR [--config FILE] [--version v1] [--base-port 18080] [--data DIR]", e.stderr)
	var tf tierFlags
	var basePort int
	var data, drop string
	addTierFlags(fs, &tf, "")
	fs.IntVar(&basePort, "base-port", 18080, "web's port; app replicas, db primary, db backup and queue follow (then the cache and the apps' gRPC, when configured)")
	fs.StringVar(&drop, "drop-context", "-", "hops that lose trace context, comma-separated (e.g. web->app); - keeps the configuration's")
	fs.StringVar(&data, "data", "", "directory of the SQLite files (default: a temporary directory, removed on exit)")
	if err := parseFlags(fs, args, "otlp"); err != nil {
		return err
	}
	if basePort < 1 || basePort > 65535-8 {
		return usagef("--base-port %d: want 1 to %d", basePort, 65535-8)
	}
	cfg, err := tf.load()
	if err != nil {
		return err
	}
	if drop != "-" {
		var hops []string
		for _, h := range strings.Split(drop, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hops = append(hops, h)
			}
		}
		if err := cfg.SetDropContext(hops); err != nil {
			return usagef("--drop-context: %v", err)
		}
	}
	var (
		mu      sync.Mutex
		tps     []*sdktrace.TracerProvider
		tpError error
	)
	shutdownTPs := func() error {
		mu.Lock()
		defer mu.Unlock()
		return flushAll(tf.otlp, tps)
	}
	keep := func(tp *sdktrace.TracerProvider, err error) trace.TracerProvider {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			tpError = errors.Join(tpError, err)
			return nil
		}
		tps = append(tps, tp)
		return tp
	}
	opts := services.StackOptions{
		Config: cfg, Version: tf.version, Host: "127.0.0.1", BasePort: basePort, DataDir: data,
		TracerProvider: func(service, instance string) trace.TracerProvider {
			return keep(newTracerProvider(e.ctx, tf.otlp, service, instance, tf.version))
		},
	}
	if len(cfg.Clients) > 0 {
		opts.Reporter = func(id services.Identity) trace.TracerProvider {
			return keep(newReporterProvider(e.ctx, tf.otlp, id))
		}
	}
	st, err := services.StartStack(opts)
	if err == nil && tpError != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*shutdownTimeout)
		err = errors.Join(tpError, st.Close(ctx))
		cancel()
	}
	if err != nil {
		return errors.Join(err, shutdownTPs())
	}
	fmt.Fprintf(e.stderr, "testbed up: version %s, replication %s, spans to %s\n", tf.version, cfg.Replication, tf.otlp)
	fmt.Fprintf(e.stderr, "  web        %s  (GET /txn/{Name})\n", st.WebURL)
	for i, u := range st.AppURLs {
		fmt.Fprintf(e.stderr, "  app-%d      %s\n", i+1, u)
	}
	fmt.Fprintf(e.stderr, "  db-primary %s\n  db-backup  %s\n  queue      %s\n", st.PrimaryURL, st.BackupURL, st.QueueURL)
	if st.CacheAddr != "" {
		fmt.Fprintf(e.stderr, "  cache      %s  (RESP: GET, SET, DEL)\n", st.CacheAddr)
	}
	for i, a := range st.AppGRPCAddrs {
		fmt.Fprintf(e.stderr, "  app-%d gRPC %s  (%s)\n", i+1, a, services.AppGRPCService)
	}
	<-e.ctx.Done()
	fmt.Fprintln(e.stderr, "testbed up: stopping")
	ctx, cancel := context.WithTimeout(context.Background(), 2*shutdownTimeout)
	defer cancel()
	return errors.Join(st.Close(ctx), shutdownTPs())
}

// flushAll shuts the providers down at once, so an unreachable collector costs
// one shutdownTimeout rather than one per tier, and reports a single error.
func flushAll(endpoint string, tps []*sdktrace.TracerProvider) error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	errs := make([]error, len(tps))
	var wg sync.WaitGroup
	for i, tp := range tps {
		wg.Go(func() { errs[i] = tp.Shutdown(ctx) })
	}
	wg.Wait()
	failed := 0
	var first error
	for _, err := range errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if failed == 0 {
		return nil
	}
	return fmt.Errorf("flushing spans of %d of %d tiers to %s: %w", failed, len(tps), endpoint, first)
}
