package query

import (
	"context"
	"fmt"

	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/store"
)

// Hour rollups make a cold query over a day read about 24 records per key
// instead of 1440. Each instance rolls up its own shard's windows of every hour
// it has closed, under the kind name plus rollupSuffix, and marks the hour done
// for its shard. A query uses an hour's rollups only when every shard that
// flushed a window in that hour (ShardWindowKind markers) has marked it done;
// otherwise it reads the hour's windows. Rolling up is idempotent: an hour is
// recomputed from its windows, never incremented.
const (
	rollupSuffix = "@h"
	// ShardWindowKind marks, under the shard's key, each window a shard
	// flushed; the writer puts it beside the window's statistics.
	ShardWindowKind = "shard.window"
	rollupDoneKind  = "rollup.done" // key: shard; one per hour a shard rolled up
)

// StatKinds are the windowed statistics: hour rollups and downsampling
// merge them.
var StatKinds = []string{model.KindGraphNode, model.KindGraphEdge, model.KindPath, model.KindTraces, model.KindCPU, model.KindSpanRates, model.KindSigWindow}

// rollupKinds are the statistics that get hour rollups.
var rollupKinds = StatKinds

// rollUpHour recomputes this shard's rollups of the hour starting at h.
func (q *Reader) rollUpHour(ctx context.Context, h int64) error {
	var recs []store.Record
	for _, kind := range rollupKinds {
		cd := codecs[kind]
		merged := Stats{}
		err := q.st.Scan(ctx, store.Query{Kind: kind, From: h, To: h + hourBlock, Shards: []string{q.set.Shard}}, func(r store.Record) error {
			v, err := cd.decode(r.Payload)
			if err != nil {
				return fmt.Errorf("%s %q at %d: %w", kind, r.Key, r.WindowStart, err)
			}
			if cur, ok := merged[r.Key]; ok {
				return cd.mergeInto(cur, v)
			}
			merged[r.Key] = v
			return nil
		})
		if err != nil {
			return err
		}
		for key, v := range merged {
			b, err := model.Encode(kind, v)
			if err != nil {
				return err
			}
			recs = append(recs, store.Record{Kind: kind + rollupSuffix, Key: key, Shard: q.set.Shard, WindowStart: h, Resolution: hourBlock, Payload: b})
		}
	}
	recs = append(recs, store.Record{Kind: rollupDoneKind, Key: q.set.Shard, Shard: q.set.Shard, WindowStart: h, Resolution: hourBlock, Payload: []byte("1")})
	return q.st.Put(ctx, recs)
}

// RollUp rolls up every hour of the last day that this instance has closed
// (wholly before closedBefore, ingest's) and not rolled up since it started.
func (q *Reader) RollUp(ctx context.Context, closedBefore int64) {
	closed := alignDown(closedBefore, hourBlock)
	from := max(q.rolledUpTo, alignDown(q.set.Now().Unix(), hourBlock)-25*hourBlock)
	for h := from; h+hourBlock <= closed && ctx.Err() == nil; h += hourBlock {
		if err := q.rollUpHour(ctx, h); err != nil {
			q.set.Logger.Warn("perfmodel: hour rollup failed: " + err.Error())
			return
		}
		q.rolledUpTo = h + hourBlock
	}
}

// RollupUsable reports, per hour of [from, to), whether every shard that
// flushed a window in the hour has rolled it up.
func (q *Reader) RollupUsable(ctx context.Context, from, to int64) (map[int64]bool, error) {
	active := map[int64]map[string]bool{}
	err := q.st.Scan(ctx, store.Query{Kind: ShardWindowKind, From: from, To: to}, func(r store.Record) error {
		h := alignDown(r.WindowStart, hourBlock)
		if active[h] == nil {
			active[h] = map[string]bool{}
		}
		active[h][r.Key] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	done := map[int64]map[string]bool{}
	err = q.st.Scan(ctx, store.Query{Kind: rollupDoneKind, From: from, To: to}, func(r store.Record) error {
		if done[r.WindowStart] == nil {
			done[r.WindowStart] = map[string]bool{}
		}
		done[r.WindowStart][r.Key] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := map[int64]bool{}
	for h, shards := range active {
		ok := len(shards) > 0
		for s := range shards {
			ok = ok && done[h][s]
		}
		out[h] = ok
	}
	return out, nil
}

// hourStats computes an hour's merged statistics from its rollups when every
// shard's is there, else from its windows.
func (q *Reader) hourStats(ctx context.Context, kind string, h int64) (Stats, error) {
	usable, err := q.RollupUsable(ctx, h, h+hourBlock)
	if err != nil {
		return nil, err
	}
	s := Stats{}
	if usable[h] {
		cd := codecs[kind]
		err := q.st.Scan(ctx, store.Query{Kind: kind + rollupSuffix, From: h, To: h + hourBlock}, func(r store.Record) error {
			v, err := cd.decode(r.Payload)
			if err != nil {
				return fmt.Errorf("%s%s %q at %d: %w", kind, rollupSuffix, r.Key, r.WindowStart, err)
			}
			if cur, ok := s[r.Key]; ok {
				return cd.mergeInto(cur, v)
			}
			s[r.Key] = v
			return nil
		})
		return s, err
	}
	return s, q.scanTyped(ctx, kind, h, h+hourBlock, s)
}
