package perfmodelexporter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/tierscope/tierscope/exporter/perfmodelexporter/internal/metadata"
	"github.com/tierscope/tierscope/internal/causal"
	"github.com/tierscope/tierscope/internal/model"
	"github.com/tierscope/tierscope/internal/span"
	"github.com/tierscope/tierscope/internal/stitch"
	"github.com/tierscope/tierscope/internal/store"
	"github.com/tierscope/tierscope/internal/workfactor"
)

// engine is the model engine shared by the traces and metrics pipelines.
type engine struct {
	set    exporter.Settings
	cfg    *Config
	tel    *metadata.TelemetryBuilder
	shard  string
	window int64 // seconds
	now    func() time.Time
	// workFactorMethod is work_factors.method, parsed once (Validate checked it).
	workFactorMethod workfactor.Method

	mu      sync.Mutex
	asm     *model.Assembler
	windows map[int64]*model.Window // open windows by start
	// closedBefore: windows starting before it were flushed for the last time
	// and dropped; traces that fall in them are late.
	closedBefore int64
	lastEarly    int64
	lastDropped  int64
	book         *stitch.AddressBook // address → service, learned from answered calls
	links        *linkBook           // caller→callee → addresses, for link experiments
	countCalls   bool                // keep the link book's calls per request (linkInjectors)
	byID         map[uint64]int32    // scratch for resolvePeers
	answeredBy   []int32             // scratch for resolvePeers: the SERVER span answering each CLIENT span, or -1
	syncPath     []int8              // scratch for countLinkCalls: each span's path state
	chain        []int32             // scratch for markSyncPaths
	openReported int64

	injMu   sync.Mutex
	injHTTP *http.Client // to the injectors: experiments.client

	flushMu sync.Mutex // one flush at a time; Put runs outside mu
	st      store.Store
	srv     *http.Server
	addr    string // where the API listens, once started
	stop    chan struct{}
	done    sync.WaitGroup
	started time.Time

	lastFlush   atomic.Int64 // unix seconds
	flushFailed atomic.Bool
	experiments *experiments
	cache       *blockCache
	reported    map[string]bool // signature changes already logged (warming goroutine only)
	rolledUpTo  int64           // hours before it are rolled up (warming goroutine only)
	// openWindows is how many recent windows stay open (openWindowsOf).
	openWindows int64
	// localHost is this collector's host name, the machine of metrics whose
	// resource names none (hostmetrics scraped here) when host_name is unset.
	localHost string
}

func newEngine(set exporter.Settings, cfg *Config) (*engine, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	method, err := workfactor.ParseMethod(cfg.WorkFactors.Method)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	shard := cfg.Storage.Shard
	if shard == "" {
		shard = host + "/" + set.ID.String()
	}
	e := &engine{
		set: set, cfg: cfg, tel: tel, shard: shard, workFactorMethod: method,
		window:  int64(cfg.Window / time.Second),
		now:     time.Now,
		asm:     model.NewAssembler(int64(cfg.TraceWait), cfg.MaxOpenTraces, cfg.MaxSpansPerTrace),
		windows: map[int64]*model.Window{},
		book:    stitch.NewAddressBook(10000),
		links:   newLinkBook(),
		byID:    map[uint64]int32{},
		// A request may name its injector, but without one configured
		// the pulse is only reported, not bounded by the call counts.
		countCalls:  cfg.Experiments.linkInjectors(),
		localHost:   host,
		openWindows: openWindowsOf(cfg),
	}
	e.experiments = newExperiments(e)
	e.cache = newBlockCache()
	e.reported = map[string]bool{}
	return e, nil
}

// openWindowsOf is open_windows, raised so that the open windows span twice
// trace_wait and one window more: a trace reaches a window only trace_wait
// after its first span arrived, which itself waited upstream (the SDK's batch,
// causalpath's wait, itself shorter than trace_wait), and a trace whose
// window had closed would be lost to every model. With a 1m window this is
// open_windows as configured; with windows of a few seconds, not.
func openWindowsOf(cfg *Config) int64 {
	window := max(int64(cfg.Window/time.Second), 1)
	need := (2*int64(cfg.TraceWait/time.Second)+window-1)/window + 1
	return max(int64(cfg.OpenWindows), need)
}

func (e *engine) limits() model.Limits {
	return model.Limits{MaxServices: e.cfg.Limits.MaxServices, MaxEdges: e.cfg.Limits.MaxEdges, MaxPatterns: e.cfg.Limits.MaxPatterns}
}

// Start opens the store, starts the API server and the flush loop.
func (e *engine) Start(ctx context.Context, host component.Host) error {
	st, err := store.Open(ctx, e.cfg.Storage.DSN)
	if err != nil {
		return fmt.Errorf("perfmodel: storage.dsn: %w", err)
	}
	e.st = st
	e.started = e.now()
	ln, err := e.cfg.ToListener(ctx)
	if err != nil {
		_ = st.Close()
		return fmt.Errorf("perfmodel: endpoint %s: %w", e.cfg.NetAddr.Endpoint, err)
	}
	srv, err := e.cfg.ToServer(ctx, host.GetExtensions(), e.set.TelemetrySettings, e.handler())
	if err != nil {
		_ = ln.Close()
		_ = st.Close()
		return fmt.Errorf("perfmodel: %w", err)
	}
	if len(e.cfg.Experiments.injectorURLs()) > 0 {
		hc, err := e.cfg.Experiments.Client.ToClient(ctx, host.GetExtensions(), e.set.TelemetrySettings)
		if err != nil {
			_ = ln.Close()
			_ = st.Close()
			return fmt.Errorf("perfmodel: experiments.client: %w", err)
		}
		if hc.Timeout == 0 {
			hc.Timeout = e.cfg.Experiments.RequestTimeout
		}
		e.injMu.Lock()
		e.injHTTP = hc
		e.injMu.Unlock()
	}
	e.srv = srv
	e.stop = make(chan struct{})
	e.done.Add(2)
	go func() {
		defer e.done.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
		}
	}()
	go e.loop(host)
	e.startShared()
	e.done.Add(1)
	go func() {
		defer e.done.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-e.stop
			cancel()
		}()
		// Once at start, then every 5 minutes: warm the query cache for
		// the hours that settled, and compare new versions' signatures. Off
		// the flush loop, and cancelled by Shutdown.
		e.warm(ctx)
		tick := time.NewTicker(5 * time.Minute)
		defer tick.Stop()
		for {
			select {
			case <-e.stop:
				return
			case <-tick.C:
				e.warm(ctx)
				e.checkNewVersions(ctx)
			}
		}
	}()
	e.addr = ln.Addr().String()
	e.set.Logger.Info("perfmodel API listening", zap.String("url", "http://"+e.addr+"/api/v1/graph"), zap.String("shard", e.shard))
	return nil
}

// Shutdown completes every trace, flushes every window and closes the store.
func (e *engine) Shutdown(ctx context.Context) error {
	if e.stop == nil {
		return nil
	}
	close(e.stop)
	var errs []error
	if e.srv != nil {
		errs = append(errs, e.srv.Shutdown(ctx))
	}
	e.done.Wait()
	e.experiments.abortAll("collector shutting down")
	e.mu.Lock()
	e.asm.Flush(e.emit)
	e.mu.Unlock()
	errs = append(errs, e.flush(ctx, true))
	errs = append(errs, e.st.Close())
	e.stop = nil
	return errors.Join(errs...)
}

// loop completes traces every second, flushes every FlushInterval and runs
// retention and downsampling every hour.
func (e *engine) loop(host component.Host) {
	defer e.done.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastFlush := e.now()
	var lastMaint time.Time
	for {
		select {
		case <-e.stop:
			return
		case <-tick.C:
			now := e.now()
			e.mu.Lock()
			e.asm.Expire(now.UnixNano(), e.emit)
			e.countAssembler()
			e.mu.Unlock()
			if now.Sub(lastFlush) >= e.cfg.FlushInterval {
				lastFlush = now
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				if err := e.flush(ctx, false); err != nil {
					e.set.Logger.Warn("perfmodel: flush failed; windows kept in memory", zap.Error(err))
					componentstatus.ReportStatus(host, componentstatus.NewRecoverableErrorEvent(err))
				} else if e.flushFailed.Swap(false) {
					componentstatus.ReportStatus(host, componentstatus.NewEvent(componentstatus.StatusOK))
				}
				cancel()
			}
			if now.Sub(lastMaint) >= time.Hour {
				lastMaint = now
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				if err := e.maintain(ctx, now); err != nil {
					e.set.Logger.Warn("perfmodel: retention/downsampling failed", zap.Error(err))
				}
				cancel()
			}
		}
	}
}

// ConsumeTraces adds spans to the traces being assembled.
func (e *engine) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	now := e.now().UnixNano()
	n := 0
	e.mu.Lock()
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		res := stitch.ResourceOf(rs.Resource().Attributes())
		machine := e.machineOf(rs.Resource().Attributes())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				if sp.TraceID().IsEmpty() || sp.SpanID().IsEmpty() {
					continue
				}
				n++
				kind := stitch.KindOf(sp.Kind())
				ms := model.Span{
					SpanID:      stitch.SpanID(sp.SpanID()),
					ParentID:    stitch.SpanID(sp.ParentSpanID()),
					Service:     res.Service,
					Kind:        kind,
					Start:       int64(sp.StartTimestamp()),
					End:         int64(sp.EndTimestamp()),
					Error:       sp.Status().Code() == ptrace.StatusCodeError,
					Version:     res.Version,
					Machine:     machine,
					Process:     res.Process,
					Transaction: stitch.Transaction(sp, kind),
				}
				attrs := sp.Attributes()
				switch kind {
				case span.KindProducer:
					ms.Peer, ms.Database = stitch.PeerNode(attrs)
					e.addOneWay(ms.Start, ms.Service, ms.Peer)
				case span.KindConsumer:
					if sp.ParentSpanID().IsEmpty() {
						if dest, _ := stitch.PeerNode(attrs); dest != "" {
							e.addOneWay(ms.Start, dest, ms.Service)
						}
					}
				case span.KindClient:
					ms.Peer, ms.PeerAddress, ms.Database = stitch.PeerOf(attrs)
				}
				if ms.End < ms.Start {
					ms.End = ms.Start
				}
				e.asm.Add(model.TraceID(sp.TraceID()), ms, now, e.emit)
			}
		}
	}
	e.countAssembler()
	e.mu.Unlock()
	e.tel.ExporterPerfmodelSpansReceived.Add(ctx, int64(n))
	return nil
}

// completeAll adds every trace being assembled to the model now.
func (e *engine) completeAll() {
	e.mu.Lock()
	e.asm.Flush(e.emit)
	e.countAssembler()
	e.mu.Unlock()
}

// machineOf names the machine of a resource: host.name, else the configured
// host_name (the collector's own host, when it and the applications share
// one), else service.instance.id.
func (e *engine) machineOf(res pcommon.Map) string {
	if m := attrString(res, "host.name"); m != "" {
		return m
	}
	if e.cfg.HostName != "" {
		return e.cfg.HostName
	}
	return attrString(res, "service.instance.id")
}

// resolvePeers learns, from CLIENT spans answered by a SERVER span of the
// trace, which service answers at each address, and names the callee of
// unanswered CLIENT spans by it (docs/design.md, "Who is the peer?"), so an
// uninstrumented hop or a lost context does not turn a known service into an
// address node (e.mu held).
func (e *engine) resolvePeers(spans []model.Span) {
	clear(e.byID)
	for i := range spans {
		e.byID[spans[i].SpanID] = int32(i)
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
		if s.Kind != model.KindServer || s.ParentID == 0 {
			continue
		}
		if p, ok := e.byID[s.ParentID]; ok && spans[p].Kind == model.KindClient {
			e.book.Learn(spans[p].PeerAddress, s.Service)
			e.links.learn(spans[p].Service, s.Service, spans[p].PeerAddress)
			answeredBy[p] = int32(i)
		}
	}
	for i := range spans {
		s := &spans[i]
		if s.Kind != model.KindClient || s.PeerAddress == "" || answeredBy[i] >= 0 {
			continue
		}
		if !s.Database {
			if svc := e.book.Resolve(s.PeerAddress); svc != "" {
				s.Peer = svc
			}
		}
		e.links.learn(s.Service, s.Peer, s.PeerAddress)
	}
}

// countLinkCalls counts the trace's request under the front transaction it
// serves, each SERVER span on the request's synchronous path, and each
// CLIENT span on it as a call on its caller→callee link (e.mu held; after
// resolvePeers, whose scratch it reads).
func (e *engine) countLinkCalls(spans []model.Span) {
	front := -1
	for i := range spans {
		if s := &spans[i]; s.Kind == model.KindServer && s.Transaction != "" && e.experiments.isFront(s) &&
			(front < 0 || s.Start < spans[front].Start) {
			front = i
		}
	}
	if front < 0 || !e.links.countRequest(spans[front].Service, spans[front].Transaction) {
		return
	}
	tx := spans[front].Transaction
	e.markSyncPaths(spans, front)
	for i := range spans {
		s := &spans[i]
		if e.syncPath[i] != pathSync {
			continue
		}
		switch s.Kind {
		case model.KindServer:
			e.links.countServer(s.Service, tx)
		case model.KindClient:
			callee := s.Peer
			if a := e.answeredBy[i]; a >= 0 {
				callee = spans[a].Service
			}
			e.links.countCall(s.Service, callee, s.PeerAddress, tx)
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
func (e *engine) markSyncPaths(spans []model.Span, front int) {
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
			if k := spans[j].Kind; k == model.KindProducer || k == model.KindConsumer {
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
func (e *engine) addOneWay(ts int64, from, to string) {
	if from == "" || to == "" {
		return
	}
	start := alignDown(ts/1e9, e.window)
	if start < e.closedBefore {
		return
	}
	w, ok := e.windows[start]
	if !ok {
		w = model.NewWindow(start, e.limits())
		e.windows[start] = w
	}
	if len(w.OneWay) >= e.cfg.Async.MaxMessages {
		w.OneWayDropped++
		return
	}
	w.OneWay = append(w.OneWay, model.OneWayMessage{Time: ts, From: from, To: to})
}

// convolveClosing runs the convolution algorithm (paper 001 §5.2) over the
// one-way messages of every window about to close, and adds the async edges
// it finds, with their delays, to the window's service graph.
func (e *engine) convolveClosing(final bool) {
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
		res, err := causal.ConvolveOneWay(msgs, causal.DefaultConvolutionConfig(e.cfg.Async.Quantum))
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
func (e *engine) countAssembler() {
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
func (e *engine) emit(spans []model.Span) {
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
	w, ok := e.windows[start]
	if !ok {
		w = model.NewWindow(start, e.limits())
		e.windows[start] = w
	}
	e.resolvePeers(spans)
	if e.countCalls {
		e.countLinkCalls(spans)
	}
	for i := range spans {
		if spans[i].Kind == model.KindServer {
			e.experiments.observe(spans, i)
		}
	}
	of := w.AddTrace(spans)
	e.tel.ExporterPerfmodelTracesCompleted.Add(ctx, 1)
	if n := of.Services + of.Edges + of.Patterns + of.Signatures + e.links.takeOverflow(); n > 0 {
		e.tel.ExporterPerfmodelOverflow.Add(ctx, n)
	}
}

// flush writes every changed window to the store, then drops the windows that
// are too old to receive more traces (all of them when final).
func (e *engine) flush(ctx context.Context, final bool) error {
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
			recs = append(recs, store.Record{Kind: shardWindowKind, Key: e.shard, Shard: e.shard, WindowStart: w.Start, Resolution: e.window, Payload: []byte("1")})
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
		settled := e.settledBefore()
		if slices.ContainsFunc(written, func(w *model.Window) bool { return w.Start < settled }) {
			e.cache.reset()
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
func (e *engine) openTracesDelta() int64 {
	v := int64(e.asm.Open())
	d := v - e.openReported
	e.openReported = v
	return d
}

// maintain applies retention and downsampling.
func (e *engine) maintain(ctx context.Context, now time.Time) error {
	var errs []error
	if after := e.cfg.Storage.DownsampleAfter; after > 0 {
		to := int64(e.cfg.Storage.DownsampleTo / time.Second)
		for _, kind := range statKinds {
			if _, err := e.st.Downsample(ctx, kind, now.Add(-after).Unix(), to, model.Merge); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if r := e.cfg.Storage.Retention; r > 0 {
		if _, err := e.st.DeleteBefore(ctx, "", now.Add(-r).Unix()); err != nil {
			errs = append(errs, err)
		}
	}
	// Deleted and re-resolved windows must not be answered from memory.
	e.cache.reset()
	return errors.Join(errs...)
}

// statKinds are the windowed statistics that downsampling merges.
var statKinds = []string{model.KindGraphNode, model.KindGraphEdge, model.KindPath, model.KindTraces, model.KindCPU, model.KindSpanRates, model.KindSigWindow}

func alignDown(t, r int64) int64 {
	m := t % r
	if m < 0 {
		m += r
	}
	return t - m
}

func attrString(m pcommon.Map, key string) string {
	if v, ok := m.Get(key); ok {
		return v.AsString()
	}
	return ""
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
