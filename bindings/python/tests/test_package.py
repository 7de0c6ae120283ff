"""Docstrings on every public name, type stubs that cover the public API, and how the
package loads the library."""
import ast
import inspect
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import tensorasync as ta


def test_every_public_name_has_a_docstring():
    missing = []
    for name in ta.__all__:
        obj = getattr(ta, name)
        if name == "__version__" or name == "dtypes":
            continue
        if not inspect.getdoc(obj):
            missing.append(name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") or not (callable(member) or isinstance(member, property)):
                    continue
                if not inspect.getdoc(member):
                    missing.append(f"{name}.{attr}")
    assert not missing, missing


def test_stubs_cover_the_public_api():
    stub = pathlib.Path(ta.__file__).with_name("__init__.pyi")
    tree = ast.parse(stub.read_text())
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    names |= {t.id for n in tree.body if isinstance(n, (ast.AnnAssign,)) for t in [n.target]}
    missing = [n for n in ta.__all__ if n not in names]
    assert not missing, missing
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    for cname in ("Tensor", "Event", "BlockArray"):
        stubbed = {f.name for f in classes[cname].body if isinstance(f, ast.FunctionDef)}
        public = {a for a in vars(getattr(ta, cname)) if not a.startswith("_")}
        assert public <= stubbed, (cname, public - stubbed)


def test_the_loading_mode_is_the_one_expected():
    """The installed package calls the library through its compiled API-mode extension
    (TA_EXPECT_FFI=api, set by the test script when a C compiler and Python's headers are
    there); TENSORASYNC_ABI_MODE=1 opens the same library through libffi instead."""
    from tensorasync import _ffi

    expected = os.environ.get("TA_EXPECT_FFI")
    if os.environ.get("TENSORASYNC_ABI_MODE"):
        expected = "abi"
    if not expected:
        pytest.skip("TA_EXPECT_FFI is not set")
    assert _ffi.MODE == expected
    if expected == "api":
        from tensorasync import _native

        assert _ffi.lib is _native.lib
        # The extension resolves the bundled library, not some other copy.
        with open("/proc/self/maps") as maps:
            loaded = {line.split()[-1] for line in maps if "libtensorasync" in line}
        assert loaded == {os.path.realpath(_ffi.LIBRARY_PATH)}, loaded


def test_both_modes_compute_the_same():
    """A fill, a scale and a sum in a fresh interpreter, in each mode, against NumPy."""
    code = (
        "import numpy as np, tensorasync as ta, tensorasync._ffi as f\n"
        "t = ta.zeros(5)\n"
        "t.fill(2.5); t.scale(-3.0)\n"
        "print(f.MODE, float(t.sum()), np.asarray(t).tolist())\n"
    )
    outs = {}
    for abi in ("", "1"):
        env = dict(os.environ)
        env.pop("TENSORASYNC_ABI_MODE", None)
        if abi:
            env["TENSORASYNC_ABI_MODE"] = abi
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             cwd=tempfile.gettempdir(), check=True).stdout.split(" ", 1)
        outs[out[0]] = out[1].strip()
    assert "abi" in outs
    ref = np.full(5, 2.5) * -3.0
    for mode, text in outs.items():
        total, values = text.split(" ", 1)
        assert float(total) == ref.sum(), (mode, text)
        assert values == str(ref.tolist()), (mode, text)
