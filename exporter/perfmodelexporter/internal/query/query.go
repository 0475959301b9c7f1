package query

import (
	"container/list"
	"context"
	"fmt"
	"sync"

	"github.com/tierscope/tierscope/internal/api"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/store"
)

// Queries merge statistics over shards and windows. A 24-hour query over
// 1-minute windows of 100 services touches hundreds of thousands of records,
// so decoded statistics of settled time blocks are cached: whole hours, and
// single windows at a range's ragged ends. A block is settled when no instance
// can still write to it (it ended more than open_windows windows plus two
// flush intervals ago); the still-open windows are always read afresh. The
// cache holds at most maxCachedBlocks blocks, least recently used first out.

const (
	hourBlock       = 3600
	maxCachedBlocks = 1024
)

// Stats is one kind's decoded statistics by key.
type Stats map[string]any

// kindCodec decodes and merges one kind's payloads without re-encoding.
type kindCodec struct {
	decode func([]byte) (any, error)
	// mergeInto adds src to dst, both of this kind.
	mergeInto func(dst, src any) error
	zero      func() any
}

func codecOf[T any](kind string, merge func(a, b *T) error) kindCodec {
	return kindCodec{
		decode:    func(b []byte) (any, error) { return model.Decode(kind, b) },
		mergeInto: func(dst, src any) error { return merge(dst.(*T), src.(*T)) },
		zero:      func() any { return new(T) },
	}
}

var codecs = map[string]kindCodec{
	model.KindGraphNode: codecOf(model.KindGraphNode, func(a, b *model.CallStats) error { a.Merge(b); return nil }),
	model.KindGraphEdge: codecOf(model.KindGraphEdge, func(a, b *model.CallStats) error { a.Merge(b); return nil }),
	model.KindPath: codecOf(model.KindPath, func(a, b *model.PatternStats) error {
		if !a.Merge(b) {
			return fmt.Errorf("pattern node lists differ")
		}
		return nil
	}),
	model.KindTraces:    codecOf(model.KindTraces, func(a, b *model.TraceCount) error { a.Traces += b.Traces; return nil }),
	model.KindCPU:       codecOf(model.KindCPU, func(a, b *model.CPUStats) error { a.Merge(b); return nil }),
	model.KindSpanRates: codecOf(model.KindSpanRates, func(a, b *model.FlowCounts) error { a.Merge(b); return nil }),
	model.KindSigWindow: codecOf(model.KindSigWindow, func(a, b *model.SignatureWindow) error { a.Merge(b); return nil }),
}

type blockKey struct {
	kind        string
	start, size int64
}

type blockCache struct {
	mu     sync.Mutex
	blocks map[blockKey]*list.Element
	lru    *list.List // of *cachedBlock, most recent first
	// gen counts resets. A scan that began before a reset read what the
	// reset was for, so put drops its result (see generation).
	gen uint64
}

type cachedBlock struct {
	key   blockKey
	stats Stats
}

func newBlockCache() *blockCache {
	return &blockCache{blocks: map[blockKey]*list.Element{}, lru: list.New()}
}

func (c *blockCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.blocks)
	c.lru.Init()
	c.gen++
}

// generation is taken before the scan whose result is put.
func (c *blockCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

func (c *blockCache) get(k blockKey) (Stats, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.blocks[k]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cachedBlock).stats, true
}

// put caches s, read from the store at generation gen, unless the cache
// was reset since.
func (c *blockCache) put(k blockKey, s Stats, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.blocks[k]; ok || gen != c.gen {
		return
	}
	c.blocks[k] = c.lru.PushFront(&cachedBlock{k, s})
	for c.lru.Len() > maxCachedBlocks {
		old := c.lru.Remove(c.lru.Back()).(*cachedBlock)
		delete(c.blocks, old.key)
	}
}

// scanTyped reads and merges one kind over [from, to), decoding each record once.
func (q *Reader) scanTyped(ctx context.Context, kind string, from, to int64, into Stats) error {
	cd := codecs[kind]
	return q.st.Scan(ctx, store.Query{Kind: kind, From: from, To: to}, func(r store.Record) error {
		v, err := cd.decode(r.Payload)
		if err != nil {
			return fmt.Errorf("%s %q at %d: %w", kind, r.Key, r.WindowStart, err)
		}
		if cur, ok := into[r.Key]; ok {
			return cd.mergeInto(cur, v)
		}
		into[r.Key] = v
		return nil
	})
}

// block returns the merged statistics of one settled block, from the cache
// when it holds them.
func (q *Reader) block(ctx context.Context, k blockKey) (Stats, error) {
	if s, ok := q.cache.get(k); ok {
		return s, nil
	}
	gen := q.cache.generation()
	var s Stats
	var err error
	if k.size == hourBlock {
		s, err = q.hourStats(ctx, k.kind, k.start)
	} else {
		s = Stats{}
		err = q.scanTyped(ctx, k.kind, k.start, k.start+k.size, s)
	}
	if err != nil {
		return nil, err
	}
	q.cache.put(k, s, gen)
	return s, nil
}

// SettledBefore is where the windows a query caches end: those before it
// are taken to receive no more records.
func (q *Reader) SettledBefore() int64 {
	return alignDown(q.set.Now().Unix(), q.set.Window) - q.set.OpenWindows*q.set.Window - 2*int64(q.set.FlushInterval.Seconds()) - q.set.Window
}

// Query merges one kind over a window-aligned range: settled hours and
// windows from the cache, the rest from the store. The values are the
// kind's statistics (model.Decode), by key.
func (q *Reader) Query(ctx context.Context, kind string, tr api.TimeRange) (Stats, error) {
	cd, ok := codecs[kind]
	if !ok {
		return nil, fmt.Errorf("no codec for kind %q", kind)
	}
	settled := q.SettledBefore()
	out := Stats{}
	add := func(s Stats) error {
		for k, v := range s {
			cur, ok := out[k]
			if !ok {
				cur = cd.zero()
				out[k] = cur
			}
			if err := cd.mergeInto(cur, v); err != nil {
				return fmt.Errorf("%s %q: %w", kind, k, err)
			}
		}
		return nil
	}
	t := tr.From
	for t < tr.To {
		switch {
		case t%hourBlock == 0 && t+hourBlock <= tr.To && t+hourBlock <= settled && q.set.Window <= hourBlock:
			s, err := q.block(ctx, blockKey{kind, t, hourBlock})
			if err != nil {
				return nil, err
			}
			if err := add(s); err != nil {
				return nil, err
			}
			t += hourBlock
		case t+q.set.Window <= settled:
			// A ragged run of settled windows up to the next hour, the range's
			// end or the unsettled windows: cached per window, and fetched in
			// one scan when any is missing.
			end := min(alignDown(t, hourBlock)+hourBlock, tr.To, alignDown(settled, q.set.Window))
			if err := q.windowRun(ctx, kind, t, end, add); err != nil {
				return nil, err
			}
			t = end
		default:
			// Unsettled: read the rest of the range directly.
			s := Stats{}
			if err := q.scanTyped(ctx, kind, t, tr.To, s); err != nil {
				return nil, err
			}
			if err := add(s); err != nil {
				return nil, err
			}
			t = tr.To
		}
	}
	return out, nil
}

// warmKinds are the statistics dashboards read most.
var warmKinds = []string{model.KindGraphNode, model.KindGraphEdge, model.KindPath, model.KindTraces, model.KindSigWindow}

// Warm rolls up the hours this instance closed (those before closedBefore)
// and fills the cache with the settled hours of the last day, so the first
// dashboard query after a start, or after an hour settles, does not pay for
// decoding a day of windows. It stops early when ctx ends.
func (q *Reader) Warm(ctx context.Context, closedBefore int64) {
	q.RollUp(ctx, closedBefore)
	settled := q.SettledBefore()
	last := alignDown(settled, hourBlock) - hourBlock
	// The ragged ends of "the last 24 hours": the windows of the hour it
	// starts in and those after the last settled hour.
	if q.set.Window < hourBlock {
		first := alignDown(q.set.Now().Unix()-24*hourBlock, hourBlock)
		for _, run := range [][2]int64{{first, first + hourBlock}, {last + hourBlock, alignDown(settled, q.set.Window)}} {
			for _, kind := range warmKinds {
				if ctx.Err() != nil || run[1] <= run[0] {
					break
				}
				if err := q.windowRun(ctx, kind, run[0], run[1], func(Stats) error { return nil }); err != nil {
					q.set.Logger.Debug("perfmodel: warming the query cache: " + err.Error())
					return
				}
			}
		}
	}
	for h := last; h > last-24*hourBlock; h -= hourBlock {
		for _, kind := range warmKinds {
			if ctx.Err() != nil {
				return
			}
			if _, err := q.block(ctx, blockKey{kind, h, hourBlock}); err != nil {
				q.set.Logger.Debug("perfmodel: warming the query cache: " + err.Error())
				return
			}
		}
	}
}

// windowRun adds the settled windows of [from, to) one by one, from the cache
// when it holds them all, else from one scan that refills it.
func (q *Reader) windowRun(ctx context.Context, kind string, from, to int64, add func(Stats) error) error {
	var cached []Stats
	for w := from; w < to; w += q.set.Window {
		s, ok := q.cache.get(blockKey{kind, w, q.set.Window})
		if !ok {
			cached = nil
			break
		}
		cached = append(cached, s)
	}
	if cached == nil {
		gen := q.cache.generation()
		cd := codecs[kind]
		byWindow := map[int64]Stats{}
		err := q.st.Scan(ctx, store.Query{Kind: kind, From: from, To: to}, func(r store.Record) error {
			w := alignDown(r.WindowStart, q.set.Window)
			v, err := cd.decode(r.Payload)
			if err != nil {
				return fmt.Errorf("%s %q at %d: %w", kind, r.Key, r.WindowStart, err)
			}
			s := byWindow[w]
			if s == nil {
				s = Stats{}
				byWindow[w] = s
			}
			if cur, ok := s[r.Key]; ok {
				return cd.mergeInto(cur, v)
			}
			s[r.Key] = v
			return nil
		})
		if err != nil {
			return err
		}
		for w := from; w < to; w += q.set.Window {
			s := byWindow[w]
			if s == nil {
				s = Stats{}
			}
			q.cache.put(blockKey{kind, w, q.set.Window}, s, gen)
			cached = append(cached, s)
		}
	}
	for _, s := range cached {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}
