#!/usr/bin/env bash
# End-to-end checks of the work-factor (issue 9) and signature (issue 10) models
# on the real testbed through the shipped collector (e2e/models_test.go, build
# tag `long`: the work factors take about 14 minutes (calibration alone 3.5, in
# the mix 4, load 6), the signatures 5, and want a quiet machine). Rebuilds
# build/otelcol-tierscope/otelcol-tierscope first (seconds when up to date).
#
#   scripts/e2e-models.sh                 # both
#   RUN=TestWorkFactorsOnTestbed scripts/e2e-models.sh
#   WORKFACTOR_SAMPLES_DIR=/tmp/wf scripts/e2e-models.sh   # also saves the regression's inputs (CSV), every
#       span and every 1 s process CPU reading (OTLP JSON lines; docs/workfactor/rewindow.py re-windows them)
#   RUN=TestWorkFactorTruthIsAdditive scripts/e2e-models.sh # the truth's premise: costs alone = costs together (4 min)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
scripts/build-otelcol.sh
cd e2e && go test -tags long -count=1 -v -timeout 30m \
  -run "${RUN:-TestWorkFactorsOnTestbed|TestSignatureCompareOnTestbed}" .
