package model

// CPUStats is a machine's CPU utilization over a window, from host or process
// metrics: the mean is SumUtilization/Samples.
type CPUStats struct {
	SumUtilization float64 `json:"sum_utilization"`
	Samples        int64   `json:"samples"`
	// CapacityMHz is the machine's capacity (frequency × logical cores) when
	// the metrics tell it, else 0 and configuration decides.
	CapacityMHz float64 `json:"capacity_mhz,omitempty"`
	// LogicalCPUs is how many CPUs the utilization is the mean of, when the
	// metrics tell it (system.cpu.utilization's cpu attribute), else 0.
	LogicalCPUs int `json:"logical_cpus,omitempty"`
}

// Merge adds o.
func (c *CPUStats) Merge(o *CPUStats) {
	c.SumUtilization += o.SumUtilization
	c.Samples += o.Samples
	c.CapacityMHz = max(c.CapacityMHz, o.CapacityMHz)
	c.LogicalCPUs = max(c.LogicalCPUs, o.LogicalCPUs)
}

// Mean is the mean utilization, or −1 without samples.
func (c *CPUStats) Mean() float64 {
	if c.Samples == 0 {
		return -1
	}
	return c.SumUtilization / float64(c.Samples)
}

// FlowCounts counts the SERVER spans of each flow (service and route) that a
// machine served in a window: the request rates λ of the work-factor model.
type FlowCounts struct {
	Counts map[string]int64 `json:"counts"`
}

// Merge adds o.
func (f *FlowCounts) Merge(o *FlowCounts) {
	if f.Counts == nil {
		f.Counts = map[string]int64{}
	}
	for k, v := range o.Counts {
		f.Counts[k] += v
	}
}

// SignatureWindow is one transaction's monitoring window at a front service
// (docs/formats.md §6, one CSV row): exact sums in nanoseconds.
type SignatureWindow struct {
	Machine       string `json:"machine"`
	Count         int64  `json:"count"`
	SumLatencyNs  int64  `json:"sum_latency_ns"`
	OutboundCalls int64  `json:"outbound_calls"`
	SumOutboundNs int64  `json:"sum_outbound_ns"`
}

// Merge adds o.
func (s *SignatureWindow) Merge(o *SignatureWindow) {
	if s.Machine == "" {
		s.Machine = o.Machine
	}
	s.Count += o.Count
	s.SumLatencyNs += o.SumLatencyNs
	s.OutboundCalls += o.OutboundCalls
	s.SumOutboundNs += o.SumOutboundNs
}
