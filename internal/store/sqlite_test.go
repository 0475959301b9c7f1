package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestSQLiteContract(t *testing.T) {
	runContract(t, func(t testing.TB) string {
		return "sqlite://" + filepath.Join(t.TempDir(), "store.db")
	})
}

func TestSQLitePragmas(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, c := range []struct {
		dsn  string
		sync int // PRAGMA synchronous: 1 NORMAL, 2 FULL
		busy int
	}{
		{filepath.Join(dir, "a.db"), 2, 5000},
		{"sqlite://" + filepath.Join(dir, "b.db") + "?synchronous=normal&busy_timeout=250ms", 1, 250},
		{filepath.Join(dir, "odd ?#% name.db"), 2, 5000},                          // a bare path is literal
		{"sqlite://" + filepath.Join(dir, "odd%20%3F%23%25%20name2.db"), 2, 5000}, // a DSN is escaped
	} {
		s := openT(t, c.dsn)
		st := s.(*sqlStore)
		var mode string
		var sync, busy, queryOnly int
		if err := st.w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := st.w.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if err := st.w.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if err := st.r.QueryRowContext(ctx, "PRAGMA query_only").Scan(&queryOnly); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || sync != c.sync || busy != c.busy || queryOnly != 1 {
			t.Errorf("%s: journal_mode %s, synchronous %d, busy_timeout %d, reader query_only %d", c.dsn, mode, sync, busy, queryOnly)
		}
		if st.w.Stats().MaxOpenConnections != 1 {
			t.Errorf("%d writer connections", st.w.Stats().MaxOpenConnections)
		}
	}
	for _, name := range []string{"odd ?#% name.db", "odd ?#% name2.db"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("the file with an odd name was not created where asked: %v", err)
		}
	}
}

// Crash safety: a child process writes to SQLite in a loop and reports each
// committed batch on stdout; the parent kills it with SIGKILL mid-write, then
// reopens the database and checks it.
const (
	envCrashChild = "TIERSCOPE_STORE_CRASH_CHILD" // the database path
	envCrashRound = "TIERSCOPE_STORE_CRASH_ROUND"
	envCrashSync  = "TIERSCOPE_STORE_CRASH_SYNC"
	crashBatch    = 100 // records per batch
	crashPayload  = 300 // bytes per record: the WAL passes its checkpoint size often
)

func crashKey(round, batch, i int) string { return fmt.Sprintf("r%02d/b%06d/%03d", round, batch, i) }

func crashPayloadFor(round, batch, i int) []byte {
	p := make([]byte, crashPayload)
	binary.LittleEndian.PutUint64(p, uint64(round)<<40|uint64(batch)<<10|uint64(i))
	for j := 8; j < len(p); j++ {
		p[j] = byte(batch + i + j)
	}
	return p
}

// crashChild is the child: it never returns.
func crashChild(path string) {
	round, _ := strconv.Atoi(os.Getenv(envCrashRound))
	ctx := context.Background()
	s, err := OpenSQLite(ctx, path, WithSynchronous(os.Getenv(envCrashSync)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for batch := 0; ; batch++ {
		recs := make([]Record, 0, crashBatch+1)
		for i := range crashBatch {
			recs = append(recs, Record{Kind: "crash", Key: crashKey(round, batch, i), Shard: "child",
				WindowStart: t0 + 60*int64(batch), Resolution: 60, Payload: crashPayloadFor(round, batch, i)})
		}
		// A cumulative record re-written by every batch, as the exporter does.
		recs = append(recs, Record{Kind: "cum", Key: fmt.Sprintf("r%02d", round), Shard: "child",
			WindowStart: t0, Resolution: 60, Payload: sumPayload(uint64(batch))})
		if err := s.Put(ctx, recs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		// Reported only after Put returned: every reported batch is committed.
		fmt.Fprintln(os.Stdout, batch)
	}
}

func TestSQLiteCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for round := range 6 {
		sync := []string{"FULL", "NORMAL"}[round%2]
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envCrashChild+"="+path, envCrashRound+"="+strconv.Itoa(round), envCrashSync+"="+sync)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Let it commit a random number of batches, then kill it while it writes
		// the next one. Lines already written are committed batches too.
		killAfter := 5 + rng.IntN(150)
		sc := bufio.NewScanner(out)
		last := -1
		for sc.Scan() {
			n, err := strconv.Atoi(sc.Text())
			if err != nil {
				t.Fatalf("child said %q", sc.Text())
			}
			last = n
			if n == killAfter {
				time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child did not die by SIGKILL: %v\n%s", round, err, stderr.String())
		}
		if last < killAfter {
			t.Fatalf("round %d: child stopped at batch %d before the kill\n%s", round, last, stderr.String())
		}
		checkAfterCrash(t, path, round, last)
		t.Logf("round %d (synchronous=%s): killed after batch %d was reported; intact", round, sync, last)
	}
}

func checkAfterCrash(t *testing.T, path string, round, last int) {
	t.Helper()
	ctx := context.Background()
	s, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatalf("round %d: reopen after kill -9: %v", round, err)
	}
	defer s.Close()
	var ok string
	if err := s.(*sqlStore).w.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("round %d: integrity_check = %q, %v", round, ok, err)
	}
	// Every reported batch is there, whole; the batch being written when the
	// child died is there whole or not at all; nothing beyond it.
	perBatch := map[int]int{}
	err = s.Scan(ctx, Query{Kind: "crash", KeyPrefix: fmt.Sprintf("r%02d/", round)}, func(r Record) error {
		var b, i int
		if _, err := fmt.Sscanf(r.Key[len("r00/"):], "b%06d/%03d", &b, &i); err != nil {
			return fmt.Errorf("key %q: %v", r.Key, err)
		}
		if string(r.Payload) != string(crashPayloadFor(round, b, i)) {
			return fmt.Errorf("record %q: wrong payload", r.Key)
		}
		perBatch[b]++
		return nil
	})
	if err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	for b := 0; b <= last; b++ {
		if perBatch[b] != crashBatch {
			t.Fatalf("round %d: committed batch %d has %d of %d records", round, b, perBatch[b], crashBatch)
		}
	}
	if n, ok := perBatch[last+1]; ok && n != crashBatch {
		t.Fatalf("round %d: the interrupted batch %d is partly there (%d of %d records)", round, last+1, n, crashBatch)
	}
	if len(perBatch) > last+2 {
		t.Fatalf("round %d: %d batches present, at most %d were written", round, len(perBatch), last+2)
	}
	cum := scanAll(t, s, Query{Kind: "cum", KeyPrefix: fmt.Sprintf("r%02d", round)})
	if len(cum) != 1 {
		t.Fatalf("round %d: %d cumulative records", round, len(cum))
	}
	if v := int(sumOf(t, cum[0].Payload)); v != last && v != last+1 {
		t.Fatalf("round %d: cumulative record says batch %d, last committed %d", round, v, last)
	}
	// Earlier rounds are untouched.
	for r := range round {
		if len(scanAll(t, s, Query{Kind: "cum", KeyPrefix: fmt.Sprintf("r%02d", r)})) != 1 {
			t.Fatalf("round %d: round %d's data is gone", round, r)
		}
	}
}
