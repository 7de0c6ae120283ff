#!/usr/bin/env bash
# Tests of the C++ binding (bindings/cpp/tensorasync.hpp):
#   - the test suite at -std=c++17, c++20 and c++23 (-Wall -Wextra -Werror, and
#     -Wpedantic -Wshadow -Wconversion -Wsign-conversion -Wold-style-cast),
#   - the no-exceptions mode (-fno-exceptions) at c++17 (bundled result type)
#     and c++23 (std::expected),
#   - the suite once under AddressSanitizer + UndefinedBehaviorSanitizer,
#   - the tiled Cholesky example (verifies its own result),
#   - a build of the overhead benchmark (run by hand: see its header),
#   - every TA_STATUS_* of the C header has its ta::status value.
# Needs g++ and the release library (built here if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

CXX=${CXX:-g++}
LIB=$PWD/target/release
OUT=$PWD/target/bindings-cpp
INC="-Iinclude -Ibindings/cpp"
LINK="-L$LIB -Wl,-rpath,$LIB -ltensorasync -pthread"
WARN="-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion -Wold-style-cast -Werror"

cargo build --release -p tensorasync-capi --quiet
ln -sf libtensorasync.so "$LIB/libtensorasync.so.0"
mkdir -p "$OUT"

# The status enum covers the header's statuses.
missing=0
for name in $(sed -n 's/^#define TA_STATUS_\([A-Z_]*\) .*/\1/p' include/tensorasync.h); do
  lower=$(echo "$name" | tr 'A-Z' 'a-z')
  grep -q "^    $lower = TA_STATUS_$name," bindings/cpp/tensorasync.hpp || { echo "ta::status lacks $lower"; missing=1; }
done
[ "$missing" = 0 ] || exit 1
echo "ta::status covers every TA_STATUS_* of the header"

run() { echo "+ $*"; "$@"; }
# Test programs get a time limit, so that a hang fails instead of blocking CI.
run_test() { echo "+ $*"; timeout 300 "$@"; }

for std in 17 20 23; do
  run $CXX -std=c++$std -O1 -g $WARN $INC bindings/cpp/tests/test_cpp.cpp -o "$OUT/test_cpp_$std" $LINK
  run_test "$OUT/test_cpp_$std"
done
for std in 17 23; do
  run $CXX -std=c++$std -fno-exceptions -O1 -g $WARN $INC bindings/cpp/tests/test_cpp_noexc.cpp \
    -o "$OUT/test_cpp_noexc_$std" $LINK
  run_test "$OUT/test_cpp_noexc_$std"
done
run $CXX -std=c++20 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
  $WARN $INC bindings/cpp/tests/test_cpp.cpp -o "$OUT/test_cpp_asan" $LINK
ASAN_OPTIONS=detect_leaks=1 run_test "$OUT/test_cpp_asan"

run $CXX -std=c++17 -O2 $WARN $INC bindings/cpp/examples/tiled_cholesky.cpp -o "$OUT/tiled_cholesky" $LINK
run_test "$OUT/tiled_cholesky"
run $CXX -std=c++17 -O2 $WARN $INC bindings/cpp/examples/bench_overhead.cpp -o "$OUT/bench_overhead" $LINK
echo "C++ binding tests passed (benchmark built: $OUT/bench_overhead)"
