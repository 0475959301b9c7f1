// Package store persists Tierscope's mergeable statistics: opaque records that a
// caller-supplied merge function can combine exactly (counts, sums, log-binned
// histograms, regression matrices). See docs/store.md.
//
// A record is identified by (kind, key, shard, window start, resolution). The
// shard is the id of the writing instance, so instances never overwrite each
// other; a query merges across shards and windows in Go. Writes are upserts: a
// writer re-writes a window's cumulative state at every flush, and re-writing is
// idempotent. Two backends implement the same contract: embedded SQLite
// (modernc.org/sqlite, WAL) for one machine, PostgreSQL (pgx) for several
// instances sharing one database.
package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Record is one window of one statistic of one writer.
type Record struct {
	Kind  string // what the payload is, e.g. "pattern" or "edge"; not empty
	Key   string // which series, e.g. a path signature; may be empty
	Shard string // the writing instance; not empty
	// WindowStart is the window's start in Unix seconds, a multiple of Resolution.
	WindowStart int64
	Resolution  int64 // window length in seconds, > 0
	Payload     []byte
}

// Query selects records of one kind whose window starts in [From, To).
type Query struct {
	Kind      string   // required
	KeyPrefix string   // "" = all keys
	From, To  int64    // window_start in [From, To); To == 0 means no upper bound
	Shards    []string // empty = all shards
}

// MergeFunc combines two payloads of the same kind and key. It must be
// associative and commutative, so that the result does not depend on how records
// were split over shards and windows. It may modify and return dst; it must not
// retain src.
type MergeFunc func(kind string, dst, src []byte) ([]byte, error)

// Store is the mergeable statistics store. Its methods are safe for concurrent
// use, and several Stores (processes) may share one database.
type Store interface {
	// Put upserts recs in one transaction: all or none are stored. Identical
	// re-writes are idempotent; within recs a later duplicate identity wins.
	Put(ctx context.Context, recs []Record) error
	// Scan calls fn for each record matching q, ordered by key, window start,
	// shard (and resolution), keys in byte order. An error from fn stops the scan
	// and is returned as is.
	Scan(ctx context.Context, q Query, fn func(Record) error) error
	// Keys returns the distinct keys of kind with a window starting in
	// [from, to) (to == 0: no upper bound), in byte order.
	Keys(ctx context.Context, kind string, from, to int64) ([]string, error)
	// Downsample merges, per shard and key, the records of kind (all kinds if
	// "") finer than toResolution into aligned windows of toResolution, for the
	// aligned windows that end at or before olderThan. Each aligned window is
	// replaced atomically; a record already at toResolution there is merged into.
	// It returns the number of finer records merged away.
	Downsample(ctx context.Context, kind string, olderThan int64, toResolution int64, merge MergeFunc) (merged int, err error)
	// DeleteBefore deletes the records of kind (all kinds if "") whose window
	// ends at or before before (window_start + resolution <= before).
	DeleteBefore(ctx context.Context, kind string, before int64) (deleted int, err error)
	// SchemaVersion is the highest migration applied to the database.
	SchemaVersion(ctx context.Context) (int, error)
	Close() error
}

// ErrInvalid is wrapped by the errors for invalid records, queries and
// arguments.
var ErrInvalid = errors.New("invalid argument")

// Limits on identities. PostgreSQL's B-tree cannot index entries larger than
// about 2.7 kB; the limit keeps both backends' behaviour identical.
const maxIdentityBytes = 1024

// DefaultBatchSize bounds the rows per SQL statement and, for Downsample and
// DeleteBefore, the rows per transaction.
const DefaultBatchSize = 1000

// Option configures OpenSQLite, OpenPostgres and Open.
type Option func(*options)

type options struct {
	busyTimeout time.Duration
	synchronous string
	batchSize   int
	maxConns    int
}

func defaultOptions() options {
	return options{busyTimeout: 5 * time.Second, synchronous: "FULL", batchSize: DefaultBatchSize}
}

// WithBusyTimeout is how long a SQLite connection waits for another writer's
// lock before failing with SQLITE_BUSY (default 5 s). Ignored by PostgreSQL.
func WithBusyTimeout(d time.Duration) Option { return func(o *options) { o.busyTimeout = d } }

// WithSynchronous sets SQLite's synchronous pragma: "FULL" (default; a committed
// Put survives power loss) or "NORMAL" (survives a process crash; power loss may
// roll back the latest commits, never corrupting). Ignored by PostgreSQL.
func WithSynchronous(mode string) Option {
	return func(o *options) { o.synchronous = strings.ToUpper(mode) }
}

// WithBatchSize bounds the rows per statement (Put) and per transaction
// (Downsample, DeleteBefore); default DefaultBatchSize.
func WithBatchSize(n int) Option { return func(o *options) { o.batchSize = n } }

// WithMaxConns bounds the connection pool: PostgreSQL connections (default 8) or
// SQLite reader connections (default 4; SQLite always has one writer).
func WithMaxConns(n int) Option { return func(o *options) { o.maxConns = n } }

func (o *options) validate() error {
	switch {
	case o.busyTimeout < 0:
		return fmt.Errorf("%w: busy timeout %v < 0", ErrInvalid, o.busyTimeout)
	case o.synchronous != "FULL" && o.synchronous != "NORMAL" && o.synchronous != "EXTRA":
		return fmt.Errorf("%w: synchronous %q: want FULL, NORMAL or EXTRA", ErrInvalid, o.synchronous)
	case o.batchSize < 1 || o.batchSize > 10000:
		return fmt.Errorf("%w: batch size %d: want 1..10000", ErrInvalid, o.batchSize)
	case o.maxConns < 0:
		return fmt.Errorf("%w: max conns %d < 0", ErrInvalid, o.maxConns)
	}
	return nil
}

// Open opens the store named by dsn, creating and migrating its schema:
// "postgres://…" or "postgresql://…" is PostgreSQL; "sqlite://" followed by a
// path ("sqlite:///var/lib/tierscope.db"), "sqlite:" + path, or a bare path is
// SQLite. A SQLite DSN may carry ?synchronous=NORMAL|FULL and
// ?busy_timeout=<duration>, which override opts.
func Open(ctx context.Context, dsn string, opts ...Option) (Store, error) {
	switch {
	case dsn == "":
		return nil, fmt.Errorf("store: empty DSN: want postgres://…, sqlite://<path> or a file path: %w", ErrInvalid)
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return OpenPostgres(ctx, dsn, opts...)
	}
	path, extra, err := parseSQLiteDSN(dsn)
	if err != nil {
		return nil, err
	}
	return OpenSQLite(ctx, path, append(slices.Clone(opts), extra...)...)
}

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// parseSQLiteDSN turns a SQLite DSN into a path and options.
func parseSQLiteDSN(dsn string) (string, []Option, error) {
	var rest string
	switch {
	case strings.HasPrefix(dsn, "sqlite://"):
		rest = strings.TrimPrefix(dsn, "sqlite://")
	case strings.HasPrefix(dsn, "sqlite:"):
		rest = strings.TrimPrefix(dsn, "sqlite:")
	case schemeRE.MatchString(dsn):
		scheme := dsn[:strings.Index(dsn, "://")]
		return "", nil, fmt.Errorf("store: DSN scheme %q is not supported (want postgres://, postgresql://, sqlite:// or a file path): %w", scheme, ErrInvalid)
	default:
		return dsn, nil, nil // a bare path, taken literally
	}
	path, rawQuery, _ := strings.Cut(rest, "?")
	if path == "" {
		return "", nil, fmt.Errorf("store: DSN %q has no file path: %w", dsn, ErrInvalid)
	}
	if p, err := url.PathUnescape(path); err == nil {
		path = p
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", nil, fmt.Errorf("store: DSN %q: %v: %w", dsn, err, ErrInvalid)
	}
	var opts []Option
	for name, vals := range q {
		v := vals[len(vals)-1]
		switch name {
		case "synchronous":
			opts = append(opts, WithSynchronous(v))
		case "busy_timeout":
			d, err := time.ParseDuration(v)
			if err != nil {
				return "", nil, fmt.Errorf("store: DSN %q: busy_timeout: %v: %w", dsn, err, ErrInvalid)
			}
			opts = append(opts, WithBusyTimeout(d))
		default:
			return "", nil, fmt.Errorf("store: DSN %q: unknown parameter %q (known: synchronous, busy_timeout): %w", dsn, name, ErrInvalid)
		}
	}
	return path, opts, nil
}

// MergeScan merges, per key, the payloads of the records matching q over all
// shards and windows.
func MergeScan(ctx context.Context, s Store, q Query, merge MergeFunc) (map[string][]byte, error) {
	out := make(map[string][]byte)
	err := s.Scan(ctx, q, func(r Record) error {
		dst, ok := out[r.Key]
		if !ok {
			out[r.Key] = r.Payload // Scan hands over a fresh slice
			return nil
		}
		m, err := merge(r.Kind, dst, r.Payload)
		if err != nil {
			return fmt.Errorf("store: merge %s %q: %w", r.Kind, r.Key, err)
		}
		out[r.Key] = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func validIdentity(what, s string, allowEmpty bool) error {
	switch {
	case s == "" && !allowEmpty:
		return fmt.Errorf("%w: empty %s", ErrInvalid, what)
	case len(s) > maxIdentityBytes:
		return fmt.Errorf("%w: %s longer than %d bytes", ErrInvalid, what, maxIdentityBytes)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalid, what, s)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: %s %q contains a NUL byte", ErrInvalid, what, s)
	}
	return nil
}

func (r *Record) validate() error {
	if err := validIdentity("kind", r.Kind, false); err != nil {
		return err
	}
	if err := validIdentity("key", r.Key, true); err != nil {
		return err
	}
	if err := validIdentity("shard", r.Shard, false); err != nil {
		return err
	}
	if r.Resolution <= 0 {
		return fmt.Errorf("%w: %s %q: resolution %d must be > 0", ErrInvalid, r.Kind, r.Key, r.Resolution)
	}
	if floorMod(r.WindowStart, r.Resolution) != 0 {
		return fmt.Errorf("%w: %s %q: window start %d is not a multiple of its resolution %d",
			ErrInvalid, r.Kind, r.Key, r.WindowStart, r.Resolution)
	}
	return nil
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m != 0 && (m < 0) != (b < 0) {
		m += b
	}
	return m
}

// alignDown is the largest multiple of r that is <= t.
func alignDown(t, r int64) int64 { return t - floorMod(t, r) }

// upperBound returns the smallest string greater than every string that has
// prefix p, and false when there is none (p empty, or only U+10FFFF runes). For
// valid UTF-8 byte order equals code point order, so incrementing the last rune
// (skipping surrogates) gives the bound, and the bound is valid UTF-8, which
// PostgreSQL requires of text parameters.
func upperBound(p string) (string, bool) {
	for p != "" {
		r, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
		switch {
		case r == utf8.MaxRune:
			continue
		case r == 0xD7FF:
			r = 0xE000
		default:
			r++
		}
		return p + string(r), true
	}
	return "", false
}

func normTo(to int64) int64 {
	if to == 0 {
		return math.MaxInt64
	}
	return to
}

// redactDSN removes passwords from a PostgreSQL DSN (URL or keyword/value).
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" && u.Host != "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	if scheme, rest, ok := strings.Cut(dsn, "://"); ok {
		// Not a parsable URL: hide everything between "user:" and the last "@".
		// Over-redacting is harmless here; leaking is not.
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if colon := strings.Index(rest[:at], ":"); colon >= 0 {
				rest = rest[:colon+1] + "xxxxx" + rest[at:]
			}
		}
		return kvPasswordRE.ReplaceAllString(scheme+"://"+rest, "${1}xxxxx")
	}
	return kvPasswordRE.ReplaceAllString(dsn, "${1}xxxxx")
}

var kvPasswordRE = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)
