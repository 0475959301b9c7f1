#!/usr/bin/env bash
# Issue 11's capacity gradient on a real cgroup (e2e/capacity_long_test.go): a
# CPU-bound testbed tier in a cgroup v1 cpu group, a square wave of its CFS
# quota through the injector in the real collector, the spectral gradient with
# respect to 1/(c·f − α·w), its linearity over six quotas and predictions at
# three unseen ones. Needs root and /sys/fs/cgroup/cpu; takes ~40 minutes (two waves, below and above, up to 8 windows each).
#   scripts/e2e-capacity.sh            # uses build/otelcol-tierscope/otelcol-tierscope
#   REBUILD=1 scripts/e2e-capacity.sh  # rebuilds the collector first
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$HOME/go/bin:$PATH
if [[ "${REBUILD:-0}" == 1 ]]; then scripts/build-otelcol.sh; fi
exec go test -tags long -count=1 -timeout 80m -run 'TestCapacityGradientOnRealCgroup' -v ./e2e/ "$@"
