#!/usr/bin/env bash
# Runs every test of tensorasync on a fresh Debian machine with Rust and gcc:
# installs the tools it needs, then runs
#   1. the Rust unit, integration, differential and header tests (release),
#      and a build of the criterion benchmarks;
#   2. the C tests (examples-c), once normally and once under valgrind;
#   3. the install + pkg-config check;
#   4. the Rust tests again under AddressSanitizer, when a nightly toolchain exists.
set -euo pipefail
cd "$(dirname "$0")/.."

CBINDGEN_VERSION=0.29.4

# Each `step` call starts a step and ends the one before it; the duration of
# every step is printed when it ends, and all of them again in a summary at
# exit (also when a step fails).
STEP_NAME="" STEP_START=0 STEP_TIMES=""
step_end() {
  [ -n "$STEP_NAME" ] || return 0
  local secs=$((SECONDS - STEP_START))
  printf '<== %s: %d min %02d s\n' "$STEP_NAME" $((secs / 60)) $((secs % 60))
  STEP_TIMES+=$(printf '%6d s  %s' "$secs" "$STEP_NAME")$'\n'
  STEP_NAME=""
}
step() {
  step_end
  printf '\n==> %s\n' "$*"
  STEP_NAME="$*" STEP_START=$SECONDS
}
step_summary() {
  local rc=$?
  step_end
  printf '\nstep durations (total %d s):\n%s' "$SECONDS" "$STEP_TIMES"
  exit $rc
}
trap step_summary EXIT

missing=()
for tool in valgrind:valgrind pkg-config:pkg-config g++:g++ make:make; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool##*:}")
done
# OpenBLAS at run time, so the tests of the system-BLAS backend run with a
# library present (they also test its absence, in a child process).
ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so\.0' || missing+=(libopenblas0)
if ((${#missing[@]})); then
  step "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
if ! cbindgen --version 2>/dev/null | grep -q "$CBINDGEN_VERSION"; then
  step "installing cbindgen $CBINDGEN_VERSION"
  cargo install cbindgen --version "$CBINDGEN_VERSION" --locked
fi

step "Rust hygiene: cargo fmt --check, cargo clippy -D warnings, cargo doc without warnings"
cargo fmt --all --check
# Both on the release profile: the dependencies are checked once for the two
# (and for the no-trace check in scripts/test-observe.sh), and their build
# scripts are the ones `cargo test --release` runs.
cargo clippy --release --workspace --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --release --no-deps --workspace
python3 scripts/check-import-cycles.py src capi/src capi/cdylib/src
cyc=$(mktemp -d); printf 'mod a;\nmod b;\n' >"$cyc/lib.rs"
printf 'use crate::b::X;\n' >"$cyc/a.rs"; printf 'use super::a::Y;\n' >"$cyc/b.rs"
if python3 scripts/check-import-cycles.py "$cyc" >/dev/null; then echo "the import-cycle check missed a cycle"; exit 1; fi
rm -rf "$cyc"

# Every public item of the core crate has a doc example; read from rustdoc's
# JSON output, which needs nightly (its own target dir, target/doc-json).
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  step "doc examples: every public item has one (rustdoc JSON, nightly)"
  python3 scripts/check-doc-examples.py --self-test
  python3 scripts/check-doc-examples.py
else
  step "no nightly toolchain: doc-example check skipped"
fi

step "Rust tests (cargo test --release)"
cargo test --release

# The kernel benches compile library sources into themselves (benches/common/
# kernel_shim.rs), so a change to those sources can break them: build them.
step "benchmarks build (cargo bench --no-run)"
cargo bench --no-run

step "dense kernel tests on other instruction sets (valgrind, qemu Haswell and Nehalem)"
./scripts/test-simd-paths.sh

step "C tests, normally and under valgrind"
make -C examples-c check

step "observability: trace content and the Gantt script"
scripts/test-observe.sh

step "install and pkg-config"
make -C examples-c install-check

# Hardening (scripts/test-hardening.sh): soak, allocation failpoints, the C
# ABI fuzzer and the loom models.
step "hardening: soak (10^5 operations per round)"; scripts/test-hardening.sh soak
step "hardening: allocation failpoints"; scripts/test-hardening.sh failpoints
step "hardening: C ABI fuzzer (120 s, AddressSanitizer)"; scripts/test-hardening.sh fuzz
step "hardening: loom models"; scripts/test-hardening.sh loom
step "C++ binding (C++17/20/23, no-exceptions mode, ASan+UBSan)"; scripts/test-cpp.sh
step "Fortran binding (generated interfaces, tests, tiled example)"; scripts/test-fortran.sh
step "packaging (CMake package, static library, pkg-config)"; scripts/test-packaging.sh
step "Go binding (go test, go test -race, per-op benchmark)"; scripts/test-go.sh
step "Julia binding: ABI agreement checks (Julia itself is not run)"; scripts/test-julia-checks.sh
step "Python package (pip install ./bindings/python, pytest, NumPy 2.0 DLPack run)"
scripts/test-python.sh
step "MPI operations and the distributed Cholesky (scripts/test-mpi.sh)"
./scripts/test-mpi.sh

if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  step "Rust tests under AddressSanitizer (nightly, system allocator)"
  RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address" TA_DIFF_PROGRAMS=300 \
    cargo +nightly test --release --no-default-features --target x86_64-unknown-linux-gnu \
    --target-dir target/asan --tests
else
  step "no nightly toolchain: AddressSanitizer pass skipped"
fi

step "all tests passed"
