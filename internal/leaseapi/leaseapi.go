// Package leaseapi is the injector's lease protocol in one place: the JSON
// documents of its HTTP API (injector/README.md), which the injector
// extension serves, and the client that the perfmodel exporter's experiment
// coordinator calls it with.
//
// A lease asks one injector for one square wave (paper 000 §3; paper 003
// §III.B–C for CPU frequency and capacity) on one target for a bounded time;
// the injector restores the target when the lease ends, expires or fails.
package leaseapi

import "time"

// Paths of the injector's API.
const (
	PathHealth = "/v1/health"
	PathLeases = "/v1/leases" // POST to create; /{id} to GET or DELETE; /{id}/renew to POST
)

// Lease kinds.
const (
	KindDelay    = "delay"
	KindCPUFreq  = "cpufreq"
	KindCapacity = "capacity"
)

// Lease states.
const (
	StateActive    = "active"    // the wave runs (or waits for its start)
	StateCompleted = "completed" // the wave finished; restored
	StateExpired   = "expired"   // the lease ran out; restored
	StateStopped   = "stopped"   // deleted, or the extension shut down; restored
	StateFailed    = "failed"    // the backend failed; restored as far as it could be
)

// Request is the body of POST /v1/leases.
type Request struct {
	Kind   string `json:"kind"`
	Target Target `json:"target"`
	Wave   Wave   `json:"wave"`
	// Duration of the lease, a Go duration ("90s"); default 1m.
	Duration string `json:"duration,omitempty"`
}

// Target is what a lease perturbs: a link (delay), CPUs (cpufreq) or a
// cgroup (capacity).
type Target struct {
	Link   *Link  `json:"link,omitempty"`
	CPUs   []int  `json:"cpus,omitempty"`
	Cgroup string `json:"cgroup,omitempty"`
}

// Link selects the packets of one link.
type Link struct {
	Proto     string `json:"proto"`
	Dst       string `json:"dst"`
	DstPort   uint16 `json:"dst_port"`
	Direction string `json:"direction,omitempty"`
}

// Wave is the square wave a lease runs.
type Wave struct {
	// Amplitude: ms of delay, kHz below base, or the fraction of capacity
	// withheld.
	Amplitude float64 `json:"amplitude"`
	// Period, a Go duration ("1s").
	Period string     `json:"period"`
	Cycles int        `json:"cycles,omitempty"`
	Start  *time.Time `json:"start,omitempty"`
	Single bool       `json:"single,omitempty"`
	// Floor, for delay leases, is ms of delay every packet gets for the
	// whole lease under the wave, so that holding packets costs the host
	// the same in both phases. For capacity leases it is the fraction
	// withheld in the off-phases, the on-phases withholding floor +
	// amplitude; a negative floor grants capacity above the saved quota, so
	// a floor of −amplitude/2 centers the wave on it.
	Floor float64 `json:"floor,omitempty"`
}

// Renewal is the body of POST /v1/leases/{id}/renew: the new duration from
// now ("" for the lease's original duration).
type Renewal struct {
	Duration string `json:"duration,omitempty"`
}

// Created is the answer to a create or a renew.
type Created struct {
	ID      string    `json:"id"`
	Expires time.Time `json:"expires"`
}

// Status is the body of GET and DELETE /v1/leases/{id}. S is the type of
// the backend's statistics: the injector serves any of them, a client reads
// the ones it needs (Stats).
type Status[S any] struct {
	ID      string    `json:"id"`
	Kind    string    `json:"kind"`
	Target  Target    `json:"target"`
	Wave    Wave      `json:"wave"`
	State   string    `json:"state"`
	Expires time.Time `json:"expires"`
	Error   string    `json:"error,omitempty"`
	Stats   S         `json:"stats,omitempty"`
}

// DelayStats is the delay a delay lease actually injected (paper 000 §3), in
// ms.
type DelayStats struct {
	Count           int     `json:"count"`
	MeanMs          float64 `json:"mean_ms"`
	StdMs           float64 `json:"std_ms"`
	MinMs           float64 `json:"min_ms"`
	MaxMs           float64 `json:"max_ms"`
	P50Ms           float64 `json:"p50_ms"`
	P90Ms           float64 `json:"p90_ms"`
	P99Ms           float64 `json:"p99_ms"`
	RequestedMeanMs float64 `json:"requested_mean_ms"`
	// On and Off split the packets by whether the wave requested a delay
	// for them: on.mean_ms − off.mean_ms is the delay the wave added.
	On  *PhaseStats `json:"on,omitempty"`
	Off *PhaseStats `json:"off,omitempty"`
	// Probe is the loopback probe stream's one-way delay by phase
	// (delay_probe_interval): unlike on/off, timed from send to receive.
	Probe        *ProbeStats `json:"probe,omitempty"`
	ErrMeanMs    float64     `json:"err_mean_ms"`
	ErrP99Ms     float64     `json:"err_p99_ms"`
	HeldForOrder int         `json:"held_for_order"`
	Flushed      int         `json:"flushed"`
	Errors       int         `json:"errors"`
	LastError    string      `json:"last_error,omitempty"`
}

// PhaseStats is the delay applied in one phase of the wave.
type PhaseStats struct {
	Count           int     `json:"count"`
	MeanMs          float64 `json:"mean_ms"`
	StdMs           float64 `json:"std_ms"`
	RequestedMeanMs float64 `json:"requested_mean_ms"`
}

// ProbeStats is what a delay lease's probe stream measured.
type ProbeStats struct {
	Sent     int         `json:"sent"`
	Received int         `json:"received"`
	On       *PhaseStats `json:"on,omitempty"`
	Off      *PhaseStats `json:"off,omitempty"`
}

// FreqStats is what a cpufreq lease did: the CPUs' base speed and the
// P-state step its on-phases took (the change injected, known exactly).
type FreqStats struct {
	BaseKHz int64 `json:"base_khz"`
	StepKHz int64 `json:"step_khz"`
}

// Stats is what a client reads of any lease's statistics: a delay lease's
// fields, and a cpufreq lease's step.
type Stats struct {
	DelayStats
	StepKHz float64 `json:"step_khz"`
}
