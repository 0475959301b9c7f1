#!/usr/bin/env bash
# The work-factor experiments of docs/workfactor-report.md (paper 002 §5): the
# deterministic replay scored like Table 5, other seeds, background sensitivity,
# solvers, §5.5 collinearity, §5.6 hyperthreading and workload variants. Writes
# the tables to $OUT/workfactor/tables.md (about 30 s), then times the CLI on the
# whole 10-hour replay and the estimator's per-period cost.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-out}/workfactor
mkdir -p "$out"
go build -o bin/tierscope ./cmd/tierscope
go run ./internal/sim/paperexp/cmd/wfreplay -report > "$out/tables.md"
echo "tables: $out/tables.md"
for mode in machine process; do
  flag=""
  [ "$mode" = process ] && flag=-per-process
  csv="$out/replay-$mode.csv"
  go run ./internal/sim/paperexp/cmd/wfreplay -csv "$csv" $flag
  rows=$(($(wc -l < "$csv") - 1))
  start=$(date +%s.%N)
  bin/tierscope workfactor --in "$csv" --every-period --out "$out/estimates-$mode.jsonl"
  end=$(date +%s.%N)
  awk -v m="$mode" -v r="$rows" -v s="$start" -v e="$end" \
    'BEGIN { printf "tierscope workfactor, %s readings: %d rows, 600 periods in %.2f s\n", m, r, e - s }'
done
go test -run '^$' -bench AddPeriod -benchmem ./internal/workfactor/
