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
	opt = withStackDefaults(opt)
	st = &Stack{}
	defer func() {
		if err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = st.Close(ctx)
			st = nil
		}
	}()
	b := &stackBuilder{opt: opt, st: st}
	if err := b.makeDataDir(); err != nil {
		return st, err
	}
	if err := b.listen(); err != nil {
		return st, err
	}
	// Listeners no tier took are closed before a failed stack is closed.
	defer b.closeUnstarted()
	if err := b.startStorage(); err != nil {
		return st, err
	}
	if err := b.startApps(); err != nil {
		return st, err
	}
	if err := b.startWebAndWorker(); err != nil {
		return st, err
	}
	return st, nil
}

// withStackDefaults fills in the host, the number of app replicas and the
// version when opt leaves them unset.
func withStackDefaults(opt StackOptions) StackOptions {
	if opt.Host == "" {
		opt.Host = "127.0.0.1"
	}
	if opt.AppReplicas <= 0 {
		opt.AppReplicas = 2
	}
	if opt.Version == "" {
		opt.Version = "v1"
	}
	return opt
}

// stackBuilder holds what StartStack's steps share while the tiers start:
// the options, the stack being built, its listeners and which of them a tier
// serves.
type stackBuilder struct {
	opt StackOptions
	st  *Stack
	// processes counts the fake process identities handed out so far.
	processes int

	lns                            []net.Listener
	webLn, primLn, backLn, queueLn net.Listener
	appLns                         []net.Listener
	cacheLn                        net.Listener
	grpcLns                        []net.Listener
	started                        map[net.Listener]bool
	clientOpts                     []Option
}

// onStop registers f to run when the stack closes (last registered first).
func (b *stackBuilder) onStop(f func(context.Context) error) {
	b.st.stops = append(b.st.stops, f)
}

// makeDataDir creates a temporary directory for the databases, removed on
// Close, when the options name none.
func (b *stackBuilder) makeDataDir() error {
	if b.opt.DataDir != "" {
		return nil
	}
	dir, err := os.MkdirTemp("", "testbed-db-")
	if err != nil {
		return err
	}
	b.onStop(func(context.Context) error { return os.RemoveAll(dir) })
	b.opt.DataDir = dir
	return nil
}

// tier returns the Tier settings of one service instance, with its tracer
// providers: per process (and per client library) from Reporter, or per tier
// from TracerProvider.
func (b *stackBuilder) tier(service, instance string) Tier {
	opt := b.opt
	t := Tier{Config: opt.Config, Version: opt.Version, Instance: instance}
	switch {
	case opt.Reporter != nil:
		id := processIdentity(service, instance, opt.Version, b.processes)
		b.processes++
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

// listen opens every listener and records the stack's URLs and addresses.
// Listening everywhere first makes every URL known before any tier is built;
// the cache and the apps' gRPC listeners come after the others, and only
// when the configuration uses them, so that the ports of the rest stay put.
func (b *stackBuilder) listen() error {
	opt, st := b.opt, b.st
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
			return err
		}
		lns = append(lns, ln)
	}
	b.lns = lns
	url := func(ln net.Listener) string { return "http://" + ln.Addr().String() }
	b.webLn, b.appLns, b.primLn, b.backLn, b.queueLn = lns[0], lns[1:1+opt.AppReplicas], lns[n-3], lns[n-2], lns[n-1]
	next := n
	if opt.Config.UsesCache() {
		b.cacheLn = lns[next]
		st.CacheAddr = b.cacheLn.Addr().String()
		next++
	}
	if opt.Config.UsesGRPC() {
		b.grpcLns = lns[next : next+opt.AppReplicas]
		for _, l := range b.grpcLns {
			st.AppGRPCAddrs = append(st.AppGRPCAddrs, l.Addr().String())
		}
	}
	st.WebURL, st.PrimaryURL, st.BackupURL, st.QueueURL = url(b.webLn), url(b.primLn), url(b.backLn), url(b.queueLn)
	for _, l := range b.appLns {
		st.AppURLs = append(st.AppURLs, url(l))
	}
	b.started = map[net.Listener]bool{}
	return nil
}

// closeUnstarted closes the listeners that no tier serves (after a failure).
func (b *stackBuilder) closeUnstarted() {
	for _, l := range b.lns {
		if !b.started[l] {
			l.Close()
		}
	}
}

// serve serves h on ln until the stack stops.
func (b *stackBuilder) serve(ln net.Listener, h http.Handler) {
	b.started[ln] = true
	b.onStop(Serve(ln, h).Shutdown)
}

// startStorage starts the back tiers: the backup database, then the primary
// (replicating to the backup unless replication is none), the queue and,
// when used, the cache, whose address it adds to the client options.
func (b *stackBuilder) startStorage() (err error) {
	opt, st := b.opt, b.st
	if st.Backup, err = NewDB(b.tier(config.DB, "db-backup"), opt.DataDir, ""); err != nil {
		return err
	}
	b.onStop(func(context.Context) error { return st.Backup.Close() })
	b.serve(b.backLn, st.Backup.Handler())
	backup := st.BackupURL
	if opt.Config.Replication == config.ReplNone {
		backup = ""
	}
	if st.Primary, err = NewDB(b.tier(config.DB, "db-primary"), opt.DataDir, backup); err != nil {
		return err
	}
	b.onStop(func(context.Context) error { return st.Primary.Close() })
	b.serve(b.primLn, st.Primary.Handler())
	st.Queue = NewQueue(opt.QueueCapacity)
	b.serve(b.queueLn, st.Queue.Handler())
	if b.cacheLn != nil {
		st.Cache = NewCache()
		b.started[b.cacheLn] = true
		st.Cache.Serve(b.cacheLn)
		b.onStop(func(context.Context) error { return st.Cache.Close() })
		b.clientOpts = append(b.clientOpts, WithCache(st.CacheAddr))
	}
	return nil
}

// startApps starts each app replica on its HTTP listener and, when the
// configuration uses grpc steps, on its gRPC listener.
func (b *stackBuilder) startApps() error {
	st := b.st
	appOpts := append([]Option{WithQueue(st.QueueURL)}, b.clientOpts...)
	for i, l := range b.appLns {
		a, err := NewApp(b.tier(config.App, fmt.Sprintf("app-%d", i+1)), st.PrimaryURL, appOpts...)
		if err != nil {
			return err
		}
		b.onStop(func(context.Context) error { a.Close(); return nil })
		b.serve(l, a.Handler())
		if b.grpcLns != nil {
			if err := serveGRPC(a, b.grpcLns[i], b.onStop); err != nil {
				return err
			}
			b.started[b.grpcLns[i]] = true
		}
	}
	return nil
}

// startWebAndWorker starts the front tier and the queue's worker; the worker
// runs until the stack stops or the stop's context ends.
func (b *stackBuilder) startWebAndWorker() error {
	opt, st := b.opt, b.st
	web, err := NewWeb(b.tier(config.Web, "web-1"), st.AppURLs, st.QueueURL, WithAppGRPC(st.AppGRPCAddrs...))
	if err != nil {
		return err
	}
	b.onStop(func(context.Context) error { web.Close(); return nil })
	b.serve(b.webLn, web.Handler())
	w, err := NewWorker(b.tier(config.Worker, "worker-1"), st.QueueURL, st.PrimaryURL, opt.WorkerConcurrency, b.clientOpts...)
	if err != nil {
		return err
	}
	wctx, stopWorker := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(wctx)
	}()
	b.onStop(func(ctx context.Context) error {
		stopWorker()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("worker: %w", ctx.Err())
		}
	})
	return nil
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
