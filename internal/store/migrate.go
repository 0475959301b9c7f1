package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Migrations are migrations/<dialect>/NNNN_name.sql, applied in order of NNNN,
// which must run 1, 2, 3, … with no gaps. A migration, once released, is never
// edited; a change is a new file in each dialect's directory.
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations(dialect string) ([]migration, error) {
	dir := path.Join("migrations", dialect)
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		num, name, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration file %s/%s: want NNNN_name.sql", dir, e.Name())
		}
		b, err := fs.ReadFile(migrationFS, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migrations/%s: version %d where %d was expected", dialect, m.version, i+1)
		}
	}
	return ms, nil
}

// LatestSchemaVersion is the schema version this build migrates databases to.
func LatestSchemaVersion() int {
	ms, err := loadMigrations("sqlite")
	if err != nil {
		panic(err) // the embedded files are checked by tests
	}
	return len(ms)
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	name       TEXT    NOT NULL,
	applied_at BIGINT  NOT NULL
)`

// migrate applies the pending migrations in one transaction, under the
// dialect's cross-process lock, so that of several processes starting at once
// one migrates and the others find the work done. It refuses a database whose
// schema is newer than this build.
func migrate(ctx context.Context, db *sql.DB, d dialect) error {
	ms, err := loadMigrations(d.name())
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if err := d.lockMigrations(ctx, tx); err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	if _, err := tx.ExecContext(ctx, createMigrationsTable); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	if current > len(ms) {
		return fmt.Errorf("database schema version %d is newer than this build's %d; upgrade Tierscope", current, len(ms))
	}
	if current == len(ms) {
		return nil // nothing to commit
	}
	for _, m := range ms[current:] {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migration %d (%s): %w", m.version, m.name, err)
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`),
			m.version, m.name, time.Now().Unix()); err != nil {
			return fmt.Errorf("record migration %d: %w", m.version, err)
		}
	}
	return tx.Commit()
}
