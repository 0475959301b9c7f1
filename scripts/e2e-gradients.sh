#!/usr/bin/env bash
# Issue 11's real-testbed link gradients: testbed tiers in network namespaces,
# real NFQUEUE delays through the injector, the coordinator in the real
# collector (e2e/gradients_long_test.go), one experiment measuring every link
# after one shared training phase. Needs root; takes about 40 minutes
# (k = 32, d = 90, min_snr 15, max_windows 3; GRADIENTS_MAX_WINDOWS=2 is the
# setup of runs J–R, GRADIENTS_K=16 GRADIENTS_SCALE=45 GRADIENTS_MIN_SNR=9
# GRADIENTS_MAX_WINDOWS=2 that of runs C–F).
#   scripts/e2e-gradients.sh            # uses build/otelcol-tierscope/otelcol-tierscope
#   REBUILD=1 scripts/e2e-gradients.sh  # rebuilds the collector first
#   GRADIENTS_RUN=sync GRADIENTS_K=48 scripts/e2e-gradients.sh  # one part, larger bins
# (GRADIENTS_RUN: sync,async,lb,predict, or noise, which records GRADIENTS_NOISE_SECONDS
#  of unperturbed load, or linearity, which runs square waves through the
#  injector on app->db (GRADIENTS_LINEARITY_LINK lists other links, e.g.
#  web->app-1,web->app-2), GRADIENTS_LINEARITY=amplitude_ms@period,... (default
#  1.5@4s,5@4s,20@4s), each for GRADIENTS_LINEARITY_SECONDS (default 240),
#  and reports (RT_on − RT_off)/injected per transaction; GRADIENTS_K/_N/_SCALE/_USERS/_MIN_SNR/_MAX_WINDOWS: k, N, d,
#  closed-loop users, min_snr, max_windows; GRADIENTS_SAMPLES=file.csv keeps every
#  client response time)
#   GRADIENTS_ADAPTIVE_IN_WINDOW=0 scripts/e2e-gradients.sh  # the adaptive cycle as a phase of its own (the default up to run AW)
#   GRADIENTS_PERTURBATION_MEASURE=mean scripts/e2e-gradients.sh  # bound the mean change over a window, paper 000 Table 3's measure (run AF)
#   GRADIENTS_REFERENCES=0 scripts/e2e-gradients.sh  # without the requests that did not cross the link as references (as runs before AO)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$HOME/go/bin:$PATH
if [[ "${REBUILD:-0}" == 1 ]]; then scripts/build-otelcol.sh; fi
exec go test -tags long -count=1 -timeout 150m -run 'TestLinkGradientsOnNetnsTestbed' -v ./e2e/ "$@"
