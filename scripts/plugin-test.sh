#!/usr/bin/env bash
# Runs the Grafana datasource plugin's tests (Go backend, jest, headless Chromium)
# and prints how long each took.
set -euo pipefail
cd "$(dirname "$0")/../grafana-datasource"
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"
for target in test-go test-jest test-browser; do
  started=$(date +%s)
  make --no-print-directory "$target"
  echo "plugin: $target took $(( $(date +%s) - started )) s"
done
