package causal

import "github.com/tierscope/tierscope/internal/span"

// Caller addresses. A SERVER span records where its request came from: the
// caller's address and port (client.address and client.port, or
// network.peer.* and the legacy net.sock.peer.*). A connection belongs to one
// process for its life, and an address to one host (or to a proxy, which the
// data then show). The caller model learns, from the current assignment as the
// delay models do, which processes called from each connection and each
// address, and scores a caller by the probability that its process is behind
// the callee's connection:
//
//	P_addr(i) = (n_addr(i) + 1/M) / (N_addr + 1)
//	P_conn(i) = (n_conn(i) + P_addr(i)) / (N_conn + 1)
//	factor    = P_conn(i) / max_j P_conn(j)
//
// with n the assignments' confidence-weighted counts, the callee's own
// assignment left out (it is no evidence for itself), and M the number of
// processes that make calls. The factor is at most 1, so that callees that
// record their caller and callees that do not keep scores of one scale (their
// confidences are weighed against the same strangers), and an address every
// process calls from (one loopback, a NAT, a sidecar proxy) scores each about
// 1 and changes nothing.

type callerModels struct {
	n     map[[2]int32]float64 // (address key, caller process) → weight
	total map[int32]float64    // address key → weight
	most  map[int32]float64    // address key → the largest n of its processes
	// vote and weight are what each callee added in this fit.
	vote   []int32
	weight []float32
	procs  float64 // M
}

func newCallerModels(spans []span.Span, proc []int32) *callerModels {
	m := &callerModels{n: make(map[[2]int32]float64), total: make(map[int32]float64), most: make(map[int32]float64),
		vote: make([]int32, len(spans)), weight: make([]float32, len(spans))}
	callers := make(map[int32]bool)
	for i := range spans {
		if spans[i].Kind.RemoteCaller() {
			callers[proc[i]] = true
		}
	}
	m.procs = float64(max(len(callers), 1))
	return m
}

func (m *callerModels) reset() {
	clear(m.n)
	clear(m.total)
	clear(m.most)
	clear(m.weight)
}

// addCaller counts caller p of SERVER span c with weight w.
func (s *spanStitcher) addCaller(p, c int32, w float64) {
	cs := &s.spans[c]
	if cs.Kind != span.KindServer || (cs.Caller < 0 && cs.CallerAddress < 0) {
		return
	}
	m := s.callers
	proc := s.proc[p]
	m.vote[c], m.weight[c] = proc, float32(w)
	for _, key := range [2]int32{cs.Caller, cs.CallerAddress} {
		if key >= 0 {
			k := [2]int32{key, proc}
			m.n[k] += w
			m.total[key] += w
			m.most[key] = max(m.most[key], m.n[k])
		}
	}
}

// callerFactor is P_conn(process of p)/max_j P_conn(j) for SERVER span c, 1
// when c does not say where its request came from.
func (s *spanStitcher) callerFactor(p, c int32) float64 {
	cs := &s.spans[c]
	if cs.Kind != span.KindServer || (cs.Caller < 0 && cs.CallerAddress < 0) {
		return 1
	}
	m := s.callers
	proc := s.proc[p]
	prob, best := 1/m.procs, 1/m.procs
	for _, key := range [2]int32{cs.CallerAddress, cs.Caller} {
		if key < 0 {
			continue
		}
		n, total := m.n[[2]int32{key, proc}], m.total[key]
		if w := float64(m.weight[c]); w > 0 {
			total -= w
			if m.vote[c] == proc {
				n -= w
			}
		}
		total = max(total, 0)
		prob = (max(n, 0) + prob) / (total + 1)
		best = (m.most[key] + best) / (total + 1)
	}
	return min(prob/best, 1)
}

// Connection neighbours. The requests of one connection follow each other
// when its protocol is sequential (HTTP/1.1): the caller of a request started
// after the connection's previous request was answered, and ended before its
// next request arrived. Two link models learn how far apart they are,
//
//	prev gap = start(caller) + θ − end(previous request on the connection)
//	next gap = start(next request on the connection) − end(caller) − θ
//
// so that a multiplexed protocol (HTTP/2, gRPC), whose requests overlap,
// teaches a broad model that decides nothing.

// indexConnections finds each SERVER span's previous and next request on its
// connection (the same process and caller connection), by start.
func (s *spanStitcher) indexConnections() {
	n := len(s.spans)
	s.connPrev, s.connNext = make([]int32, n), make([]int32, n)
	byConn := make(map[[2]int32][]int32)
	for i := range s.spans {
		s.connPrev[i], s.connNext[i] = -1, -1
		sp := &s.spans[i]
		if sp.Kind == span.KindServer && sp.Caller >= 0 {
			k := [2]int32{sp.Instance, sp.Caller}
			byConn[k] = append(byConn[k], int32(i))
		}
	}
	for _, l := range byConn {
		s.sortByStart(l)
		for j := 1; j < len(l); j++ {
			s.connPrev[l[j]], s.connNext[l[j-1]] = l[j-1], l[j]
		}
	}
}

// addConnection counts caller p of SERVER span c in the connection models.
func (s *spanStitcher) addConnection(p, c int32, theta int64, w float64) {
	ps := &s.spans[p]
	if q := s.connPrev[c]; q >= 0 {
		s.models.add(s.linkKey(modelConnPrev, p, c), ps.Start+theta-s.spans[q].End, w)
	}
	if q := s.connNext[c]; q >= 0 {
		s.models.add(s.linkKey(modelConnNext, p, c), s.spans[q].Start-ps.End-theta, w)
	}
}

// connectionFactor is the connection models' likelihood of caller p for c,
// relative to the likeliest gaps.
func (s *spanStitcher) connectionFactor(p, c int32, theta int64) float64 {
	ps, v := &s.spans[p], 1.0
	if q := s.connPrev[c]; q >= 0 {
		v *= s.models.relative(s.linkKey(modelConnPrev, p, c), ps.Start+theta-s.spans[q].End)
	}
	if q := s.connNext[c]; q >= 0 {
		v *= s.models.relative(s.linkKey(modelConnNext, p, c), s.spans[q].Start-ps.End-theta)
	}
	return v
}

// remoteFactors are what callee c says of each of its callers
// (objs[arcObj[k]]): caller and connection factors for a SERVER span, queue
// order for a CONSUMER span, each relative to the best of c's callers, so that
// they rank c's callers without changing the scale of c's best score, against
// which c's confidence weighs strangers (the scores of other callees, which
// may say nothing of theirs). It returns nil when they say nothing.
func (s *spanStitcher) remoteFactors(c int32, arcObj, objs []int32) []float64 {
	kind := s.spans[c].Kind
	if kind != span.KindServer && kind != span.KindConsumer {
		return nil
	}
	f := s.factorBuf[:0]
	best := 0.0
	for _, o := range arcObj {
		p := objs[o]
		var v float64
		if kind == span.KindServer {
			v = s.callerFactor(p, c) * s.connectionFactor(p, c, s.offset(p, c).theta)
		} else {
			v = s.queueFactor(p, c)
		}
		f = append(f, v)
		best = max(best, v)
	}
	s.factorBuf = f
	if best <= 0 || best == 1 && allOnes(f) {
		return nil
	}
	for k := range f {
		f[k] /= best
	}
	return f
}

func allOnes(f []float64) bool {
	for _, v := range f {
		if v != 1 {
			return false
		}
	}
	return true
}
