#!/usr/bin/env bash
# Issue 11's frequency gradient through the real collector
# (e2e/frequency_long_test.go). DVFS is emulated: the injector's cpufreq
# lease drives a fake sysfs tree, and the testbed db tier, pinned to CPU 0 by
# a cgroup v1 cpuset, burns its queries at the speed that tree shows. The
# spectral gradient with respect to 1/(f − α·w), its linearity over six speeds
# and predictions at three unseen ones. Needs root and /sys/fs/cgroup/cpuset;
# takes ~8 minutes.
#   scripts/e2e-frequency.sh            # uses build/otelcol-tierscope/otelcol-tierscope
#   REBUILD=1 scripts/e2e-frequency.sh  # rebuilds the collector first
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$HOME/go/bin:$PATH
if [[ "${REBUILD:-0}" == 1 ]]; then scripts/build-otelcol.sh; fi
exec go test -tags long -count=1 -timeout 25m -run 'TestFrequencyGradientOnEmulatedDVFS' -v ./e2e/ "$@"
