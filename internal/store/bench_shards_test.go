package store

import (
	"context"
	"fmt"
	"testing"
)

// The scale-out cost (docs/scale-out.md): what one window costs when N
// analyzers write it, each under its own shard, and a query merges them.
//
//	go test -run '^$' -bench Shards -benchtime 5x ./internal/store/
//
// Each of N shards writes the same 100 keys (routing by trace id gives every
// analyzer every pattern, edge and service) in 6 one-minute windows, 128-byte
// payloads. PutWindow: one op is one analyzer's flush of one window (100
// records). MergeWindow: one op merges one window over all N shards.
// MergeRange: one op merges all 6 windows (N × 600 records).
func BenchmarkShards(b *testing.B) {
	const keys, windows, size = 100, 6, 128
	for _, be := range benchBackends {
		for _, shards := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("%s/shards=%d", be.name, shards), func(b *testing.B) {
				s := openT(b, be.dsn(b))
				ctx := context.Background()
				window := func(shard, w int) []Record {
					recs := make([]Record, 0, keys)
					for k := 0; k < keys; k++ {
						recs = append(recs, Record{Kind: "edge", Key: fmt.Sprintf("key-%03d", k), Shard: fmt.Sprintf("analyzer-%03d", shard),
							WindowStart: t0 + int64(w)*60, Resolution: 60, Payload: benchPayload(size, uint64(shard*7+w))})
					}
					return recs
				}
				for sh := 0; sh < shards; sh++ {
					var recs []Record
					for w := 0; w < windows; w++ {
						recs = append(recs, window(sh, w)...)
					}
					if err := s.Put(ctx, recs); err != nil {
						b.Fatal(err)
					}
				}
				b.Run("PutWindow", func(b *testing.B) {
					cpu := startCPU()
					for i := 0; b.Loop(); i++ {
						if err := s.Put(ctx, window(i%shards, windows+i)); err != nil {
							b.Fatal(err)
						}
					}
					cpu.report(b, b.N*keys)
				})
				b.Run("MergeWindow", func(b *testing.B) {
					cpu := startCPU()
					for b.Loop() {
						m, err := MergeScan(ctx, s, Query{Kind: "edge", From: t0, To: t0 + 60}, benchMerge)
						if err != nil || len(m) != keys {
							b.Fatalf("%d keys, %v", len(m), err)
						}
					}
					cpu.report(b, b.N*keys*shards)
				})
				b.Run("MergeRange", func(b *testing.B) {
					cpu := startCPU()
					for b.Loop() {
						m, err := MergeScan(ctx, s, Query{Kind: "edge", From: t0, To: t0 + windows*60}, benchMerge)
						if err != nil || len(m) != keys {
							b.Fatalf("%d keys, %v", len(m), err)
						}
					}
					cpu.report(b, b.N*keys*shards*windows)
				})
			})
		}
	}
}
