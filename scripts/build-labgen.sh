#!/usr/bin/env bash
# Build native/labgen (labctl's paced DPDK generator) with meson + ninja into build/labgen.
# Cached: rebuilds only when native/labgen's meson.build or sources, or the DPDK version, change
# (a hash of them is kept in build/labgen/.source-hash). Needs meson, gcc and libdpdk-dev
# (scripts/setup-host.sh installs them). LABGEN_BUILD_DIR overrides the output directory.
set -euo pipefail
cd "$(dirname "$0")/.."

SRC=native/labgen
OUT=${LABGEN_BUILD_DIR:-build/labgen}
STAMP=$OUT/.source-hash

for tool in meson ninja pkg-config; do
  command -v "$tool" >/dev/null || { echo "build-labgen: $tool is not installed (scripts/setup-host.sh installs it)" >&2; exit 1; }
done
dpdk=$(pkg-config --modversion libdpdk 2>/dev/null) || { echo "build-labgen: libdpdk-dev is not installed (pkg-config libdpdk)" >&2; exit 1; }

want=$( { echo "dpdk $dpdk"; find "$SRC/meson.build" "$SRC/src" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; } | sha256sum | cut -d' ' -f1)
if [[ -x $OUT/labgen && -x $OUT/labgen-selftest && -f $STAMP && "$(cat "$STAMP")" == "$want" ]]; then
  exit 0
fi

echo "build-labgen: building $SRC into $OUT (DPDK $dpdk)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if [[ ! -f $OUT/build.ninja ]]; then
  rm -rf "$OUT"
  meson setup "$OUT" "$SRC" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
fi
# ninja re-runs meson by itself when meson.build changed
ninja -C "$OUT" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
echo "$want" >"$STAMP"
