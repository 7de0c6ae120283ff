#!/usr/bin/env bash
# Checks of the Julia binding (bindings/julia/TensorAsync.jl) without Julia:
# the package parses, its generated layer is fresh, every @ccall and struct
# layout agrees with include/tensorasync.h, and every constant and name it
# uses exists, with as many arguments as it takes (gen/check_abi.py). Then the checker's own self-test: copies of
# the package with one fault each must fail with the fault named.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PKG=bindings/julia/TensorAsync.jl
VENV=target/julia-check-venv

if [ ! -x "$VENV/bin/python" ]; then
  if ! python3 -c 'import ensurepip' 2>/dev/null; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv
  fi
  python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q tree-sitter==0.26.1 tree-sitter-julia==0.23.1 pycparser==3.12
PY=$VENV/bin/python

"$PY" "$PKG/gen/check_abi.py"

# Self-test: each fault must be caught, by name.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
expect_fail() {  # name, sed script, file, expected message
  local dir=$TMP/$1
  cp -r "$PKG" "$dir"
  sed -i "$2" "$dir/$3"
  if out=$("$PY" "$dir/gen/check_abi.py" "$dir" "$ROOT/include/tensorasync.h" 2>&1); then
    echo "self-test $1: the checker passed a faulty package"; exit 1
  fi
  if ! grep -qF -- "$4" <<<"$out"; then
    echo "self-test $1: expected '$4' in:"; echo "$out"; exit 1
  fi
  echo "self-test $1: caught"
}
expect_fail argtype 's/value::ta_scalar, opts::Ptr{ta_submit}/value::Ptr{ta_scalar}, opts::Ptr{ta_submit}/' \
  src/LibTensorAsync.jl "ta_fill argument 2 (value) is ta_scalar in C, Ptr{ta_scalar} in Julia"
expect_fail rettype 's/::Ptr{Cchar}$/::Cstring/' src/LibTensorAsync.jl "returns Ptr{Int8} in C, Cstring in Julia"
expect_fail layout 's/^    conj::UInt8$/    conj::UInt32/' src/LibTensorAsync.jl "ta_view.conj is UInt8 in C, UInt32 in Julia"
expect_fail syntax '0,/^end$/{/^end$/d}' src/TensorAsync.jl "syntax error"
expect_fail name 's/L\.ta_tensor_ready(/L.ta_tensor_readyy(/' src/TensorAsync.jl "L.ta_tensor_readyy is not defined"
expect_fail constant 's/^const TA_STATUS_ALIAS = ta_status(25)$/const TA_STATUS_ALIAS = ta_status(26)/' \
  src/LibTensorAsync.jl "constant TA_STATUS_ALIAS is 25 in C, 26 in Julia"
expect_fail arity 's/L\.ta_tensor_ready(t, ev, err)/L.ta_tensor_ready(t, ev)/' src/TensorAsync.jl \
  "L.ta_tensor_ready takes 3 arguments, called with 2"
expect_fail fields 's/L\.ta_slice(0, n, 1, 0)/L.ta_slice(0, n, 1)/' src/TensorAsync.jl \
  "L.ta_slice takes 4 arguments, called with 3"
echo "Julia binding checks passed (ABI agreement only: Julia itself was not run)"
