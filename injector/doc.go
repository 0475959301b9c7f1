//go:generate go tool mdatagen metadata.yaml

// Package injector is the `injector` extension: it runs square-wave
// perturbations (link delay through NFQUEUE, CPU frequency through the cpufreq
// userspace governor, CPU capacity through cgroup CPU quotas) under expiring
// leases, controlled over an authenticated HTTP API. It is the actuator side
// of the gradient experiments of papers 000 and 003.
//
// Safety (docs/design.md): every target must be allowlisted, every amplitude and
// lease duration is capped, a lease stops by itself at expiry, and stopping
// a lease or the extension restores the backend (delay rule removed,
// frequency and quota put back). Beyond a clean stop: quotas and frequencies
// are journaled before they change and restored by the next start after a
// crash (journal.go); a watchdog process deletes a hung injector's rules
// (watchdog.go); start sweeps only the rules of owners that are gone
// (docs/threat-model.md).
//
// Choices where the issue leaves a gap:
//   - Wave amplitudes are in the unit of each kind: milliseconds of delay
//     (delay), kHz below each CPU's base frequency (cpufreq), and the fraction
//     of the cgroup's capacity withheld, in [0, 1) (capacity). A capacity
//     lease's base capacity is the cgroup's quota/period, or the number of
//     online CPUs when the quota is unlimited; its off-phase restores the
//     saved quota.
//   - All CPUs of one cpufreq lease must share one base frequency, because a
//     single setspeed value is written to all of them. An on-phase sets the
//     speed nearest base − amplitude that every CPU accepts (a P-state of
//     their scaling_available_frequencies, else within their min/max), and
//     the lease status reports the step it took as stats.step_khz: a
//     gradient divides by what was set, not by what was asked.
//   - Leases last `duration` (default one minute, at most max_lease); renew
//     extends from now. Two active leases conflict when they share a link
//     (proto, dst, dst_port, direction), a CPU, or a cgroup (or one cgroup
//     contains the other).
//   - A delay lease's wave is followed through timers (edge jitter of tens of
//     µs); the delay actually applied is measured per packet by nfqdelay and
//     reported in the lease status, with a loopback probe stream's one-way
//     delay through the same queue (delay_probe_interval), which also counts
//     the wait before the hook and after the verdict. nfqdelay's own
//     one-hour lease is a backstop should this process hang.
//   - Ended leases stay queryable (newest 256) until deleted.
package injector // import "github.com/tierscope/tierscope/injector"
