#!/usr/bin/env bash
# make run: the testbed under load, observed by the otelcol-tierscope distribution,
# answering the four questions (README): which causal paths cost the most (and how
# many of the parents causalpath inferred were right), what each request costs in
# CPU (work factors, beside the testbed's known burn), each transaction's service
# time without the load (signatures), and what a slower link would do (a short
# gradient experiment on web → app and a what-if prediction).
#
#   1. starts the collector with examples/testbed.yaml (causalpath → file, perfmodel,
#      servicegraph → prometheus; hostmetrics for the CPU; the injector extension);
#   2. starts the testbed's tiers on loopback (`testbed up`, as one process named
#      testbed-tiers), with trace context dropped on the web → app hop so that
#      causalpath has something to repair;
#   3. runs the load generator for DURATION (default 120s) and, meanwhile, a short
#      link experiment (`tierscope experiment start`; the injector needs root);
#   4. lets the last traces through, prints the models (`tierscope models`), the
#      service graph and the metrics of both, then stops the tiers and the collector;
#   5. prints the costliest causal paths, scored against the truth the spans carry
#      (`tierscope summary`), and how to see the same in Grafana.
#
# RUN_FOREVER=1 leaves the tiers, the load and the collector running until Ctrl-C.
# Ports: OTLP_PORT (14317), BASE_PORT (18080 and up), API (127.0.0.1:8790, the
# perfmodel API), PROMETHEUS (127.0.0.1:8889, the service-graph and model metrics)
# and INJECTOR (127.0.0.1:18777). EXPERIMENT=0 skips the experiment.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-out/run}
DURATION=${DURATION:-120s}
OTLP_PORT=${OTLP_PORT:-14317}
API=${API:-127.0.0.1:8790}
PROMETHEUS=${PROMETHEUS:-127.0.0.1:8889}
INJECTOR=${INJECTOR:-127.0.0.1:18777}
BASE_PORT=${BASE_PORT:-18080}
USERS=${USERS:-20}
MIX=${MIX:-nonstationary}
DROP_CONTEXT=${DROP_CONTEXT:-web->app}
EXPERIMENT=${EXPERIMENT:-1}
# The what-if of the fourth answer: this much more latency on the link measured.
WHAT_IF=${WHAT_IF:-link:web->app=+10}
COLLECTOR=build/otelcol-tierscope/otelcol-tierscope
# The injector's bearer token, shared by the extension and the exporter.
INJECTOR_TOKEN=${INJECTOR_TOKEN:-$(head -c 24 /dev/urandom | base64 | tr -d '/+=')}
export INJECTOR_TOKEN

log() { printf '[run %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

wait_port() { # port what
  local deadline=$((SECONDS + 30))
  until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
    if ((SECONDS > deadline)); then
      log "$2 did not listen on 127.0.0.1:$1 within 30s; see $OUT/*.log"
      exit 1
    fi
    sleep 0.2
  done
}

port_free() {
  if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
    log "port 127.0.0.1:$1 is in use; set OTLP_PORT, BASE_PORT, API, PROMETHEUS or INJECTOR"
    exit 1
  fi
}

mkdir -p "$OUT"
rm -f "$OUT/spans.jsonl" "$OUT"/perfmodel.db*
for p in "$OTLP_PORT" "$BASE_PORT" "${API##*:}" "${PROMETHEUS##*:}" "${INJECTOR##*:}"; do port_free "$p"; done

collector_pid="" testbed_pid="" load_pid="" experiment_pid=""
stop() { # pid name
  [ -n "$1" ] || return 0
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
trap 'stop "$experiment_pid"; stop "$load_pid"; stop "$testbed_pid"; stop "$collector_pid"' EXIT
trap 'exit 130' INT TERM

log "starting the collector (OTLP on 127.0.0.1:$OTLP_PORT, spans to $OUT/spans.jsonl)"
TIERSCOPE_OTLP_PORT=$OTLP_PORT TIERSCOPE_SPANS_FILE=$OUT/spans.jsonl TIERSCOPE_API=$API TIERSCOPE_DB=$OUT/perfmodel.db \
  TIERSCOPE_PROMETHEUS=$PROMETHEUS TIERSCOPE_INJECTOR=$INJECTOR TIERSCOPE_INJECTOR_STATE=$OUT/injector \
  TIERSCOPE_APP_ADDRESS=127.0.0.1:$((BASE_PORT + 1)) \
  "$COLLECTOR" --config examples/testbed.yaml >"$OUT/collector.log" 2>&1 &
collector_pid=$!
wait_port "$OTLP_PORT" collector
log "perfmodel API on http://$API (curl -s http://$API/api/v1/graph)"

# The tiers run as one process named testbed-tiers (a link to bin/testbed), so
# that hostmetrics reads their CPU apart from the load generator's; their spans
# name the same process.
ln -sf "$(pwd)/bin/testbed" "$OUT/testbed-tiers"
log "starting the testbed tiers on 127.0.0.1:$BASE_PORT and up (context dropped on: ${DROP_CONTEXT:-nothing})"
# Their SDKs export every second (OTEL_BSP_SCHEDULE_DELAY, 5 s by default), so
# that traces reach the models, and the experiment its samples, sooner.
OTEL_RESOURCE_ATTRIBUTES=process.executable.name=testbed-tiers OTEL_BSP_SCHEDULE_DELAY=1000 \
  "$OUT/testbed-tiers" up --otlp "127.0.0.1:$OTLP_PORT" --base-port "$BASE_PORT" --drop-context "$DROP_CONTEXT" \
  >"$OUT/testbed.log" 2>&1 &
testbed_pid=$!
wait_port "$BASE_PORT" "testbed web tier"

if [ "${RUN_FOREVER:-0}" = 1 ]; then
  log "perfmodel API: curl -s http://$API/api/v1/graph ; curl -s 'http://$API/api/v1/paths?top=5'"
  log "models: bin/tierscope models --api http://$API --what-if '$WHAT_IF'"
  log "an experiment: bin/tierscope experiment start --api http://$API --element 'link:web->app' --k 2 --n 32 --wait"
  log "Grafana: datasource tierscope-perfmodel-datasource at http://$API (grafana-datasource/README.md);"
  log "service-graph and model metrics for Prometheus at http://$PROMETHEUS/metrics"
  log "load running until Ctrl-C"
  bin/testbed load --target "http://127.0.0.1:$BASE_PORT" --mode closed --mix "$MIX" --users "$USERS" --duration 8760h
  exit 0
fi
log "load: $USERS users, $MIX mix, for $DURATION (statistics to $OUT/load.json)"
load_start=$(date +%s)
bin/testbed load --target "http://127.0.0.1:$BASE_PORT" --mode closed --mix "$MIX" --users "$USERS" --duration "$DURATION" \
  >"$OUT/load.json" &
load_pid=$!

# The fourth answer: a short gradient experiment on the web → app link while
# the load runs (paper 000: a square wave of delay through the injector, and
# the spectrum of the front transactions' response times). Few requests per bin
# (k 2) and short windows (n 32; 3 training chunks and one window in
# examples/testbed.yaml) keep it to about a minute and a half; its SNR and
# interval say what that costs in precision.
if [ "$EXPERIMENT" = 1 ] && [ "$(id -u)" = 0 ]; then
  log "experiment: delay waves on web → app (127.0.0.1:$((BASE_PORT + 1))) while the load runs (log: $OUT/experiment.log)"
  echo "  bin/tierscope experiment start --api http://$API --element 'link:web->app' --k 2 --n 32 --wait"
  bin/tierscope experiment start --api "http://$API" --element 'link:web->app' --k 2 --n 32 --wait --poll 10s \
    >"$OUT/experiment.log" 2>&1 &
  experiment_pid=$!
elif [ "$EXPERIMENT" = 1 ]; then
  log "experiment: skipped, the injector delays packets through NFQUEUE and needs root"
fi
wait "$load_pid" || { log "the load generator failed; see $OUT/load.json"; exit 1; }
load_pid=""
load_end=$(date +%s)
if [ -n "$experiment_pid" ]; then
  if ! wait "$experiment_pid"; then
    log "the experiment did not finish; see $OUT/experiment.log and $OUT/collector.log"
  fi
  experiment_pid=""
  sed 's/^/  /' "$OUT/experiment.log" | tail -n 12
fi

# A request's trace reaches the models some 31 s after it (the SDK's batch,
# causalpath's wait and the exporter's trace_wait): wait that long after the
# load, less what the experiment already took.
settle=$((load_end + 32 - $(date +%s)))
if ((settle > 0)); then
  log "the last traces: the SDKs (1 s), causalpath (10 s) and perfmodel (20 s) let them through (${settle} s)"
  sleep "$settle"
fi
echo
log "work factors, signatures, gradients and a what-if from the perfmodel API (since the load began):"
echo "  bin/tierscope models --api http://$API --truth <(bin/testbed truth) --what-if '$WHAT_IF'"
bin/testbed truth >"$OUT/truth.json"
bin/tierscope models --api "http://$API" --truth "$OUT/truth.json" --what-if "$WHAT_IF" --from "$load_start" ||
  log "(the API did not answer; see $OUT/collector.log)"
log "the service graph, paths and models as JSON: curl -s http://$API/api/v1/graph (…/paths, …/workfactors, …/latency)"
log "the service graph as standard service-graph metrics (servicegraph connector, seconds), and the models as metrics"
echo "  (perfmodel receiver), the first 4 series of each:"
echo "  curl -s http://$PROMETHEUS/metrics | grep -E '^(traces_service_graph_request_total|tierscope_)'"
curl -s "http://$PROMETHEUS/metrics" | grep -E '^(traces_service_graph_request_total|tierscope_(workfactor|signature|gradient))' |
  awk -F'{' '++n[$1] <= 4' || log "(no metrics; see $OUT/collector.log)"
stop "$testbed_pid"
testbed_pid=""
stop "$collector_pid"
collector_pid=""

echo
bin/tierscope summary --in "$OUT/spans.jsonl" --top 5

echo
log "to see it in Grafana: RUN_FOREVER=1 make run, install grafana-datasource/dist as the plugin"
echo "  tierscope-perfmodel-datasource with URL http://$API (grafana-datasource/README.md; the provisioned"
echo "  dashboard has every answer above as a panel), and a Prometheus scraping http://$PROMETHEUS/metrics"
echo "  for Grafana's service-graph views and the tierscope_* model metrics"

# ---- work factors on the testbed (issue 37) ---------------------------------
# Each tier as its own process under a varying load, per-process CPU from the
# collector's hostmetrics, and the perfmodel API's work factor of every flow
# printed beside the CPU its request kind is known to burn (measured per
# process with each transaction alone under load before the mixed load):
# e2e/models_test.go, TestWorkFactorsOnTestbed, about 11 minutes on 2 cores,
# so it runs only with WORKFACTORS=1.
if [ "${WORKFACTORS:-0}" = 1 ]; then
  echo
  log "work factors on the testbed: each flow's estimate beside its known CPU cost (about 11 min)"
  wf_log=$OUT/workfactors.log
  wf_status=0
  (cd e2e && go test -tags long -count=1 -timeout 30m -run 'TestWorkFactorsOnTestbed$' -v .) >"$wf_log" 2>&1 || wf_status=$?
  # The test's own lines, without the file:line prefix: the load, each flow
  # (share of the CPU, known cost, estimate, error), the worst.
  sed -n 's/^ *models_test\.go:[0-9]*: //p' "$wf_log" | grep -E '^(load:|per process|machine level|  [a-z]+ |[a-z]+: [0-9]+ Mc|worst)' || true
  if [ "$wf_status" = 0 ]; then
    log "work factors: every flow drawing ≥ 5% of the CPU within 15% of its known cost (per process)"
  else
    log "work factors: the check failed; see $wf_log"
  fi
fi
