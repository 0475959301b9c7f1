#!/usr/bin/env bash
# Issue 11's real-testbed link gradients: testbed tiers in network namespaces,
# real NFQUEUE delays through the injector, the coordinator in the real
# collector (e2e/gradients_long_test.go). Needs root; takes ~30 minutes.
#   scripts/e2e-gradients.sh            # uses build/otelcol-tierscope/otelcol-tierscope
#   REBUILD=1 scripts/e2e-gradients.sh  # rebuilds the collector first
#   GRADIENTS_RUN=sync GRADIENTS_K=48 scripts/e2e-gradients.sh  # one part, larger bins
# (GRADIENTS_RUN: sync,async,lb,predict; GRADIENTS_K/_N/_SCALE/_USERS: k, N, d, closed-loop users)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$HOME/go/bin:$PATH
if [[ "${REBUILD:-0}" == 1 ]]; then scripts/build-otelcol.sh; fi
exec go test -tags long -count=1 -timeout 80m -run 'TestLinkGradientsOnNetnsTestbed' -v ./e2e/ "$@"
