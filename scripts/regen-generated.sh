#!/usr/bin/env bash
# Regenerates include/tensorasync.h and every binding's generated low-level
# layer from it. Run after any change to the C ABI; the tests fail on a stale
# file.
set -euo pipefail
cd "$(dirname "$0")/.."
(cd capi && cbindgen --quiet --config cbindgen.toml --output ../include/tensorasync.h)
python3 bindings/python/tools/gen_ffi.py
python3 bindings/fortran/gen_interfaces.py
(cd bindings/go && go generate ./...)
python3 bindings/julia/TensorAsync.jl/gen/generate.py
