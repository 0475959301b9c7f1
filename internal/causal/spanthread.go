package causal

// Threads. A span that records the thread it started on (thread.id) says
// which local spans can be its parent: in a thread-per-request server a
// synchronous child starts on its parent's thread while the other requests'
// spans run on other threads; in a reactive server every continuation runs on
// whichever event-loop thread is free, and the thread says next to nothing.
// Which of the two a process is, its orphans tell, before any assignment. For
// an orphan c with n_c local candidates of which m_c share its thread, with
// q₁ the chance that a parent shares its child's thread and r the chance
// that another candidate does, the parent is on c's thread with probability
//
//	π_c = m_c·q₁/r / (m_c·q₁/r + (n_c − m_c)·(1 − q₁)/(1 − r)),
//
// the candidates equally likely a priori (timing left out). EM alternates
// π_c with
//
//	q₁ = (Σ π_c + ½) / (N + 1),   r = (Σ (m_c − π_c) + ½) / (Σ (n_c − 1) + 1),
//
// per process, from q₁ = ½ and r the share of candidates on their orphan's
// thread, then q₁ alone per kind of child, again from ½, with r the
// process's (fitThreads). A candidate on the child's thread then has its score
// multiplied by q₁/r, one on another thread by (1 − q₁)/(1 − r): a thread-per-request
// process (q₁ near 1, r small) gives nearly all the weight to its
// same-thread candidates, a reactive one (q₁ ≈ r) leaves the scores as they
// were, and @Async work, which never shares its parent's thread, keeps the
// weight 1 − q₁ of what it is.

// threadRounds is how many EM steps fitThreads takes.
const threadRounds = 30

// threadStats holds the thread factors of one kind of child in one process.
type threadStats struct {
	same, other float64
}

type threadKey struct{ proc, service, name int32 }

// threadCounts are an orphan's local candidates, n, and those on its thread, m.
type threadCounts struct{ m, n float64 }

// fitThreads learns the thread factors before the first round: r and q₁ per
// process, then q₁ per kind of child (service and name) in the process, since
// whether a child is synchronous is a property of the code that makes it.
func (s *spanStitcher) fitThreads() {
	s.threads = make(map[threadKey]threadStats)
	byKey := make(map[threadKey][]threadCounts)
	for c := range s.spans {
		cs := &s.spans[c]
		if cs.Thread < 0 || s.remote[c] {
			continue
		}
		var cn threadCounts
		for k := s.start[c]; k < s.start[c+1]; k++ {
			if p := s.cands[k]; s.spans[p].Thread >= 0 {
				cn.n++
				if s.spans[p].Thread == cs.Thread {
					cn.m++
				}
			}
		}
		if cn.n >= 2 {
			k := threadKey{s.procIndex[c], cs.Service, cs.Name}
			byKey[k] = append(byKey[k], cn)
		}
	}
	byProc := make(map[int32][]threadCounts)
	for k, l := range byKey {
		byProc[k.proc] = append(byProc[k.proc], l...)
	}
	type procFit struct{ q1, r float64 }
	fits := make(map[int32]procFit, len(byProc))
	for proc, l := range byProc {
		var m, n float64
		for _, cn := range l {
			m, n = m+cn.m, n+cn.n
		}
		if m == 0 || m == n {
			continue // every candidate on the orphan's thread, or none: nothing to tell
		}
		q1, r := 0.5, m/n
		for range threadRounds {
			var sumPi, sumOther, others float64
			for _, cn := range l {
				pi := onThread(cn, q1, r)
				sumPi += pi
				sumOther += cn.m - pi
				others += cn.n - 1
			}
			q1 = (sumPi + 0.5) / (float64(len(l)) + 1)
			r = (max(sumOther, 0) + 0.5) / (others + 1)
		}
		fits[proc] = procFit{q1, r}
	}
	for k, l := range byKey {
		f, ok := fits[k.proc]
		if !ok {
			continue
		}
		q1 := 0.5
		for range threadRounds {
			var sumPi float64
			for _, cn := range l {
				sumPi += onThread(cn, q1, f.r)
			}
			q1 = (sumPi + 0.5) / (float64(len(l)) + 1)
		}
		s.threads[k] = threadStats{same: q1 / f.r, other: (1 - q1) / (1 - f.r)}
	}
}

// threadCut is the factor below which a thread rules a candidate out: a
// child of a kind that starts on its parent's thread all but always does not
// keep the other threads' spans as candidates, when some candidate shares its
// thread.
const threadCut = 0.02

// pruneByThread drops the candidates that threadCut rules out.
func (s *spanStitcher) pruneByThread() {
	if len(s.threads) == 0 {
		return
	}
	out := s.cands[:0]
	from := uint32(0)
	for c := range s.spans {
		lo, hi := from, s.start[c+1]
		from = hi
		s.start[c] = uint32(len(out))
		cs := &s.spans[c]
		st, ok := s.threads[threadKey{s.procIndex[c], cs.Service, cs.Name}]
		cut := ok && cs.Thread >= 0 && !s.remote[c] && st.other < threadCut
		if cut {
			cut = false
			for k := lo; k < hi; k++ {
				if s.spans[s.cands[k]].Thread == cs.Thread {
					cut = true
					break
				}
			}
		}
		for k := lo; k < hi; k++ {
			p := s.cands[k]
			if cut && s.spans[p].Thread != cs.Thread {
				continue
			}
			out = append(out, p)
		}
	}
	s.start[len(s.spans)] = uint32(len(out))
	s.cands = out
}

// onThread is π_c: the chance that c's parent is among its m candidates on its
// thread.
func onThread(cn threadCounts, q1, r float64) float64 {
	on, off := cn.m*q1/r, (cn.n-cn.m)*(1-q1)/(1-r)
	if on+off == 0 {
		return q1
	}
	return on / (on + off)
}

// threadFactor is the factor of local candidate p for c.
func (s *spanStitcher) threadFactor(p, c int32) float64 {
	cs := &s.spans[c]
	if len(s.threads) == 0 || cs.Thread < 0 || s.spans[p].Thread < 0 {
		return 1
	}
	st, ok := s.threads[threadKey{s.procIndex[c], cs.Service, cs.Name}]
	if !ok {
		return 1
	}
	if s.spans[p].Thread == cs.Thread {
		return st.same
	}
	return st.other
}
