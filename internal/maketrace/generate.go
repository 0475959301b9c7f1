package maketrace

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tierscope/tierscope/internal/causal"
)

// MaxMessages bounds a generated trace (32 bytes a message) so that a mistyped duration
// or think time fails fast instead of exhausting memory.
const MaxMessages = 100_000_000

// Options are the per-invocation settings of Generate.
type Options struct {
	Seed        uint64
	Duration    time.Duration // 0 uses the config's duration
	DropRate    float64       // target fraction of messages the sniffer drops, in [0, 1); 0 = no sniffer
	CaptureRate float64       // explicit sniffer peak rate in messages/s; overrides DropRate when > 0
	Queue       int           // sniffer queue length, counting the message in service; 0 = DefaultQueue
	Skews       []Skew        // per-node clock offsets applied after the sniffer
}

// Skew is a clock offset for the messages a node sends.
type Skew struct {
	Node   string
	Offset time.Duration
}

// ParseSkew parses "NODE=+30ms" or "NODE=-5ms". The node name is everything before the
// last '=', so names that contain '=' still work.
func ParseSkew(s string) (Skew, error) {
	i := strings.LastIndexByte(s, '=')
	if i < 0 {
		return Skew{}, fmt.Errorf("skew %q: expected NODE=OFFSET, such as WS2=+30ms", s)
	}
	node, off := s[:i], s[i+1:]
	if err := checkNodeName(node); err != nil {
		return Skew{}, fmt.Errorf("skew %q: %v", s, err)
	}
	d, err := time.ParseDuration(off)
	if err != nil {
		return Skew{}, fmt.Errorf("skew %q: invalid offset %q (use a Go duration such as +30ms or -5ms)", s, off)
	}
	return Skew{Node: node, Offset: d}, nil
}

// Stats summarises a generated trace.
type Stats struct {
	Messages        int            // messages in the returned trace (after drops)
	Runs            int            // tracelet runs (path instances) generated
	Dropped         int            // messages the sniffer dropped
	CaptureRate     float64        // sniffer peak rate used, messages/s; 0 when there was no sniffer
	RunsPerTracelet map[string]int // runs by tracelet name
}

// gauss is a Gaussian in float nanoseconds.
type gauss struct{ mean, std float64 }

type callerDelay struct {
	caller int32
	g      gauss
}

// mixture is a multi-modal delay: a mode is picked with the cumulative weights, then
// sampled.
type mixture struct {
	modes []gauss
	cum   []float64
}

func toMixture(modes []Mode) *mixture {
	m := &mixture{}
	sum := 0.0
	for _, x := range modes {
		sum += x.Weight
	}
	acc := 0.0
	for _, x := range modes {
		m.modes = append(m.modes, toGauss(x.Gaussian))
		acc += x.Weight / sum
		m.cum = append(m.cum, acc)
	}
	m.cum[len(m.cum)-1] = 1
	return m
}

// ccall is a Call compiled for generation: node names become small indices and the
// weights a cumulative table, so the hot loop neither hashes nor allocates.
type ccall struct {
	to       []int32
	cum      []float64 // cumulative normalised weights; nil for a single callee
	delay    gauss
	delayMix *mixture // set when the delay is multi-modal; overrides delay
	hasDelay bool     // the config wrote a delay, so no forwarding delay applies
	byCaller []callerDelay
	reply    gauss
	parallel bool
	oneway   bool
	calls    []*ccall
}

type ctracelet struct {
	name      string
	instances int
	thinkMin  int64
	thinkSpan int64 // max - min
	from      int32
	root      *ccall
}

// compiler assigns node indices in first-seen order.
type compiler struct {
	names []string
	index map[string]int32
}

func (c *compiler) node(name string) int32 {
	if i, ok := c.index[name]; ok {
		return i
	}
	i := int32(len(c.names))
	c.names = append(c.names, name)
	c.index[name] = i
	return i
}

func toGauss(g Gaussian) gauss { return gauss{float64(g.Mean), float64(g.Std)} }

func (c *compiler) call(in *Call) *ccall {
	out := &ccall{delay: toGauss(in.Delay), reply: toGauss(in.Reply), parallel: in.Parallel, oneway: in.OneWay, hasDelay: in.HasDelay}
	if in.DelayModes != nil {
		out.delayMix = toMixture(in.DelayModes)
	}
	for _, t := range in.To {
		out.to = append(out.to, c.node(t))
	}
	if len(in.To) > 1 {
		w := in.Weights
		if w == nil {
			w = make([]float64, len(in.To))
			for i := range w {
				w[i] = 1
			}
		}
		sum := 0.0
		for _, x := range w {
			sum += x
		}
		acc := 0.0
		for _, x := range w {
			acc += x / sum
			out.cum = append(out.cum, acc)
		}
		out.cum[len(out.cum)-1] = 1 // guard against rounding leaving a gap at the top
	}
	// Sorted by caller name so that compilation does not depend on map order.
	callers := make([]string, 0, len(in.DelayByCaller))
	for k := range in.DelayByCaller {
		callers = append(callers, k)
	}
	slices.Sort(callers)
	for _, k := range callers {
		out.byCaller = append(out.byCaller, callerDelay{c.node(k), toGauss(in.DelayByCaller[k])})
	}
	for _, ch := range in.Calls {
		out.calls = append(out.calls, c.call(ch))
	}
	return out
}

// instance is one closed-loop client: its own random stream and next start time.
type instance struct {
	next     int64 // ns since t=0 of its next run
	tracelet int32
	index    int32
	rng      *rand.Rand
}

// less orders instances by next start, then by tracelet and instance index, so that the
// global path and call counters are assigned in a deterministic order.
func (a *instance) less(b *instance) bool {
	if a.next != b.next {
		return a.next < b.next
	}
	if a.tracelet != b.tracelet {
		return a.tracelet < b.tracelet
	}
	return a.index < b.index
}

type gen struct {
	forward  []*mixture           // per node index: forwarding delay of its one-way sends, or nil
	last     int64                // latest message time of the current run
	b        *causal.TraceBuilder // interns node names
	msgs     []causal.Message     // owned here, not Add-ed, so it can be sized up front
	names    []string
	ids      []causal.NodeID // interned lazily so the trace lists only nodes that occur
	start    int64           // ns of t=0
	callIDs  bool
	nextCall int64
	path     uint32
	rng      *rand.Rand
}

func (g *gen) node(i int32) causal.NodeID {
	if g.ids[i] < 0 {
		g.ids[i] = g.b.Node([]byte(g.names[i]))
	}
	return g.ids[i]
}

func (g *gen) sample(d gauss) int64 {
	if d.std == 0 {
		return int64(d.mean + 0.5)
	}
	x := d.mean + d.std*g.rng.NormFloat64()
	if x <= 0 {
		return 0
	}
	return int64(x + 0.5)
}

func (g *gen) choose(c *ccall) int32 {
	if c.cum == nil {
		return c.to[0]
	}
	u := g.rng.Float64()
	for i, w := range c.cum {
		if u < w {
			return c.to[i]
		}
	}
	return c.to[len(c.to)-1]
}

// delay samples the delay before c when its caller is caller: delay_by_caller first,
// then the call's own delay (multi-modal or not), then, for a one-way call without
// one, the caller's forwarding delay. Configs without mixtures or one-way calls draw
// exactly the random numbers they always drew.
func (g *gen) delay(c *ccall, caller int32) int64 {
	for _, bc := range c.byCaller {
		if bc.caller == caller {
			return g.sample(bc.g)
		}
	}
	if c.delayMix != nil {
		return g.sampleMix(c.delayMix)
	}
	if c.oneway && !c.hasDelay && g.forward != nil && g.forward[caller] != nil {
		return g.sampleMix(g.forward[caller])
	}
	return g.sample(c.delay)
}

func (g *gen) sampleMix(m *mixture) int64 {
	if len(m.modes) == 1 {
		return g.sample(m.modes[0])
	}
	u := g.rng.Float64()
	for i, w := range m.cum {
		if u < w {
			return g.sample(m.modes[i])
		}
	}
	return g.sample(m.modes[len(m.modes)-1])
}

// send emits the one-way message caller→callee sent at t and everything the callee
// sends on because of it: serial children follow one another (a one-way child
// takes no time of its sender's; an RPC child takes until its return), parallel
// children all start from t. The sender does not wait, so it returns t.
func (g *gen) send(c *ccall, caller, callee int32, t int64) int64 {
	from, to := g.node(caller), g.node(callee)
	g.msgs = append(g.msgs, causal.Message{Time: g.start + t, Sender: from, Receiver: to, PathID: g.path, Op: causal.OpMessage})
	g.last = max(g.last, t)
	cursor := t
	for _, ch := range c.calls {
		cb := g.choose(ch)
		if c.parallel {
			g.call(ch, callee, cb, t+g.delay(ch, callee))
		} else {
			cursor = g.call(ch, callee, cb, cursor+g.delay(ch, callee))
		}
	}
	return t
}

// call emits the RPC caller→callee sent at t, everything the callee does to handle it,
// and its return; it returns the return's time. A one-way call is emitted by send.
func (g *gen) call(c *ccall, caller, callee int32, t int64) int64 {
	if c.oneway {
		return g.send(c, caller, callee, t)
	}
	var id uint32
	if g.callIDs {
		g.nextCall++
		id = uint32(g.nextCall) // the table is filled in at the end by numbered
	}
	from, to := g.node(caller), g.node(callee)
	g.msgs = append(g.msgs, causal.Message{Time: g.start + t, Sender: from, Receiver: to, CallID: id, PathID: g.path, Op: causal.OpCall})
	end := t
	if c.parallel {
		for _, ch := range c.calls {
			cb := g.choose(ch)
			if r := g.call(ch, callee, cb, t+g.delay(ch, callee)); r > end {
				end = r
			}
		}
	} else {
		for _, ch := range c.calls {
			cb := g.choose(ch)
			end = g.call(ch, callee, cb, end+g.delay(ch, callee))
		}
	}
	end += g.sample(c.reply)
	g.msgs = append(g.msgs, causal.Message{Time: g.start + end, Sender: to, Receiver: from, CallID: id, PathID: g.path, Op: causal.OpReturn})
	g.last = max(g.last, end)
	return end
}

// streamSeeds derives the PCG state of one instance from the seed with SplitMix64, so
// that the streams of different (tracelet, instance) pairs are unrelated.
func streamSeeds(seed uint64, tracelet, inst int) (uint64, uint64) {
	x := seed ^ splitmix(uint64(tracelet)<<32|uint64(uint32(inst)))
	a := splitmix(x)
	return a, splitmix(a ^ 0x9e3779b97f4a7c15)
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func think(r *rand.Rand, t *ctracelet) int64 {
	if t.thinkSpan == 0 {
		return t.thinkMin
	}
	return t.thinkMin + r.Int64N(t.thinkSpan+1)
}

// Generate builds a trace from cfg: runs in true time, then the sniffer's drops, then
// clock skew, then a stable sort by (skewed) time. The result is a function of cfg and
// opt only.
func Generate(cfg *Config, opt Options) (*causal.Trace, Stats, error) {
	st := Stats{RunsPerTracelet: map[string]int{}}
	dur := opt.Duration
	if dur == 0 {
		dur = cfg.Duration
	}
	if err := checkOptions(cfg, opt, dur); err != nil {
		return nil, st, err
	}

	comp := &compiler{index: map[string]int32{}}
	tls := make([]ctracelet, len(cfg.Tracelets))
	var insts []*instance
	for i, t := range cfg.Tracelets {
		tls[i] = ctracelet{
			name:      t.Name,
			instances: t.Instances,
			thinkMin:  int64(t.ThinkMin),
			thinkSpan: int64(t.ThinkMax - t.ThinkMin),
			from:      comp.node(t.Root.From),
			root:      comp.call(t.Root),
		}
		st.RunsPerTracelet[t.Name] = 0
		for j := 0; j < t.Instances; j++ {
			a, b := streamSeeds(opt.Seed, i, j)
			in := &instance{tracelet: int32(i), index: int32(j), rng: rand.New(rand.NewPCG(a, b))}
			in.next = think(in.rng, &tls[i])
			if in.next < int64(dur) {
				insts = append(insts, in)
			}
		}
	}
	// Reject a skew of a node the config never names before spending time generating;
	// ApplySkew checks again against the nodes that actually occur.
	for _, s := range opt.Skews {
		if _, ok := comp.index[s.Node]; !ok {
			return nil, st, fmt.Errorf("skew: node %q does not appear in %s (nodes: %s)", s.Node, cfg.File, strings.Join(comp.names, ", "))
		}
	}
	est := estimate(tls, dur)
	if est > 2*MaxMessages { // the estimate errs high, so this never rejects a trace that fits
		return nil, st, fmt.Errorf("%s: the trace would have about %.3g messages, more than %d; shorten the duration or lengthen think times", cfg.File, est, MaxMessages)
	}
	g := &gen{
		b:       causal.NewTraceBuilder(),
		names:   comp.names,
		ids:     make([]causal.NodeID, len(comp.names)),
		start:   cfg.Start * int64(time.Second),
		callIDs: cfg.CallIDs,
		msgs:    make([]causal.Message, 0, int(min(est, MaxMessages+1))),
	}
	for i := range g.ids {
		g.ids[i] = -1
	}
	if len(cfg.Forwarding) > 0 {
		g.forward = make([]*mixture, len(comp.names))
		for name, modes := range cfg.Forwarding {
			if i, ok := comp.index[name]; ok {
				g.forward[i] = toMixture(modes)
			}
		}
	}
	runs := make([]int, len(tls))

	if err := g.runAll(cfg, tls, insts, runs, &st, int64(dur)); err != nil {
		return nil, st, err
	}
	for i, t := range tls {
		st.RunsPerTracelet[t.name] = runs[i]
	}

	// The builder holds the node table. The messages were collected directly, in a
	// slice sized up front, because growing millions of them by append dominated the
	// run time; call and path ids are fresh by construction, so their tables are built
	// in one piece instead of being interned one map insertion at a time.
	tr := g.b.Trace()
	tr.Messages = g.msgs
	tr.PathIDs = numbered('p', st.Runs)
	if cfg.CallIDs {
		tr.CallIDs = numbered('c', int(g.nextCall))
	}
	causal.SortMessages(tr.Messages)
	if rate := opt.CaptureRate; rate > 0 || opt.DropRate > 0 {
		if rate == 0 {
			rate = CaptureRateForDropRate(tr.Messages, opt.DropRate, opt.Queue)
		}
		st.CaptureRate = rate
		if rate > 0 {
			tr.Messages, st.Dropped = ApplySniffer(tr.Messages, rate, opt.Queue)
		}
	}
	if err := ApplySkew(tr, opt.Skews); err != nil {
		return nil, st, err
	}
	st.Messages = len(tr.Messages)
	return tr, st, nil
}

// checkOptions rejects options and configs no trace can come from.
func checkOptions(cfg *Config, opt Options, dur time.Duration) error {
	switch {
	case dur < 0:
		return fmt.Errorf("duration %s is negative", dur)
	case dur == 0:
		return fmt.Errorf("%s: no duration: set `duration` in the config or pass one", cfg.File)
	case !(opt.DropRate >= 0 && opt.DropRate < 1):
		return fmt.Errorf("drop rate %v is outside [0, 1)", opt.DropRate)
	case !(opt.CaptureRate >= 0) || math.IsInf(opt.CaptureRate, 0):
		return fmt.Errorf("capture rate %v must be a positive number of messages per second", opt.CaptureRate)
	case opt.Queue < 0:
		return fmt.Errorf("sniffer queue %d is negative", opt.Queue)
	case len(cfg.Tracelets) == 0:
		return fmt.Errorf("%s: no tracelets", cfg.File)
	}
	if cfg.Start > (math.MaxInt64-int64(dur))/int64(time.Second)-1<<20 {
		return fmt.Errorf("%s: start %d is too late to represent the trace in nanoseconds", cfg.File, cfg.Start)
	}
	return nil
}

// runAll runs the instances in order of start time with a binary heap, so path
// and call ids grow with time whatever the number of instances, until each one's
// next run would start after dur.
func (g *gen) runAll(cfg *Config, tls []ctracelet, insts []*instance, runs []int, st *Stats, dur int64) error {
	h := instHeap(insts)
	h.init()
	for len(h) > 0 {
		in := h[0]
		t := &tls[in.tracelet]
		g.rng = in.rng
		st.Runs++
		runs[in.tracelet]++
		g.path = uint32(st.Runs)
		g.last = in.next
		end := g.call(t.root, t.from, g.choose(t.root), in.next)
		if t.root.oneway {
			// A one-way run is over when its last message has been sent.
			end = g.last
		}
		if len(g.msgs) > MaxMessages {
			return fmt.Errorf("%s: the trace would exceed %d messages; shorten the duration or lengthen think times", cfg.File, MaxMessages)
		}
		in.next = end + think(in.rng, t)
		if in.next < dur {
			h.fixTop()
		} else {
			h.popTop()
		}
	}
	return nil
}

// ApplySkew is the paper's "skewer" (§7.5.6): it adds each node's offset to the
// timestamps of the messages that node sends, since a node's clock stamps its own
// sends, and re-sorts the trace stably by time. A negative offset de-skews. Naming a
// node twice, or a node absent from the trace, is an error.
func ApplySkew(tr *causal.Trace, skews []Skew) error {
	if len(skews) == 0 {
		return nil
	}
	off := make([]int64, len(tr.Nodes))
	set := make([]bool, len(tr.Nodes))
	var errs []error
	for _, s := range skews {
		id := -1
		for i, n := range tr.Nodes {
			if n == s.Node {
				id = i
				break
			}
		}
		switch {
		case id < 0:
			errs = append(errs, fmt.Errorf("skew: node %q does not appear in the trace", s.Node))
		case set[id]:
			errs = append(errs, fmt.Errorf("skew: node %q is skewed more than once", s.Node))
		default:
			off[id], set[id] = int64(s.Offset), true
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i := range tr.Messages {
		tr.Messages[i].Time += off[tr.Messages[i].Sender]
	}
	causal.SortMessages(tr.Messages)
	return nil
}

// numbered returns the id table "", "<prefix>1", ..., "<prefix>n", in which id k is at
// index k as causal.Trace requires. All ids share one backing string, so the table costs
// a few allocations however many ids there are.
func numbered(prefix byte, n int) []string {
	buf := make([]byte, 0, n*9)
	ends := make([]int, n+1)
	for k := 1; k <= n; k++ {
		buf = strconv.AppendInt(append(buf, prefix), int64(k), 10)
		ends[k] = len(buf)
	}
	all := string(buf)
	out := make([]string, n+1)
	for k := 1; k <= n; k++ {
		out[k] = all[ends[k-1]:ends[k]]
	}
	return out
}

// estimate is the expected number of messages, plus a margin, used to size the message
// slice once. Latencies use the means, ignoring clamping and parallel maxima.
func estimate(tls []ctracelet, dur time.Duration) float64 {
	total := 0.0
	for _, t := range tls {
		msgs, lat := shape(t.root)
		cycle := float64(t.thinkMin) + float64(t.thinkSpan)/2 + lat
		runs := float64(t.instances) * (float64(dur)/max(cycle, 1) + 1)
		total += runs * float64(msgs)
	}
	return total*1.05 + 1024
}

// shape returns the number of messages of one run of c and its mean handling latency.
func shape(c *ccall) (msgs int, lat float64) {
	msgs = 2
	if c.oneway {
		msgs = 1
	}
	for _, ch := range c.calls {
		m, l := shape(ch)
		msgs += m
		l += ch.delay.mean
		if c.parallel {
			lat = max(lat, l)
		} else {
			lat += l
		}
	}
	return msgs, lat + c.reply.mean
}

// instHeap is a min-heap of instances; container/heap would box every push.
type instHeap []*instance

func (h instHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h instHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].less(h[l]) {
			m = r
		}
		if !h[m].less(h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// fixTop restores the heap after the top's start time grew.
func (h instHeap) fixTop() { h.down(0) }

func (h *instHeap) popTop() {
	old := *h
	n := len(old) - 1
	old[0] = old[n]
	old[n] = nil
	*h = old[:n]
	h.down(0)
}
