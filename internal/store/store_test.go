package store

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tierscope/tierscope/internal/store/pgtest"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(envCrashChild); path != "" {
		crashChild(path) // never returns
	}
	os.Exit(pgtest.Main(m))
}

func TestUpperBound(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"", "", false},
		{"a", "b", true},
		{"a/", "a0", true},
		{"é", "ê", true},
		{"¿", "À", true}, // U+00BF → U+00C0: a byte-increment would give invalid UTF-8
		{"\uD7FF", "\uE000", true},
		{"x\U0010FFFF", "y", true},
		{"\U0010FFFF\U0010FFFF", "", false},
	}
	for _, c := range cases {
		got, ok := upperBound(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("upperBound(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
		if ok && !utf8.ValidString(got) {
			t.Errorf("upperBound(%q) = %q is not valid UTF-8", c.in, got)
		}
	}
	// Property: s has prefix p ⇔ p <= s < upperBound(p), over random strings.
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune{'a', 'b', '/', 'é', '¿', 'À', '\uD7FF', '\uE000', '\U0010FFFF', '\U0010FFFE'}
	randStr := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for range 20000 {
		p, s := randStr(rng.IntN(3)), randStr(rng.IntN(5))
		ub, ok := upperBound(p)
		in := s >= p && (!ok || s < ub)
		if in != strings.HasPrefix(s, p) {
			t.Fatalf("prefix %q, string %q: range says %v", p, s, in)
		}
	}
}

func TestAlignDown(t *testing.T) {
	for _, c := range []struct{ t, r, want int64 }{
		{0, 60, 0}, {59, 60, 0}, {60, 60, 60}, {-1, 60, -60}, {-60, 60, -60}, {3599, 3600, 0},
	} {
		if got := alignDown(c.t, c.r); got != c.want {
			t.Errorf("alignDown(%d, %d) = %d, want %d", c.t, c.r, got, c.want)
		}
	}
}

func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://alice:s3cret@db:5432/ts?sslmode=disable":  "postgres://alice:xxxxx@db:5432/ts?sslmode=disable",
		"postgresql://alice@db/ts":                            "postgresql://alice@db/ts",
		"postgres://db/ts?password=s3cret&user=alice":         "postgres://db/ts?password=xxxxx&user=alice",
		"host=db user=alice password=s3cret dbname=ts":        "host=db user=alice password=xxxxx dbname=ts",
		"host=db password='s3 cret' dbname=ts":                "host=db password=xxxxx dbname=ts",
		"postgres://alice:p%zz@db/ts":                         "postgres://alice:xxxxx@db/ts",
		"postgres://alice:a@b@db/ts":                          "postgres://alice:xxxxx@db/ts",
		"postgres://alice:s3cret@[::1]:5432/ts?sslmode=allow": "postgres://alice:xxxxx@[::1]:5432/ts?sslmode=allow",
	} {
		got := redactDSN(in)
		if got != want {
			t.Errorf("redactDSN(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "s3") {
			t.Errorf("redactDSN(%q) leaks the password: %q", in, got)
		}
	}
}

func TestParseSQLiteDSN(t *testing.T) {
	for _, c := range []struct {
		dsn, path string
		nopts     int
		bad       bool
	}{
		{dsn: "/var/lib/ts.db", path: "/var/lib/ts.db"},
		{dsn: "ts.db", path: "ts.db"},
		{dsn: "sqlite:///var/lib/ts.db", path: "/var/lib/ts.db"},
		{dsn: "sqlite://rel/ts.db", path: "rel/ts.db"},
		{dsn: "sqlite:ts.db", path: "ts.db"},
		{dsn: "sqlite:///a%20b.db", path: "/a b.db"},
		{dsn: "sqlite:///ts.db?synchronous=normal&busy_timeout=10s", path: "/ts.db", nopts: 2},
		{dsn: "sqlite:///ts.db?busy_timeout=10", bad: true},
		{dsn: "sqlite:///ts.db?journal_mode=delete", bad: true},
		{dsn: "sqlite://", bad: true},
		{dsn: "mysql://db/ts", bad: true},
	} {
		path, opts, err := parseSQLiteDSN(c.dsn)
		if c.bad {
			if err == nil || !errors.Is(err, ErrInvalid) {
				t.Errorf("%q: err = %v, want ErrInvalid", c.dsn, err)
			}
			continue
		}
		if err != nil || path != c.path || len(opts) != c.nopts {
			t.Errorf("%q: %q, %d options, %v; want %q, %d", c.dsn, path, len(opts), err, c.path, c.nopts)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Open(ctx, "mysql://u:p@db/ts")
	if err == nil || !strings.Contains(err.Error(), `"mysql"`) {
		t.Errorf("unsupported scheme: %v", err)
	}
	_, err = Open(ctx, "")
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("empty DSN: %v", err)
	}
	missing := "/nonexistent-tierscope-dir/sub/ts.db"
	_, err = Open(ctx, "sqlite://"+missing)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing directory: %v", err)
	}
	_, err = Open(ctx, ":memory:")
	if !errors.Is(err, ErrInvalid) {
		t.Errorf(":memory:: %v", err)
	}
	garbage := filepath.Join(t.TempDir(), "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 500)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, garbage)
	if err == nil || !strings.Contains(err.Error(), garbage) {
		t.Errorf("not a database: %v", err)
	}
	_, err = OpenSQLite(ctx, t.TempDir()+"/x.db", WithSynchronous("sometimes"))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "x.db") {
		t.Errorf("bad synchronous: %v", err)
	}
	// Nothing listens on port 1; the error names the DSN without its password.
	_, err = Open(ctx, "postgres://alice:s3cret@127.0.0.1:1/ts?connect_timeout=5")
	if err == nil {
		t.Fatal("connected to port 1")
	}
	msg := err.Error()
	if !strings.Contains(msg, "postgres://alice:xxxxx@127.0.0.1:1/ts") || strings.Contains(msg, "s3cret") {
		t.Errorf("error does not name the DSN, or leaks the password: %v", msg)
	}
	_, err = OpenPostgres(ctx, "postgres://alice:s3cret@127.0.0.1:1/ts?sslmode=bogus")
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "parse DSN") {
		t.Errorf("bad DSN: %v", err)
	}
}

func TestMigrationsEmbedded(t *testing.T) {
	s, err := loadMigrations("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	p, err := loadMigrations("postgres")
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != len(p) {
		t.Fatalf("sqlite has %d migrations, postgres %d: every migration needs both dialects", len(s), len(p))
	}
	for i := range s {
		if s[i].name != p[i].name {
			t.Errorf("migration %d: sqlite %q, postgres %q", i+1, s[i].name, p[i].name)
		}
	}
	if LatestSchemaVersion() != len(s) {
		t.Fatal("LatestSchemaVersion")
	}
}

func TestDedupe(t *testing.T) {
	in := []Record{
		{Kind: "k", Key: "b", Shard: "s", WindowStart: 0, Resolution: 60, Payload: []byte("1")},
		{Kind: "k", Key: "a", Shard: "s", WindowStart: 0, Resolution: 60, Payload: []byte("2")},
		{Kind: "k", Key: "b", Shard: "s", WindowStart: 0, Resolution: 60, Payload: []byte("3")},
		{Kind: "k", Key: "a", Shard: "s", WindowStart: 60, Resolution: 60},
	}
	out := dedupe(in)
	got := make([]string, len(out))
	for i, r := range out {
		got[i] = r.Key + ":" + string(r.Payload)
	}
	if want := []string{"a:2", "a:", "b:3"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("dedupe = %v, want %v", got, want)
	}
	if out[1].Payload == nil {
		t.Fatal("nil payload not normalised")
	}
	if string(in[0].Payload) != "1" || in[3].Payload != nil {
		t.Fatal("dedupe modified its input")
	}
	if !sort.SliceIsSorted(out, func(i, j int) bool { return compareID(&out[i], &out[j]) < 0 }) {
		t.Fatal("not sorted")
	}
}
