#!/usr/bin/env bash
# make run: the testbed under load, observed by the otelcol-tierscope distribution.
#
#   1. starts the collector with examples/testbed.yaml (causalpath → file);
#   2. starts the testbed's tiers on loopback (`testbed up`), with trace context
#      dropped on the web → app hop so that causalpath has something to repair;
#   3. runs the load generator for DURATION (default 90s), with a progress line;
#   4. stops the tiers, lets causalpath release its buffer, stops the collector;
#   5. prints the costliest causal paths and the service graph (`tierscope summary`).
#
# RUN_FOREVER=1 leaves the tiers, the load and the collector running until Ctrl-C.
# Ports: OTLP_PORT (14317), BASE_PORT (18080 and up), API (127.0.0.1:8790, the
# perfmodel API) and PROMETHEUS (127.0.0.1:8889, the service-graph metrics).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${OUT:-out/run}
DURATION=${DURATION:-90s}
OTLP_PORT=${OTLP_PORT:-14317}
API=${API:-127.0.0.1:8790}
PROMETHEUS=${PROMETHEUS:-127.0.0.1:8889}
BASE_PORT=${BASE_PORT:-18080}
USERS=${USERS:-20}
MIX=${MIX:-nonstationary}
DROP_CONTEXT=${DROP_CONTEXT:-web->app}
COLLECTOR=build/otelcol-tierscope/otelcol-tierscope

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
    log "port 127.0.0.1:$1 is in use; set OTLP_PORT or BASE_PORT"
    exit 1
  fi
}

mkdir -p "$OUT"
rm -f "$OUT/spans.jsonl"
port_free "$OTLP_PORT"
port_free "$BASE_PORT"

collector_pid="" testbed_pid=""
stop() { # pid name
  [ -n "$1" ] || return 0
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
trap 'stop "$testbed_pid"; stop "$collector_pid"' EXIT
trap 'exit 130' INT TERM

log "starting the collector (OTLP on 127.0.0.1:$OTLP_PORT, spans to $OUT/spans.jsonl)"
TIERSCOPE_OTLP_PORT=$OTLP_PORT TIERSCOPE_SPANS_FILE=$OUT/spans.jsonl TIERSCOPE_API=$API TIERSCOPE_DB=$OUT/perfmodel.db \
  TIERSCOPE_PROMETHEUS=$PROMETHEUS "$COLLECTOR" --config examples/testbed.yaml >"$OUT/collector.log" 2>&1 &
collector_pid=$!
wait_port "$OTLP_PORT" collector
log "perfmodel API on http://$API (curl -s http://$API/api/v1/graph)"

log "starting the testbed tiers on 127.0.0.1:$BASE_PORT and up (context dropped on: ${DROP_CONTEXT:-nothing})"
bin/testbed up --otlp "127.0.0.1:$OTLP_PORT" --base-port "$BASE_PORT" --drop-context "$DROP_CONTEXT" \
  >"$OUT/testbed.log" 2>&1 &
testbed_pid=$!
wait_port "$BASE_PORT" "testbed web tier"

if [ "${RUN_FOREVER:-0}" = 1 ]; then
  log "perfmodel API: curl -s http://$API/api/v1/graph ; curl -s 'http://$API/api/v1/paths?top=5'"
  log "Grafana: datasource tierscope-perfmodel-datasource at http://$API (grafana-datasource/README.md);"
  log "service-graph metrics for Prometheus at http://$PROMETHEUS/metrics"
  log "load running until Ctrl-C"
  bin/testbed load --target "http://127.0.0.1:$BASE_PORT" --mode closed --mix "$MIX" --users "$USERS" --duration 8760h
  exit 0
fi
log "load: $USERS users, $MIX mix, for $DURATION (statistics to $OUT/load.json)"
bin/testbed load --target "http://127.0.0.1:$BASE_PORT" --mode closed --mix "$MIX" --users "$USERS" --duration "$DURATION" \
  >"$OUT/load.json"

log "stopping the tiers; the graph once causalpath (10 s) and perfmodel (20 s) have let the last traces through"
stop "$testbed_pid"
testbed_pid=""
sleep 32
echo
log "the service graph from the perfmodel API:"
echo "  curl -s http://$API/api/v1/graph"
curl -s "http://$API/api/v1/graph" || log "(the API did not answer; see $OUT/collector.log)"
echo
log "the same graph as standard service-graph metrics (servicegraph connector, seconds):"
echo "  curl -s http://$PROMETHEUS/metrics | grep traces_service_graph_request_total"
curl -s "http://$PROMETHEUS/metrics" | grep '^traces_service_graph_request_total' || log "(no service-graph metrics; see $OUT/collector.log)"
echo
log "to see it in Grafana: RUN_FOREVER=1 make run, install grafana-datasource/dist as the plugin"
echo "  tierscope-perfmodel-datasource with URL http://$API (grafana-datasource/README.md), and"
echo "  a Prometheus scraping http://$PROMETHEUS/metrics for Grafana's service-graph views"
stop "$collector_pid"
collector_pid=""

echo
bin/tierscope summary --in "$OUT/spans.jsonl" --top 5

# ---- work factors on the testbed (issue 37) ---------------------------------
# Each tier as its own process under a varying load, per-process CPU from the
# collector's hostmetrics, and the perfmodel API's work factor of every flow
# printed beside the CPU its request kind is known to burn (testbed config
# burn + the measured unburned cost): e2e/models_test.go,
# TestWorkFactorsOnTestbed, about 8 minutes on 2 cores, so it runs only with WORKFACTORS=1.
if [ "${WORKFACTORS:-0}" = 1 ]; then
  echo
  log "work factors on the testbed: each flow's estimate beside its known CPU cost (about 8 min)"
  wf_log=$OUT/workfactors.log
  wf_status=0
  (cd e2e && go test -tags long -count=1 -timeout 30m -run 'TestWorkFactorsOnTestbed$' -v .) >"$wf_log" 2>&1 || wf_status=$?
  # The test's own lines, without the file:line prefix: the load, each flow
  # (share of the CPU, known burn + unburned cost, estimate, error), the worst.
  sed -n 's/^ *models_test\.go:[0-9]*: //p' "$wf_log" | grep -E '^(load:|per process|machine level|  [a-z]+ |[a-z]+: [0-9]+ Mc|worst)' || true
  if [ "$wf_status" = 0 ]; then
    log "work factors: every flow drawing ≥ 5% of the CPU within 15% of its known cost (per process)"
  else
    log "work factors: the check failed; see $wf_log"
  fi
fi
