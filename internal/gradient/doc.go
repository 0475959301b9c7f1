// Package gradient turns spectral measurements into resource gradients and
// predictions (papers 000 §2–§5 and 003 §II–§III), and holds the pure state
// machine of a gradient experiment that the perfmodel exporter's coordinator
// drives. It has no I/O, no goroutines and no clock of its own.
//
// # Bases and prediction
//
// A gradient is taken with respect to a basis function of an element's
// attribute in which the response time is (nearly) linear (paper 003
// §II-A): the identity for a link's latency, 1/(f − α·w) for a CPU's
// frequency, 1/(c·f − α·w) for a CPU capacity (Basis). α·w is the CPU
// demand in MHz: α from the work-factor regression (paper 002) or from a
// utilization gradient (AlphaFromUtilization, AlphaRegression), w the
// request rate. The injector's knob units (ms of delay, kHz below the base
// frequency, the fraction of capacity withheld) map to a change of the
// basis through Basis.Delta, and back through Basis.Knob.
//
// A square wave that only withholds measures the secant between the
// operating point and below it. Where the response is not one line in the
// basis (a biased α, CFS throttling), that secant misjudges every change
// above the operating point: paper 000 §6 (figure 14) shows a gradient as
// the secant over the perturbation's interval. A centered capacity wave
// (Basis.Centered) swings c·(1 ∓ a/2), granting in its off-phases
// (Basis.OffKnob, the lease's floor), so its secant straddles c: a central
// difference, which predicts changes either way alike. Near saturation
// one secant is not enough: the response below c climbs faster than a
// centered secant allows, and above it flattens. Paper 000 §6 gives two
// remedies, perturbations of several magnitudes regressed for higher-order
// terms, and a set of gradients each used for the changes it covers. A
// wave above the operating point (Basis.Above) holds c in its on-phases and
// grants c·(1 + a) in its off-phases, so one experiment can measure an
// element below and above c (two elements of one id). Secant combines the
// set: each gradient is the secant to its reach Δb_i, which for a response
// quadratic in b is linear in Δb, so the secant of a change is interpolated
// between the gradients' reaches (the regression) and, past the outermost,
// is that one's (the nearest gradient), never an extrapolated curvature.
//
// Predict is the first-order Taylor prediction of paper 000 §5.3 in the
// basis, rt² = rt¹ + Σ ∇rt_i·Δb_i (∇rt_i from Secant), with the paper's variance ρ(rt¹) +
// Σ ρ(Δb_i)·∇rt_i², plus Σ Δb_i²·ρ(∇rt_i) for the error of the gradients,
// which the paper leaves out but which dominates for large changes. Route
// is §5.5's per-transaction routing: it predicts each transaction under
// each candidate placement and picks the fastest; for the paper's two
// application-server replicas this is exactly "local if the WS–AS gradient
// exceeds the AS–DB gradient".
//
// # The experiment (Experiment)
//
// One experiment is one training phase and then, per element, an adaptive
// phase and an active phase (paper 000 §3, figure 6):
//
//   - Training is passive. The first CalibrationRequests target requests
//     size the bins (ΔTs), then M·N bins of every transaction are collected
//     and the plan chosen (spectral.TrainBins). A given Plan skips it.
//   - Adaptive: one on-phase (of a one-cycle lease, so that the injector's
//     floor and rule stay through the window's off-phase) of a small A⁰
//     (for a link 0.5·A_d, the delay that would move a gradient-1
//     transaction by half of A_d), measured over one period for a rough
//     gradient g′; the active amplitude is then A_d′ = A_d/g′, so that the
//     response time moves by about A_d whatever the gradient.
//   - Active: k_d+1 cycles of A_d′, measured over N bins; every transaction
//     with a baseline gets its gradient, with the change the injector
//     reports it actually made.
//   - With AdaptiveInWindow (the collector's adaptive_in_window, on by
//     default for links), the adaptive cycle is the active window's first j periods
//     instead (fold.go): A⁰ for j periods, g′ from their on-phases against
//     their off-phases and the quiet level just before the wave, A_d′ for
//     the rest, and equation 5 divided by the window's effective change
//     |Σ Δ_j·C_j| / |Σ C_j|. An element then costs N bins, a lead time and
//     a lateness; over 40 simulated experiments the accuracy is that of the
//     separate phase (TestLongAdaptiveInWindow). An element with
//     SeparateAdaptive keeps the separate phase.
//
// The caller feeds samples (Observe) and time (Tick), executes the actions
// returned (start a lease, stop a lease) against the injector, and reports
// back what each lease injected (Injected) or that it failed (LeaseFailed).
// Progress gives the phase, the share done and the time left; Result the
// plan and the gradients. ObserveCovariate takes exogenous series, such as
// each host's CPU steal share: when they cover the training, the training
// chunks and every active window are adjusted for them (spectral.Adjust),
// which on a VM removes most of the noise the wave competes with
// (TestExperimentCovariateAdjustment: the RMS error over 20 seeds halves).
//
// With References, a request fed through ObserveRouted says which elements
// it crossed, and each transaction's requests that did not cross an element
// become that element's reference covariate (reference.go): the host's
// noise moves them with the rest, the wave does not. A load-balanced link's
// other replica is the case in point: the transaction's own requests
// through it take the shared noise out of the window and the baseline
// alike. A transaction is adjusted so only when 20–80% of its requests did
// not cross, in training and in the window; the estimate without it stays
// beside, in ElementResult.Unreferenced. Over 30 simulated seeds of two
// replicas under a common unobserved steal, the RMS error falls from 0.169
// to 0.081 (TestExperimentReferenceRequests). A reference whose own
// response at the wave's frequency, combined over the element's windows as
// its gradients are, is significant is not exogenous, and is dropped for
// the rest of the element (ElementResult.ReferenceRejected;
// TestExperimentRejectsAReferenceTheWaveMoves,
// TestExperimentRejectsAWeakReachOverWindows). The papers do not have it:
// equation 5 is unchanged, and the adjustment is the analysis of
// covariance of spectral.Adjust with a covariate taken per request. It
// assumes the wave does not reach the other requests through a resource
// they share.
//
// # Choices where the papers are silent or loose
//
//   - Clocks. The injector's clock need not match the coordinator's. The
//     active wave starts SkewGuard (1 s, at most a quarter period) before
//     the window and is stopped SkewGuard after it, so for any offset up to
//     the guard the window holds exactly k_d periods of a shifted wave, and
//     the spectral estimate does not depend on the shift. The adaptive
//     window is one period holding the single on-phase: within one period a
//     half-period pulse anywhere is a circular shift of the square wave.
//   - Late samples. Spans arrive after their requests end; a window closes
//     Lateness (10 s) after its end.
//   - The adaptive rule's edges. A link's g′ is taken as at least
//     GradientFloor (0.1) so an asynchronous link does not ask for an
//     unbounded delay; A_d′ grows at most MaxGrowth (20) times over A⁰ and
//     stays within the element's bounds (the injector's caps). When g′ was
//     not significant, the response to A⁰ was lost in the noise: A_d′ is
//     then at least A⁰ rather than a scaled-down amplitude the active phase
//     could not see either. Non-link elements must give A⁰ (there is no
//     "gradient of 1" prior for a basis in ms·MHz).
//   - The adaptive pulse's perturbation. Paper 000 Table 3 bounds what the
//     measurement does to response times, and the single pulse of A⁰ comes
//     before any gradient is measured. Element.PriorGradients, upper bounds
//     on the gradients known beforehand (for a link, the synchronous calls
//     per request the causal paths count: n delayed calls add at most n·d),
//     keep A⁰ within the same bound as the active windows; without them
//     the pulse is only reported (AdaptivePerturbationOverStd). They bound
//     the active windows too for the transactions whose spike one cycle's
//     noise hid; they do not lower a measured gradient's upper error, as a
//     transaction may respond over its calls. A wave above the operating
//     point only grants, so no request is slower for it: the bound leaves
//     it to the element's caps (TestPerturbationBoundLeavesAGrantToItsCap).
//   - A single pulse is one half-period: one stall of the host in it can
//     make the cycle read a gradient several times the calls per request
//     (run AR's web->app-2: 2.5 for 0.5). A cycle whose gradients
//     contradict the priors so is repeated once, and the cycle that
//     contradicts them less sizes the window; a system that does amplify
//     the delay contradicts them in both.
//   - The SLO guard watches the p99 of the last Window (30 s) of the
//     watched transactions' samples (all by default), by request time. The
//     nearest-rank p99 exceeds the bound exactly when more than n − ⌈0.99·n⌉
//     samples do, which is O(1) to keep. While a lease is out, the sample
//     that trips it returns the stop action from Observe itself, and the
//     experiment aborts; a lease is never started while the p99 is over.
//     It needs MinSamples (100) to judge.
//   - Lost reports. If the injected change is not reported within
//     InjectedTimeout (60 s), the requested amplitude is used and the
//     result says so (InjectedAssumed). A lease that cannot start fails its
//     element; the experiment goes on with the next.
//   - Queues. For CPU frequency and capacity the response time is a queue's,
//     which follows a change of speed with some lag and whose requests
//     share one queue's state, so a bin's mean varies far more than its
//     requests' count suggests (on a real cgroup quota wave, the client's
//     0.67 s bins of ~16 requests left σ 12.5 ms about their levels; their
//     spectrum was nearly flat, 1.0–1.3 times its mean at the lowest
//     frequency). Longer bins and periods (a higher MinSamplesPerPeriod;
//     the exporter's min_samples_per_period) suit these elements better
//     than the link defaults: a half period only a few relaxation times
//     long reads the gradient low (a real cgroup quota wave at 8 bins per
//     period read 31% low); docs/gradient-report.md has measurements.
//   - Bounds. Series are kept for at most MaxTransactions transactions,
//     the calibration buffer holds at most MaxBuffered samples, the guard at
//     most 2¹⁸; what does not fit is counted in Result.Dropped.
package gradient
