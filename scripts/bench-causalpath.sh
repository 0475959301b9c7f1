#!/usr/bin/env bash
# Throughput of the causalpath processor against the servicegraph connector, in
# one run of the otelcol-tierscope distribution with one pipeline per contender,
# each fed by its own OTLP/gRPC receiver on 127.0.0.1:
#
#   causalpath:   otlp/causalpath   → causalpath → batch → debug/causalpath
#   servicegraph: otlp/servicegraph → batch → [servicegraph, debug/servicegraph];
#                 servicegraph (metrics) → debug/servicegraph-metrics
#   baseline:     otlp/baseline     → batch → debug/baseline   (optional ceiling)
#
# internal/sim/loadgen/cmd/loadgen sends the same three-tier spans (DROP_FRACTION of
# the requests lost their context on the web → app hop) to one pipeline at a
# time, as fast as it accepts them, for DURATION each. Reported per pipeline:
# spans/s accepted by the receiver, spans/s that reached the pipeline's exporter
# (from the collector's own metrics, after a drain), and collector CPU seconds,
# hence spans per CPU-second, which is less sensitive to other load on the host.
#
#   make bench-causalpath
#   PIPELINES="servicegraph baseline" DURATION=10s scripts/bench-causalpath.sh
#
# Results: a table on stdout and build/bench/causalpath.json.
set -euo pipefail

cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"

OTELCOL=${OTELCOL:-build/otelcol-tierscope/otelcol-tierscope}
PIPELINES=${PIPELINES:-causalpath servicegraph}
DURATION=${DURATION:-20s}
CONCURRENCY=${CONCURRENCY:-4}
DROP_FRACTION=${DROP_FRACTION:-0.5}
MAX_SPANS_SENT=${MAX_SPANS_SENT:-50000000}
CAUSALPATH_MODE=${CAUSALPATH_MODE:-reparent}
CAUSALPATH_WAIT=${CAUSALPATH_WAIT:-2s}
# Large enough that at a few hundred thousand spans/s nothing leaves the buffer
# early; set 100000 (the examples' value) to see the overflow behaviour.
CAUSALPATH_MAX_SPANS=${CAUSALPATH_MAX_SPANS:-1000000}
# The same for the connector: edges wait up to the store's ttl (2s) for their
# other side, and a full store drops the spans that would add edges, which
# spares the connector their work. At 150,000 spans/s some 200,000 edges wait
# (the unanswered calls of the dropped hops and the database calls); at 100,000
# the connector dropped more than half of the spans.
SERVICEGRAPH_MAX_ITEMS=${SERVICEGRAPH_MAX_ITEMS:-1000000}
OUT_DIR=${OUT_DIR:-build/bench}

log() { printf '[bench-causalpath %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf '[bench-causalpath] error: %s\n' "$*" >&2; exit 1; }

[ -x "$OTELCOL" ] || die "$OTELCOL not found: run make build-otelcol first"
for p in $PIPELINES; do
  case $p in causalpath|servicegraph|baseline) ;; *) die "unknown pipeline $p (causalpath, servicegraph, baseline)" ;; esac
done
if [[ " $PIPELINES " == *" causalpath "* ]] && ! "$OTELCOL" components 2>/dev/null | grep -q 'name: causalpath$'; then
  die "$OTELCOL was built without the causalpath processor; rebuild (make build-otelcol) or set PIPELINES=\"servicegraph baseline\""
fi

mkdir -p "$OUT_DIR"
work=$(mktemp -d)
collector_pid=
cleanup() {
  if [ -n "$collector_pid" ] && kill -0 "$collector_pid" 2>/dev/null; then
    kill -INT "$collector_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$collector_pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$collector_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# A port on 127.0.0.1 that nothing listens on right now.
used_ports=" "
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    [[ "$used_ports" == *" $p "* ]] && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      used_ports+="$p "
      echo "$p"
      return
    fi
  done
}
wait_port() {
  for _ in $(seq 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "$collector_pid" 2>/dev/null || { tail -30 "$work/collector.log" >&2; die "the collector exited"; }
    sleep 0.1
  done
  die "port $1 did not open"
}
# GET http://127.0.0.1:$1/metrics without curl.
scrape() {
  exec 3<>"/dev/tcp/127.0.0.1/$1"
  printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  cat <&3
  exec 3<&-
}
# Sum of a Prometheus counter's samples whose labels contain $3, from file $1.
metric() {
  awk -v name="$2" -v sel="$3" '
    index($0, name) == 1 && (sel == "" || index($0, sel) > 0) { s += $NF }
    END { printf "%.0f", s + 0 }' "$1"
}
# utime+stime of a process, in seconds.
cpu_seconds() {
  awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / hz }' "/proc/$1/stat"
}

log "building the load generator"
go build -o "$OUT_DIR/loadgen" ./internal/sim/loadgen/cmd/loadgen

metrics_port=$(free_port)
declare -A port
for p in $PIPELINES; do port[$p]=$(free_port); done

{
  echo "receivers:"
  for p in $PIPELINES; do
    printf '  otlp/%s:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:%s\n' "$p" "${port[$p]}"
  done
  echo "processors:"
  echo "  batch: {}"
  if [ -n "${port[causalpath]:-}" ]; then
    cat <<EOF
  causalpath:
    mode: $CAUSALPATH_MODE
    wait: $CAUSALPATH_WAIT
    max_spans: $CAUSALPATH_MAX_SPANS
    skew_window: 5ms
EOF
  fi
  if [ -n "${port[servicegraph]:-}" ]; then
    cat <<EOF
connectors:
  servicegraph:
    latency_histogram_buckets: [2ms, 5ms, 10ms, 25ms, 50ms, 100ms, 250ms, 500ms, 1s]
    store:
      ttl: 2s
      max_items: $SERVICEGRAPH_MAX_ITEMS
    virtual_node_peer_attributes: [service.peer.name, peer.service, db.system.name, db.system, server.address]
    metrics_flush_interval: 5s
EOF
  fi
  echo "exporters:"
  for p in $PIPELINES; do printf '  debug/%s:\n    verbosity: basic\n' "$p"; done
  [ -n "${port[servicegraph]:-}" ] && printf '  debug/servicegraph-metrics:\n    verbosity: basic\n'
  cat <<EOF
service:
  telemetry:
    logs:
      level: info
    metrics:
      level: normal
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: $metrics_port
  pipelines:
EOF
  for p in $PIPELINES; do
    case $p in
      causalpath) procs="[causalpath, batch]"; exps="[debug/causalpath]" ;;
      servicegraph) procs="[batch]"; exps="[servicegraph, debug/servicegraph]" ;;
      baseline) procs="[batch]"; exps="[debug/baseline]" ;;
    esac
    printf '    traces/%s:\n      receivers: [otlp/%s]\n      processors: %s\n      exporters: %s\n' "$p" "$p" "$procs" "$exps"
  done
  if [ -n "${port[servicegraph]:-}" ]; then
    printf '    metrics/servicegraph:\n      receivers: [servicegraph]\n      exporters: [debug/servicegraph-metrics]\n'
  fi
} >"$work/config.yaml"
cp "$work/config.yaml" "$OUT_DIR/causalpath-bench-config.yaml"

log "starting $OTELCOL (pipelines: $PIPELINES; config in $OUT_DIR/causalpath-bench-config.yaml)"
"$OTELCOL" --config "$work/config.yaml" >"$work/collector.log" 2>&1 &
collector_pid=$!
for p in $PIPELINES; do wait_port "${port[$p]}"; done
wait_port "$metrics_port"

calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
# Seconds in a Go duration such as 2s, 500ms or 1m (whole seconds, rounded up).
seconds_of() {
  awk -v d="$1" 'BEGIN {
    if (d ~ /ms$/) { sub(/ms$/, "", d); v = d / 1000 } else if (d ~ /m$/) { sub(/m$/, "", d); v = d * 60 }
    else { sub(/s$/, "", d); v = d + 0 }
    printf "%d", (v == int(v)) ? v : int(v) + 1 }'
}
# A field of a flat JSON object.
field() { echo "$1" | sed -E "s/.*\"$2\":\"?([^,\"}]*).*/\1/"; }

results=()
for p in $PIPELINES; do
  scrape "$metrics_port" >"$work/before.prom"
  cpu0=$(cpu_seconds "$collector_pid")
  log "sending to $p (127.0.0.1:${port[$p]}) for $DURATION, $CONCURRENCY concurrent exports"
  lg=$("$OUT_DIR/loadgen" --endpoint "127.0.0.1:${port[$p]}" --duration "$DURATION" --concurrency "$CONCURRENCY" \
        --drop-fraction "$DROP_FRACTION" --max-spans "$MAX_SPANS_SENT" --label "$p")
  drain=3
  [ "$p" = causalpath ] && drain=$(( $(seconds_of "$CAUSALPATH_WAIT") + 3 ))
  log "draining for ${drain}s"
  sleep "$drain"
  cpu1=$(cpu_seconds "$collector_pid")
  scrape "$metrics_port" >"$work/after.prom"
  cp "$work/after.prom" "$OUT_DIR/metrics-after-$p.prom"
  sel="exporter=\"debug/$p\""
  exported=$(( $(metric "$work/after.prom" otelcol_exporter_sent_spans "$sel") - $(metric "$work/before.prom" otelcol_exporter_sent_spans "$sel") ))
  sel="receiver=\"otlp/$p\""
  refused=$(( $(metric "$work/after.prom" otelcol_receiver_refused_spans "$sel") - $(metric "$work/before.prom" otelcol_receiver_refused_spans "$sel") ))
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$collector_pid/status")
  extra="\"exported_spans\":$exported,\"refused_spans\":$refused,\"collector_cpu_seconds\":$(calc "$cpu1 - $cpu0"),\"collector_rss_kib\":$rss"
  if [ "$p" = causalpath ]; then
    # The processor's own counters (processor/causalpathprocessor/metadata.yaml).
    for c in spans_received dropped orphans inferred left_orphan; do
      n=otelcol_processor_causalpath_${c}_total
      extra+=",\"causalpath_$c\":$(( $(metric "$work/after.prom" "$n" "") - $(metric "$work/before.prom" "$n" "") ))"
    done
  fi
  if [ "$p" = servicegraph ]; then
    # The connector's own counters: spans it dropped (store full) and edges expired.
    for c in dropped_spans expired_edges total_edges; do
      n=otelcol_connector_servicegraph_${c}_total
      extra+=",\"servicegraph_$c\":$(( $(metric "$work/after.prom" "$n" "") - $(metric "$work/before.prom" "$n" "") ))"
    done
  fi
  results+=("${lg%\}},$extra}")
  log "$p: $(printf '%.0f' "$(field "${results[-1]}" spans_per_sec)") spans/s accepted"
done

{
  printf '{"duration":"%s","concurrency":%s,"drop_fraction":%s,' "$DURATION" "$CONCURRENCY" "$DROP_FRACTION"
  printf '"causalpath":{"mode":"%s","wait":"%s","max_spans":%s},' "$CAUSALPATH_MODE" "$CAUSALPATH_WAIT" "$CAUSALPATH_MAX_SPANS"
  printf '"servicegraph":{"max_items":%s},' "$SERVICEGRAPH_MAX_ITEMS"
  printf '"host_cores":%s,"load_average":"%s","runs":[' "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
  (IFS=,; printf '%s' "${results[*]}")
  printf ']}\n'
} >"$OUT_DIR/causalpath.json"

printf '\n%-13s %11s %11s %11s %9s %12s %10s %8s\n' pipeline "accepted/s" "exported/s" "inferred/s" "coll_cpu" "spans/cpu_s" "lgen_cpu" "rss_MiB"
declare -A rate
for r in "${results[@]}"; do
  name=$(field "$r" label); secs=$(field "$r" seconds); acc=$(field "$r" spans_accepted)
  cpu=$(field "$r" collector_cpu_seconds); exp=$(field "$r" exported_spans); rss=$(field "$r" collector_rss_kib)
  rate[$name]=$(field "$r" spans_per_sec)
  through="-"
  if [ "$name" = causalpath ]; then
    # Spans that went through inference (not released early because the buffer was full).
    through=$(printf '%.0f' "$(calc "($(field "$r" causalpath_spans_received) - $(field "$r" causalpath_dropped)) / $secs")")
  fi
  printf '%-13s %11.0f %11.0f %11s %9.1f %12.0f %10.1f %8.0f\n' "$name" "${rate[$name]}" "$(calc "$exp / $secs")" "$through" "$cpu" \
    "$(calc "($cpu > 0) ? $acc / $cpu : 0")" "$(field "$r" loadgen_cpu_seconds)" "$(calc "$rss / 1024")"
  if [ "$name" = servicegraph ]; then
    sg_dropped=$(field "$r" servicegraph_dropped_spans); sg_expired=$(field "$r" servicegraph_expired_edges)
  fi
  if [ "$name" = causalpath ]; then
    cp_early=$(field "$r" causalpath_dropped); cp_orph=$(field "$r" causalpath_orphans)
    cp_inf=$(field "$r" causalpath_inferred); cp_left=$(field "$r" causalpath_left_orphan)
  fi
done
if [ -n "${cp_orph:-}" ]; then
  printf '\ncausalpath: %s spans released early (buffer full, max_spans %s), %s orphans looked at, %s given a parent, %s left orphan (true roots among them)\n' \
    "$cp_early" "$CAUSALPATH_MAX_SPANS" "$cp_orph" "$cp_inf" "$cp_left"
fi
if [ -n "${sg_dropped:-}" ]; then
  printf 'servicegraph: %s spans dropped (store full, max_items %s), %s edges expired\n' "$sg_dropped" "$SERVICEGRAPH_MAX_ITEMS" "$sg_expired"
fi
if [ -n "${rate[causalpath]:-}" ] && [ -n "${rate[servicegraph]:-}" ]; then
  printf 'ratio causalpath/servicegraph, accepted spans/s: %.3f\n' "$(calc "${rate[causalpath]} / ${rate[servicegraph]}")"
fi
echo "accepted/s and exported/s are per second of sending; coll_cpu covers sending and draining; spans/cpu_s = accepted / coll_cpu."
echo "(host: $(nproc) cores shared with the load generator, load average now $(cut -d' ' -f1-3 /proc/loadavg); details in $OUT_DIR/causalpath.json)"
