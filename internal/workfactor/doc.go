// Package workfactor estimates the CPU demand of each request flow (its "work
// factor", in standard megacycles per request) from machine or process CPU
// utilization and per-flow request rates, after Pacifici, Segmuller, Spreitzer
// and Tantawi, "Dynamic estimation of CPU demand of web traffic" (paper 002). It
// is pure: no I/O, no global state, deterministic.
//
// # Use
//
// Feed an Estimator one period at a time:
//
//	e, _ := workfactor.New(workfactor.DefaultConfig())
//	est, err := e.AddPeriod(period, []workfactor.Observation{
//		{Machine: "xd008", CapacityMHz: 4585, Utilization: 0.35, Rates: map[string]float64{"A": 31.9, "B": 24.6}},
//	})
//	alpha, ok := est.WorkFactorOf("A")
//
// Every period gets an Estimate (the document of docs/formats.md §5). e.State() is
// the persistent state (JSON, its equations as columns with their flows by
// index, or MarshalBinary; both read versions 1–3 too); Restore resumes
// from it; Merge combines two shards' states (see State); Current solves a
// restored or merged state without changing it.
//
// # Issue 37: memory from the data, collinear combining, background
//
// DefaultConfig goes beyond the paper in four ways (PaperConfig turns them
// all off); docs/workfactor-report.md measures them on generated scenarios
// (internal/workfactor/scenario).
//
//   - Memory chosen from the data (Config.MaxHalfLife, MemoryGrowth). A
//     block's half-life is MemoryGrowth (4) times the number of periods since
//     its last detected change, between HalfLife (10) and MaxHalfLife (1000):
//     at realistic utilization noise the paper's 10 periods leave too few
//     equations for the minor flows, while a fixed long memory follows a
//     release hundreds of periods late. Growing at 4× the regime's age keeps
//     its first periods near full weight ((1/age)^(ln 2/4): 46% after 100
//     periods; at 1× they would weigh 4%), as a stationary regime deserves;
//     a change is found by the tests below, not by forgetting. The effective
//     memory is reported (Estimate.HalfLife, BlockFit.HalfLife).
//   - Change detection: a CUSUM on the residuals (our choice, rather than the
//     paper's §4 alone). Each source keeps a two-sided CUSUM (Page) of its
//     equations' standardized one-step-ahead residuals against the last
//     solve, with allowance CusumDrift (0.5σ) and alarm level CusumThreshold
//     (8σ). The residuals are recursive residuals (Brown, Durbin and Evans):
//     divided by √(1 + leverage) so that a young model's own error does not
//     accumulate, and by the source's own residual level (machines of
//     different power have different noise), each capped at 4σ so that
//     background bursts, which the 5σ outlier test throws out, cannot raise an
//     alarm. The 5σ tests below still catch large changes at once; the CUSUM
//     catches a minor flow's change as it accumulates. For 4·HalfLife periods
//     after a change the CUSUM is off (the new model is young).
//   - Where a regime found by a CUSUM alarm started (Config.ChangePoint,
//     changepoint.go). An alarm comes up to tens of periods after a minor
//     flow's change, and the equations in between hold the new work factors.
//     Each source keeps a trail: the equations folded in since its regime
//     started (at most 128 periods), each with the aging weight it still has
//     in the sums and its standardized residual against the solve before it.
//     At an alarm the change point is the maximum-likelihood one of a shift in
//     the mean of the block's sources' standardized residuals (Hinkley 1970,
//     "Inference about the change-point in a sequence of random variables"),
//     k̂ = argmax_k Σ_s S_s,k²/n_s,k, S_s,k the sum of source s's residuals
//     from period k to the alarm and n_s,k their number, held equations
//     included. It is used when the maximum exceeds 2·ln n (n periods
//     searched; Schwarz's penalty for the location): then the equations after
//     it are subtracted from the previous regime, at the weight they have
//     there, and folded into the new one at the same weight; otherwise only
//     the last ShiftPeriods move, as before. ChangePointRegression (a
//     two-segment regression of the residuals on the rates, Quandt 1958, with
//     a Bayes factor as in Smith 1975) did as well, at more cost;
//     ChangePointExcursion (the start of the CUSUM's excursion) worse: the
//     excursion often starts tens of periods before the change
//     (docs/workfactor-report.md).
//   - Both regimes after a change. A change usually concerns a few flows (a
//     release); forgetting everything would estimate the others from the
//     few periods since. So at a change the block's sums are kept as the
//     previous regime (State.PrevC, aged at MaxHalfLife). When there is one
//     already, the regime ending is merged into it: as is when no flow was
//     found changed (or new) during it (its shift was a false alarm);
//     otherwise after the previous regime is rewritten in the ending
//     regime's work factors, each equation y = xᵀα becoming y + xᵀδ with δ
//     the last solve's increments (State.Smooth[i].Delta), so that a second
//     shift discards nothing (without the increments, as in a state written
//     before version 5, the regime holding more aged equations N_h is kept).
//     A regime younger than 4·HalfLife is not kept (it is most likely the
//     aftermath of the shift before). Each solve then estimates across both
//     regimes, averaging over which columns changed (Config.Changes,
//     ChangeAveraging):
//     every flow column spanning both regimes may get an increment (a copy
//     over the current regime only), and every subset S of the increments is
//     weighed by its posterior probability (Bayesian model averaging,
//     averageChanges). The priors: a flat one on the coefficients; increments
//     δ_a ~ N(0, τ_a²) with τ_a = ChangeScale (½) × the larger of the column's
//     two work factors; over the subsets, a beta-binomial (ChangePrior 0:
//     p(S) = 1/((m+1)·C(m, |S|)), the share of changed columns learnt from the
//     data). With the coefficients integrated out, S's weight needs only the
//     Schur complement A, b of the normal equations:
//     log p(S|y) = log p(S) − ½ log det(I + T A_SS T/σ²) + ½ b_Sᵀ M_S⁻¹ b_S/σ²,
//     M_S = A_SS + σ² T⁻². The estimates are the posterior means, their
//     goodness the mean over the posterior standard deviation, and a column is
//     reported changed (FlowEstimate.Changed) at a posterior probability ≥ ½.
//     Exact over the 10 most significant increments; the background column
//     gets none (a release changes work factors, and a background increment
//     is confounded with any steady flow's change). ChangeBackward, Ridge and
//     NNLS select one subset instead, by backward elimination: the increment
//     of least goodness is dropped while that goodness is below 3. A changed
//     column gets one coefficient per regime, an unchanged one a single
//     coefficient over both. Up to 24 columns; larger blocks use the current
//     regime alone.
//   - Combining only what is collinear (Config.Combining, CombineCollinear).
//     Flows whose aged, centred rate correlation over the block's equations
//     reaches CollinearCorrelation (0.99) cannot be told apart: they share one
//     column, whose coefficient is their rate-weighted work factor and whose
//     power λ·α is exact. Every other flow starts alone; the columns are ranked
//     by power (rate × work factor), not by rate, for the q always solved and
//     for the column budget. Flows that fail §4.3's criterion still join one
//     combined column. Groups are reported with their reason (Estimate.Groups,
//     FlowEstimate.Group).
//   - A background column when the data identify it (BackgroundAuto): in
//     machine mode one shared column, kept when its variance inflation
//     B0/(B0 − bᵀC⁻¹b) is at most BackgroundMaxVIF (1000) and its estimate is
//     not negative. A small positive background with g < 1 is kept: dropping it
//     would give its power to the steadiest flows. Its form comes from the
//     data (backgroundForm): the same MHz on every machine (the paper's column
//     of ones) or the same share of each machine's capacity (a column of Ω_m),
//     whichever lowers the residual sum of squares more; on machines of
//     different power the wrong form's differences go to the flows each
//     machine serves (15% on a test, TestBackgroundForm). Per-process readings get no
//     column: they hold no other tenant's work, and on the testbed a column
//     took per-request costs of the processes' flows (errors to −25%).
//   - A flow that fails §4.3's criterion and whose rates correlate at ≥ 0.9
//     with another column's is grouped with it (reason given) rather than
//     joining the combined column.
//   - No utilization discounting (NoDiscount): §4.2's f(ρ) weighs rows by a
//     function of the noisy reading itself, which biases the fit (below); on
//     the scenarios' releases 12 of 20 runs passed with it, 14 without.
//
// CrossCheck compares the work factors with the application signature's
// service times (paper 004, S = R·(1−U)), which estimate the same demand: per
// service, the rate-weighted α/coreMHz against S, flagged beyond 25%.
//
// # The paper, section by section
//
//   - Model (§2, §3.1, §3.3): ρ_m·Ω_m = Σ_k λ_k,m·α_k, one equation per machine
//     (or process) and period, solved by least squares α̂ = C⁻¹D on C = XᵀX and
//     D = XᵀY, which are updated incrementally and never require X or Y.
//   - Aging (§3.4): rows of period i (1 = newest) weigh 2^((1−i)/h); a new period
//     multiplies C and D by 2^(−2/h) before adding its equations. N_h = Σ
//     2^((1−i)/h) over equations (so M machines give M equations per period).
//     MSE = SSE/(N_h − K − 1) (equation 5), R² = 1 − SSE/SST, g_k = α̂_k/S_k with
//     S² = MSE·diag(C⁻¹) (§3.2).
//   - Flow rejection (§4.1): X̄ = 1ᵀX/N_h; a flow with X̄_k/‖X̄‖₁ < δ (1e-5) is left
//     out of the regression.
//   - Utilization discounting (§4.2): rows are multiplied by f(ρ), piecewise
//     linear through (0, 0), (0.2, 2/3) and (1, 1) (Discount). Machine mode
//     only. The paper's reason is the noise of an idle machine's reading; a
//     process's share is not noisier for being small, and f is steep where
//     process shares lie (f ≈ 3.3ρ below 0.2), so weighing by it gives the
//     periods whose reading came out high by chance more weight: a bias
//     towards larger α. Measured: on the real testbed (per process, whole-run
//     half-life) the db's flows read search_items +24%, list_items −18%,
//     insert_bid −15% discounted and +10%, −3%, −10% without; the §5 replay
//     is unchanged (6 seeds: the same cells beaten and tails within 15%;
//     discounting by the machine's utilization instead did slightly worse).
//   - Combining (§4.3): flows in decreasing X̄; flows j+q … K start combined into
//     one column (q = 2); failing flows (α̂ < 0, α̂ a floating-point problem, g < 1)
//     are moved into it and the problem re-solved, at most 2q+1 times.
//   - Smoothing (§4.4): α̃ = P/Q with P ← 2^(−1/t)P + s(g)α̂, Q ← 2^(−1/t)Q + s(g),
//     s piecewise linear (SmoothingWeight); t = 15 periods by default.
//   - Per-process CPU (§4.6): with Config.PerProcess each observation is one
//     server process and its own share of the machine. The problem splits into
//     independent blocks, the connected components of the graph in which a
//     process links the flows it serves; each block has its own N_h, MSE, R²,
//     rejection and combining. (Machine mode uses the same mechanism; with an
//     interlinked placement there is one block.)
//   - Background (§4.8): Config.Background adds a column of ones, shared by the
//     block's machines (the paper's) or one per machine; off by default, as the
//     paper advises: when utilization varies little the background and the
//     steadiest flows are collinear and both estimates fail. The same section's
//     intermittent background work is thrown out as outliers (below).
//   - Hyperthreading (§5.6): Config.UtilizationPolynomial corrects each reading
//     with a polynomial (degree 3 in the paper); InvertPolynomial fits one from a
//     measured distortion. Ω must be the hyperthreaded machine's power.
//   - Ridge and NNLS (§6 names ridge for collinear flows): Config.Method. Ridge
//     solves (SCS + λI)x = SD on the standardized problem; NNLS is Lawson and
//     Hanson's active set on C and D.
//
// # Where the paper is loose, and what is done
//
//   - j of §4.3. The text's "lowest j with X̄_j ≤ ‖X̄‖" holds for j = 1 always
//     (an element never exceeds the L1 norm), which would solve only two flows
//     alone, yet the paper's flow F (fourth by rate) gets its own estimates. It is
//     read as X̄_j ≤ ‖X̄‖/K, the mean flow rate (Config.CombineThreshold scales
//     it): in the §5 baseline A, B, E and F start alone and the rest combined,
//     and the paper reports estimates above 1 for only A, B and F.
//   - SST with aging. YᵀY − N_hȲ² mixes squared and plain weights and can be
//     negative; the consistent weighted form YᵀY − (Σv²y)²/Σv² is used.
//   - A combined flow's estimate is the combined column's. It updates the
//     member's smoothing with s(g) scaled by the member's share of the combined
//     rate: a rate-weighted mean says little about a minor member.
//   - The failing criterion is also applied to the combined column. A failing
//     combined column is not used as an estimate: it is fixed at its members'
//     smoothed work factors (when those are mature, HalfLife periods old), and
//     the other columns are solved around it; otherwise it stays free.
//   - Plausibility is added to the failing criterion: α̂ above twice D_c/C_cc
//     (the value the column would get if it alone explained the CPU of the
//     equations it appears in, an upper bound when work factors and background
//     are non-negative) is a fitting artefact: a flow seen in one or two periods
//     has a column that acts as an indicator of those periods.
//   - Columns and equations. The paper asks N_h ≥ K. Here a block solves at most
//     (N_h − 1)/2 columns (as many spare equations as columns), except the q
//     largest flows, which are solved whenever dof ≥ 1. When the columns are
//     short, the combined column is fixed first (as above), so that the main
//     flows are estimated from the first periods.
//   - Sources without any rate (idle machines) are skipped and counted unless a
//     background column is on.
//
// # Beyond the paper: outliers, shifts, responsiveness
//
// The paper's §6 finds its estimates slow to follow changes; its §4.8 advises
// throwing out periods of intermittent background work. Both are implemented
// (Config.ShiftSigma, 5 by default; 0 gives the paper's behaviour exactly, see
// PaperConfig):
//
//   - Each new equation is predicted from the last solve; σ_y² is estimated per
//     block from the weighted residuals (SSE·N_h/(Σv²·dof), floored at 0.1% of Ω).
//     An equation more than ShiftSigma·σ_y off is held back.
//   - If the source's next equation fits, the held ones were intermittent
//     background (§4.8) and are thrown out (Counters.Outliers).
//   - If ShiftPeriods (3) consecutive equations of a source are held, or two or
//     more sources of a block are suspect in the same period with misfits that
//     one flow's change of work factor explains (r_s ≈ Δα·λ_k,s to 80%, for a
//     flow carrying a tenth of each of those sources' requests: a changed work
//     factor shows on every machine serving the flow in proportion to its rate
//     there, background bursts do not), the work factors have shifted: the block's sums are aged by ShiftForget (8)
//     extra half-lives, the equations since the change (held, and those folded
//     meanwhile) are folded in again, and the first held period, which straddles
//     the change, is thrown out (Counters.Shifts). Without this, the utilization
//     discounting makes a busy old regime outweigh a quiet new one for tens of
//     periods (f² weighs a 15%-busy machine 36 times a 2.5%-busy one).
//   - Within HalfLife periods after a shift a persistent misfit is folded in
//     rather than taken for another shift, and an immediate shift needs misfits
//     above 3·ShiftSigma: a young model mispredicts moderately.
//   - For HalfLife periods after a shift (or a flow's first appearance) a flow's
//     smoothing forgets P and Q when its own new estimate differs from α̃ by more
//     than ShiftSigma standard errors; flows that did not change keep theirs.
//   - Flows the model does not know yet count for nothing in a prediction, unless
//     they carry more than a tenth of the equation's requests.
//   - When a shift leaves too few equations to measure the noise (per-process
//     blocks have one or two per period), the block's previous σ_y² stands in for
//     the MSE, so the main flows are estimated from the first new period.
//
// Trade-offs: with readings that lag the throughput window, the period before a
// change already contains some of it; two sources then look suspect at once and
// the estimate of that one period is a blend of the two regimes. And before a
// first noise level is known (the first periods), bursts of background work
// cannot be recognised; through f(ρ) a burst period then weighs many quiet ones.
// docs/workfactor-report.md measures both.
//
// # Bad input
//
// AddPeriod never returns NaN or infinite numbers. It returns an error only for
// a period that does not increase. Observations with a NaN, infinite, negative
// or above-1 utilization, a capacity that is not a positive number, a NaN,
// infinite or negative rate, all-zero rates (without a background column), the
// wrong mode (a process in machine mode or none in per-process mode), or a
// source given twice in a period are skipped and counted (Counters). Missing
// periods are counted and only age the data; a period without any usable
// observation is counted and not solved. A single flow is an ordinary
// (univariate) problem. A block that cannot be solved (too few equations, or
// every column singular) is counted and keeps its smoothed work factors.
//
// # Bounds
//
// The state is K² + O(K·S) numbers for K flows and S sources, bounded by
// Config.MaxFlows and Config.MaxSources: beyond them the least-used flow (not
// seen in the current period) or the longest-silent source is evicted and
// counted. The trails (Config.ChangePoint) add at most 128 equations per
// source, each its flows' names and rates and six numbers. Sources whose aged
// weight fell below 1e-12 are pruned.
package workfactor
