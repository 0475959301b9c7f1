package perfmodelexporter

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	_ "modernc.org/sqlite"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/sim/loadgen"
)

const crashChildEnv = "TIERSCOPE_PERFMODEL_CRASH_CHILD"

// reexecAsChild returns this test binary set to run the calling test again
// with env=value, which makes that test play the child it kills. Its output
// is the caller's to read.
func reexecAsChild(t *testing.T, env, value string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env+"="+value)
	return cmd
}

// crashChild is the killed process of TestKill9DuringIngest: it ingests
// without pause into the SQLite database db, flushing every 100 ms, and
// prints after every flush how many traces it had completed before it.
func crashChild(t *testing.T, db string) {
	te := startEngine(t, "sqlite://"+db, "crash", loadStart, func(c *Config) { c.FlushInterval = time.Hour })
	cfg := loadgen.DefaultConfig()
	cfg.DropFraction = 0
	cfg.Start = loadStart
	gen, err := loadgen.NewGenerator(cfg)
	require.NoError(t, err)
	ids := loadgen.NewIDs(3)
	completed := 0
	lastFlush := time.Now()
	for {
		td := ptrace.NewTraces()
		batch := gen.Next(50)
		loadgen.AppendOTLP(td, batch, ids)
		require.NoError(t, te.ConsumeTraces(context.Background(), td))
		te.completeAll()
		completed += len(batch)
		if time.Since(lastFlush) >= 100*time.Millisecond {
			lastFlush = time.Now()
			require.NoError(t, te.flush(context.Background(), false))
			fmt.Printf("flushed %d\n", completed)
		}
	}
}

// Kill -9 during ingest: the SQLite database passes integrity_check, and every
// trace flushed before the kill is there after a restart. What is lost is
// bounded by what had not been flushed: at most flush_interval of statistics,
// plus the traces still being assembled (at most trace_wait).
func TestKill9DuringIngest(t *testing.T) {
	if db, ok := os.LookupEnv(crashChildEnv); ok {
		crashChild(t, db)
		return
	}
	db := filepath.Join(t.TempDir(), "crash.db")
	cmd := reexecAsChild(t, crashChildEnv, db)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(out)
	flushed, reports := 0, 0
	deadline := time.Now().Add(30 * time.Second)
	for lines.Scan() && time.Now().Before(deadline) {
		if n, ok := strings.CutPrefix(lines.Text(), "flushed "); ok {
			flushed, _ = strconv.Atoi(n)
			reports++
			if reports == 15 {
				break
			}
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	require.Equal(t, 15, reports, "the child reported its flushes")

	conn, err := sql.Open("sqlite", db)
	require.NoError(t, err)
	var check string
	require.NoError(t, conn.QueryRow("PRAGMA integrity_check").Scan(&check))
	require.NoError(t, conn.Close())
	require.Equal(t, "ok", check)

	te := startEngine(t, "sqlite://"+db, "crash", loadStart, nil)
	var p api.PathsResponse
	require.Equal(t, 200, te.get(api.PathPaths+fmt.Sprintf("?from=%d&to=%d", loadStart.Unix(), loadStart.Add(24*time.Hour).Unix()), &p))
	t.Logf("killed after %d traces were reported flushed; %d traces found after restart", flushed, p.Traces)
	require.GreaterOrEqual(t, p.Traces, int64(flushed), "every flushed trace survives")
}
