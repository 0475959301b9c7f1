package services

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tierscope/tierscope/testbed/config"
)

// Server is one tier's HTTP server.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// Serve serves h on ln until Shutdown. Every timeout is bounded; WriteTimeout
// leaves room for the queue's long poll.
func Serve(ln net.Listener, h http.Handler) *Server {
	s := &Server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      15 * time.Second,
			IdleTimeout:       60 * time.Second,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          log.New(os.Stderr, "", log.LstdFlags),
		},
		ln:   ln,
		done: make(chan error, 1),
	}
	go func() {
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return s
}

// URL is the server's base URL.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Done reports a failure of the server (nil after a clean Shutdown).
func (s *Server) Done() <-chan error { return s.done }

// Shutdown stops accepting, waits for requests in flight (bounded by ctx) and
// returns the serve error, if any.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	return errors.Join(err, <-s.done)
}

// StackOptions configures every tier in one process.
type StackOptions struct {
	Config  *config.Config
	Version string
	// Host to listen on; "" is 127.0.0.1.
	Host string
	// BasePort: web listens on it, then app replicas, db primary, db backup and
	// queue on the following ports. 0 means ephemeral ports.
	BasePort int
	// AppReplicas defaults to 2.
	AppReplicas int
	// DataDir holds the SQLite files; "" means a temporary directory removed on Close.
	DataDir string
	// TracerProvider returns each tier's provider (its resource names the tier);
	// nil means no spans.
	TracerProvider func(service, instance string) trace.TracerProvider
	// Reporter, when set, replaces TracerProvider: it is called for every tier
	// instance and, in app and worker, for every in-process client library of
	// the configuration's clients, with an Identity that carries fake per-process
	// host.name, process.pid and container.id (every tier runs in this one
	// process), from which it builds the resource (Identity.Attributes). Without
	// it the client libraries report under their tier's provider.
	Reporter func(id Identity) trace.TracerProvider
	// QueueCapacity per topic; 0 is the default.
	QueueCapacity int
	// WorkerConcurrency per topic; 0 is DefaultWorkerConcurrency.
	WorkerConcurrency int
}

// Stack is every tier running in this process.
type Stack struct {
	WebURL     string
	AppURLs    []string
	PrimaryURL string
	BackupURL  string
	QueueURL   string
	// CacheAddr (host:port) and AppGRPCAddrs are set when the configuration
	// uses the cache or grpc steps.
	CacheAddr    string
	AppGRPCAddrs []string

	Queue   *Queue
	Cache   *Cache
	Primary *DB
	Backup  *DB

	// stops undo the start, last started first: tiers start back to front, so
	// they stop front to back (nothing new comes in; the worker before the queue;
	// the primary's async replication drains before the backup stops).
	stops []func(context.Context) error
}

// StartStack starts every tier; the stack answers as soon as it returns.
func StartStack(opt StackOptions) (st *Stack, err error) {
	if opt.Config == nil {
		return nil, errors.New("stack: no config")
	}
	if opt.Host == "" {
		opt.Host = "127.0.0.1"
	}
	if opt.AppReplicas <= 0 {
		opt.AppReplicas = 2
	}
	if opt.Version == "" {
		opt.Version = "v1"
	}
	st = &Stack{}
	defer func() {
		if err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = st.Close(ctx)
			st = nil
		}
	}()
	onStop := func(f func(context.Context) error) { st.stops = append(st.stops, f) }
	if opt.DataDir == "" {
		dir, err := os.MkdirTemp("", "testbed-db-")
		if err != nil {
			return st, err
		}
		onStop(func(context.Context) error { return os.RemoveAll(dir) })
		opt.DataDir = dir
	}
	processes := 0
	tier := func(service, instance string) Tier {
		t := Tier{Config: opt.Config, Version: opt.Version, Instance: instance}
		switch {
		case opt.Reporter != nil:
			id := processIdentity(service, instance, opt.Version, processes)
			processes++
			t.TracerProvider = opt.Reporter(id)
			if service == config.App || service == config.Worker {
				for _, client := range sortedNames(opt.Config.Clients) {
					cl := opt.Config.Clients[client]
					if t.Clients == nil {
						t.Clients = map[string]trace.TracerProvider{}
					}
					t.Clients[client] = opt.Reporter(clientIdentity(id, client, cl.ServiceName, cl.Resource))
				}
			}
		case opt.TracerProvider != nil:
			t.TracerProvider = opt.TracerProvider(service, instance)
		}
		return t
	}
	// Listen everywhere first so every URL is known before any tier is built;
	// the cache and the apps' gRPC listeners come after the others, and only
	// when the configuration uses them, so that the ports of the rest stay put.
	n := opt.AppReplicas + 4
	extra := 0
	if opt.Config.UsesCache() {
		extra++
	}
	if opt.Config.UsesGRPC() {
		extra += opt.AppReplicas
	}
	lns := make([]net.Listener, 0, n+extra)
	for i := 0; i < n+extra; i++ {
		port := 0
		if opt.BasePort > 0 {
			port = opt.BasePort + i
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(opt.Host, strconv.Itoa(port)))
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return st, err
		}
		lns = append(lns, ln)
	}
	url := func(ln net.Listener) string { return "http://" + ln.Addr().String() }
	webLn, appLns, primLn, backLn, queueLn := lns[0], lns[1:1+opt.AppReplicas], lns[n-3], lns[n-2], lns[n-1]
	var cacheLn net.Listener
	var grpcLns []net.Listener
	next := n
	if opt.Config.UsesCache() {
		cacheLn = lns[next]
		st.CacheAddr = cacheLn.Addr().String()
		next++
	}
	if opt.Config.UsesGRPC() {
		grpcLns = lns[next : next+opt.AppReplicas]
		for _, l := range grpcLns {
			st.AppGRPCAddrs = append(st.AppGRPCAddrs, l.Addr().String())
		}
	}
	st.WebURL, st.PrimaryURL, st.BackupURL, st.QueueURL = url(webLn), url(primLn), url(backLn), url(queueLn)
	for _, l := range appLns {
		st.AppURLs = append(st.AppURLs, url(l))
	}
	started := map[net.Listener]bool{}
	defer func() {
		for _, l := range lns {
			if !started[l] {
				l.Close()
			}
		}
	}()
	serve := func(ln net.Listener, h http.Handler) {
		started[ln] = true
		onStop(Serve(ln, h).Shutdown)
	}

	if st.Backup, err = NewDB(tier(config.DB, "db-backup"), opt.DataDir, ""); err != nil {
		return st, err
	}
	onStop(func(context.Context) error { return st.Backup.Close() })
	serve(backLn, st.Backup.Handler())
	backup := st.BackupURL
	if opt.Config.Replication == config.ReplNone {
		backup = ""
	}
	if st.Primary, err = NewDB(tier(config.DB, "db-primary"), opt.DataDir, backup); err != nil {
		return st, err
	}
	onStop(func(context.Context) error { return st.Primary.Close() })
	serve(primLn, st.Primary.Handler())
	st.Queue = NewQueue(opt.QueueCapacity)
	serve(queueLn, st.Queue.Handler())
	var clientOpts []Option
	if cacheLn != nil {
		st.Cache = NewCache()
		started[cacheLn] = true
		st.Cache.Serve(cacheLn)
		onStop(func(context.Context) error { return st.Cache.Close() })
		clientOpts = append(clientOpts, WithCache(st.CacheAddr))
	}
	appOpts := append([]Option{WithQueue(st.QueueURL)}, clientOpts...)
	for i, l := range appLns {
		a, err := NewApp(tier(config.App, fmt.Sprintf("app-%d", i+1)), st.PrimaryURL, appOpts...)
		if err != nil {
			return st, err
		}
		onStop(func(context.Context) error { a.Close(); return nil })
		serve(l, a.Handler())
		if grpcLns != nil {
			if err := serveGRPC(a, grpcLns[i], onStop); err != nil {
				return st, err
			}
			started[grpcLns[i]] = true
		}
	}
	web, err := NewWeb(tier(config.Web, "web-1"), st.AppURLs, st.QueueURL, WithAppGRPC(st.AppGRPCAddrs...))
	if err != nil {
		return st, err
	}
	onStop(func(context.Context) error { web.Close(); return nil })
	serve(webLn, web.Handler())
	w, err := NewWorker(tier(config.Worker, "worker-1"), st.QueueURL, st.PrimaryURL, opt.WorkerConcurrency, clientOpts...)
	if err != nil {
		return st, err
	}
	wctx, stopWorker := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(wctx)
	}()
	onStop(func(ctx context.Context) error {
		stopWorker()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("worker: %w", ctx.Err())
		}
	})
	return st, nil
}

// serveGRPC serves a's gRPC service on ln until the stack stops: gracefully,
// unless ctx ends first.
func serveGRPC(a *App, ln net.Listener, onStop func(func(context.Context) error)) error {
	srv, err := a.GRPCServer()
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	onStop(func(ctx context.Context) error {
		stopped := make(chan struct{})
		go func() {
			srv.GracefulStop()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-ctx.Done():
			srv.Stop()
		}
		return <-done
	})
	return nil
}

// Close stops every tier, front to back.
func (st *Stack) Close(ctx context.Context) error {
	var errs []error
	for i := len(st.stops) - 1; i >= 0; i-- {
		errs = append(errs, st.stops[i](ctx))
	}
	st.stops = nil
	return errors.Join(errs...)
}
