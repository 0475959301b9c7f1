#!/usr/bin/env bash
# The long replay of paper 004's case study behind docs/signature-report.md:
# every run of the case study (Table III workloads, Home +1/+2/+5/+10 ms, the
# heavy-load regime) over SEEDS seeds (default 10), evaluated under the
# defaults and under the alternatives they were chosen against. Writes
# out/signature-report.md. About 1 s of CPU per simulated 3-hour run.
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS="${SEEDS:-10}"
mkdir -p out
SIGNATURE_REPORT="$PWD/out/signature-report.md" SIGNATURE_SEEDS="$SEEDS" \
  go test -count=1 -timeout 60m -run '^TestSignatureReport$' ./internal/sim/tpcwsim/
echo "wrote out/signature-report.md"
