#!/usr/bin/env bash
# What trace recording costs when it is off: an A/B of the task-overhead bench
# (patterns (a) chain, (b) independent, (c) fan-out) between the library as
# shipped (A) and a build without the recording code (B, `--cfg ta_no_trace`:
# no trace field in a task, every observation hook compiled out). Interleaved
# pairs, alternating which goes first; prints each pair's B/A ratios and the
# medians. A ratio below 1 means the build without recording is faster. Each
# pair also runs A with recording on (TA_TRACE), for what recording costs per
# task when it is on.
#
#   scripts/ab-trace-off.sh [PAIRS]      # default 10 pairs, about 10 s a pair
#
# By hand on a quiet machine, not in CI (timings are not tests). Needs
# libstarpu-dev (`make -C examples-c/bench deps`) to link the bench.
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-10}
ROOT=$PWD
OUT=target/ab-trace-off
mkdir -p "$OUT/a" "$OUT/b"

cargo build --release -q -p tensorasync-capi --lib
RUSTFLAGS="--cfg ta_no_trace" CARGO_TARGET_DIR=target/notrace cargo build --release -q -p tensorasync-capi --lib
cp target/release/libtensorasync.so "$OUT/a/libtensorasync.so.0"
cp target/notrace/release/libtensorasync.so "$OUT/b/libtensorasync.so.0"

# The B build really has no recording: starting a trace fails with
# TA_STATUS_UNSUPPORTED there and succeeds in A.
for tag_status in a:0 b:28; do  # TA_STATUS_OK, TA_STATUS_UNSUPPORTED
  python3 - "$OUT/${tag_status%:*}/libtensorasync.so.0" "${tag_status#*:}" <<'EOF'
import ctypes, sys
path, want = sys.argv[1], int(sys.argv[2])
lib = ctypes.CDLL(path)
rt = ctypes.c_void_p()
assert lib.ta_runtime_new(ctypes.c_size_t(1), ctypes.byref(rt), None) == 0
got = lib.ta_runtime_trace_start(rt, None, None)
assert got == want, f"{path}: ta_runtime_trace_start returned {got}, expected {want}"
print(f"{path}: ta_runtime_trace_start -> {got}")
EOF
done

# The bench without an rpath, so that LD_LIBRARY_PATH picks the build.
cc -O2 -std=gnu11 -fopenmp -Iinclude -o "$OUT/bench" examples-c/bench/bench.c \
  $(pkg-config --cflags --libs starpu-1.3) -L"$OUT/a" -l:libtensorasync.so.0 -lm

python3 scripts/ab_pairs.py "$OUT/bench" "$OUT/a" "$OUT/b" "$PAIRS" --traced-a
