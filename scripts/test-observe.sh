#!/usr/bin/env bash
# Observability checks beyond the C tests: the content of traces the library
# writes (test_observe's diamond, and the tiled Cholesky under TA_TRACE), and
# scripts/trace_gantt.py on them and on a generated trace. Needs the release
# library and the C tests built (make -C examples-c check does both). Installs
# matplotlib into a virtual environment under target/.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=target/observe-venv
if ! "$VENV/bin/python" -c "import matplotlib" 2>/dev/null; then
  if ! python3 -c "import ensurepip" 2>/dev/null; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv
  fi
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q matplotlib
fi
make -C examples-c tests examples >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
TRACE_OUT="$work/diamond.json" examples-c/build/tests/test_observe
TA_TRACE="$work/cholesky.json" examples-c/build/tiled_cholesky >/dev/null
TA_TRACE="$work/cholesky-600.json" examples-c/build/tiled_cholesky 600 100 >/dev/null
# The simulated CUDA devices of test_cuda: device work on per-stream tracks.
TA_TRACE="$work/cuda.json" examples-c/build/tests/test_cuda >/dev/null
"$VENV/bin/python" scripts/test_trace_gantt.py --diamond "$work/diamond.json" \
  --program "$work/cholesky.json" "$work/cholesky-600.json" --device "$work/cuda.json" --workdir "$work/out"
# The build without the recording code (what scripts/ab-trace-off.sh measures
# against) still compiles, clippy-clean. The cfg is read by the core crate
# alone, so it is given to that crate alone (clippy passes it to the
# workspace's crates): the dependencies are the ones the hygiene step's
# `cargo clippy --release` checked, not a build of their own.
cargo clippy -q --release -p tensorasync --lib -- --cfg ta_no_trace -D warnings
