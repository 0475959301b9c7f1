// Package ingest is the perfmodel exporter's write side: it assembles spans
// into traces and traces into the open windows' models (path patterns,
// service graph, latency histograms, async edges by paper 001 §5.2's
// convolution), adds the CPU readings of machines and processes, learns the
// links between services, and flushes the windows to the store as mergeable
// statistics. It hands the coordinator what it observes of the traffic.
package ingest // import "github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/ingest"

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/metadata"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/query"
	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/timegrid"
	"github.com/tierscope/tierscope/internal/causal"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/span"
	"github.com/tierscope/tierscope/internal/stitch"
	"github.com/tierscope/tierscope/internal/store"
)

// Observer is told what the coordinator needs of the traffic, under the
// engine's lock: each call must be fast.
type Observer interface {
	// IsFront reports whether a SERVER span is a front-tier request.
	IsFront(s *span.Span, names *span.Names) bool
	// Observe sees every completed SERVER span, spans[i] of its trace.
	Observe(spans []span.Span, names *span.Names, i int)
	// ObserveSteal takes a host's CPU steal share over the scrape ending at ts.
	ObserveSteal(host string, ts int64, steal float64)
}

// Settings is what ingestion needs of the exporter's configuration.
type Settings struct {
	// Window is the window length in seconds; OpenWindows how many recent
	// windows stay in memory.
	Window      int64
	OpenWindows int64
	// TraceWait, MaxOpenTraces and MaxSpansPerTrace bound the assembly.
	TraceWait        time.Duration
	MaxOpenTraces    int
	MaxSpansPerTrace int
	// Limits bound each window's model; MaxAddresses the address book;
	// MaxNames the names of the spans being assembled before they are
	// compacted.
	Limits       model.Limits
	MaxAddresses int
	MaxNames     int
	// AsyncQuantum and MaxMessages configure the convolution of one-way
	// messages.
	AsyncQuantum time.Duration
	MaxMessages  int
	// Shard names this instance's records.
	Shard string
	// HostName is the configured host_name, LocalHost this collector's own.
	HostName, LocalHost string
	// CountCalls keeps the link book's calls per request (for link
	// experiments' priors).
	CountCalls bool
	// Retention, DownsampleAfter and DownsampleTo maintain the store.
	Retention, DownsampleAfter, DownsampleTo time.Duration

	Now       func() time.Time
	Logger    *zap.Logger
	Telemetry *metadata.TelemetryBuilder
	Observer  Observer
	// SettledBefore is where the reads' cache takes windows as settled, and
	// Invalidate empties that cache: a flush that writes an earlier window,
	// or maintenance, calls it.
	SettledBefore func() int64
	Invalidate    func()
}

// Engine assembles traces and metrics into the open windows.
type Engine struct {
	set    Settings
	tel    *metadata.TelemetryBuilder
	shard  string
	window int64 // seconds

	mu  sync.Mutex
	asm *model.Assembler
	// names holds the names of the assembler's spans; compactNames bounds it
	// once it passes compactAt.
	names     *span.Names
	compactAt int

	windows map[int64]*model.Window // open windows by start
	// closedBefore: windows starting before it were flushed for the last time
	// and dropped; traces that fall in them are late.
	closedBefore int64
	lastEarly    int64
	lastDropped  int64
	book         *stitch.AddressBook // address → service, learned from answered calls
	links        *linkBook           // caller→callee → addresses, for link experiments
	countCalls   bool                // keep the link book's calls per request
	byID         map[uint64]int32    // scratch for resolvePeers
	answeredBy   []int32             // scratch for resolvePeers: the SERVER span answering each CLIENT span, or -1
	syncPath     []int8              // scratch for countLinkCalls: each span's path state
	chain        []int32             // scratch for markSyncPaths
	openReported int64

	flushMu     sync.Mutex // one flush at a time; Put runs outside mu
	st          store.Store
	lastFlush   atomic.Int64 // unix seconds
	flushFailed atomic.Bool
	// observer is the coordinator (Settings.Observer).
	observer Observer
	// openWindows is how many recent windows stay open.
	openWindows int64
	// lastReading is each machine's and process's last CPU reading time (unix ns).
	lastReading map[string]int64
}

// New returns an engine; Open gives it the store.
func New(set Settings) *Engine {
	return &Engine{
		set: set, tel: set.Telemetry, shard: set.Shard, window: set.Window,
		asm:         model.NewAssembler(int64(set.TraceWait), set.MaxOpenTraces, set.MaxSpansPerTrace),
		windows:     map[int64]*model.Window{},
		names:       span.NewNames(),
		compactAt:   set.MaxNames,
		book:        stitch.NewAddressBook(set.MaxAddresses),
		links:       newLinkBook(),
		byID:        map[uint64]int32{},
		countCalls:  set.CountCalls,
		observer:    set.Observer,
		openWindows: set.OpenWindows,
	}
}

// Open gives the engine the store it flushes to.
func (e *Engine) Open(st store.Store) { e.st = st }

func (e *Engine) now() time.Time { return e.set.Now() }

func (e *Engine) limits() model.Limits { return e.set.Limits }

// ClosedBefore is where the windows this instance has closed end.
func (e *Engine) ClosedBefore() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closedBefore
}

// LastFlush is when the last flush ended (unix seconds).
func (e *Engine) LastFlush() int64 { return e.lastFlush.Load() }

// FlushFailed reports whether the last flush failed.
func (e *Engine) FlushFailed() bool { return e.flushFailed.Load() }

// Recovered reports, once, that a flush succeeded after one failed.
func (e *Engine) Recovered() bool { return e.flushFailed.Swap(false) }

// Expire completes the traces whose wait has ended by now.
func (e *Engine) Expire(now time.Time) {
	e.mu.Lock()
	e.asm.Expire(now.UnixNano(), e.emit)
	e.countAssembler()
	e.mu.Unlock()
}

// OpenTraces is how many traces are being assembled.
func (e *Engine) OpenTraces() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.asm.Open()
}

// CompletedEarly is how many traces the max_open_traces bound completed.
func (e *Engine) CompletedEarly() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.asm.CompletedEarly
}

// CompleteAll adds every trace being assembled to the model now.
func (e *Engine) CompleteAll() {
	e.mu.Lock()
	e.asm.Flush(e.emit)
	e.countAssembler()
	e.mu.Unlock()
}

// machineOf names the machine of a resource: host.name, else the configured
// host_name (the collector's own host, when it and the applications share
// one), else service.instance.id.
func (e *Engine) machineOf(res pcommon.Map) string {
	if m := attrString(res, "host.name"); m != "" {
		return m
	}
	if e.set.HostName != "" {
		return e.set.HostName
	}
	return attrString(res, "service.instance.id")
}

// resolvePeers learns, from CLIENT spans answered by a SERVER span of the
// trace, which service answers at each address, and names the callee of
// unanswered CLIENT spans by it (docs/design.md, "Who is the peer?"), so an
// uninstrumented hop or a lost context does not turn a known service into an
// address node (e.mu held).
func (e *Engine) resolvePeers(spans []span.Span) {
	names := e.names
	clear(e.byID)
	for i := range spans {
		e.byID[spans[i].ID] = int32(i)
	}
	if cap(e.answeredBy) < len(spans) {
		e.answeredBy = make([]int32, len(spans))
	}
	answeredBy := e.answeredBy[:len(spans)]
	for i := range answeredBy {
		answeredBy[i] = -1
	}
	for i := range spans {
		s := &spans[i]
		if s.Kind != span.KindServer || s.ParentID == 0 {
			continue
		}
		if p, ok := e.byID[s.ParentID]; ok && spans[p].Kind == span.KindClient {
			address := names.Name(spans[p].Endpoint)
			e.book.Learn(address, names.Name(s.Service))
			e.links.learn(names.Name(spans[p].Service), names.Name(s.Service), address)
			answeredBy[p] = int32(i)
		}
	}
	for i := range spans {
		s := &spans[i]
		if s.Kind != span.KindClient || s.Endpoint < 0 || answeredBy[i] >= 0 {
			continue
		}
		address := names.Name(s.Endpoint)
		if !s.Database {
			if svc := e.book.Resolve(address); svc != "" {
				s.Peer = names.ID(svc)
			}
		}
		e.links.learn(names.Name(s.Service), names.Name(s.Peer), address)
	}
}

// countLinkCalls counts the trace's request under the front transaction it
// serves, each SERVER span on the request's synchronous path, and each
// CLIENT span on it as a call on its caller→callee link (e.mu held; after
// resolvePeers, whose scratch it reads).
func (e *Engine) countLinkCalls(spans []span.Span) {
	names := e.names
	front := -1
	for i := range spans {
		if s := &spans[i]; s.Kind == span.KindServer && s.Transaction >= 0 && e.observer.IsFront(s, names) &&
			(front < 0 || s.Start < spans[front].Start) {
			front = i
		}
	}
	if front < 0 || !e.links.countRequest(names.Name(spans[front].Service), names.Name(spans[front].Transaction)) {
		return
	}
	tx := names.Name(spans[front].Transaction)
	e.markSyncPaths(spans, front)
	for i := range spans {
		s := &spans[i]
		if e.syncPath[i] != pathSync {
			continue
		}
		switch s.Kind {
		case span.KindServer:
			e.links.countServer(names.Name(s.Service), tx)
		case span.KindClient:
			callee := s.Peer
			if a := e.answeredBy[i]; a >= 0 {
				callee = spans[a].Service
			}
			e.links.countCall(names.Name(s.Service), names.Name(callee), names.Name(s.Endpoint), tx)
		}
	}
}

// Whether a span descends from the front span through spans that wait for
// their children (markSyncPaths).
const (
	pathUnknown int8 = iota
	pathSync
	pathOff
)

// markSyncPaths fills e.syncPath: pathSync for the spans below the front
// span with no PRODUCER or CONSUMER between (a queue on the path), pathOff
// for the rest. Each span's chain is walked once: O(spans).
func (e *Engine) markSyncPaths(spans []span.Span, front int) {
	if cap(e.syncPath) < len(spans) {
		e.syncPath = make([]int8, len(spans))
	}
	state := e.syncPath[:len(spans)]
	clear(state)
	state[front] = pathSync
	for i := range spans {
		chain := e.chain[:0]
		j, verdict := i, pathOff
		for len(chain) <= len(spans) {
			if state[j] != pathUnknown {
				verdict = state[j]
				break
			}
			chain = append(chain, int32(j))
			if k := spans[j].Kind; k == span.KindProducer || k == span.KindConsumer {
				break // pathOff: a queue between the front and what lies below
			}
			p, ok := e.byID[spans[j].ParentID]
			if spans[j].ParentID == 0 || !ok {
				break
			}
			j = int(p)
		}
		for _, c := range chain {
			state[c] = verdict
		}
		e.chain = chain
	}
}

// addOneWay keeps a message without context for the window's convolution
// (e.mu held).
func (e *Engine) addOneWay(ts int64, from, to string) {
	if from == "" || to == "" {
		return
	}
	start := alignDown(ts/1e9, e.window)
	if start < e.closedBefore {
		return
	}
	w := e.windowAt(start)
	if len(w.OneWay) >= e.set.MaxMessages {
		w.OneWayDropped++
		return
	}
	w.OneWay = append(w.OneWay, model.OneWayMessage{Time: ts, From: from, To: to})
}

// convolveClosing runs the convolution algorithm (paper 001 §5.2) over the
// one-way messages of every window about to close, and adds the async edges
// it finds, with their delays, to the window's service graph.
func (e *Engine) convolveClosing(final bool) {
	horizon := alignDown(e.now().Unix(), e.window) - (e.openWindows-1)*e.window
	type job struct {
		w    *model.Window
		msgs []model.OneWayMessage
	}
	var jobs []job
	e.mu.Lock()
	for _, w := range e.windows {
		if (final || w.Start < horizon) && len(w.OneWay) > 0 {
			jobs = append(jobs, job{w, w.OneWay})
			w.OneWay = nil
		}
	}
	e.mu.Unlock()
	for _, j := range jobs {
		msgs := make([]causal.OneWayMessage, len(j.msgs))
		for i, m := range j.msgs {
			msgs[i] = causal.OneWayMessage{Time: m.Time, From: m.From, To: m.To}
		}
		res, err := causal.ConvolveOneWay(msgs, causal.DefaultConvolutionConfig(e.set.AsyncQuantum))
		if err != nil {
			e.set.Logger.Debug("perfmodel: convolution of window", zap.Int64("window", j.w.Start), zap.Error(err))
			continue
		}
		e.mu.Lock()
		fromTraces := map[model.EdgeKey]bool{}
		for k := range j.w.Edges {
			fromTraces[k] = true
		}
		for _, p := range res.Patterns {
			for h, hop := range p.Hops {
				for _, d := range hop.Delays {
					j.w.AddAsyncEdge(p.Nodes[h], p.Nodes[h+1], int64(d.Delay), int64(d.Messages), fromTraces)
				}
			}
		}
		e.mu.Unlock()
	}
}

// countAssembler publishes the assembler's counters (e.mu held).
func (e *Engine) countAssembler() {
	ctx := context.Background()
	if d := e.asm.CompletedEarly - e.lastEarly; d > 0 {
		e.tel.ExporterPerfmodelTracesCompletedEarly.Add(ctx, d)
		e.lastEarly = e.asm.CompletedEarly
	}
	if d := e.asm.DroppedSpans - e.lastDropped; d > 0 {
		e.tel.ExporterPerfmodelSpansDropped.Add(ctx, d)
		e.lastDropped = e.asm.DroppedSpans
	}
}

// emit adds one complete trace to the window its root started in (e.mu held).
func (e *Engine) emit(spans []span.Span) {
	ctx := context.Background()
	root := 0
	for i := range spans {
		if spans[i].Start < spans[root].Start {
			root = i
		}
	}
	start := alignDown(spans[root].Start/1e9, e.window)
	if start < e.closedBefore {
		e.tel.ExporterPerfmodelLateSpans.Add(ctx, int64(len(spans)))
		return
	}
	w := e.windowAt(start)
	e.resolvePeers(spans)
	if e.countCalls {
		e.countLinkCalls(spans)
	}
	for i := range spans {
		if spans[i].Kind == span.KindServer {
			e.observer.Observe(spans, e.names, i)
		}
	}
	of := w.AddTrace(spans, e.names)
	e.countFlows(spans, w)
	e.tel.ExporterPerfmodelTracesCompleted.Add(ctx, 1)
	if n := of.Services + of.Edges + of.Patterns + of.Signatures + e.links.takeOverflow(); n > 0 {
		e.tel.ExporterPerfmodelOverflow.Add(ctx, n)
	}
}

// countFlows counts each SERVER span's request in the window its span started
// in, not its root's (e.mu held): a process's CPU reading of a window pairs
// with the requests it served then, and a deep or queued span starts seconds
// after its root under load. A span that starts before its root's window
// (clock skew) or after the current one counts in the root's.
func (e *Engine) countFlows(spans []span.Span, root *model.Window) {
	now := alignDown(e.now().Unix(), e.window)
	for i := range spans {
		w := root
		if start := alignDown(spans[i].Start/1e9, e.window); start > root.Start && start <= now {
			w = e.windowAt(start)
		}
		w.CountFlow(&spans[i], e.names)
	}
}

// Flush writes every changed window to the store, then drops the windows that
// are too old to receive more traces (all of them when final).
func (e *Engine) Flush(ctx context.Context, final bool) error {
	e.flushMu.Lock()
	defer e.flushMu.Unlock()
	e.convolveClosing(final)
	e.mu.Lock()
	horizon := alignDown(e.now().Unix(), e.window) - (e.openWindows-1)*e.window
	var recs []store.Record
	var written, closing []*model.Window
	for _, w := range e.windows {
		closes := final || w.Start < horizon
		if !w.Dirty && !closes {
			continue
		}
		if w.Dirty {
			rs, err := w.Records()
			if err != nil {
				e.mu.Unlock()
				return err
			}
			for _, r := range rs {
				recs = append(recs, store.Record{Kind: r.Kind, Key: r.Key, Shard: e.shard, WindowStart: w.Start, Resolution: e.window, Payload: r.Payload})
			}
			// Which shards wrote which windows: a query trusts an hour's
			// rollups only when all of them have rolled it up.
			recs = append(recs, store.Record{Kind: query.ShardWindowKind, Key: e.shard, Shard: e.shard, WindowStart: w.Start, Resolution: e.window, Payload: []byte("1")})
			w.Dirty = false
			written = append(written, w)
		}
		if closes {
			closing = append(closing, w)
		}
	}
	e.tel.ExporterPerfmodelOpenTraces.Add(ctx, e.openTracesDelta())
	e.mu.Unlock()

	if len(recs) > 0 {
		if err := e.st.Put(ctx, recs); err != nil {
			e.mu.Lock()
			for _, w := range written {
				w.Dirty = true
			}
			e.mu.Unlock()
			e.flushFailed.Store(true)
			e.tel.ExporterPerfmodelFlushErrors.Add(ctx, 1)
			return fmt.Errorf("perfmodel: writing %d records to the store: %w", len(recs), err)
		}
		e.tel.ExporterPerfmodelFlushedRecords.Add(ctx, int64(len(recs)))
		// Late traces (after a restart, or from a skewed clock) may land in
		// windows a query has cached as settled.
		settled := e.set.SettledBefore()
		if slices.ContainsFunc(written, func(w *model.Window) bool { return w.Start < settled }) {
			e.set.Invalidate()
		}
	}
	e.mu.Lock()
	for _, w := range closing {
		if !w.Dirty { // a trace may have arrived during Put
			delete(e.windows, w.Start)
			e.closedBefore = max(e.closedBefore, w.Start+e.window)
		}
	}
	e.mu.Unlock()
	e.lastFlush.Store(e.now().Unix())
	return nil
}

// openTracesDelta is the change of the open-traces up-down counter since it
// was last reported (e.mu held).
func (e *Engine) openTracesDelta() int64 {
	v := int64(e.asm.Open())
	d := v - e.openReported
	e.openReported = v
	return d
}

// Maintain applies retention and downsampling.
func (e *Engine) Maintain(ctx context.Context, now time.Time) error {
	var errs []error
	if after := e.set.DownsampleAfter; after > 0 {
		to := int64(e.set.DownsampleTo / time.Second)
		for _, kind := range query.StatKinds {
			if _, err := e.st.Downsample(ctx, kind, now.Add(-after).Unix(), to, model.Merge); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if r := e.set.Retention; r > 0 {
		if _, err := e.st.DeleteBefore(ctx, "", now.Add(-r).Unix()); err != nil {
			errs = append(errs, err)
		}
	}
	// Deleted and re-resolved windows must not be answered from memory.
	e.set.Invalidate()
	return errors.Join(errs...)
}

func alignDown(t, r int64) int64 { return timegrid.AlignDown(t, r) }

func attrString(m pcommon.Map, key string) string {
	if v, ok := m.Get(key); ok {
		return v.AsString()
	}
	return ""
}

// windowAt is the open window that starts at start, made when absent (e.mu
// held).
func (e *Engine) windowAt(start int64) *model.Window {
	w, ok := e.windows[start]
	if !ok {
		w = model.NewWindow(start, e.limits())
		e.windows[start] = w
	}
	return w
}
