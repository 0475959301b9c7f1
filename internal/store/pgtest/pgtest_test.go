package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestDSNIsolatedSchemas(t *testing.T) {
	ctx := context.Background()
	a, b := DSN(t), DSN(t)
	if a == b {
		t.Fatalf("two DSNs are equal: %s", a)
	}
	for _, dsn := range []string{a, b} {
		if !strings.Contains(dsn, "search_path=tierscope_test_") {
			t.Fatalf("DSN without a test schema: %s", dsn)
		}
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	// The table created through a is not visible through b.
	if _, err := cb.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Fatalf("schemas are not isolated: %v", err)
	}
	if os.Getenv(EnvDSN) == "" {
		var addr string
		if err := ca.QueryRow(ctx, "SELECT inet_server_addr()::text").Scan(&addr); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(addr, "127.0.0.1") {
			t.Fatalf("server listens on %s, want loopback", addr)
		}
	}
}

func TestWithParam(t *testing.T) {
	got, err := withParam("postgres://u@h:5/db?sslmode=disable", "search_path", "s1")
	if err != nil || got != "postgres://u@h:5/db?search_path=s1&sslmode=disable" {
		t.Fatalf("url: %q %v", got, err)
	}
	got, _ = withParam("host=h dbname=db", "search_path", "s1")
	if got != "host=h dbname=db search_path=s1" {
		t.Fatalf("kv: %q", got)
	}
}

type recordingTB struct {
	testing.TB
	skipped, failed bool
}

func (r *recordingTB) Helper()               {}
func (r *recordingTB) Skipf(string, ...any)  { r.skipped = true }
func (r *recordingTB) Fatalf(string, ...any) { r.failed = true }

func TestSkipOrFail(t *testing.T) {
	for _, c := range []struct {
		ci           string
		err          error
		skip, failed bool
	}{
		{"", ErrNotInstalled, true, false},
		{"false", ErrNotInstalled, true, false},
		{"true", ErrNotInstalled, false, true}, // CI must never skip
		{"", errors.New("server did not start"), false, true},
	} {
		t.Setenv("CI", c.ci)
		r := &recordingTB{TB: t}
		skipOrFail(r, fmt.Errorf("wrapped: %w", c.err))
		if r.skipped != c.skip || r.failed != c.failed {
			t.Errorf("CI=%q, %v: skipped %v, failed %v", c.ci, c.err, r.skipped, r.failed)
		}
	}
}
