#!/usr/bin/env bash
# Builds the otelcol-tierscope collector distribution from builder-config.yaml.
#
#   scripts/build-otelcol.sh                  # -> build/otelcol-tierscope/otelcol-tierscope
#   MANIFEST=other.yaml scripts/build-otelcol.sh
#   FORCE_GENERATE=1 scripts/build-otelcol.sh # regenerate even if nothing changed
#   VERBOSE=1 scripts/build-otelcol.sh        # list packages as they compile
#
# Steps, each skipped when its result is up to date:
#   1. install the pinned OpenTelemetry Collector Builder (ocb) into bin/ocb;
#   2. generate the distribution's sources and go.mod with `ocb --skip-compilation`
#      (this runs `go mod tidy` there, so it needs the module proxy the first time).
#      It is redone only when the manifest, the ocb version or this repository's
#      go.mod/go.sum change: a stamp file in the output directory records them;
#   3. `go build` in the generated module. Go's build cache makes this incremental:
#      after a change to one of our components only that part is recompiled.
#
# Measured on 2 shared cores: cold (empty module and build caches) about 7 min
# (1 min generating and downloading modules, 6 min compiling); after that a
# change in one of our packages recompiles in about 10 s, and a no-op in 1-2 s.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"

OCB_VERSION=${OCB_VERSION:-v0.145.0}
OCB=${OCB:-$ROOT/bin/ocb}
MANIFEST=${MANIFEST:-builder-config.yaml}
GO=${GO:-go}

log() { printf '[build-otelcol %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf '[build-otelcol] error: %s\n' "$*" >&2; exit 1; }

command -v "$GO" >/dev/null || die "go not found (expected in /usr/local/go/bin)"
[ -f "$MANIFEST" ] || die "manifest $MANIFEST not found"

# dist.name and dist.output_path from the manifest (a flat two-space-indented block).
dist_field() {
  awk -v key="$1" '
    /^dist:/ { in_dist = 1; next }
    /^[^[:space:]#]/ { in_dist = 0 }
    in_dist && $1 == key":" { v = $2; gsub(/["'\'']/, "", v); print v; exit }
  ' "$MANIFEST"
}
NAME=$(dist_field name)
OUT=$(dist_field output_path)
[ -n "$NAME" ] && [ -n "$OUT" ] || die "$MANIFEST: dist.name and dist.output_path are required"

# 1. ocb, pinned.
have_ocb_version() { [ -x "$OCB" ] && "$OCB" version 2>&1 | grep -q "$OCB_VERSION"; }
if ! have_ocb_version; then
  log "installing ocb $OCB_VERSION into $(dirname "$OCB")"
  tmpbin=$(mktemp -d)
  GOBIN="$tmpbin" "$GO" install "go.opentelemetry.io/collector/cmd/builder@$OCB_VERSION"
  mkdir -p "$(dirname "$OCB")"
  mv "$tmpbin/builder" "$OCB"
  rmdir "$tmpbin"
  have_ocb_version || die "$OCB does not report version $OCB_VERSION"
fi

# 2. Generate, unless the stamp says the generated module is current.
stamp_file="$OUT/.tierscope-build-stamp"
stamp=$( { echo "ocb $OCB_VERSION"; cat "$MANIFEST" go.mod go.sum; } | sha256sum | cut -d' ' -f1)
if [ "${FORCE_GENERATE:-0}" = 1 ] || [ ! -f "$OUT/go.mod" ] || [ ! -f "$OUT/components.go" ] ||
   [ "$(cat "$stamp_file" 2>/dev/null)" != "$stamp" ]; then
  log "generating sources in $OUT from $MANIFEST (ocb; go mod tidy/download, slow the first time)"
  mkdir -p "$OUT"
  rm -f "$stamp_file"
  start=$SECONDS
  ocb_log=$(mktemp)
  if ! "$OCB" --config "$MANIFEST" --skip-compilation >"$ocb_log" 2>&1; then
    cat "$ocb_log" >&2
    rm -f "$ocb_log"
    die "ocb failed to generate the distribution (see above)"
  fi
  grep -E 'Sources created|Getting go modules|error' "$ocb_log" | sed 's/^/  ocb: /' || true
  rm -f "$ocb_log"
  echo "$stamp" >"$stamp_file"
  log "generated in $((SECONDS - start))s"
else
  log "sources in $OUT are up to date (manifest and go.mod unchanged)"
fi

# 3. Compile (incremental through the Go build cache).
log "compiling $OUT/$NAME (cold: several minutes on 2 cores; warm: seconds)"
start=$SECONDS
ticker_pid=
if [ "${PROGRESS:-1}" = 1 ]; then
  ( while sleep 30 >/dev/null 2>&1; do log "  ... still compiling ($((SECONDS - start))s)"; done ) &
  ticker_pid=$!
fi
stop_ticker() { [ -n "$ticker_pid" ] && kill "$ticker_pid" 2>/dev/null; ticker_pid=; }
trap stop_ticker EXIT
build_flags=(-trimpath -buildvcs=false -ldflags='-s -w')
[ "${VERBOSE:-0}" = 1 ] && build_flags+=(-v)
( cd "$OUT" && CGO_ENABLED=0 "$GO" build "${build_flags[@]}" -o "$NAME" . )
stop_ticker
log "built $OUT/$NAME in $((SECONDS - start))s"
"$OUT/$NAME" --version
