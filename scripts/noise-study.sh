#!/usr/bin/env bash
# What the namespace testbed's own noise allows (e2e/noise_long_test.go): records
# unperturbed client response times from the gradient testbed (root, about
# 17 minutes) unless the sample file exists, then adds known square waves to them
# and reports equation 5's per-window standard error for several per-bin
# statistics, its spread against the time-domain estimates at equal
# perturbation (on/off, a step in the window, paper 000 §2.2's step), the
# noise spectrum's shape and the transactions' coherence.
#   scripts/noise-study.sh                      # records /tmp/tierscope-noise.csv first
#   GRADIENTS_NOISE_SECONDS=2700 scripts/noise-study.sh   # a longer recording (N 512 needs ~45 min)
#   GRADIENTS_SAMPLES=run.csv scripts/noise-study.sh   # any docs/formats.md §7 sample file
#   NOISE_KD=16 NOISE_PERTURBATION_PCT=80 GRADIENTS_K=32 GRADIENTS_N=128 scripts/noise-study.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$HOME/go/bin:$PATH
export GRADIENTS_SAMPLES="${GRADIENTS_SAMPLES:-/tmp/tierscope-noise.csv}"
if [[ ! -s "$GRADIENTS_SAMPLES" ]]; then
	GRADIENTS_RUN=noise GRADIENTS_NOISE_SECONDS="${GRADIENTS_NOISE_SECONDS:-900}" scripts/e2e-gradients.sh
fi
exec go test -tags long -count=1 -run 'TestTestbedNoise' -v ./e2e/
