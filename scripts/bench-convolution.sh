#!/usr/bin/env bash
# Costs of `tierscope paths --algorithm convolution` against paper 001 (table 1,
# figure 23, §5.2.5), end to end through the command line:
#
#   1. table 1: the 200,000-message multi-tier trace (500 s) at μ = 10 ms, target
#      ≤ 2 s wall (the paper: 6684 s), and the email-like relay trace (about
#      76,000 messages over 5.1e6 s) at μ = 5 s, target ≤ 5 s (the paper: 2106 s),
#      and at 30 s (338 s);
#   2. figure 23: run time against the quantum on the email trace, with the FFT
#      forced (time per correlation fitted to a·S·log2(S) + b) and with the
#      default method;
#   3. memory, O(m + S): peak RSS at S = 10^6 and 10^7 quanta (the multi-tier
#      trace at μ = 500 µs and 50 µs, FFT forced, the first two levels of the
#      graph, where the S-sized vectors live), the bytes per further quantum, and
#      the email trace at S = 10^7 with the default method, whole.
#
# Wall time depends on what else the machine runs; CPU time (user + sys) is
# printed beside it. LONG=1 also runs the Go long tests of the same claims
# (internal/causal/convolution_long_test.go), which measure the heap directly.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=bin/tierscope
out=${OUT:-out}/convolution
mkdir -p "$out"
if ! command -v /usr/bin/time >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq time
fi
go build -o "$bin" ./cmd/tierscope

multi="$out/multitier.tsv"
email="$out/relay-email.tsv"
[ -f "$multi" ] || "$bin" maketrace --config testdata/multitier.yaml --seed 1 --out "$multi" 2>/dev/null
[ -f "$email" ] || "$bin" maketrace --config testdata/relay-email.yaml --seed 1 --out "$email" 2>/dev/null

# run NAME TRACE ARGS...: one timed run; prints wall, CPU and peak RSS, and
# leaves the report in $out/NAME.json and "wall cpu rss_kb quanta correlations" in $out/NAME.cost.
run() {
  local name=$1 trace=$2
  shift 2
  /usr/bin/time -f '%e %U %S %M' -o "$out/$name.time" \
    "$bin" paths --algorithm convolution --in "$trace" --out "$out/$name.json" "$@"
  local wall user sys rss quanta corr
  read -r wall user sys rss < "$out/$name.time"
  quanta=$(grep -m1 '"quanta"' "$out/$name.json" | tr -dc 0-9)
  corr=$(grep -m1 '"correlations"' "$out/$name.json" | tr -dc 0-9)
  echo "$wall $(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }') $rss $quanta $corr" > "$out/$name.cost"
}

show() { # show NAME LABEL TARGET_SECONDS
  local wall cpu rss quanta corr verdict
  read -r wall cpu rss quanta corr < "$out/$1.cost"
  verdict=""
  if [ -n "${3:-}" ]; then
    verdict=$(awk -v w="$wall" -v c="$cpu" -v t="$3" 'BEGIN { if (w <= t) print "within " t " s"; else if (c <= t) print "CPU within " t " s, wall over (busy machine?)"; else print "OVER " t " s" }')
  fi
  printf '%-34s S=%9d  %4d correlations  wall %6.2f s  CPU %6.2f s  peak RSS %6.0f MB  %s\n' \
    "$2" "$quanta" "$corr" "$wall" "$cpu" "$(awk -v r="$rss" 'BEGIN { print r / 1024 }')" "$verdict"
}

echo "== table 1 ($(grep -vc '^#' "$multi") and $(grep -vc '^#' "$email") messages)"
run t1-multi "$multi" --quantum 10ms
show t1-multi "multi-tier, μ=10 ms (paper 6684 s)" 2
run t1-email5 "$email" --quantum 5s
show t1-email5 "email, μ=5 s (paper 2106 s)" 5
run t1-email30 "$email" --quantum 30s
show t1-email30 "email, μ=30 s (paper 338 s)" 5

echo "== figure 23: email trace, time against the quantum"
: > "$out/fig23.dat"
for mu in 5 10 20 30 60 120 360 720; do
  run "fig23-fft-$mu" "$email" --quantum "${mu}s" --correlation fft
  run "fig23-auto-$mu" "$email" --quantum "${mu}s"
  read -r wall cpu rss quanta corr < "$out/fig23-fft-$mu.cost"
  read -r awall acpu _ _ _ < "$out/fig23-auto-$mu.cost"
  printf 'μ=%4d s  S=%8d  FFT: %3d correlations, CPU %7.2f s (%6.2f ms each), wall %7.2f s   auto: CPU %5.2f s, wall %5.2f s\n' \
    "$mu" "$quanta" "$corr" "$cpu" "$(awk -v c="$cpu" -v n="$corr" 'BEGIN { print 1000 * c / n }')" "$wall" "$acpu" "$awall"
  echo "$quanta $cpu $corr" >> "$out/fig23.dat"
done
# Least squares of CPU per correlation against S·log2(S). The process's start-up
# (reading the trace) is in every run, which the intercept absorbs.
awk '{ s = $1; x = s * log(s) / log(2); y = $2 / $3; n++; sx += x; sy += y; sxx += x * x; sxy += x * y; X[n] = x; Y[n] = y }
  END {
    a = (n * sxy - sx * sy) / (n * sxx - sx * sx); b = (sy - a * sx) / n
    for (i = 1; i <= n; i++) { e = Y[i] - a * X[i] - b; d = Y[i] - sy / n; ssr += e * e; sst += d * d }
    printf "CPU per correlation = %.3g ns x S*log2(S) + %.3g ms, R^2 = %.4f\n", a * 1e9, b * 1e3, 1 - ssr / sst
  }' "$out/fig23.dat"

echo "== memory, O(m + S)"
run mem-6 "$multi" --quantum 500us --correlation fft --max-depth 2
show mem-6 "multi-tier FFT, μ=500 µs"
run mem-7 "$multi" --quantum 50us --correlation fft --max-depth 2
show mem-7 "multi-tier FFT, μ=50 µs"
read -r _ _ rss6 q6 _ < "$out/mem-6.cost"
read -r _ _ rss7 q7 _ < "$out/mem-7.cost"
awk -v r6="$rss6" -v r7="$rss7" -v q6="$q6" -v q7="$q7" \
  'BEGIN { printf "peak RSS grows by %.1f bytes per quantum from S=%d to S=%d (FFT plan 24 + sequence 8 + spectrum 8 + one cached spectrum 8 = 48)\n", (r7 - r6) * 1024 / (q7 - q6), q6, q7 }'
run mem-email "$email" --quantum 500ms
show mem-email "email, default method, μ=500 ms"

if [ "${LONG:-0}" = 1 ]; then
  echo "== go test -tags long (heap measured in process)"
  go test -tags long -count=1 -timeout 30m -run 'TestConvolution(Figure23|Memory)' -v ./internal/causal/ | grep -E 'fig23|memory|^(ok|FAIL|---)'
fi
