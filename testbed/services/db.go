package services

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	_ "modernc.org/sqlite" // pure-Go SQLite driver "sqlite"

	"github.com/tierscope/tierscope/testbed/config"
)

// Seed sizes of the store.
const (
	SeedItems = 1000
	SeedUsers = 100
)

// keepRows bounds the tables that writes grow, so a long run cannot fill the disk.
const keepRows = 100000

const replQueueLen = 1024

// DB is the store tier: POST /query/{name} runs a named query on SQLite. With a
// backup URL it is the primary and replicates its writes there, inside the write
// (sync) or after it has answered (async).
type DB struct {
	tier   Tier
	tracer trace.Tracer
	conv   conv
	sql    *sql.DB
	ns     string // db.namespace
	mu     sync.Mutex
	writes atomic.Uint64

	backup  string
	client  *http.Client
	jobs    chan replJob
	quit    chan struct{}
	done    chan struct{}
	dropped atomic.Uint64 // async replications dropped because the queue was full
	mux     *http.ServeMux
}

type replJob struct {
	ctx  context.Context // carries the primary SERVER span as parent
	name string
	args []any
}

type queryRequest struct {
	Args []any `json:"args"`
}

// NewDB opens (creating and seeding if needed) dataDir/<instance>.sqlite. backup
// is the backup's base URL; "" for the backup itself or for no replication.
func NewDB(t Tier, dataDir, backup string) (*DB, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	name := t.Instance
	if name == "" {
		name = "db"
	}
	path := filepath.Join(dataDir, name+".sqlite")
	// WAL lets readers run beside the single writer; busy_timeout covers the rest.
	dsn := "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	sdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	sdb.SetMaxOpenConns(8)
	d := &DB{tier: t, tracer: t.tracer(), conv: conv{legacy: t.Config.Legacy(config.DB)}, sql: sdb, ns: name,
		backup: strings.TrimRight(backup, "/"), client: newPooledClient(t.dial()),
		jobs: make(chan replJob, replQueueLen), quit: make(chan struct{}), done: make(chan struct{})}
	if err := d.seed(); err != nil {
		sdb.Close()
		return nil, fmt.Errorf("db %s: %w", path, err)
	}
	go d.replicator()
	d.mux = http.NewServeMux()
	d.mux.HandleFunc("POST /query/{name}", d.serveQuery)
	d.mux.HandleFunc("GET /healthz", healthz)
	d.mux.HandleFunc("GET /stats", d.serveStats)
	return d, nil
}

// seed creates the schema and, on an empty store, the deterministic rows, so a
// primary and a backup start identical.
func (d *DB) seed() error {
	ctx := context.Background()
	for _, stmt := range []string{
		`CREATE TABLE IF NOT EXISTS items(id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS users(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)`,
		`CREATE TABLE IF NOT EXISTS bids(id INTEGER PRIMARY KEY AUTOINCREMENT, item INTEGER NOT NULL, amount REAL NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS notices(id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL)`,
	} {
		if _, err := d.sql.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	var n int
	if err := d.sql.QueryRowContext(ctx, `SELECT COUNT(*) FROM items`).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	tx, err := d.sql.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	for i := 1; i <= SeedItems; i++ {
		if _, err := tx.ExecContext(ctx, `INSERT INTO items(id, name, price) VALUES (?, ?, ?)`,
			i, fmt.Sprintf("item %d", i), float64(i*37%1000)+0.99); err != nil {
			return err
		}
	}
	for i := 1; i <= SeedUsers; i++ {
		if _, err := tx.ExecContext(ctx, `INSERT INTO users(id, name) VALUES (?, ?)`, i, fmt.Sprintf("user%d", i)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Handler serves the tier.
func (d *DB) Handler() http.Handler { return d.mux }

// Close stops replication (finishing what is queued, each call bounded by its
// timeout) and closes the store. Call it after the server has stopped.
func (d *DB) Close() error {
	select {
	case <-d.quit:
	default:
		close(d.quit)
	}
	<-d.done
	d.client.CloseIdleConnections()
	return d.sql.Close()
}

func (d *DB) serveStats(rw http.ResponseWriter, _ *http.Request) {
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(map[string]uint64{
		"writes": d.writes.Load(), "replication_dropped": d.dropped.Load(),
	})
}

func (d *DB) serveQuery(rw http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	q, ok := d.tier.Config.Queries[name]
	if !ok {
		http.NotFound(rw, r)
		return
	}
	route := "/query/" + name
	ctx, span := serverSpan(d.tracer, d.conv, r, "POST "+route, route)
	sw := &statusWriter{ResponseWriter: rw}
	job := d.handle(ctx, sw, span, name, q, r)
	endServer(span, d.conv, sw)
	// Async replication starts only once the write has answered and its span has
	// ended: that is what distinguishes it from sync in the traces.
	if job != nil {
		select {
		case d.jobs <- *job:
		default:
			d.dropped.Add(1)
		}
	}
}

func (d *DB) handle(ctx context.Context, sw *statusWriter, span trace.Span, name string, q config.Query, r *http.Request) *replJob {
	args, err := d.args(r, q)
	if err != nil {
		fail(sw, span, http.StatusBadRequest, err)
		return nil
	}
	cfg := d.tier.Config
	Burn(cfg.Extra(config.DB, d.tier.Version, name))
	rows, err := d.exec(ctx, q, args)
	if err != nil {
		fail(sw, span, http.StatusInternalServerError, err)
		return nil
	}
	var job *replJob
	if q.Write && d.backup != "" && cfg.Replication != config.ReplNone {
		if cfg.Replication == config.ReplSync {
			if err := d.replicate(ctx, name, args); err != nil {
				fail(sw, span, http.StatusBadGateway, err)
				return nil
			}
		} else {
			job = &replJob{ctx: trace.ContextWithSpanContext(context.Background(), span.SpanContext()), name: name, args: args}
		}
	}
	sw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(sw).Encode(map[string]int64{"rows": rows})
	return job
}

// args are the request's (a replicated write carries the primary's) or drawn
// from the query's templates.
func (d *DB) args(r *http.Request, q config.Query) ([]any, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) > 0 {
		var req queryRequest
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&req); err != nil {
			return nil, fmt.Errorf("bad request body: %w", err)
		}
		if req.Args != nil {
			for i, a := range req.Args {
				if n, ok := a.(json.Number); ok {
					if v, err := n.Int64(); err == nil {
						req.Args[i] = v
					} else if f, err := n.Float64(); err == nil {
						req.Args[i] = f
					}
				}
			}
			return req.Args, nil
		}
	}
	n := strings.Count(q.SQL, "?")
	args := make([]any, n)
	for i := range args {
		tmpl := "{1-1000}"
		if i < len(q.Args) {
			tmpl = q.Args[i]
		}
		a, err := config.ParseArg(tmpl)
		if err != nil {
			return nil, err
		}
		args[i] = a.Value(rand.Int64N)
	}
	return args, nil
}

// exec runs the SQL under an INTERNAL span, burning the query's CPU there.
func (d *DB) exec(ctx context.Context, q config.Query, args []any) (int64, error) {
	op, table := summarize(q.SQL)
	summary := strings.TrimSpace(op + " " + table)
	ctx, span := d.tracer.Start(ctx, summary, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String("db.system.name", "sqlite"),
		attribute.String("db.namespace", d.ns),
		attribute.String("db.query.summary", summary),
		attribute.String("db.query.text", q.SQL),
		attribute.String("db.operation.name", op),
		attribute.String("db.collection.name", table),
	))
	defer span.End()
	Burn(d.tier.Config.BusyTime(q.CPUMC))
	if w := q.Wait.Draw(rand.NormFloat64()); w > 0 {
		time.Sleep(w)
	}
	n, err := d.run(ctx, q, args)
	if err != nil {
		span.RecordError(err)
	} else {
		span.SetAttributes(attribute.Int64("db.response.returned_rows", n))
	}
	return n, err
}

func (d *DB) run(ctx context.Context, q config.Query, args []any) (int64, error) {
	if !q.Write {
		rows, err := d.sql.QueryContext(ctx, q.SQL, args...)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		var n int64
		for rows.Next() {
			n++
		}
		return n, rows.Err()
	}
	// One writer at a time: SQLite would serialise them anyway, this avoids
	// SQLITE_BUSY retries.
	d.mu.Lock()
	defer d.mu.Unlock()
	res, err := d.sql.ExecContext(ctx, q.SQL, args...)
	if err != nil {
		return 0, err
	}
	if d.writes.Add(1)%1024 == 0 {
		for _, t := range []string{"bids", "notices"} {
			_, _ = d.sql.ExecContext(ctx, fmt.Sprintf(`DELETE FROM %s WHERE id <= (SELECT MAX(id) FROM %s) - %d`, t, t, keepRows))
		}
	}
	return res.RowsAffected()
}

// summarize returns the operation and first table of a statement, for
// db.query.summary ("SELECT items").
func summarize(sqlText string) (op, table string) {
	f := strings.Fields(sqlText)
	if len(f) == 0 {
		return "", ""
	}
	op = strings.ToUpper(f[0])
	for i := 0; i+1 < len(f); i++ {
		switch strings.ToUpper(f[i]) {
		case "FROM", "INTO", "UPDATE", "TABLE":
			t := f[i+1]
			if j := strings.IndexAny(t, "(,;"); j >= 0 {
				t = t[:j]
			}
			return op, t
		}
	}
	return op, ""
}

// replicate sends one write to the backup under a CLIENT span.
func (d *DB) replicate(ctx context.Context, name string, args []any) error {
	body, err := json.Marshal(queryRequest{Args: args})
	if err != nil {
		return err
	}
	c := outCall{
		tracer: d.tracer, kind: trace.SpanKindClient,
		name: "POST /query/" + name, url: d.backup + "/query/" + name,
		pooled: d.client, drop: d.tier.Config.Dropped(config.DB, config.DB), dial: d.tier.dial(), conv: d.conv,
		body: func(context.Context) ([]byte, error) { return body, nil },
	}
	_, err = c.do(ctx)
	return err
}

// replicator sends async replications in order; on Close it finishes the queue.
func (d *DB) replicator() {
	defer close(d.done)
	for {
		select {
		case j := <-d.jobs:
			_ = d.replicate(j.ctx, j.name, j.args) // the error is on the span
		case <-d.quit:
			for {
				select {
				case j := <-d.jobs:
					_ = d.replicate(j.ctx, j.name, j.args)
				default:
					return
				}
			}
		}
	}
}
