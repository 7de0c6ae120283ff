#!/usr/bin/env bash
# Tests of the Python package (bindings/python): builds it with pip into a fresh
# virtual environment (the library is compiled from this checkout; with a fresh
# target/ from the earlier steps, cargo has nothing to rebuild), runs pytest with
# the newest NumPy, then the DLPack and NumPy-export tests again with NumPy 2.0.x,
# which only understands unversioned DLPack capsules. The suite runs twice: through the
# package's compiled API-mode extension and through ABI mode (libffi).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=${TA_PY_VENV:-target/py-venv}
if ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv
fi
rm -rf "$VENV"
"$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${PIP[@]}" install --upgrade pip
"${PIP[@]}" install "numpy>=2.1" pytest cffi
"${PIP[@]}" install ./bindings/python

# The pytest script (unlike `python -m pytest`) does not put the working directory on
# sys.path, so the installed package is tested, not the source tree (conftest checks).
VBIN=$(cd "$VENV/bin" && pwd)
# With a C compiler and Python's headers the package calls the library through its
# compiled API-mode extension; the suite runs that way, then once more in ABI mode.
if "$VBIN/python" -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  export TA_EXPECT_FFI=api
fi
cd bindings/python
TA_EXPECT_INSTALLED=1 "$VBIN/pytest" -q -p no:cacheprovider tests
TENSORASYNC_ABI_MODE=1 TA_EXPECT_INSTALLED=1 "$VBIN/pytest" -q -p no:cacheprovider tests

"$VBIN/python" -m pip --disable-pip-version-check -q install "numpy==2.0.*"
"$VBIN/python" -c 'import numpy; print("NumPy", numpy.__version__)'
TA_EXPECT_INSTALLED=1 "$VBIN/pytest" -q -p no:cacheprovider tests/test_dlpack.py
