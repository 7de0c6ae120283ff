#!/usr/bin/env bash
# What a change of the code costs per task: an A/B of the task-overhead
# bench (patterns (a) chain, (b) independent, (c) fan-out) between the
# library built from another commit (A) and the working tree (B), plus the
# instructions per `ta_kernel_submit` of each (callgrind, deterministic:
# docs/perf-notes/capi-submit-callgrind.c). Interleaved pairs, alternating
# which goes first (scripts/ab_pairs.py); a ratio below 1 means the working
# tree is faster.
#
#   scripts/ab-builds.sh REF [PAIRS]     # default 10 pairs, about 8 s a pair
#
# Issue 16's bar was measured as `scripts/ab-builds.sh f858170` (the last
# commit before the restructure into two crates and layers).
# By hand on a quiet machine, not in CI (timings are not tests). Needs
# libstarpu-dev (`make -C examples-c/bench deps`) to link the bench, and valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
REF=${1:?usage: scripts/ab-builds.sh REF [PAIRS]}
PAIRS=${2:-10}
OUT=target/ab-builds
# Outside the repository: a package below it would be taken for a member of
# this workspace.
SRC="${TMPDIR:-/tmp}/tensorasync-ab/src-$(git rev-parse --short "$REF")"
mkdir -p "$OUT/a" "$OUT/b"

# A: REF in a worktree of its own (its own target dir, kept for the next run).
if [ ! -d "$SRC" ]; then git worktree add --detach "$SRC" "$REF"; fi
# Before the split the C library was the top crate; after it, tensorasync-capi.
if [ -d "$SRC/capi" ]; then
  (cd "$SRC" && cargo build --release -q -p tensorasync-capi --lib)
else
  (cd "$SRC" && cargo build --release -q --lib)
fi
cargo build --release -q -p tensorasync-capi --lib
cp "$SRC/target/release/libtensorasync.so" "$OUT/a/libtensorasync.so.0"
cp target/release/libtensorasync.so "$OUT/b/libtensorasync.so.0"

# Instructions per ta_kernel_submit (20000 calls, NULL event_out).
cc -O2 -Iinclude -o "$OUT/submit" docs/perf-notes/capi-submit-callgrind.c -L"$OUT/a" -l:libtensorasync.so.0
for tag in a b; do
  n=$(LD_LIBRARY_PATH="$OUT/$tag" valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        --toggle-collect=ta_kernel_submit "$OUT/submit" 2>&1 | sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
  echo "$tag: $((n / 20000)) instructions per ta_kernel_submit"
done

# The bench without an rpath, so that LD_LIBRARY_PATH picks the build.
cc -O2 -std=gnu11 -fopenmp -Iinclude -o "$OUT/bench" examples-c/bench/bench.c \
  $(pkg-config --cflags --libs starpu-1.3) -L"$OUT/a" -l:libtensorasync.so.0 -lm
python3 scripts/ab_pairs.py "$OUT/bench" "$OUT/a" "$OUT/b" "$PAIRS"
