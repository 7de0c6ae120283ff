#!/usr/bin/env bash
# Runs the dense kernel tests (potrf, trsm, syrk/herk for f32, f64, c64 and
# c128, both triangles, the untouched triangle checked bit for bit) on the
# instruction-set paths other than the build machine's: faer picks its
# kernels by run-time CPU detection, so the same binary runs
#   - under valgrind (which hides AVX-512),
#   - under qemu-user as a Haswell (AVX2, no AVX-512),
#   - under qemu-user as a Nehalem (SSE4.2, no AVX).
# Needs valgrind and qemu-user (qemu-x86_64); installs qemu-user if missing.
set -euo pipefail
cd "$(dirname "$0")/.."

FILTER=kernels::factor_tests

if ! command -v qemu-x86_64 >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq qemu-user
fi

# The library's unit-test binary (the kernel tests live there), as the
# workspace's `cargo test --release` builds it: selecting the workspace's
# packages gives the same features, so the binary is reused, not rebuilt
# (`-p tensorasync` alone drops capi's features and rebuilds the crate).
bin=$(cargo test --release --lib --no-run --message-format=json 2>/dev/null | python3 -c '
import json, os, sys
root = os.path.realpath("Cargo.toml")
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("executable") and os.path.realpath(msg.get("manifest_path", "")) == root:
        print(msg["executable"])')
[ -x "$bin" ] || { echo "test-simd-paths: no test binary found" >&2; exit 1; }

run() {
  local what=$1
  shift
  local start=$SECONDS
  echo "--- kernel tests $what"
  "$@" "$bin" "$FILTER" --test-threads=2 -q 2>&1 | tail -n 3
  local rc=${PIPESTATUS[0]}
  echo "    ($((SECONDS - start)) s)"
  return "$rc"
}

run "natively" env
run "under valgrind (no AVX-512)" valgrind -q --error-exitcode=99
run "under qemu -cpu Haswell (AVX2)" qemu-x86_64 -cpu Haswell
run "under qemu -cpu Nehalem (SSE4.2)" qemu-x86_64 -cpu Nehalem
echo "kernel tests passed on every path"
