package ingest

import "github.com/tierscope/tierscope/internal/model"

// What the coordinator reads of the traffic (coordinator.Traffic).

// Links are the addresses caller→callee was called at, the most called
// first, and every known link as "caller->callee".
func (e *Engine) Links(caller, callee string) (addresses, known []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.links.addresses(caller, callee), e.links.names()
}

// CallsPerRequest is, per front transaction, the calls per request to
// address, else on caller→callee when none went to it.
func (e *Engine) CallsPerRequest(caller, callee, address string) map[string]float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if calls := e.links.callsPerRequestTo(address); len(calls) > 0 {
		return calls
	}
	return e.links.callsPerRequest(caller, callee)
}

// CPU merges the open windows' readings of a process and of its machine.
func (e *Engine) CPU(machine, process string) (share, host model.CPUStats) {
	key := model.ProcessKey(machine, process)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, w := range e.windows {
		if c, ok := w.CPU[key]; ok {
			share.Merge(c)
		}
		if c, ok := w.CPU[machine]; ok {
			host.Merge(c)
		}
	}
	return share, host
}
