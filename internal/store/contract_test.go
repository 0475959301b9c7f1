package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The contract every backend passes: TestSQLiteContract, TestPostgresContract.

// newDSNFunc returns the DSN of a fresh, empty database.
type newDSNFunc func(t testing.TB) string

// sumPayload is the test statistic: a little-endian uint64 count.
func sumPayload(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func sumOf(t testing.TB, p []byte) uint64 {
	t.Helper()
	if len(p) != 8 {
		t.Fatalf("payload of %d bytes, want 8", len(p))
	}
	return binary.LittleEndian.Uint64(p)
}

func sumMerge(_ string, dst, src []byte) ([]byte, error) {
	if len(dst) != 8 || len(src) != 8 {
		return nil, fmt.Errorf("sum merge: payloads of %d and %d bytes", len(dst), len(src))
	}
	binary.LittleEndian.PutUint64(dst, binary.LittleEndian.Uint64(dst)+binary.LittleEndian.Uint64(src))
	return dst, nil
}

// t0 is a day boundary (UTC), so aligned hours and days start there.
const t0 = 1_699_920_000

func openT(t testing.TB, dsn string, opts ...Option) Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Open(ctx, dsn, opts...)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustPut(t testing.TB, s Store, recs []Record) {
	t.Helper()
	if err := s.Put(context.Background(), recs); err != nil {
		t.Fatalf("put: %v", err)
	}
}

func scanAll(t testing.TB, s Store, q Query) []Record {
	t.Helper()
	var out []Record
	if err := s.Scan(context.Background(), q, func(r Record) error {
		out = append(out, r)
		return nil
	}); err != nil {
		t.Fatalf("scan %+v: %v", q, err)
	}
	return out
}

func recString(r Record) string {
	return fmt.Sprintf("%s|%q|%d|%s|%d|%x", r.Kind, r.Key, r.WindowStart, r.Shard, r.Resolution, r.Payload)
}

func sameRecords(t testing.TB, what string, got, want []Record) {
	t.Helper()
	g := make([]string, len(got))
	for i, r := range got {
		g[i] = recString(r)
	}
	w := make([]string, len(want))
	for i, r := range want {
		w[i] = recString(r)
	}
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Fatalf("%s:\ngot  %d records:\n%s\nwant %d records:\n%s", what, len(g), strings.Join(g, "\n"), len(w), strings.Join(w, "\n"))
	}
}

// scanOrder is the order Scan promises.
func scanOrder(a, b Record) int {
	if c := strings.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	if c := cmpInt(a.WindowStart, b.WindowStart); c != 0 {
		return c
	}
	if c := strings.Compare(a.Shard, b.Shard); c != 0 {
		return c
	}
	return cmpInt(a.Resolution, b.Resolution)
}

func runContract(t *testing.T, newDSN newDSNFunc) {
	t.Run("MigrateFromEmptyAndReopen", func(t *testing.T) { testMigrate(t, newDSN) })
	t.Run("ConcurrentOpen", func(t *testing.T) { testConcurrentOpen(t, newDSN) })
	t.Run("PutScanOrder", func(t *testing.T) { testPutScanOrder(t, newDSN) })
	t.Run("UpsertIdempotent", func(t *testing.T) { testUpsert(t, newDSN) })
	t.Run("KeyPrefix", func(t *testing.T) { testKeyPrefix(t, newDSN) })
	t.Run("ShardFilterAndWindows", func(t *testing.T) { testShardFilter(t, newDSN) })
	t.Run("Keys", func(t *testing.T) { testKeys(t, newDSN) })
	for _, batch := range []int{7, 50, 200, DefaultBatchSize} {
		// A key has about 48 records an hour per shard, 3 shards, 3.5 hours:
		// batches smaller than one shard's hour, than all shards' hour, ending
		// inside the second hour, and larger than a key's records.
		t.Run(fmt.Sprintf("DownsampleExact/batch=%d", batch), func(t *testing.T) { testDownsample(t, newDSN, batch) })
	}
	t.Run("DownsampleMergeError", func(t *testing.T) { testDownsampleMergeError(t, newDSN) })
	t.Run("Retention", func(t *testing.T) { testRetention(t, newDSN) })
	t.Run("ConcurrentWriters", func(t *testing.T) { testConcurrentWriters(t, newDSN) })
	t.Run("ConcurrentDownsample", func(t *testing.T) { testConcurrentDownsample(t, newDSN) })
	t.Run("Cancellation", func(t *testing.T) { testCancellation(t, newDSN) })
	t.Run("Invalid", func(t *testing.T) { testInvalid(t, newDSN) })
}

func migrationRows(t testing.TB, s Store) int {
	t.Helper()
	var n int
	if err := s.(*sqlStore).r.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func testMigrate(t *testing.T, newDSN newDSNFunc) {
	ctx := context.Background()
	dsn := newDSN(t)
	s := openT(t, dsn)
	v, err := s.SchemaVersion(ctx)
	if err != nil || v != LatestSchemaVersion() {
		t.Fatalf("schema version %d, %v; want %d", v, err, LatestSchemaVersion())
	}
	rec := Record{Kind: "k", Key: "x", Shard: "s", WindowStart: t0, Resolution: 60, Payload: sumPayload(7)}
	mustPut(t, s, []Record{rec})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	s2 := openT(t, dsn)
	if v, _ := s2.SchemaVersion(ctx); v != LatestSchemaVersion() {
		t.Fatalf("reopened at version %d", v)
	}
	if n := migrationRows(t, s2); n != LatestSchemaVersion() {
		t.Fatalf("%d schema_migrations rows after reopen, want %d", n, LatestSchemaVersion())
	}
	sameRecords(t, "after reopen", scanAll(t, s2, Query{Kind: "k"}), []Record{rec})

	// A database migrated by a newer build is refused, with a clear error.
	if _, err := s2.(*sqlStore).w.Exec(s2.(*sqlStore).d.rebind(
		`INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, 'future', 0)`), LatestSchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	if _, err := Open(ctx, dsn); err == nil || !strings.Contains(err.Error(), "newer than this build") {
		t.Fatalf("opening a newer schema: %v", err)
	}
}

func testConcurrentOpen(t *testing.T, newDSN newDSNFunc) {
	dsn := newDSN(t)
	const n = 6
	stores := make([]Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			stores[i], errs[i] = Open(ctx, dsn)
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("open %d: %v", i, errs[i])
		}
		defer stores[i].Close()
	}
	if got := migrationRows(t, stores[0]); got != LatestSchemaVersion() {
		t.Fatalf("%d schema_migrations rows, want %d", got, LatestSchemaVersion())
	}
	for i, s := range stores {
		mustPut(t, s, []Record{{Kind: "k", Key: "x", Shard: fmt.Sprint(i), WindowStart: t0, Resolution: 60, Payload: sumPayload(1)}})
	}
	if got := len(scanAll(t, stores[n-1], Query{Kind: "k"})); got != n {
		t.Fatalf("%d records, want %d", got, n)
	}
}

var orderKeys = []string{"", "a", "a/b", "a/c", "ab", "b", "B", "é", "e", "z\u00ff", "\U0010FFFF", "日本"}

func testPutScanOrder(t *testing.T, newDSN newDSNFunc) {
	s := openT(t, newDSN(t))
	var recs []Record
	for i, k := range orderKeys {
		for _, sh := range []string{"s2", "s1", "s10"} {
			for w := int64(2); w >= 0; w-- {
				recs = append(recs, Record{Kind: "k", Key: k, Shard: sh, WindowStart: t0 + 60*w, Resolution: 60, Payload: sumPayload(uint64(i))})
			}
		}
	}
	// Same key and window at another resolution, and another kind.
	recs = append(recs, Record{Kind: "k", Key: "a", Shard: "s1", WindowStart: t0, Resolution: 3600, Payload: sumPayload(99)})
	recs = append(recs, Record{Kind: "other", Key: "a", Shard: "s1", WindowStart: t0, Resolution: 60, Payload: sumPayload(5)})
	rng := rand.New(rand.NewPCG(3, 4))
	rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	mustPut(t, s, recs)

	var want []Record
	for _, r := range recs {
		if r.Kind == "k" {
			want = append(want, r)
		}
	}
	slices.SortFunc(want, scanOrder) // byte order: "B" < "a", "e" < "é"
	sameRecords(t, "scan order", scanAll(t, s, Query{Kind: "k"}), want)
	sameRecords(t, "other kind", scanAll(t, s, Query{Kind: "other"}), recs[slices.IndexFunc(recs, func(r Record) bool { return r.Kind == "other" }):][:1])
	if got := scanAll(t, s, Query{Kind: "none"}); len(got) != 0 {
		t.Fatalf("unknown kind: %d records", len(got))
	}

	// An error from fn stops the scan and comes back unwrapped.
	stop := errors.New("stop")
	n := 0
	err := s.Scan(context.Background(), Query{Kind: "k"}, func(Record) error { n++; return stop })
	if err != stop || n != 1 {
		t.Fatalf("fn error: %v after %d calls", err, n)
	}
}

func testUpsert(t *testing.T, newDSN newDSNFunc) {
	s := openT(t, newDSN(t))
	var recs []Record
	for i := range 2500 { // several statements at the default batch size
		recs = append(recs, Record{Kind: "k", Key: fmt.Sprintf("key%04d", i%50), Shard: "s", WindowStart: t0 + 60*int64(i/50), Resolution: 60, Payload: sumPayload(uint64(i))})
	}
	mustPut(t, s, recs)
	want := slices.Clone(recs)
	slices.SortFunc(want, scanOrder)
	sameRecords(t, "first put", scanAll(t, s, Query{Kind: "k"}), want)
	mustPut(t, s, recs) // an identical re-write changes nothing
	sameRecords(t, "identical re-write", scanAll(t, s, Query{Kind: "k"}), want)

	// A cumulative re-write replaces payloads; the last duplicate in a batch wins.
	re := []Record{
		{Kind: "k", Key: "key0000", Shard: "s", WindowStart: t0, Resolution: 60, Payload: sumPayload(1000)},
		{Kind: "k", Key: "key0001", Shard: "s", WindowStart: t0, Resolution: 60, Payload: sumPayload(1)},
		{Kind: "k", Key: "key0000", Shard: "s", WindowStart: t0, Resolution: 60, Payload: sumPayload(2000)},
		{Kind: "k", Key: "key0002", Shard: "s", WindowStart: t0, Resolution: 60, Payload: nil},
	}
	mustPut(t, s, re)
	got := scanAll(t, s, Query{Kind: "k", KeyPrefix: "key000", From: t0, To: t0 + 60})
	if len(got) != 10 {
		t.Fatalf("%d records, want 10", len(got))
	}
	if sumOf(t, got[0].Payload) != 2000 || sumOf(t, got[1].Payload) != 1 {
		t.Fatalf("re-write: %x %x", got[0].Payload, got[1].Payload)
	}
	if got[2].Payload == nil || len(got[2].Payload) != 0 {
		t.Fatalf("nil payload came back as %#v, want empty", got[2].Payload)
	}
	if err := s.Put(context.Background(), nil); err != nil {
		t.Fatalf("empty put: %v", err)
	}
	// Small statement batches give the same result.
	s2 := openT(t, newDSN(t), WithBatchSize(7))
	mustPut(t, s2, recs)
	sameRecords(t, "batch size 7", scanAll(t, s2, Query{Kind: "k"}), want)
}

func testKeyPrefix(t *testing.T, newDSN newDSNFunc) {
	s := openT(t, newDSN(t))
	keys := append(slices.Clone(orderKeys), "a\U0010FFFF", "a\U0010FFFFb", "\U0010FFFFz", "¿x", "Àx", "a%", "a_b", "a*")
	var recs []Record
	for _, k := range keys {
		recs = append(recs, Record{Kind: "k", Key: k, Shard: "s", WindowStart: t0, Resolution: 60, Payload: sumPayload(1)})
	}
	mustPut(t, s, recs)
	for _, p := range []string{"", "a", "a/", "a\U0010FFFF", "\U0010FFFF", "¿", "é", "日", "a%", "a_", "zzz", "B"} {
		var want []string
		for _, k := range keys {
			if strings.HasPrefix(k, p) {
				want = append(want, k)
			}
		}
		slices.Sort(want)
		var got []string
		for _, r := range scanAll(t, s, Query{Kind: "k", KeyPrefix: p}) {
			got = append(got, r.Key)
		}
		if !slices.Equal(got, want) {
			t.Errorf("prefix %q: got %q, want %q", p, got, want)
		}
	}
}

func testShardFilter(t *testing.T, newDSN newDSNFunc) {
	s := openT(t, newDSN(t))
	var recs []Record
	for _, sh := range []string{"s1", "s2", "s3"} {
		for w := range int64(5) {
			recs = append(recs, Record{Kind: "k", Key: "x", Shard: sh, WindowStart: t0 + 60*w, Resolution: 60, Payload: sumPayload(uint64(w))})
		}
	}
	mustPut(t, s, recs)
	count := func(q Query) map[string]int {
		m := map[string]int{}
		for _, r := range scanAll(t, s, q) {
			m[r.Shard]++
		}
		return m
	}
	check := func(q Query, want map[string]int) {
		t.Helper()
		if got := count(q); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%+v: %v, want %v", q, got, want)
		}
	}
	check(Query{Kind: "k", Shards: []string{"s1"}}, map[string]int{"s1": 5})
	check(Query{Kind: "k", Shards: []string{"s3", "s1", "s3"}}, map[string]int{"s1": 5, "s3": 5})
	check(Query{Kind: "k", Shards: []string{"nope"}}, map[string]int{})
	check(Query{Kind: "k"}, map[string]int{"s1": 5, "s2": 5, "s3": 5})
	// Windows: start in [From, To); To == 0 is unbounded; an empty range is empty.
	check(Query{Kind: "k", From: t0 + 60, To: t0 + 180}, map[string]int{"s1": 2, "s2": 2, "s3": 2})
	check(Query{Kind: "k", From: t0 + 120}, map[string]int{"s1": 3, "s2": 3, "s3": 3})
	check(Query{Kind: "k", From: t0 + 120, To: t0 + 120}, map[string]int{})
	check(Query{Kind: "k", From: t0 + 120, To: t0}, map[string]int{})
	check(Query{Kind: "k", From: t0 + 60, To: t0 + 120, Shards: []string{"s2"}}, map[string]int{"s2": 1})

	m, err := MergeScan(context.Background(), s, Query{Kind: "k", Shards: []string{"s1", "s2"}}, sumMerge)
	if err != nil || len(m) != 1 || sumOf(t, m["x"]) != 2*(0+1+2+3+4) {
		t.Fatalf("MergeScan: %v %v", m, err)
	}
}

func testKeys(t *testing.T, newDSN newDSNFunc) {
	ctx := context.Background()
	s := openT(t, newDSN(t))
	mustPut(t, s, []Record{
		{Kind: "k", Key: "b", Shard: "s1", WindowStart: t0, Resolution: 60},
		{Kind: "k", Key: "b", Shard: "s2", WindowStart: t0 + 60, Resolution: 60},
		{Kind: "k", Key: "a", Shard: "s1", WindowStart: t0 + 120, Resolution: 60},
		{Kind: "k", Key: "B", Shard: "s1", WindowStart: t0 + 120, Resolution: 60},
		{Kind: "j", Key: "c", Shard: "s1", WindowStart: t0, Resolution: 60},
	})
	for _, c := range []struct {
		from, to int64
		want     []string
	}{
		{0, 0, []string{"B", "a", "b"}},
		{t0, t0 + 120, []string{"b"}},
		{t0 + 60, 0, []string{"B", "a", "b"}},
		{t0 + 120, t0 + 180, []string{"B", "a"}},
		{t0 + 180, 0, nil},
	} {
		got, err := s.Keys(ctx, "k", c.from, c.to)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Keys(k, %d, %d) = %q, %v; want %q", c.from-t0, c.to-t0, got, err, c.want)
		}
	}
	if _, err := s.Keys(ctx, "", 0, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("Keys without kind: %v", err)
	}
}

// snapshot is every record of the store, in scan order per kind.
func snapshot(t testing.TB, s Store, kinds ...string) []Record {
	var all []Record
	for _, k := range kinds {
		all = append(all, scanAll(t, s, Query{Kind: k})...)
	}
	return all
}

type cell struct {
	key, shard string
	start      int64
}

func testDownsample(t *testing.T, newDSN newDSNFunc, batch int) {
	ctx := context.Background()
	s := openT(t, newDSN(t), WithBatchSize(batch))
	rng := rand.New(rand.NewPCG(5, 6))
	// 4 keys × 3 shards × 210 one-minute windows (3.5 hours, ~20% missing),
	// plus a two-minute record and a second kind.
	var recs []Record
	hourSum := map[cell]uint64{} // per key, shard and hour
	keyTotal := map[string]uint64{}
	fineInHour := map[int64]int{}
	for _, k := range []string{"k1", "k2", "k3", "k4"} {
		for _, sh := range []string{"A", "B", "C"} {
			for m := range int64(210) {
				if rng.IntN(5) == 0 {
					continue
				}
				v := rng.Uint64N(1000)
				ws := t0 + 60*m
				recs = append(recs, Record{Kind: "lat", Key: k, Shard: sh, WindowStart: ws, Resolution: 60, Payload: sumPayload(v)})
				hourSum[cell{k, sh, alignDown(ws, 3600)}] += v
				keyTotal[k] += v
				fineInHour[alignDown(ws, 3600)]++
			}
		}
	}
	recs = append(recs, Record{Kind: "lat", Key: "k1", Shard: "A", WindowStart: t0 + 3600 + 120, Resolution: 120, Payload: sumPayload(5)})
	hourSum[cell{"k1", "A", t0 + 3600}] += 5
	keyTotal["k1"] += 5
	fineInHour[t0+3600]++
	// 7-second windows are aligned but one crosses the t0+1h boundary: it is
	// not contained in an hour and stays as it is.
	crossing := Record{Kind: "lat", Key: "k2", Shard: "A", WindowStart: alignDown(t0+3599, 7), Resolution: 7, Payload: sumPayload(11)}
	if crossing.WindowStart+7 <= t0+3600 {
		t.Fatal("test setup: the 7-second window does not cross the hour")
	}
	recs = append(recs, crossing)
	keyTotal["k2"] += 11
	other := []Record{{Kind: "other", Key: "k1", Shard: "A", WindowStart: t0, Resolution: 60, Payload: sumPayload(3)}}
	mustPut(t, s, recs)
	mustPut(t, s, other)
	before := snapshot(t, s, "lat")

	// Cut-off at 2.5 h: hours 0 and 1 end by then and are downsampled; hour 2
	// (ends at 3 h) and hour 3 are not, even though some of their minutes are
	// older than the cut-off.
	olderThan := int64(t0 + 2*3600 + 1800)
	merged, err := s.Downsample(ctx, "lat", olderThan, 3600, sumMerge)
	if err != nil {
		t.Fatal(err)
	}
	if want := fineInHour[t0] + fineInHour[t0+3600]; merged != want {
		t.Fatalf("merged %d records, want %d", merged, want)
	}
	after := snapshot(t, s, "lat")
	var untouched []Record
	for _, r := range before {
		if r.WindowStart >= t0+2*3600 || recString(r) == recString(crossing) {
			untouched = append(untouched, r)
		}
	}
	var gotUntouched []Record
	coarse := 0
	for _, r := range after {
		switch {
		case r.Resolution == 3600:
			coarse++
			c := cell{r.Key, r.Shard, r.WindowStart}
			if r.WindowStart >= t0+2*3600 {
				t.Fatalf("hour %d downsampled before the cut-off", (r.WindowStart-t0)/3600)
			}
			if got := sumOf(t, r.Payload); got != hourSum[c] {
				t.Fatalf("%+v: sum %d, want %d", c, got, hourSum[c])
			}
		default:
			gotUntouched = append(gotUntouched, r)
		}
	}
	if coarse != 4*3*2 {
		t.Fatalf("%d hourly records, want %d", coarse, 4*3*2)
	}
	sameRecords(t, "records not downsampled", gotUntouched, untouched)
	checkTotals := func(what string) {
		t.Helper()
		m, err := MergeScan(ctx, s, Query{Kind: "lat"}, sumMerge)
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range keyTotal {
			if got := sumOf(t, m[k]); got != want {
				t.Fatalf("%s: key %s total %d, want %d", what, k, got, want)
			}
		}
	}
	checkTotals("after downsampling")
	sameRecords(t, "other kind", scanAll(t, s, Query{Kind: "other"}), other)

	// Idempotent: nothing left to do.
	if merged, err := s.Downsample(ctx, "lat", olderThan, 3600, sumMerge); err != nil || merged != 0 {
		t.Fatalf("second run merged %d, %v", merged, err)
	}
	sameRecords(t, "second run", snapshot(t, s, "lat"), after)

	// A late fine record in a downsampled hour is merged into the existing hour.
	mustPut(t, s, []Record{{Kind: "lat", Key: "k3", Shard: "B", WindowStart: t0 + 600, Resolution: 60, Payload: sumPayload(1_000_000)}})
	keyTotal["k3"] += 1_000_000
	if merged, err := s.Downsample(ctx, "lat", olderThan, 3600, sumMerge); err != nil || merged != 1 {
		t.Fatalf("late record: merged %d, %v", merged, err)
	}
	checkTotals("after the late record")
	got := scanAll(t, s, Query{Kind: "lat", KeyPrefix: "k3", From: t0, To: t0 + 1, Shards: []string{"B"}})
	if len(got) != 1 || got[0].Resolution != 3600 || sumOf(t, got[0].Payload) != hourSum[cell{"k3", "B", t0}]+1_000_000 {
		t.Fatalf("late record not merged into its hour: %v", got)
	}

	// Hours and minutes into a day, across all kinds (kind ""): one record per
	// kind, key and shard, except the crossing window, which a day contains.
	merged, err = s.Downsample(ctx, "", t0+86400, 86400, sumMerge)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(after) + 1; merged != want { // +1: "other"
		t.Fatalf("day: merged %d, want %d", merged, want)
	}
	day := snapshot(t, s, "lat", "other")
	if len(day) != 4*3+1 {
		t.Fatalf("%d daily records, want %d", len(day), 4*3+1)
	}
	for _, r := range day {
		if r.Resolution != 86400 || r.WindowStart != t0 {
			t.Fatalf("not a day record: %s", recString(r))
		}
	}
	checkTotals("after the day")

	if _, err := s.Downsample(ctx, "lat", olderThan, 0, sumMerge); !errors.Is(err, ErrInvalid) {
		t.Fatalf("resolution 0: %v", err)
	}
	if _, err := s.Downsample(ctx, "lat", olderThan, 3600, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("nil merge: %v", err)
	}
}

func testDownsampleMergeError(t *testing.T, newDSN newDSNFunc) {
	ctx := context.Background()
	s := openT(t, newDSN(t))
	var recs []Record
	for m := range int64(120) {
		recs = append(recs, Record{Kind: "k", Key: "x", Shard: "s", WindowStart: t0 + 60*m, Resolution: 60, Payload: sumPayload(1)})
	}
	mustPut(t, s, recs)
	before := snapshot(t, s, "k")
	boom := errors.New("boom")
	calls := 0
	_, err := s.Downsample(ctx, "k", t0+7200, 3600, func(kind string, dst, src []byte) ([]byte, error) {
		if calls++; calls == 30 {
			return nil, boom
		}
		return sumMerge(kind, dst, src)
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	// The failing window was rolled back: totals are intact.
	m, err := MergeScan(ctx, s, Query{Kind: "k"}, sumMerge)
	if err != nil || sumOf(t, m["x"]) != 120 {
		t.Fatalf("after a failed merge: %v %v", m, err)
	}
	if _, err := s.Downsample(ctx, "k", t0+7200, 3600, sumMerge); err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, s, "k")
	if len(after) != 2 || sumOf(t, after[0].Payload) != 60 || sumOf(t, after[1].Payload) != 60 {
		t.Fatalf("retry: %v (before: %d records)", after, len(before))
	}
}

func testRetention(t *testing.T, newDSN newDSNFunc) {
	ctx := context.Background()
	s := openT(t, newDSN(t), WithBatchSize(7)) // several statements
	var recs []Record
	for m := range int64(100) {
		recs = append(recs, Record{Kind: "a", Key: "x", Shard: "s", WindowStart: t0 + 60*m, Resolution: 60})
		recs = append(recs, Record{Kind: "b", Key: "y", Shard: "s", WindowStart: t0 + 60*m, Resolution: 60})
	}
	hour := Record{Kind: "a", Key: "x", Shard: "s", WindowStart: t0, Resolution: 3600}
	recs = append(recs, hour)
	mustPut(t, s, recs)
	// Windows that end by the cut-off go; the hour (ends at t0+3600) stays.
	n, err := s.DeleteBefore(ctx, "a", t0+60*50)
	if err != nil || n != 50 {
		t.Fatalf("DeleteBefore(a) = %d, %v; want 50", n, err)
	}
	a := scanAll(t, s, Query{Kind: "a"})
	if len(a) != 51 || a[0].Resolution != 3600 || a[1].WindowStart != t0+60*50 {
		t.Fatalf("after retention: %d records, first %v", len(a), a[0])
	}
	if len(scanAll(t, s, Query{Kind: "b"})) != 100 {
		t.Fatal("retention of kind a touched kind b")
	}
	// All kinds; the hour ends exactly at the cut-off, so it goes too.
	n, err = s.DeleteBefore(ctx, "", t0+3600)
	if err != nil || n != 10+1+60 {
		t.Fatalf("DeleteBefore(all) = %d, %v; want %d", n, err, 71)
	}
	if got := len(scanAll(t, s, Query{Kind: "a"})) + len(scanAll(t, s, Query{Kind: "b"})); got != 80 {
		t.Fatalf("%d records left, want 80", got)
	}
	if n, err := s.DeleteBefore(ctx, "", t0+3600); err != nil || n != 0 {
		t.Fatalf("repeat: %d, %v", n, err)
	}
}

func testConcurrentWriters(t *testing.T, newDSN newDSNFunc) {
	ctx := context.Background()
	dsn := newDSN(t)
	a, b := openT(t, dsn), openT(t, dsn)
	const writers, puts, per = 4, 25, 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for si, s := range []Store{a, b} {
		shard := []string{"A", "B"}[si]
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for p := range puts {
					batch := make([]Record, 0, per+1)
					for i := range per {
						batch = append(batch, Record{Kind: "k", Key: fmt.Sprintf("w%d/%03d/%02d", w, p, i), Shard: shard,
							WindowStart: t0 + 60*int64(p), Resolution: 60, Payload: sumPayload(1)})
					}
					// The cumulative record of this writer, re-written at every flush.
					batch = append(batch, Record{Kind: "cum", Key: fmt.Sprintf("w%d", w), Shard: shard,
						WindowStart: t0, Resolution: 60, Payload: sumPayload(uint64(p + 1))})
					if err := s.Put(ctx, batch); err != nil {
						errs <- err
						return
					}
					// Reads run beside the writers.
					if err := s.Scan(ctx, Query{Kind: "k", KeyPrefix: fmt.Sprintf("w%d/%03d/", w, p)}, func(Record) error { return nil }); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	m, err := MergeScan(ctx, b, Query{Kind: "k"}, sumMerge)
	if err != nil || len(m) != writers*puts*per {
		t.Fatalf("%d keys, %v; want %d", len(m), err, writers*puts*per)
	}
	for k, p := range m {
		if sumOf(t, p) != 2 { // one record from each instance
			t.Fatalf("key %s: %d", k, sumOf(t, p))
		}
	}
	cum := scanAll(t, a, Query{Kind: "cum"})
	if len(cum) != 2*writers {
		t.Fatalf("%d cumulative records", len(cum))
	}
	for _, r := range cum {
		if sumOf(t, r.Payload) != puts {
			t.Fatalf("cumulative record %s = %d, want %d", recString(r), sumOf(t, r.Payload), puts)
		}
	}
}

func testConcurrentDownsample(t *testing.T, newDSN newDSNFunc) {
	ctx := context.Background()
	dsn := newDSN(t)
	a, b := openT(t, dsn, WithBatchSize(30)), openT(t, dsn, WithBatchSize(30))
	var recs []Record
	for k := range 5 {
		for _, sh := range []string{"A", "B"} {
			for m := range int64(240) {
				recs = append(recs, Record{Kind: "k", Key: fmt.Sprint("key", k), Shard: sh, WindowStart: t0 + 60*m, Resolution: 60, Payload: sumPayload(1)})
			}
		}
	}
	mustPut(t, a, recs)
	var wg sync.WaitGroup
	var merged [2]int
	var errs [2]error
	for i, s := range []Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			merged[i], errs[i] = s.Downsample(ctx, "k", t0+4*3600, 3600, sumMerge)
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if merged[0]+merged[1] != len(recs) {
		t.Fatalf("merged %d + %d, want %d in all", merged[0], merged[1], len(recs))
	}
	got := scanAll(t, b, Query{Kind: "k"})
	if len(got) != 5*2*4 {
		t.Fatalf("%d records, want %d", len(got), 5*2*4)
	}
	for _, r := range got {
		if r.Resolution != 3600 || sumOf(t, r.Payload) != 60 {
			t.Fatalf("bad hour: %s", recString(r))
		}
	}
}

func testCancellation(t *testing.T, newDSN newDSNFunc) {
	s := openT(t, newDSN(t))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	rec := Record{Kind: "k", Key: "x", Shard: "s", WindowStart: t0, Resolution: 60}
	if err := s.Put(cancelled, []Record{rec}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with a cancelled context: %v", err)
	}
	if got := scanAll(t, s, Query{Kind: "k"}); len(got) != 0 {
		t.Fatalf("cancelled Put wrote %d records", len(got))
	}
	var recs []Record
	for i := range 3000 {
		recs = append(recs, Record{Kind: "k", Key: fmt.Sprintf("%05d", i), Shard: "s", WindowStart: t0, Resolution: 60})
	}
	mustPut(t, s, recs)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := s.Scan(ctx, Query{Kind: "k"}, func(Record) error {
		if n++; n == 10 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n == len(recs) {
		t.Fatalf("Scan cancelled after 10 of %d records: %v after %d", len(recs), err, n)
	}
	if _, err := s.Downsample(cancelled, "k", t0+7200, 3600, sumMerge); !errors.Is(err, context.Canceled) {
		t.Fatalf("Downsample: %v", err)
	}
	if _, err := s.DeleteBefore(cancelled, "k", t0+7200); !errors.Is(err, context.Canceled) {
		t.Fatalf("DeleteBefore: %v", err)
	}
	if _, err := s.Keys(cancelled, "k", 0, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Keys: %v", err)
	}
	if got := len(scanAll(t, s, Query{Kind: "k"})); got != len(recs) {
		t.Fatalf("%d records after cancelled operations, want %d", got, len(recs))
	}
}

func testInvalid(t *testing.T, newDSN newDSNFunc) {
	ctx := context.Background()
	s := openT(t, newDSN(t))
	good := Record{Kind: "k", Key: "x", Shard: "s", WindowStart: t0, Resolution: 60}
	for name, mod := range map[string]func(*Record){
		"empty kind":        func(r *Record) { r.Kind = "" },
		"empty shard":       func(r *Record) { r.Shard = "" },
		"zero resolution":   func(r *Record) { r.Resolution = 0 },
		"misaligned window": func(r *Record) { r.WindowStart = t0 + 30 },
		"invalid UTF-8":     func(r *Record) { r.Key = "a\xffb" },
		"NUL":               func(r *Record) { r.Key = "a\x00b" },
		"long key":          func(r *Record) { r.Key = strings.Repeat("k", maxIdentityBytes+1) },
	} {
		r := good
		mod(&r)
		err := s.Put(ctx, []Record{good, r})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := scanAll(t, s, Query{Kind: "k"}); len(got) != 0 {
		t.Fatalf("an invalid batch wrote %d records", len(got))
	}
	if err := s.Scan(ctx, Query{}, func(Record) error { return nil }); !errors.Is(err, ErrInvalid) {
		t.Errorf("scan without kind: %v", err)
	}
	if err := s.Scan(ctx, Query{Kind: "k", KeyPrefix: "\xff"}, func(Record) error { return nil }); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid prefix: %v", err)
	}
	// Negative, aligned windows are fine.
	mustPut(t, s, []Record{{Kind: "k", Key: "neg", Shard: "s", WindowStart: -120, Resolution: 60}})
	if got := scanAll(t, s, Query{Kind: "k", From: -1000}); len(got) != 1 {
		t.Fatalf("negative window: %v", got)
	}
}
