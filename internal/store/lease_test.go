package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tierscope/tierscope/internal/store/pgtest"
)

func TestSQLiteLeases(t *testing.T) {
	runLeaseContract(t, func(t testing.TB) string { return filepath.Join(t.TempDir(), "leases.db") })
}

func TestPostgresLeases(t *testing.T) {
	runLeaseContract(t, func(t testing.TB) string { return pgtest.DSN(t) })
}

func runLeaseContract(t *testing.T, newDSN newDSNFunc) {
	t.Run("ExclusiveExpiryRenewRelease", func(t *testing.T) { testLeaseLifecycle(t, newDSN) })
	t.Run("ConcurrentAcquireOneWinner", func(t *testing.T) { testLeaseRace(t, newDSN) })
	t.Run("Samples", func(t *testing.T) { testLeaseSamples(t, newDSN) })
}

func leasesOf(t testing.TB, s Store) Leases {
	t.Helper()
	l, ok := s.(Leases)
	if !ok {
		t.Fatalf("%T does not implement Leases", s)
	}
	return l
}

// Two instances on one database: a held name is refused to the other owner
// until it expires; the group limit counts groups across owners; renewal
// fails once the lease was lost; release frees the names.
func testLeaseLifecycle(t *testing.T, newDSN newDSNFunc) {
	ctx := context.Background()
	dsn := newDSN(t)
	a, b := leasesOf(t, openT(t, dsn)), leasesOf(t, openT(t, dsn))
	const now = 1_000_000
	if err := a.AcquireLeases(ctx, []string{"link:app->db"}, "exp-1", "analyzer-1", []byte(`{"r":1}`), now, now+30_000, 2); err != nil {
		t.Fatal(err)
	}
	// The same owner and group may acquire again (idempotent).
	if err := a.AcquireLeases(ctx, []string{"link:app->db"}, "exp-1", "analyzer-1", []byte(`{"r":1}`), now, now+30_000, 2); err != nil {
		t.Fatalf("re-acquire by the holder: %v", err)
	}
	err := b.AcquireLeases(ctx, []string{"link:web->app", "link:app->db"}, "exp-2", "analyzer-2", nil, now+1000, now+31_000, 2)
	if !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("second owner on a held name: %v, want ErrLeaseHeld", err)
	}
	// All or none: web->app was not taken either.
	live, err := b.LiveLeases(ctx, now+1000)
	if err != nil || len(live) != 1 || live[0].Name != "link:app->db" || live[0].Owner != "analyzer-1" || string(live[0].Payload) != `{"r":1}` {
		t.Fatalf("live leases %+v, %v", live, err)
	}
	if err := b.AcquireLeases(ctx, []string{"link:web->app"}, "exp-2", "analyzer-2", nil, now+1000, now+31_000, 2); err != nil {
		t.Fatal(err)
	}
	// A third group passes the limit of 2, whoever asks.
	if err := a.AcquireLeases(ctx, []string{"frequency:db"}, "exp-3", "analyzer-1", nil, now+2000, now+32_000, 2); !errors.Is(err, ErrLeaseLimit) {
		t.Fatalf("third group: %v, want ErrLeaseLimit", err)
	}
	if err := a.RenewLeases(ctx, "exp-1", "analyzer-1", now+20_000, now+60_000); err != nil {
		t.Fatal(err)
	}
	// exp-2 expires at now+31 s; after that b cannot renew, and a may take it.
	if err := a.AcquireLeases(ctx, []string{"link:web->app"}, "exp-3", "analyzer-1", nil, now+40_000, now+70_000, 2); err != nil {
		t.Fatalf("acquire an expired lease: %v", err)
	}
	if err := b.RenewLeases(ctx, "exp-2", "analyzer-2", now+41_000, now+71_000); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew a lease taken over: %v, want ErrLeaseLost", err)
	}
	if err := a.ReleaseLeases(ctx, "exp-1", "analyzer-1"); err != nil {
		t.Fatal(err)
	}
	if err := b.AcquireLeases(ctx, []string{"link:app->db"}, "exp-4", "analyzer-2", nil, now+42_000, now+72_000, 2); err != nil {
		t.Fatalf("acquire a released lease: %v", err)
	}
	if err := a.RenewLeases(ctx, "exp-1", "analyzer-1", now+43_000, now+73_000); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew after release: %v, want ErrLeaseLost", err)
	}
}

// Eight instances race for one element: exactly one wins.
func testLeaseRace(t *testing.T, newDSN newDSNFunc) {
	ctx := context.Background()
	dsn := newDSN(t)
	const n = 8
	stores := make([]Leases, n)
	for i := range stores {
		stores[i] = leasesOf(t, openT(t, dsn))
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = stores[i].AcquireLeases(ctx, []string{"link:app->db"}, fmt.Sprintf("exp-%d", i), fmt.Sprintf("analyzer-%d", i), nil, 1000, 31_000, 0)
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrLeaseHeld):
			t.Errorf("analyzer-%d: %v", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d instances hold the lease, want exactly 1 (%v)", won, errs)
	}
}

func testLeaseSamples(t *testing.T, newDSN newDSNFunc) {
	ctx := context.Background()
	dsn := newDSN(t)
	a, b := leasesOf(t, openT(t, dsn)), leasesOf(t, openT(t, dsn))
	for seq := int64(1); seq <= 3; seq++ {
		if err := b.PutLeaseSamples(ctx, "exp-1", "analyzer-2", seq, []byte(fmt.Sprint(seq))); err != nil {
			t.Fatal(err)
		}
	}
	// A repeated batch is ignored, another group's is kept apart.
	if err := b.PutLeaseSamples(ctx, "exp-1", "analyzer-2", 2, []byte("again")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutLeaseSamples(ctx, "exp-2", "analyzer-2", 1, []byte("other")); err != nil {
		t.Fatal(err)
	}
	got, err := a.TakeLeaseSamples(ctx, "exp-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || string(got[0].Payload) != "1" || string(got[1].Payload) != "2" || got[2].Seq != 3 {
		t.Fatalf("took %+v", got)
	}
	if again, err := a.TakeLeaseSamples(ctx, "exp-1"); err != nil || len(again) != 0 {
		t.Fatalf("taken twice: %+v, %v", again, err)
	}
	if err := a.ReleaseLeases(ctx, "exp-2", "analyzer-1"); err != nil {
		t.Fatal(err)
	}
	if left, err := a.TakeLeaseSamples(ctx, "exp-2"); err != nil || len(left) != 0 {
		t.Fatalf("samples outlive the release: %+v, %v", left, err)
	}
}
