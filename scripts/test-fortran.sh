#!/usr/bin/env bash
# Tests of the Fortran binding (bindings/fortran):
#   - tensorasync_c.f90 is what gen_interfaces.py makes of include/tensorasync.h
#     (and the check does fail on a header with one more function),
#   - the modules build with -std=f2018 -Wall -Wextra -Werror,
#   - the test program (-std=f2018 -Wall -Werror -fcheck=all) and the tiled
#     Cholesky example run and verify their results.
# Installs gfortran (Debian) if it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v gfortran >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq gfortran
fi

FC=${FC:-gfortran}
LIB=$PWD/target/release
OUT=$PWD/target/bindings-fortran
rm -rf "$OUT"
mkdir -p "$OUT"

python3 bindings/fortran/gen_interfaces.py --check
# The staleness check itself: a header with one more function must fail it.
sed 's/^const char \*ta_version(void);/&\nta_status ta_probe_extra(size_t n);/' include/tensorasync.h > "$OUT/extra.h"
if python3 bindings/fortran/gen_interfaces.py --check --header "$OUT/extra.h" >/dev/null 2>&1; then
  echo "gen_interfaces.py --check did not notice a changed header"; exit 1
fi
echo "gen_interfaces.py --check notices a changed header"

cargo build --release -p tensorasync-capi --quiet
ln -sf libtensorasync.so "$LIB/libtensorasync.so.0"

run() { echo "+ $*"; "$@"; }
MODFLAGS="-std=f2018 -Wall -Wextra -Werror -J$OUT"
TESTFLAGS="-std=f2018 -Wall -Werror -fcheck=all -g -J$OUT -I$OUT"
LINK="-L$LIB -Wl,-rpath,$LIB -ltensorasync"
run $FC $MODFLAGS -c bindings/fortran/tensorasync_c.f90 -o "$OUT/tensorasync_c.o"
run $FC $MODFLAGS -c bindings/fortran/tensorasync.f90 -o "$OUT/tensorasync.o"
for prog in tests/test_fortran examples/tiled_cholesky; do
  name=$(basename $prog)
  run $FC $TESTFLAGS bindings/fortran/$prog.f90 "$OUT/tensorasync.o" "$OUT/tensorasync_c.o" -o "$OUT/$name" $LINK
  run timeout 300 "$OUT/$name"
done
echo "Fortran binding tests passed"
