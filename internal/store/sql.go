package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
)

// dialect is what differs between the SQLite and PostgreSQL backends. Queries
// are written with $N placeholders; SQLite's rebind turns them into ?N.
type dialect interface {
	name() string
	rebind(q string) string
	// maxStatementRows bounds the rows one upsert statement may carry.
	maxStatementRows() int
	// lockMigrations serialises migrations across processes (inside tx).
	lockMigrations(ctx context.Context, tx *sql.Tx) error
	// lockKind serialises Downsample of one kind across processes (inside tx).
	lockKind(ctx context.Context, tx *sql.Tx, kind string) error
	// forUpdate is appended to the SELECT that reads rows Downsample replaces.
	forUpdate() string
	// upsert writes recs, which have distinct identities and are sorted.
	upsert(ctx context.Context, tx *sql.Tx, recs []Record) error
	// deleteMerged deletes the records of one kind and key that Downsample
	// read in tx and merged: ids, which are all the records finer than res in
	// [from, to) that lie inside an aligned window of res.
	deleteMerged(ctx context.Context, tx *sql.Tx, kind, key string, from, to, res int64, ids []windowID) error
	// shardFilter is an "AND shard …" clause whose first placeholder is $n.
	shardFilter(n int, shards []string) (string, []any)
	// keysFirst makes Scan select the keys in range first (see Scan).
	keysFirst() bool
}

type windowID struct {
	windowStart int64
	shard       string
	resolution  int64
}

// sqlStore implements Store over database/sql for either dialect.
type sqlStore struct {
	d     dialect
	w     *sql.DB // writes; one connection for SQLite
	r     *sql.DB // reads; the same pool as w for PostgreSQL
	desc  string  // backend and DSN without password, for errors
	batch int

	closeOnce sync.Once
	closeErr  error

	qFine, qCoarse, qKeys, qNextKind, qDelete, qVersion string
}

func newSQLStore(d dialect, w, r *sql.DB, desc string, o options) *sqlStore {
	s := &sqlStore{d: d, w: w, r: r, desc: desc, batch: o.batchSize}
	s.qFine = d.rebind(`SELECT window_start, shard, resolution, payload FROM records
		WHERE kind = $1 AND key = $2 AND window_start >= $3 AND window_start < $4 AND resolution < $5
		ORDER BY window_start, shard, resolution LIMIT $6` + d.forUpdate())
	s.qCoarse = d.rebind(`SELECT window_start, shard, payload FROM records
		WHERE kind = $1 AND key = $2 AND window_start >= $3 AND window_start < $4 AND resolution = $5` + d.forUpdate())
	s.qKeys = d.rebind(`SELECT DISTINCT key FROM records
		WHERE kind = $1 AND window_start >= $2 AND window_start < $3 ORDER BY key`)
	s.qNextKind = d.rebind(`SELECT MIN(kind) FROM records WHERE kind > $1`)
	s.qDelete = d.rebind(`DELETE FROM records WHERE (kind, key, window_start, shard, resolution) IN (
		SELECT kind, key, window_start, shard, resolution FROM records
		WHERE kind = $1 AND window_start < $2 AND window_start <= $2 - resolution LIMIT $3)`)
	s.qVersion = `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`
	return s
}

// init checks the connection and migrates the schema.
func (s *sqlStore) init(ctx context.Context) error {
	if err := s.w.PingContext(ctx); err != nil {
		return s.wrap(ctx, "open", err)
	}
	if err := migrate(ctx, s.w, s.d); err != nil {
		return s.wrap(ctx, "migrate", err)
	}
	return nil
}

// wrap names the store and the operation, and makes a cancelled context
// recognisable with errors.Is whatever the driver reported.
func (s *sqlStore) wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	return fmt.Errorf("store %s: %s: %w", s.desc, op, err)
}

func (s *sqlStore) Put(ctx context.Context, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	for i := range recs {
		if err := recs[i].validate(); err != nil {
			return fmt.Errorf("store %s: put: record %d: %w", s.desc, i, err)
		}
	}
	recs = dedupe(recs)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap(ctx, "put", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	step := min(s.batch, s.d.maxStatementRows())
	for i := 0; i < len(recs); i += step {
		if err := s.d.upsert(ctx, tx, recs[i:min(i+step, len(recs))]); err != nil {
			return s.wrap(ctx, "put", err)
		}
	}
	return s.wrap(ctx, "put", tx.Commit())
}

func compareID(a, b *Record) int {
	if c := strings.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	if a.WindowStart != b.WindowStart {
		return cmpInt(a.WindowStart, b.WindowStart)
	}
	if c := strings.Compare(a.Shard, b.Shard); c != 0 {
		return c
	}
	return cmpInt(a.Resolution, b.Resolution)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// dedupe returns a copy of recs sorted by identity (primary-key order, so
// concurrent writers lock rows in the same order) in which the last of several
// records with one identity wins, as sequential upserts would have it.
// PostgreSQL rejects an upsert that touches a row twice.
func dedupe(recs []Record) []Record {
	out := make([]Record, len(recs))
	copy(out, recs)
	slices.SortStableFunc(out, func(a, b Record) int { return compareID(&a, &b) })
	n := 0
	for i := range out {
		if n > 0 && compareID(&out[n-1], &out[i]) == 0 {
			out[n-1] = out[i]
			continue
		}
		out[n] = out[i]
		n++
	}
	out = out[:n]
	for i := range out {
		if out[i].Payload == nil {
			out[i].Payload = []byte{}
		}
	}
	return out
}

// maxQueryShards bounds Query.Shards (one placeholder each in SQLite).
const maxQueryShards = 1000

func (s *sqlStore) Scan(ctx context.Context, q Query, fn func(Record) error) error {
	if err := validIdentity("kind", q.Kind, false); err != nil {
		return fmt.Errorf("store %s: scan: %w", s.desc, err)
	}
	if err := validIdentity("key prefix", q.KeyPrefix, true); err != nil {
		return fmt.Errorf("store %s: scan: %w", s.desc, err)
	}
	shards := slices.Compact(slices.Sorted(slices.Values(q.Shards)))
	if len(shards) > maxQueryShards {
		return fmt.Errorf("store %s: scan: %w: %d shards, at most %d", s.desc, ErrInvalid, len(shards), maxQueryShards)
	}
	for _, sh := range shards {
		if err := validIdentity("shard", sh, false); err != nil {
			return fmt.Errorf("store %s: scan: %w", s.desc, err)
		}
	}
	to := normTo(q.To)
	if q.From >= to {
		return nil
	}
	var b strings.Builder
	args := []any{q.Kind, q.From, to}
	keyRange := ""
	if q.KeyPrefix != "" {
		args = append(args, q.KeyPrefix)
		keyRange = fmt.Sprintf(" AND key >= $%d", len(args))
		if ub, ok := upperBound(q.KeyPrefix); ok {
			args = append(args, ub)
			keyRange += fmt.Sprintf(" AND key < $%d", len(args))
		}
	}
	b.WriteString(`SELECT key, window_start, shard, resolution, payload FROM records
		WHERE kind = $1 AND window_start >= $2 AND window_start < $3` + keyRange)
	if s.d.keysFirst() {
		// The keys with windows in range come from the window index; then each
		// key's windows are one primary-key range, already in scan order. Without
		// this SQLite reads the range from the window index and sorts it.
		b.WriteString(` AND key IN (SELECT DISTINCT key FROM records
			WHERE kind = $1 AND window_start >= $2 AND window_start < $3` + keyRange + `)`)
	}
	if len(shards) > 0 {
		clause, sargs := s.d.shardFilter(len(args)+1, shards)
		b.WriteString(clause)
		args = append(args, sargs...)
	}
	b.WriteString(" ORDER BY key, window_start, shard, resolution")

	rows, err := s.r.QueryContext(ctx, s.d.rebind(b.String()), args...)
	if err != nil {
		return s.wrap(ctx, "scan", err)
	}
	defer rows.Close()
	for n := 1; rows.Next(); n++ {
		// The driver notices a cancelled context asynchronously; check it here
		// too, so that a cancelled scan always ends with the context's error.
		if n%256 == 0 && ctx.Err() != nil {
			break
		}
		rec := Record{Kind: q.Kind}
		if err := rows.Scan(&rec.Key, &rec.WindowStart, &rec.Shard, &rec.Resolution, &rec.Payload); err != nil {
			return s.wrap(ctx, "scan", err)
		}
		if rec.Payload == nil {
			rec.Payload = []byte{}
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return s.wrap(ctx, "scan", err)
	}
	return s.wrap(ctx, "scan", ctx.Err())
}

func (s *sqlStore) Keys(ctx context.Context, kind string, from, to int64) ([]string, error) {
	if err := validIdentity("kind", kind, false); err != nil {
		return nil, fmt.Errorf("store %s: keys: %w", s.desc, err)
	}
	return s.keys(ctx, s.r, kind, from, normTo(to))
}

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *sqlStore) keys(ctx context.Context, db queryer, kind string, from, to int64) ([]string, error) {
	var keys []string
	if from >= to {
		return keys, nil
	}
	rows, err := db.QueryContext(ctx, s.qKeys, kind, from, to)
	if err != nil {
		return nil, s.wrap(ctx, "keys", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, s.wrap(ctx, "keys", err)
		}
		keys = append(keys, k)
	}
	return keys, s.wrap(ctx, "keys", rows.Err())
}

// kinds lists the distinct kinds with one index probe per kind.
func (s *sqlStore) kinds(ctx context.Context) ([]string, error) {
	var kinds []string
	last := ""
	for {
		var k sql.NullString
		if err := s.r.QueryRowContext(ctx, s.qNextKind, last).Scan(&k); err != nil {
			return nil, s.wrap(ctx, "list kinds", err)
		}
		if !k.Valid {
			return kinds, nil
		}
		kinds = append(kinds, k.String)
		last = k.String
	}
}

// kindsOrOne is []string{kind}, or every kind if kind is "".
func (s *sqlStore) kindsOrOne(ctx context.Context, op, kind string) ([]string, error) {
	if kind != "" {
		if err := validIdentity("kind", kind, false); err != nil {
			return nil, fmt.Errorf("store %s: %s: %w", s.desc, op, err)
		}
		return []string{kind}, nil
	}
	return s.kinds(ctx)
}

func (s *sqlStore) Downsample(ctx context.Context, kind string, olderThan, toResolution int64, merge MergeFunc) (int, error) {
	switch {
	case toResolution <= 0:
		return 0, fmt.Errorf("store %s: downsample: %w: resolution %d must be > 0", s.desc, ErrInvalid, toResolution)
	case merge == nil:
		return 0, fmt.Errorf("store %s: downsample: %w: nil merge function", s.desc, ErrInvalid)
	}
	kinds, err := s.kindsOrOne(ctx, "downsample", kind)
	if err != nil {
		return 0, err
	}
	// Aligned windows [t, t+R) that end by olderThan are those with t < limit.
	limit := alignDown(olderThan, toResolution)
	total := 0
	for _, k := range kinds {
		n, err := s.downsampleKind(ctx, k, limit, toResolution, merge)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

type fineRow struct {
	windowID
	payload []byte
}

// downsampleKind replaces, key by key, the finer records of each shard with
// records of resolution res, reading at most about s.batch records at a time
// and only whole aligned windows. Each aligned window is replaced within one
// transaction, so every committed state is exact; transactions carry about
// s.batch replaced records.
func (s *sqlStore) downsampleKind(ctx context.Context, kind string, limit, res int64, merge MergeFunc) (merged int, err error) {
	keys, err := s.keys(ctx, s.r, kind, math.MinInt64, limit)
	if err != nil {
		return 0, err
	}
	var tx *sql.Tx
	pending := 0 // merged in the open transaction
	defer func() {
		if tx != nil {
			_ = tx.Rollback()
		}
	}()
	commit := func() error {
		if tx == nil {
			return nil
		}
		err := tx.Commit()
		tx = nil
		if err != nil {
			return s.wrap(ctx, "downsample "+kind, err)
		}
		merged += pending
		pending = 0
		return nil
	}
	for _, key := range keys {
		for cur := int64(math.MinInt64); cur < limit; {
			if tx == nil {
				if tx, err = s.w.BeginTx(ctx, nil); err != nil {
					tx = nil
					return merged, s.wrap(ctx, "downsample "+kind, err)
				}
				if err := s.d.lockKind(ctx, tx, kind); err != nil {
					return merged, s.wrap(ctx, "downsample "+kind, err)
				}
			}
			rows, next, err := s.readFine(ctx, tx, kind, key, cur, limit, res)
			if err != nil {
				return merged, s.wrap(ctx, "downsample "+kind, err)
			}
			if len(rows) == 0 {
				break
			}
			n, err := s.replaceFine(ctx, tx, kind, key, cur, next, res, rows, merge)
			if err != nil {
				return merged, err
			}
			pending += n
			cur = next
			if pending >= s.batch {
				if err := commit(); err != nil {
					return merged, err
				}
			}
		}
	}
	return merged, commit()
}

// readFine reads, in window order, the records of kind and key finer than res
// whose windows start in [from, limit): about s.batch of them, ending at an
// aligned window's boundary. All records finer than res in [from, next) are
// returned.
func (s *sqlStore) readFine(ctx context.Context, tx *sql.Tx, kind, key string, from, limit, res int64) (rows []fineRow, next int64, err error) {
	rows, err = s.queryFine(ctx, tx, kind, key, from, limit, res, int64(s.batch))
	if err != nil || len(rows) < s.batch {
		return rows, limit, err
	}
	last := alignDown(rows[len(rows)-1].windowStart, res)
	if alignDown(rows[0].windowStart, res) < last {
		// The last aligned window may continue beyond the batch: leave it for
		// the next read.
		i := len(rows)
		for i > 0 && alignDown(rows[i-1].windowStart, res) == last {
			i--
		}
		return rows[:i], last, nil
	}
	// One aligned window holds more than a batch (many shards): read it whole.
	rows, err = s.queryFine(ctx, tx, kind, key, last, last+res, res, math.MaxInt64)
	return rows, last + res, err
}

func (s *sqlStore) queryFine(ctx context.Context, tx *sql.Tx, kind, key string, from, to, res, n int64) ([]fineRow, error) {
	rs, err := tx.QueryContext(ctx, s.qFine, kind, key, from, to, res, n)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var rows []fineRow
	for rs.Next() {
		var r fineRow
		if err := rs.Scan(&r.windowStart, &r.shard, &r.resolution, &r.payload); err != nil {
			return nil, err
		}
		if r.payload == nil {
			r.payload = []byte{}
		}
		rows = append(rows, r)
	}
	return rows, rs.Err()
}

type coarseID struct {
	start int64
	shard string
}

// replaceFine merges rows, all the records finer than res in [from, to) of kind
// and key, per shard and aligned window into records of resolution res (into
// the one already there, if any), and deletes the merged records. Records that
// cross an aligned window's boundary stay as they are.
func (s *sqlStore) replaceFine(ctx context.Context, tx *sql.Tx, kind, key string, from, to, res int64, rows []fineRow, merge MergeFunc) (int, error) {
	groups := map[coarseID][]fineRow{}
	var order []coarseID
	var ids []windowID
	for _, r := range rows {
		t := alignDown(r.windowStart, res)
		if r.windowStart+r.resolution > t+res {
			continue // not contained in an aligned window
		}
		g := coarseID{t, r.shard}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], r)
		ids = append(ids, r.windowID)
	}
	if len(order) == 0 {
		return 0, nil
	}
	coarse := map[coarseID][]byte{}
	cr, err := tx.QueryContext(ctx, s.qCoarse, kind, key, order[0].start, alignDown(rows[len(rows)-1].windowStart, res)+res, res)
	if err != nil {
		return 0, s.wrap(ctx, "downsample "+kind, err)
	}
	for cr.Next() {
		var g coarseID
		var p []byte
		if err := cr.Scan(&g.start, &g.shard, &p); err != nil {
			cr.Close()
			return 0, s.wrap(ctx, "downsample "+kind, err)
		}
		coarse[g] = p
	}
	cr.Close()
	if err := cr.Err(); err != nil {
		return 0, s.wrap(ctx, "downsample "+kind, err)
	}
	// Identity order: (window start, shard) within one kind and key.
	slices.SortFunc(order, func(a, b coarseID) int {
		if c := cmpInt(a.start, b.start); c != 0 {
			return c
		}
		return strings.Compare(a.shard, b.shard)
	})
	out := make([]Record, 0, len(order))
	for _, g := range order {
		dst, ok := coarse[g]
		for _, r := range groups[g] {
			if !ok {
				dst, ok = r.payload, true
				continue
			}
			if dst, err = merge(kind, dst, r.payload); err != nil {
				return 0, fmt.Errorf("store %s: downsample %s %q shard %q window %d: merge: %w", s.desc, kind, key, g.shard, g.start, err)
			}
		}
		if dst == nil {
			dst = []byte{}
		}
		out = append(out, Record{Kind: kind, Key: key, Shard: g.shard, WindowStart: g.start, Resolution: res, Payload: dst})
	}
	step := min(s.batch, s.d.maxStatementRows())
	for i := 0; i < len(out); i += step {
		if err := s.d.upsert(ctx, tx, out[i:min(i+step, len(out))]); err != nil {
			return 0, s.wrap(ctx, "downsample "+kind, err)
		}
	}
	if err := s.d.deleteMerged(ctx, tx, kind, key, from, to, res, ids); err != nil {
		return 0, s.wrap(ctx, "downsample "+kind, err)
	}
	return len(ids), nil
}

func (s *sqlStore) DeleteBefore(ctx context.Context, kind string, before int64) (int, error) {
	kinds, err := s.kindsOrOne(ctx, "delete", kind)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, k := range kinds {
		for {
			res, err := s.w.ExecContext(ctx, s.qDelete, k, before, s.batch)
			if err != nil {
				return total, s.wrap(ctx, "delete "+k, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return total, s.wrap(ctx, "delete "+k, err)
			}
			total += int(n)
			if n < int64(s.batch) {
				break
			}
		}
	}
	return total, nil
}

func (s *sqlStore) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.r.QueryRowContext(ctx, s.qVersion).Scan(&v)
	return v, s.wrap(ctx, "schema version", err)
}

func (s *sqlStore) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.r != s.w {
			errs = append(errs, s.r.Close())
		}
		errs = append(errs, s.w.Close())
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("store %s: close: %w", s.desc, err)
		}
	})
	return s.closeErr
}
