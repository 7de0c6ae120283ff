#!/usr/bin/env bash
# gpu-check.sh: the GPU check of tensorasync, one command on a machine with an
# NVIDIA GPU. It builds in release, prints the GPU, runs the GPU tests and the
# GPU benchmark (examples-c/bench/gpu.c: gemm through our C ABI against raw
# cuBLAS at n = 8192, f32 and f64; a chain of 10k small device operations),
# and writes everything under $OUT. Sized to finish in about 8 minutes on 16
# cores, a release build from scratch included.
#
# Usage (from anywhere; paths are relative to the repository root):
#   scripts/gpu-check.sh            run the check: build with cargo, or use the
#                                   prebuilt bundle if $BUNDLE exists
#   scripts/gpu-check.sh --build    run the check, always building with cargo
#   scripts/gpu-check.sh --bundle   on a build machine (cargo, network): build
#                                   and pack $BUNDLE (test binary, library,
#                                   benchmark) for a GPU machine that has no
#                                   Rust toolchain or no network; carry it
#                                   there and run scripts/gpu-check.sh
#
# Environment:
#   OUT         results folder (default ./gpu-results)
#   BUNDLE      prebuilt bundle folder (default ./target/gpu-bundle, or under $CARGO_TARGET_DIR)
#   BENCH_ARGS  arguments of the benchmark: n reps chain (default "8192 5 10000")
#
# Files under $OUT: summary.txt (the results summary), env.txt (GPU, driver,
# libraries), build.log, tests.log, bench.txt.
# Exit status: 0 when everything ran and passed (the benchmark is skipped, with
# a message, when there is no GPU); non-zero when a build, a test or the
# benchmark failed: the summary names which.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=${OUT:-$ROOT/gpu-results}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BUNDLE=${BUNDLE:-$TARGET/gpu-bundle}
BENCH_ARGS=${BENCH_ARGS:-8192 5 10000}
MODE=${1:-check}
case "$MODE" in
  check | --build | --bundle) ;;
  -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
  *) echo "unknown argument: $MODE (see --help)" >&2; exit 2 ;;
esac

CFLAGS_BENCH=(-O2 -std=gnu11 -Wall -Wextra -I"$ROOT/include")
T0=$(date +%s)
say() { printf '\n==> [%4ss] %s\n' "$(($(date +%s) - T0))" "$*"; }
die() { printf '\nFAILED: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------------------
# --bundle: build here, pack for the GPU machine.
if [ "$MODE" = --bundle ]; then
  command -v cargo >/dev/null || die "--bundle needs cargo"
  say "cargo build --release"
  cargo build --release || die "cargo build --release"
  say "cargo test --release --test cuda_gpu --no-run"
  exe=$(cargo test --release --test cuda_gpu --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n 1)
  [ -n "$exe" ] && [ -x "$exe" ] || die "could not find the cuda_gpu test binary"
  rm -rf "$BUNDLE" && mkdir -p "$BUNDLE" || die "cannot create $BUNDLE"
  cp "$exe" "$BUNDLE/cuda_gpu"
  cp "$TARGET/release/libtensorasync.so" "$BUNDLE/libtensorasync.so.0"
  gcc "${CFLAGS_BENCH[@]}" -o "$BUNDLE/gpu-bench" examples-c/bench/gpu.c \
    -L"$TARGET/release" -ltensorasync -Wl,-rpath,'$ORIGIN' -ldl -lm || die "building gpu.c"
  strip --strip-debug "$BUNDLE/cuda_gpu" "$BUNDLE/libtensorasync.so.0" "$BUNDLE/gpu-bench"
  {
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
    echo "rustc: $(rustc --version 2>/dev/null)"
    echo "glibc: $(ldd --version 2>/dev/null | head -n 1)"
  } >"$BUNDLE/MANIFEST"
  say "bundle ready"
  ls -la "$BUNDLE"
  cat "$BUNDLE/MANIFEST"
  echo "carry ${BUNDLE#"$ROOT"/} to the GPU machine and run scripts/gpu-check.sh there"
  exit 0
fi

# ---------------------------------------------------------------------------
# The check.
mkdir -p "$OUT" || die "cannot create $OUT"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
: >"$OUT/build.log"
: >"$OUT/tests.log"
FAILED=()
note() { echo "$*" | tee -a "$SUMMARY"; }

# run_step NAME LOG TIMEOUT CMD...: run CMD under a time limit, output shown
# and appended to LOG; the outcome goes to the summary.
run_step() {
  local name=$1 log=$2 limit=$3 rc
  shift 3
  say "$name"
  echo "\$ $*" >>"$log"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 0 ]; then
    note "PASS  $name"
  else
    [ "$rc" -eq 124 ] && note "FAIL  $name (timed out after ${limit}s)" || note "FAIL  $name (exit $rc)"
    FAILED+=("$name")
  fi
  return "$rc"
}

note "tensorasync GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

# The GPU and its libraries.
say "GPU and libraries"
GPU=0
{
  echo "== nvidia-smi"
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    nvidia-smi -L
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used,temperature.gpu,clocks.sm,clocks.max.sm \
      --format=csv
    nvidia-smi | head -n 20
  else
    echo "no NVIDIA GPU (nvidia-smi is missing or finds none)"
  fi
} 2>&1 | tee "$OUT/env.txt"
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && GPU=1

# find_lib NAME...: the folder of the first library found (ld cache first,
# then the usual CUDA folders, then the nvidia-* Python wheels).
find_lib() {
  local name dir
  for name in "$@"; do
    if ldconfig -p 2>/dev/null | grep -q "[[:space:]]$name "; then
      echo "ldcache"
      return 0
    fi
  done
  for dir in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/local/cuda/lib64 \
    /usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib /usr/lib/wsl/lib; do
    for name in "$@"; do
      [ -e "$dir/$name" ] && { echo "$dir"; return 0; }
    done
  done
  for py in python3 /opt/*/.venv/bin/python3; do
    dir=$("$py" -c 'import os, nvidia.cublas as m; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null) || continue
    for name in "$@"; do
      [ -e "$dir/$name" ] && { echo "$dir"; return 0; }
    done
  done
  return 1
}
LIBPATH=""
for want in "libcuda.so.1" "libcublas.so.13 libcublas.so.12 libcublas.so.11"; do
  # shellcheck disable=SC2086
  if where=$(find_lib $want); then
    [ "$where" != ldcache ] && LIBPATH="$where${LIBPATH:+:$LIBPATH}"
    echo "found ${want%% *}: $where" | tee -a "$OUT/env.txt"
  else
    echo "not found: $want" | tee -a "$OUT/env.txt"
  fi
done
[ -n "$LIBPATH" ] && export LD_LIBRARY_PATH="$LIBPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}" >>"$OUT/env.txt"
if [ "$GPU" = 1 ]; then
  note "GPU   $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n 1)"
else
  note "GPU   none: the tests skip and the benchmark does not run"
fi

# Build (or take the bundle).
TEST_CMD=()
BENCH=""
if [ "$MODE" = check ] && [ -d "$BUNDLE" ]; then
  say "using the prebuilt bundle $BUNDLE"
  cat "$BUNDLE/MANIFEST" 2>/dev/null | tee -a "$OUT/build.log"
  note "BUILD prebuilt bundle ($(sed -n 's/^commit: //p' "$BUNDLE/MANIFEST" 2>/dev/null))"
  [ -x "$BUNDLE/cuda_gpu" ] || die "$BUNDLE/cuda_gpu is missing"
  TEST_CMD=("$BUNDLE/cuda_gpu" --nocapture)
  BENCH=$BUNDLE/gpu-bench
  export LD_LIBRARY_PATH="$BUNDLE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  command -v cargo >/dev/null ||
    die "no cargo here: run 'scripts/gpu-check.sh --bundle' on a build machine and bring $BUNDLE along"
  run_step "cargo build --release" "$OUT/build.log" 420 cargo build --release || die "the release build failed"
  run_step "cargo test --release --test cuda_gpu --no-run" "$OUT/build.log" 300 \
    cargo test --release --test cuda_gpu --no-run || die "building the GPU tests failed"
  TEST_CMD=(cargo test --release --test cuda_gpu -- --nocapture)
  BENCH=$TARGET/release/gpu-bench
  run_step "gcc examples-c/bench/gpu.c" "$OUT/build.log" 60 \
    gcc "${CFLAGS_BENCH[@]}" -o "$BENCH" examples-c/bench/gpu.c \
    -L"$TARGET/release" -ltensorasync -Wl,-rpath,"$TARGET/release" -ldl -lm
fi

# Tests.
run_step "GPU tests (tests/cuda_gpu.rs)" "$OUT/tests.log" 300 "${TEST_CMD[@]}"
grep -E '^test result:' "$OUT/tests.log" | tail -n 1 | sed 's/^/      /' | tee -a "$SUMMARY"
if grep -q 'skipped: no CUDA device' "$OUT/tests.log"; then
  note "      note: the GPU tests skipped (no CUDA device seen by the library)"
  [ "$GPU" = 1 ] && { note "FAIL  a GPU is present but the tests saw no CUDA device"; FAILED+=("device not seen"); }
fi
# The library's device tests on the GPU are the "library_*" tests in
# tests/cuda_gpu.rs (device tensors through the public API); tests/cuda.rs
# covers the same behaviour on simulated devices and runs in CI.

# Benchmark.
if [ "$GPU" = 1 ]; then
  if [ -x "$BENCH" ]; then
    # shellcheck disable=SC2086
    run_step "benchmark: gpu-bench $BENCH_ARGS" "$OUT/bench.txt" 300 "$BENCH" $BENCH_ARGS
    {
      echo "      benchmark (ratio = ours / cuBLAS; gemm target >= 0.95):"
      grep -E '^(op |gemm_|chain_)' "$OUT/bench.txt" | sed 's/^/      /'
    } | tee -a "$SUMMARY"
  else
    note "FAIL  benchmark: $BENCH was not built"
    FAILED+=("benchmark build")
  fi
else
  say "benchmark skipped: no NVIDIA GPU on this machine"
  note "SKIP  benchmark (no GPU)"
fi

say "summary ($SUMMARY)"
note "time  $(($(date +%s) - T0)) s"
if [ "${#FAILED[@]}" -gt 0 ]; then
  note "RESULT: FAILED (${FAILED[*]})"
  cat "$SUMMARY"
  exit 1
fi
note "RESULT: OK"
cat "$SUMMARY"
