package ingest

import (
	"context"
	"net"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/tierscope/tierscope/internal/model"
)

// ConsumeMetrics takes the CPU utilization of machines and processes, the ρ of
// the work-factor model and the U of the signatures:
//   - system.cpu.utilization (hostmetrics cpu scraper; enable it, it is off by
//     default): 1 − the idle share averaged over the logical CPUs, per host.name;
//   - process.cpu.utilization (hostmetrics process scraper): the sum over
//     states, per host.name/process.executable.name (paper 002 §4.6);
//   - system.cpu.frequency × the logical CPUs, when present, is the capacity Ω;
//   - the steal share of system.cpu.utilization, per host.name, is handed to
//     running gradient experiments as a covariate (experiments.steal_covariate).
//
// It also takes the connection inventory (the blackbox receiver's
// tierscope.link.connections): links whose both ends are named services give
// link experiments the callee's address, as CLIENT spans do.
//
// A resource with no host.name, no host_name configured and no
// service.instance.id is this collector's own host (hostmetrics scraped here).
//
// Other metrics are ignored.
func (e *Engine) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		res := rm.Resource().Attributes()
		machine := e.machineOf(res)
		if machine == "" {
			// hostmetrics sets no resource attributes: its readings are of
			// the host it runs on, which SDKs name by its host name.
			machine = e.set.LocalHost
		}
		process := attrString(res, "process.executable.name")
		var capacity float64
		sms := rm.ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				if m := ms.At(k); m.Name() == "system.cpu.frequency" && m.Type() == pmetric.MetricTypeGauge {
					dps := m.Gauge().DataPoints()
					for d := 0; d < dps.Len(); d++ {
						capacity += value(dps.At(d)) / 1e6 // Hz → MHz, summed over CPUs
					}
				}
			}
		}
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if m.Type() != pmetric.MetricTypeGauge {
					continue
				}
				dps := m.Gauge().DataPoints()
				if dps.Len() == 0 {
					continue
				}
				ts := int64(dps.At(0).Timestamp())
				switch m.Name() {
				case "tierscope.link.connections":
					e.learnInventory(dps)
				case "system.cpu.utilization":
					idle, steal, hasSteal, cpus := 0.0, 0.0, false, map[string]struct{}{}
					for d := 0; d < dps.Len(); d++ {
						dp := dps.At(d)
						cpus[attrString(dp.Attributes(), "cpu")] = struct{}{}
						switch cpuState(dp.Attributes()) {
						case "idle":
							idle += value(dp)
						case "steal":
							steal += value(dp)
							hasSteal = true
						}
					}
					e.addCPU(e.readingMidpoint(machine, ts), machine, 1-idle/float64(len(cpus)), capacity, len(cpus))
					if hasSteal {
						e.observer.ObserveSteal(machine, ts, steal/float64(len(cpus)))
					}
				case "process.cpu.utilization":
					if process == "" {
						continue
					}
					sum := 0.0
					for d := 0; d < dps.Len(); d++ {
						sum += value(dps.At(d))
					}
					key := model.ProcessKey(machine, process)
					e.addCPU(e.readingMidpoint(key, ts), key, sum, 0, 0)
				}
			}
		}
	}
	return nil
}

// readingMidpoint is the middle of the interval a utilization reading taken
// at ts covers (e.mu held): hostmetrics reports the mean since its previous
// scrape, so a reading taken 0.2 s into a window is mostly the previous
// window's CPU. Placed by its time, a 1 s reading's CPU is up to 1 s off the
// window of the requests it pairs with, by a phase that changes with each
// collector start; on the testbed that moved work factors by up to 20%.
// The interval is the gap since the key's previous reading, when that is
// at most a window; otherwise ts.
func (e *Engine) readingMidpoint(key string, ts int64) int64 {
	if e.lastReading == nil || len(e.lastReading) >= max(4*e.set.Limits.MaxServices, 64) {
		e.lastReading = map[string]int64{}
	}
	last, ok := e.lastReading[key]
	e.lastReading[key] = ts
	if gap := ts - last; ok && gap > 0 && gap <= e.window*1e9 {
		return ts - gap/2
	}
	return ts
}

// AddCPU records a utilization sample of machine (or of a process, under
// model.ProcessKey) at ts in its window.
func (e *Engine) AddCPU(ts int64, machine string, u, capacity float64, logicalCPUs int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.addCPU(ts, machine, u, capacity, logicalCPUs)
}

// addCPU records a utilization sample in its window (e.mu held). Invalid
// values are ignored: the models must never see NaN or values outside [0, 1].
func (e *Engine) addCPU(ts int64, machine string, u, capacity float64, logicalCPUs int) {
	if !(u >= 0 && u <= 1) {
		return
	}
	start := alignDown(ts/1e9, e.window)
	if start < e.closedBefore {
		return
	}
	w := e.windowAt(start)
	w.AddCPU(machine, u, capacity, logicalCPUs)
}

// learnInventory puts the inventory's links between named services in the
// link book, weighted by their open connections (e.mu held).
func (e *Engine) learnInventory(dps pmetric.NumberDataPointSlice) {
	for d := 0; d < dps.Len(); d++ {
		dp := dps.At(d)
		a := dp.Attributes()
		caller, callee := attrString(a, "tierscope.source.service"), attrString(a, "tierscope.destination.service")
		host := attrString(a, "destination.address")
		port, ok := a.Get("destination.port")
		n := int64(value(dp))
		if caller == "" || callee == "" || host == "" || !ok || port.Int() <= 0 || n <= 0 {
			continue
		}
		e.links.learnN(caller, callee, net.JoinHostPort(host, strconv.FormatInt(port.Int(), 10)), n)
	}
	if n := e.links.takeOverflow(); n > 0 {
		e.tel.ExporterPerfmodelOverflow.Add(context.Background(), n)
	}
}

// cpuState is a CPU data point's state: hostmetrics' "state", or the
// semantic conventions' newer "cpu.mode".
func cpuState(a pcommon.Map) string {
	if s := attrString(a, "state"); s != "" {
		return s
	}
	return attrString(a, "cpu.mode")
}

func value(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}
