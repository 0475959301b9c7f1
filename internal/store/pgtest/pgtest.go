// Package pgtest gives tests a real PostgreSQL server.
//
// With TIERSCOPE_TEST_POSTGRES_DSN set, that server is used. Otherwise the package
// finds the server binaries (Debian's /usr/lib/postgresql/<version>/bin, newest
// first, or initdb and postgres on PATH), creates a throwaway cluster in a
// temporary directory, and starts it listening on 127.0.0.1 only, on a free port,
// with no Unix socket outside that directory. As root the cluster belongs to the
// `postgres` user, because the server refuses to run as root. One server is
// started per test binary, on first use, and shared by its tests.
//
// Each test gets a fresh, empty schema of its own (DSN): the DSN carries
// search_path=<schema>, so unqualified table names land there, and the schema is
// dropped when the test ends. This works with an externally provided server
// whose role may create schemas but not databases.
//
// If no server is available the test is skipped, except under CI=true, where it
// fails: CI must never silently skip the PostgreSQL tests.
//
// The server is a child process with a parent-death signal, so it stops even if
// the test binary is killed. Call Main from TestMain to also stop it and remove its
// directory when the tests end normally:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tierscope/tierscope/internal/freeport"
)

// EnvDSN names the variable that points the tests at an existing server.
const EnvDSN = "TIERSCOPE_TEST_POSTGRES_DSN"

// ErrNotInstalled is returned by Start when no PostgreSQL binaries are found.
var ErrNotInstalled = errors.New("pgtest: PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin or on PATH); " +
	"install it (Debian: apt-get install postgresql) or set " + EnvDSN)

var (
	sharedMu  sync.Mutex
	shared    *Server
	sharedErr error
)

// DSN returns the DSN of a fresh, empty schema on the shared test server,
// dropped when tb ends. It skips tb when no server is available, and fails it
// instead when the environment has CI=true.
func DSN(tb testing.TB) string {
	tb.Helper()
	srv, err := sharedServer()
	if err != nil {
		skipOrFail(tb, err)
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn, cleanup, err := srv.NewSchema(ctx)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(cleanup)
	return dsn
}

// OwnDSN is DSN on a server of tb's own, stopped when tb ends: for packages
// whose TestMain cannot stop the shared one (a generated TestMain).
func OwnDSN(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := Start(ctx)
	if err != nil {
		skipOrFail(tb, err)
		return ""
	}
	tb.Cleanup(func() { _ = srv.Close() })
	dsn, cleanup, err := srv.NewSchema(ctx)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(cleanup)
	return dsn
}

// skipOrFail skips tb when PostgreSQL is not installed, except under CI=true;
// any other error fails it.
func skipOrFail(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrNotInstalled) && os.Getenv("CI") != "true" {
		tb.Skipf("%v", err)
		return
	}
	tb.Fatalf("%v (CI=%q)", err, os.Getenv("CI"))
}

// Main runs the tests, then stops the shared server if one was started. Use it
// as os.Exit(pgtest.Main(m)) in TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		if err := shared.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		shared = nil
	}
	return code
}

func sharedServer() (*Server, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil || sharedErr != nil {
		return shared, sharedErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	shared, sharedErr = Start(ctx)
	return shared, sharedErr
}

// Server is a PostgreSQL server for tests: either an external one (EnvDSN) or a
// throwaway cluster this package started.
type Server struct {
	dsn string // administrative DSN

	// Throwaway cluster only.
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the postmaster exits
	log  string
}

// Start returns the server named by EnvDSN if it is set, or starts a throwaway
// cluster. It returns ErrNotInstalled when there is neither.
func Start(ctx context.Context) (*Server, error) {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		s := &Server{dsn: dsn}
		if err := s.ping(ctx); err != nil {
			return nil, fmt.Errorf("pgtest: %s: %w", EnvDSN, err)
		}
		return s, nil
	}
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	return startCluster(ctx, bin)
}

// AdminDSN is the DSN of the server's administrative database.
func (s *Server) AdminDSN() string { return s.dsn }

// NewSchema creates an empty schema and returns a DSN whose search_path is that
// schema, and a cleanup that drops it.
func (s *Server) NewSchema(ctx context.Context) (dsn string, cleanup func(), err error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "tierscope_test_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return "", nil, fmt.Errorf("pgtest: connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, fmt.Errorf("pgtest: create schema: %w", err)
	}
	dsn, err = withParam(s.dsn, "search_path", schema)
	if err != nil {
		return "", nil, err
	}
	cleanup = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, s.dsn)
		if err != nil {
			return // server already gone
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	}
	return dsn, cleanup, nil
}

// Close stops a throwaway cluster and removes its directory; for an external
// server it does nothing.
func (s *Server) Close() error {
	if s.cmd == nil {
		return nil
	}
	var err error
	// SIGINT is PostgreSQL's fast shutdown: abort sessions, checkpoint, exit.
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		err = fmt.Errorf("pgtest: server in %s did not stop within 20 s; killed", s.dir)
	}
	if rmErr := os.RemoveAll(s.dir); rmErr != nil && err == nil {
		err = fmt.Errorf("pgtest: %w", rmErr)
	}
	s.cmd = nil
	return err
}

func (s *Server) ping(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.Ping(ctx)
}

type binaries struct{ initdb, postgres string }

// findBinaries prefers the newest Debian version directory, then PATH.
func findBinaries() (binaries, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		b := binaries{initdb: filepath.Join(d, "initdb"), postgres: filepath.Join(d, "postgres")}
		if isExecutable(b.initdb) && isExecutable(b.postgres) {
			return b, nil
		}
	}
	initdb, err1 := exec.LookPath("initdb")
	postgres, err2 := exec.LookPath("postgres")
	if err1 == nil && err2 == nil {
		return binaries{initdb: initdb, postgres: postgres}, nil
	}
	return binaries{}, ErrNotInstalled
}

func versionOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// serverCredential is the identity the server runs as: the `postgres` user when
// we are root, ourselves otherwise (nil).
func serverCredential() (*syscall.Credential, int, int, error) {
	if os.Geteuid() != 0 {
		return nil, -1, -1, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("pgtest: running as root, the server needs the `postgres` user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid, gid, nil
}

func startCluster(ctx context.Context, bin binaries) (_ *Server, err error) {
	cred, uid, gid, err := serverCredential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tierscope-pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	data := filepath.Join(dir, "data")
	env := append(os.Environ(), "LC_ALL=C", "LANG=C")

	initdb := exec.CommandContext(ctx, bin.initdb, "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Env = env
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: %s: %w\n%s", bin.initdb, err, out)
	}

	// A port is free when we bind it; another process may take it before the
	// server does, so a failed start is retried on a new port.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
		s, err := startPostmaster(ctx, bin, dir, data, port, cred, env)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func startPostmaster(ctx context.Context, bin binaries, dir, data string, port int, cred *syscall.Credential, env []string) (*Server, error) {
	logPath := filepath.Join(dir, fmt.Sprintf("postgres-%d.log", port))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	defer logFile.Close()
	// Not pg_ctl: a direct child can carry a parent-death signal, so the server
	// does not outlive a test binary that is killed. SIGQUIT is immediate shutdown.
	cmd := exec.Command(bin.postgres, "-D", data,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port="+strconv.Itoa(port),
		"-c", "unix_socket_directories="+dir,
		"-c", "max_connections=100",
		"-c", "logging_collector=off")
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	s := &Server{
		dsn:  fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		dir:  dir,
		cmd:  cmd,
		done: make(chan struct{}),
		log:  logPath,
	}
	// The parent-death signal fires when the OS thread that started the
	// child exits, not the process, and the runtime ends any thread whose
	// goroutine returns while locked to it (as code entering a namespace
	// does): the server then died mid-test. This goroutine holds the thread
	// it starts the server from until the server exits.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			runtime.UnlockOSThread()
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(s.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("pgtest: start %s: %w", bin.postgres, err)
	}

	deadline := time.Now().Add(30 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.ping(pctx)
		cancel()
		if err == nil {
			return s, nil
		}
		exited := false
		select {
		case <-s.done:
			exited = true
		default:
		}
		if exited || time.Now().After(deadline) || ctx.Err() != nil {
			if !exited {
				_ = cmd.Process.Kill()
				<-s.done
			}
			return nil, fmt.Errorf("pgtest: server on 127.0.0.1:%d did not start: %w\n%s", port, err, tail(logPath, 2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort() (int, error) { return freeport.TCP() }

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}

// withParam adds a run-time parameter to a URL or keyword/value DSN.
func withParam(dsn, name, value string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("pgtest: bad DSN: %w", err)
		}
		q := u.Query()
		q.Set(name, value)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return strings.TrimSpace(dsn) + " " + name + "=" + value, nil
}
