#!/usr/bin/env bash
# Throughput of the blackbox receiver's live capture: the packets per second it
# handles without a drop on this machine, and the cost of the packet path
# without the socket.
#
#   sudo scripts/bench-capture.sh          # root: network namespaces, AF_PACKET
#
# 1. TestCaptureThroughput (receiver/blackboxreceiver, build tag `long`): a
#    sender namespace writes HTTP calls over 1,000 TCP connections onto a veth
#    with an AF_PACKET socket at paced rates (5k, 25k, 50k, ... packets/s);
#    the receiver captures them in the peer namespace through the whole path
#    (BPF filter, socket, reassembly, HTTP framing, spans to a sink). A rate
#    passes when every packet sent is captured, the kernel drops none and every
#    call gives its two spans; the highest passing rate is reported. Sender and
#    capture share the machine's cores, so the figure is a lower bound of what
#    the capture alone sustains.
# 2. BenchmarkEngine: decoding, reassembly and framing only, packets/s on one
#    core.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH:/usr/local/sbin:/usr/sbin:/sbin"
GO=${GO:-go}
out=${OUT:-out}
mkdir -p "$out"
if [ "$(id -u)" -ne 0 ]; then
  echo "bench-capture: needs root (network namespaces and AF_PACKET)" >&2
  exit 2
fi
echo "== live capture, whole receiver path (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
BENCH_CAPTURE_OUT="$PWD/$out/capture-pps.txt" $GO test -tags long -count=1 -timeout 10m \
  -run '^TestCaptureThroughput$' -v ./receiver/blackboxreceiver/ | grep -E 'throughput_long_test|^(ok|FAIL|---)'
echo "== packet path without the socket (decode, reassembly, HTTP framing)"
$GO test -run '^$' -bench '^BenchmarkEngine$' -benchtime 2000000x ./receiver/blackboxreceiver/internal/engine/ | grep -E '^Benchmark'
echo "capture throughput without drops: $(cat "$out/capture-pps.txt") packets/s"
