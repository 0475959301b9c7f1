package blackboxreceiver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/afpacket"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/bpffilter"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/engine"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/framing"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/metadata"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/nsenter"
	"github.com/tierscope/tierscope/receiver/blackboxreceiver/internal/tcpreasm"
)

// tickEvery is how often time-driven work runs (holes, idle flows, quiet
// responses, telemetry).
const tickEvery = 100 * time.Millisecond

// callSpans turns framed calls into spans. It is shared by the live capture
// and the tests and benchmarks that feed the engine directly.
type callSpans struct {
	svc            *services
	routes         []route
	client, server bool
	pair           bool
	source         string
	seq            uint64 // calls so far, to name independent clients' calls
}

func newCallSpans(cfg *CaptureConfig, svc *services) (*callSpans, error) {
	routes, err := compileRoutes(cfg.Routes)
	if err != nil {
		return nil, err
	}
	client, server, err := parseSpanKinds(cfg.Spans)
	if err != nil {
		return nil, err
	}
	return &callSpans{svc: svc, routes: routes, client: client, server: server, pair: cfg.PairSpans, source: "capture"}, nil
}

// add appends the CLIENT and SERVER spans of one call to b. The CLIENT span
// runs from the first byte of the request to the last byte of the response as
// captured, the SERVER span from the last byte of the request to the first of
// the response, so that it nests in its CLIENT span and encloses the calls the
// server made meanwhile.
func (cs *callSpans) add(b *batch, c engine.Call) {
	srv := cs.svc.server(c.Server)
	cs.seq++
	cli := cs.svc.client(c.Client, cs.seq)
	name := srv.service + ":" + strconv.Itoa(int(c.Server.Port()))
	var path, route string
	if c.Protocol == framing.HTTP {
		path = c.Target
		if i := strings.IndexAny(path, "?#"); i >= 0 {
			path = path[:i]
		}
		if strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://") {
			if i := strings.Index(path[8:], "/"); i >= 0 {
				path = path[8+i:]
			} else {
				path = "/"
			}
		}
		route = matchRoute(cs.routes, path)
		method := c.Method
		if method == "" {
			method = "HTTP"
		}
		if route != "" {
			name = method + " " + route
		} else if path != "" {
			name = method + " " + path
		} else {
			name = method
		}
	}
	netType := "ipv4"
	if c.Server.Addr().Is6() && !c.Server.Addr().Is4In6() {
		netType = "ipv6"
	}
	serverAddr, clientAddr := c.Server.Addr().Unmap().String(), c.Client.Addr().Unmap().String()
	common := func(sp ptrace.Span) {
		a := sp.Attributes()
		a.EnsureCapacity(20)
		a.PutStr("server.address", serverAddr)
		a.PutInt("server.port", int64(c.Server.Port()))
		a.PutStr("client.address", clientAddr)
		a.PutInt("client.port", int64(c.Client.Port()))
		a.PutStr("network.transport", "tcp")
		a.PutStr("network.type", netType)
		a.PutStr(attrSource, cs.source)
		a.PutInt(attrRequestBytes, c.ReqBytes)
		a.PutInt(attrResponseBytes, c.RespBytes)
		if c.Gap {
			a.PutBool(attrGap, true)
		}
		if c.Protocol == framing.HTTP {
			if c.Method != "" {
				a.PutStr("http.request.method", c.Method)
			}
			if path != "" {
				a.PutStr("url.path", path)
			}
			if route != "" {
				a.PutStr("http.route", route)
			}
			if c.Status > 0 {
				a.PutInt("http.response.status_code", int64(c.Status))
			}
		}
	}
	var clientSpan ptrace.Span
	if cs.client {
		sp := b.span(cli, name, ptrace.SpanKindClient, c.ReqStart, c.RespEnd)
		clientSpan = sp
		common(sp)
		a := sp.Attributes()
		a.PutStr("network.peer.address", serverAddr)
		a.PutInt("network.peer.port", int64(c.Server.Port()))
		if srv.named {
			a.PutStr("service.peer.name", srv.service)
		}
		if c.Protocol == framing.HTTP && c.Status >= 400 {
			sp.Status().SetCode(ptrace.StatusCodeError)
		}
	}
	if cs.server {
		sp := b.span(srv, name, ptrace.SpanKindServer, c.ReqEnd, c.RespStart)
		if cs.client && cs.pair {
			// Both ends of one connection were seen: the call pair is known
			// (the connection and the order of the messages on it are its call
			// identifier, paper 001 §5.1.1.1), so the SERVER span is the
			// CLIENT span's child. Which call caused which is left to causalpath.
			sp.SetTraceID(clientSpan.TraceID())
			sp.SetParentSpanID(clientSpan.SpanID())
		}
		common(sp)
		a := sp.Attributes()
		a.PutStr("network.peer.address", clientAddr)
		a.PutInt("network.peer.port", int64(c.Client.Port()))
		if c.Protocol == framing.HTTP && c.Status >= 500 {
			sp.Status().SetCode(ptrace.StatusCodeError)
		}
	}
}

// engineConfig maps the capture configuration to the engine's.
func engineConfig(cfg *CaptureConfig) engine.Config {
	def, _ := parseFraming(cfg.Framing)
	httpPorts, genericPorts := slices.Clone(cfg.HTTPPorts), slices.Clone(cfg.GenericPorts)
	var ports []uint16
	for _, p := range cfg.points() {
		ports = append(ports, p.Ports...)
	}
	return engine.Config{
		Flows: tcpreasm.Config{
			MaxFlows: cfg.MaxFlows, MaxFlowBuffer: cfg.MaxFlowBuffer, MaxTotalBuffer: cfg.MaxBuffer,
			GapTimeout: cfg.GapTimeout.Nanoseconds(), IdleTimeout: cfg.IdleTimeout.Nanoseconds(),
			IsServer: func(ap netip.AddrPort) bool {
				p := ap.Port()
				return slices.Contains(ports, p) || slices.Contains(httpPorts, p) || slices.Contains(genericPorts, p)
			},
		},
		Limits: framing.Limits{MaxHeader: cfg.MaxHeader, Quiet: cfg.Quiet.Nanoseconds()},
		Protocol: func(server netip.AddrPort) framing.Protocol {
			switch {
			case slices.Contains(httpPorts, server.Port()):
				return framing.HTTP
			case slices.Contains(genericPorts, server.Port()):
				return framing.Generic
			}
			return def
		},
	}
}

// captureSource is the live capture: one goroutine per capture point reads
// its socket and feeds its own engine; all points append their spans to one
// shared batch, so that a call seen at one point and the call it made, seen
// at another, reach the pipeline together (callees first), as causalpath
// expects of one process's spans.
type captureSource struct {
	cfg    *CaptureConfig
	spans  *callSpans
	em     *emitter
	tb     *metadata.TelemetryBuilder
	logger *zap.Logger
	points []*capturePoint

	mu        sync.Mutex // guards pending and lastFlush
	pending   []engine.Call
	rng       *rand.Rand // used by the emitter's goroutine only, as spans is
	lastFlush time.Time

	stop chan struct{}
	wg   sync.WaitGroup
}

// capturePoint is one socket and its engine.
type capturePoint struct {
	src    *captureSource
	point  CapturePoint
	handle *afpacket.Handle
	eng    *engine.Engine

	prev     engine.Stats
	prevHeld int
	prevFlow int
	drops    uint64
}

func newCaptureSource(cfg *CaptureConfig, svc *services, em *emitter, tb *metadata.TelemetryBuilder, logger *zap.Logger) (*captureSource, error) {
	spans, err := newCallSpans(cfg, svc)
	if err != nil {
		return nil, err
	}
	return &captureSource{cfg: cfg, spans: spans, em: em, tb: tb, logger: logger,
		rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())), stop: make(chan struct{})}, nil
}

func (c *captureSource) start() error {
	c.lastFlush = time.Now()
	for _, pt := range c.cfg.points() {
		hosts, err := pt.filterHosts()
		if err != nil {
			return err
		}
		filter, err := bpffilter.Compile(pt.Ports, hosts, uint32(c.cfg.Snaplen))
		if err != nil {
			return err
		}
		p := &capturePoint{src: c, point: pt}
		err = nsenter.Do(pt.NetworkNamespace, func() (err error) {
			p.handle, err = afpacket.Open(afpacket.Config{
				Interface: pt.Interface, Snaplen: c.cfg.Snaplen, BufferSize: c.cfg.SocketBuffer,
				Filter: filter, Timeout: tickEvery, NoRing: !c.cfg.Ring,
			})
			return err
		})
		if err != nil {
			c.closeHandles()
			return fmt.Errorf("blackbox capture (namespace %q, interface %q): %w", pt.NetworkNamespace, pt.Interface, err)
		}
		p.eng = engine.New(engineConfig(c.cfg), func(call engine.Call) {
			c.mu.Lock()
			c.pending = append(c.pending, call)
			c.mu.Unlock()
		})
		c.points = append(c.points, p)
	}
	for _, p := range c.points {
		c.wg.Add(1)
		go p.loop()
	}
	return nil
}

func (c *captureSource) closeHandles() {
	for _, p := range c.points {
		_ = p.handle.Close()
	}
	c.points = nil
}

// flush sends, every FlushInterval (or at once when always), the calls that
// ended ReorderWindow ago or earlier, as spans. Calls leave in the order of
// their ends, not of their framing: a call seen at one point never leaves
// before the calls it made, seen at another point whose socket was read a
// little later, so that causalpath gets a process's spans callees first.
// Beyond MaxBatch×4 waiting calls the oldest leave early.
func (c *captureSource) flush(now time.Time, always bool) {
	c.mu.Lock()
	if !always && now.Sub(c.lastFlush) < c.cfg.FlushInterval && len(c.pending) < 4*c.cfg.MaxBatch {
		c.mu.Unlock()
		return
	}
	c.lastFlush = now
	watermark := now.Add(-c.cfg.ReorderWindow).UnixNano()
	slices.SortStableFunc(c.pending, func(a, b engine.Call) int { return cmp.Compare(a.RespEnd, b.RespEnd) })
	n := len(c.pending)
	if !always {
		n, _ = slices.BinarySearchFunc(c.pending, watermark+1, func(a engine.Call, t int64) int { return cmp.Compare(a.RespEnd, t) })
		n = max(n, len(c.pending)-4*c.cfg.MaxBatch)
	}
	var out []*batch
	for i := 0; i < n; i += c.cfg.MaxBatch {
		calls := slices.Clone(c.pending[i:min(n, i+c.cfg.MaxBatch)])
		spans := len(calls)
		if c.spans.client && c.spans.server {
			spans *= 2
		}
		// The spans are made on the emitter's goroutine, one at a time, so
		// callSpans and rng need no lock there.
		out = append(out, &batch{n: spans, build: func() *batch {
			b := newBatch(c.rng)
			for _, call := range calls {
				c.spans.add(b, call)
			}
			return b
		}})
	}
	c.pending = append(c.pending[:0], c.pending[n:]...)
	c.mu.Unlock()
	for _, b := range out {
		c.em.send(b)
	}
}

func (p *capturePoint) loop() {
	c := p.src
	defer c.wg.Done()
	defer p.handle.Close()
	lastTick, lastFlush := time.Now(), time.Now()
	for {
		select {
		case <-c.stop:
			p.eng.CloseAll(time.Now().UnixNano())
			p.telemetry()
			return
		default:
		}
		pkt, ts, _, err := p.handle.Read()
		switch {
		case err == nil:
			p.eng.Packet(ts, pkt)
		case errors.Is(err, afpacket.ErrTimeout):
		default:
			c.logger.Error("capture socket failed; this capture point stops",
				zap.String("network_namespace", p.point.NetworkNamespace), zap.String("interface", p.point.Interface), zap.Error(err))
			<-c.stop
			return
		}
		now := time.Now()
		if now.Sub(lastTick) >= tickEvery {
			lastTick = now
			p.eng.Tick(now.UnixNano())
			p.telemetry()
		}
		if now.Sub(lastFlush) >= 10*time.Millisecond {
			lastFlush = now
			c.flush(now, false)
		}
	}
}

// telemetry adds what changed since the last call to the self-metrics.
func (p *capturePoint) telemetry() {
	ctx := context.Background()
	st := p.eng.Stats()
	prev := p.prev
	tb := p.src.tb
	tb.ReceiverBlackboxPackets.Add(ctx, int64(st.Packets-prev.Packets))
	tb.ReceiverBlackboxPacketsMalformed.Add(ctx, int64(st.Malformed-prev.Malformed))
	tb.ReceiverBlackboxGaps.Add(ctx, int64(st.Flows.Gaps-prev.Flows.Gaps))
	tb.ReceiverBlackboxGapBytes.Add(ctx, int64(st.Flows.GapBytes-prev.Flows.GapBytes))
	tb.ReceiverBlackboxFlowsEvicted.Add(ctx, int64(st.Flows.FlowsEvicted-prev.Flows.FlowsEvicted))
	tb.ReceiverBlackboxCalls.Add(ctx, int64(st.Framing.Calls-prev.Framing.Calls))
	tb.ReceiverBlackboxFramingErrors.Add(ctx, int64(st.Framing.Malformed-prev.Framing.Malformed))
	tb.ReceiverBlackboxUnanswered.Add(ctx, int64(st.Framing.Unanswered-prev.Framing.Unanswered))
	p.prev = st
	flows, held := p.eng.Flows(), p.eng.Held()
	tb.ReceiverBlackboxFlows.Add(ctx, int64(flows-p.prevFlow))
	tb.ReceiverBlackboxHeldBytes.Add(ctx, int64(held-p.prevHeld))
	p.prevFlow, p.prevHeld = flows, held
	if _, drops, err := p.handle.Stats(); err == nil && drops > p.drops {
		tb.ReceiverBlackboxPacketsDropped.Add(ctx, int64(drops-p.drops))
		p.drops = drops
	}
}

func (c *captureSource) shutdown(ctx context.Context) error {
	if len(c.points) == 0 {
		return nil
	}
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.flush(time.Now(), true)
	return nil
}
