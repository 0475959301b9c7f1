package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tierscope/tierscope/internal/store/pgtest"
)

// Benchmarks, both backends:
//
//	go test -run '^$' -bench . -benchtime 20x ./internal/store/
//
// Put: one op is one flush of 1000 records of 256 bytes (new windows, or a
// re-write of the same windows with new payloads). Scan: one op reads 24 h of
// 1-minute windows for 100 keys (144,000 records of 128 bytes); MergeScan also
// merges them per key (16 uint64 sums a record).

type benchBackend struct {
	name string
	dsn  func(b *testing.B) string
}

var benchBackends = []benchBackend{
	{"sqlite", func(b *testing.B) string { return filepath.Join(b.TempDir(), "bench.db") }},
	{"postgres", func(b *testing.B) string { return pgtest.DSN(b) }},
}

// cpuClock measures this process's CPU time, which on a busy machine says more
// than the wall clock (for PostgreSQL it leaves out the server's share).
type cpuClock struct{ start time.Duration }

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuClock { return cpuClock{processCPU()} }

// report adds records per CPU second of this process.
func (c cpuClock) report(b *testing.B, records int) {
	b.ReportMetric(float64(records)/(processCPU()-c.start).Seconds(), "records/cpu-s")
}

func benchPayload(n int, seed uint64) []byte {
	p := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(p[i:], seed+uint64(i))
	}
	return p
}

func BenchmarkPut(b *testing.B) {
	const batch, size = 1000, 256
	for _, be := range benchBackends {
		for _, mode := range []string{"insert", "rewrite"} {
			b.Run(be.name+"/"+mode, func(b *testing.B) {
				s := openT(b, be.dsn(b))
				ctx := context.Background()
				recs := make([]Record, batch)
				fill := func(window int64, seed uint64) {
					for i := range recs {
						recs[i] = Record{Kind: "pattern", Key: fmt.Sprintf("service-%02d/op-%03d", i%100, i/100), Shard: "bench",
							WindowStart: t0 + 60*window, Resolution: 60, Payload: benchPayload(size, seed+uint64(i))}
					}
				}
				fill(0, 0)
				mustPut(b, s, recs)
				b.ResetTimer()
				cpu := startCPU()
				for n := 0; n < b.N; n++ {
					if mode == "insert" {
						fill(int64(n+1), uint64(n))
					} else {
						fill(0, uint64(n+1))
					}
					if err := s.Put(ctx, recs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
				cpu.report(b, b.N*batch)
			})
		}
	}
}

// scanFixture is 24 h × 1-minute windows × 100 keys in one store per backend.
func scanFixture(b *testing.B, dsn string) Store {
	s := openT(b, dsn)
	const keys, windows = 100, 24 * 60
	recs := make([]Record, 0, keys*60)
	for w := range int64(windows) {
		for k := range keys {
			recs = append(recs, Record{Kind: "pattern", Key: fmt.Sprintf("service-%03d", k), Shard: "bench",
				WindowStart: t0 + 60*w, Resolution: 60, Payload: benchPayload(128, uint64(w))})
		}
		if len(recs) == cap(recs) {
			mustPut(b, s, recs)
			recs = recs[:0]
		}
	}
	return s
}

func BenchmarkScan(b *testing.B) {
	for _, be := range benchBackends {
		b.Run(be.name, func(b *testing.B) {
			s := scanFixture(b, be.dsn(b))
			for _, op := range []string{"Scan", "MergeScan"} {
				b.Run(op+"/24h×1min×100keys", func(b *testing.B) {
					ctx := context.Background()
					q := Query{Kind: "pattern", From: t0, To: t0 + 86400}
					n := 0
					cpu := startCPU()
					for range b.N {
						if op == "Scan" {
							if err := s.Scan(ctx, q, func(Record) error { n++; return nil }); err != nil {
								b.Fatal(err)
							}
						} else {
							m, err := MergeScan(ctx, s, q, benchMerge)
							if err != nil || len(m) != 100 {
								b.Fatalf("%d keys, %v", len(m), err)
							}
							n += 100 * 1440
						}
					}
					if n != b.N*100*1440 {
						b.Fatalf("%d records, want %d", n, b.N*100*1440)
					}
					b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
					cpu.report(b, n)
				})
			}
		})
	}
}

// benchMerge adds payloads as vectors of uint64, like a histogram merge.
func benchMerge(_ string, dst, src []byte) ([]byte, error) {
	for i := 0; i+8 <= len(dst) && i+8 <= len(src); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(dst[i:])+binary.LittleEndian.Uint64(src[i:]))
	}
	return dst, nil
}

// BenchmarkDownsample: one op merges 24 h × 1-minute windows × 100 keys
// (144,000 records) into hours.
func BenchmarkDownsample(b *testing.B) {
	for _, be := range benchBackends {
		b.Run(be.name+"/24h×1min×100keys→1h", func(b *testing.B) {
			ctx := context.Background()
			merged := 0
			var cpuUsed time.Duration
			for range b.N {
				b.StopTimer()
				s := scanFixture(b, be.dsn(b))
				b.StartTimer()
				c0 := processCPU()
				n, err := s.Downsample(ctx, "pattern", t0+86400, 3600, benchMerge)
				if err != nil || n != 144000 {
					b.Fatalf("merged %d, %v", n, err)
				}
				merged += n
				cpuUsed += processCPU() - c0
			}
			b.ReportMetric(float64(merged)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(merged)/cpuUsed.Seconds(), "records/cpu-s")
		})
	}
}
