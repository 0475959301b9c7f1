package store

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// OpenPostgres connects to the PostgreSQL database named by dsn (a URL or
// keyword/value string, as pgx accepts, e.g.
// "postgres://tierscope:secret@db:5432/tierscope?sslmode=verify-full") and
// migrates its schema. Tables are created unqualified, in the first schema of
// the search_path (settable in the DSN: ?search_path=tierscope). Errors name the
// DSN with its password replaced by xxxxx.
func OpenPostgres(ctx context.Context, dsn string, opts ...Option) (Store, error) {
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	desc := "postgres " + redactDSN(dsn)
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("store %s: %w", desc, err)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store %s: parse DSN: %w", desc, err)
	}
	conns := o.maxConns
	if conns == 0 {
		conns = 8
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	db.SetConnMaxLifetime(30 * time.Minute) // follow failovers and DNS changes
	s := newSQLStore(pgDialect{}, db, db, desc, o)
	if err := s.init(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

type pgDialect struct{}

func (pgDialect) name() string           { return "postgres" }
func (pgDialect) rebind(q string) string { return q }

// Arrays carry a statement's rows, so the parameter count does not grow.
func (pgDialect) maxStatementRows() int { return 10000 }

// Advisory lock keys: the migration lock is one bigint; per-kind downsample
// locks are (pgLockClass, hash of kind), a separate key space.
const (
	pgMigrationLock int64 = 0x7469657273636f70 // "tierscop"
	pgLockClass     int32 = 0x74737464         // "tstd"
)

func (pgDialect) lockMigrations(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1::int8)`, pgMigrationLock)
	return err
}

func (pgDialect) lockKind(ctx context.Context, tx *sql.Tx, kind string) error {
	h := fnv.New32a()
	h.Write([]byte(kind))
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1::int4, $2::int4)`, pgLockClass, int32(h.Sum32()))
	return err
}

func (pgDialect) forUpdate() string { return " FOR UPDATE" }
func (pgDialect) keysFirst() bool   { return false }

func (pgDialect) shardFilter(n int, shards []string) (string, []any) {
	return fmt.Sprintf(" AND shard = ANY($%d::text[])", n), []any{shards}
}

const pgUpsert = `INSERT INTO records (kind, key, window_start, shard, resolution, payload)
	SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[], $5::int8[], $6::bytea[])
	ON CONFLICT (kind, key, window_start, shard, resolution)
	DO UPDATE SET payload = EXCLUDED.payload WHERE records.payload IS DISTINCT FROM EXCLUDED.payload`

func (pgDialect) upsert(ctx context.Context, tx *sql.Tx, recs []Record) error {
	kinds := make([]string, len(recs))
	keys := make([]string, len(recs))
	starts := make([]int64, len(recs))
	shards := make([]string, len(recs))
	ress := make([]int64, len(recs))
	payloads := make([][]byte, len(recs))
	for i := range recs {
		r := &recs[i]
		kinds[i], keys[i], starts[i], shards[i], ress[i], payloads[i] = r.Kind, r.Key, r.WindowStart, r.Shard, r.Resolution, r.Payload
	}
	_, err := tx.ExecContext(ctx, pgUpsert, kinds, keys, starts, shards, ress, payloads)
	return err
}

// deleteMerged deletes exactly the rows Downsample read and locked (FOR
// UPDATE): a concurrent writer may have added a window since, which must stay.
func (pgDialect) deleteMerged(ctx context.Context, tx *sql.Tx, kind, key string, _, _, _ int64, ids []windowID) error {
	starts := make([]int64, len(ids))
	shards := make([]string, len(ids))
	ress := make([]int64, len(ids))
	for i, id := range ids {
		starts[i], shards[i], ress[i] = id.windowStart, id.shard, id.resolution
	}
	r, err := tx.ExecContext(ctx, `DELETE FROM records WHERE kind = $1 AND key = $2
		AND (window_start, shard, resolution) IN (SELECT * FROM unnest($3::int8[], $4::text[], $5::int8[]))`,
		kind, key, starts, shards, ress)
	if err != nil {
		return err
	}
	if n, err := r.RowsAffected(); err != nil {
		return err
	} else if n != int64(len(ids)) {
		return fmt.Errorf("downsample deleted %d records where it merged %d", n, len(ids))
	}
	return nil
}
