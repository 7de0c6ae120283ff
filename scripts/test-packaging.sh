#!/usr/bin/env bash
# Tests of the installed package: `make -C examples-c install` into a temporary
# prefix, then
#   - the installed files (libraries, headers, Fortran sources, .pc files,
#     CMake package) are there, and the static library has no debug sections;
#   - a CMake project (cmake/consumer) finds the package with
#     find_package(tensorasync 0.1 CONFIG REQUIRED) and builds and runs a C, a
#     C++ and a Fortran program against tensorasync::tensorasync and the C
#     program against tensorasync::tensorasync_static;
#   - the version file refuses a newer or another major version;
#   - pkg-config consumers: the C demo against the shared library, and against
#     the static library with `pkg-config --static --libs tensorasync-static`.
# Installs cmake and gfortran (Debian) if they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v gfortran >/dev/null 2>&1 || missing+=(gfortran)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

WORK=$PWD/target/packaging-test
PREFIX=$WORK/prefix
rm -rf "$WORK"
mkdir -p "$WORK"
VERSION=$(sed -n 's/^version *= *"\([^"]*\)".*/\1/p' Cargo.toml | head -n 1)

cargo build --release -p tensorasync-capi --quiet
make --no-print-directory -s -C examples-c install PREFIX="$PREFIX"

for f in include/tensorasync.h include/tensorasync.hpp lib/libtensorasync.so.$VERSION lib/libtensorasync.a \
         lib/pkgconfig/tensorasync.pc lib/pkgconfig/tensorasync-static.pc \
         lib/cmake/tensorasync/tensorasyncConfig.cmake lib/cmake/tensorasync/tensorasyncConfigVersion.cmake \
         share/tensorasync/fortran/tensorasync_c.f90 share/tensorasync/fortran/tensorasync.f90; do
  [ -e "$PREFIX/$f" ] || { echo "not installed: $f"; exit 1; }
done
if objdump -h "$PREFIX/lib/libtensorasync.a" | grep -q '\.debug_info'; then
  echo "the installed static library still has debug information"; exit 1
fi
echo "installed static library: $(du -h "$PREFIX/lib/libtensorasync.a" | cut -f1)" \
     "(built: $(du -h target/release/libtensorasync.a | cut -f1)), no debug sections"

# The CMake consumer: C, C++, Fortran, and the C program statically linked.
cmake -S cmake/consumer -B "$WORK/cmake-build" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_BUILD_TYPE=Release
cmake --build "$WORK/cmake-build"
for p in consumer_c consumer_c_static consumer_cpp consumer_fortran; do
  "$WORK/cmake-build/$p"
done
if readelf -d "$WORK/cmake-build/consumer_c_static" | grep -q 'NEEDED.*libtensorasync'; then
  echo "consumer_c_static depends on the shared library"; exit 1
fi
readelf -d "$WORK/cmake-build/consumer_c" | grep -q 'NEEDED.*\[libtensorasync.so.0\]'

# The version file: a newer version, or another major version, is refused.
for want in 0.1 "$VERSION"; do
  mkdir -p "$WORK/v-ok"
  printf 'cmake_minimum_required(VERSION 3.13)\nproject(v NONE)\nfind_package(tensorasync %s CONFIG REQUIRED)\n' "$want" \
    > "$WORK/v-ok/CMakeLists.txt"
  cmake -S "$WORK/v-ok" -B "$WORK/v-ok/build" -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
done
for want in 99.0 0.99; do
  mkdir -p "$WORK/v-$want"
  printf 'cmake_minimum_required(VERSION 3.13)\nproject(v NONE)\nfind_package(tensorasync %s CONFIG)\nif(tensorasync_FOUND)\n  message(FATAL_ERROR "accepted")\nendif()\n' "$want" \
    > "$WORK/v-$want/CMakeLists.txt"
  cmake -S "$WORK/v-$want" -B "$WORK/v-$want/build" -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null 2>&1 || {
    echo "find_package(tensorasync $want) accepted version $VERSION"; exit 1; }
done
echo "CMake package: find_package accepts 0.1 and $VERSION, refuses 99.0 and 0.99"

# pkg-config consumers.
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
static_libs=$(pkg-config --static --libs tensorasync-static)
echo "pkg-config --static --libs tensorasync-static: $static_libs"
case "$(pkg-config --static --libs tensorasync)" in *-lpthread*) ;; *) echo "--static lists no system libraries"; exit 1;; esac
cc -std=c99 -O2 examples-c/demo.c -o "$WORK/demo_static" $(pkg-config --cflags tensorasync-static) $static_libs
if readelf -d "$WORK/demo_static" | grep -q 'NEEDED.*libtensorasync'; then
  echo "demo_static depends on the shared library"; exit 1
fi
"$WORK/demo_static" > "$WORK/demo_static.log"
tail -n 1 "$WORK/demo_static.log"
cc -std=c99 -O2 examples-c/demo.c -o "$WORK/demo_shared" $(pkg-config --cflags --libs tensorasync) -Wl,-rpath,"$PREFIX/lib"
"$WORK/demo_shared" > "$WORK/demo_shared.log"
tail -n 1 "$WORK/demo_shared.log"
echo "packaging tests passed"
