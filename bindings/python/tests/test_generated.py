"""The cffi declarations are generated from include/tensorasync.h and must be current."""
import importlib.util
import pathlib

import tensorasync

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_ffi", HERE.parent / "tools" / "gen_ffi.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cdef_matches_header():
    gen = _generator()
    expected = gen.generate((ROOT / "include" / "tensorasync.h").read_text())
    committed = (HERE.parent / "tensorasync" / "_cdef.py").read_text()
    assert committed == expected, "tensorasync/_cdef.py is stale: run python bindings/python/tools/gen_ffi.py"


def test_installed_cdef_matches_header():
    # The installed package carries the same declarations as the source tree.
    installed = pathlib.Path(tensorasync.__file__).with_name("_cdef.py").read_text()
    assert installed == (HERE.parent / "tensorasync" / "_cdef.py").read_text()


def test_generator_rejects_what_cffi_cannot_read():
    gen = _generator()
    out = gen.generate('#define A (-1)\n#define B "x"\n#ifdef __cplusplus\nextern "C" {\n#endif\nint f(void);\n')
    assert "#define A -1" in out and "B = 'x'" in out and "extern" not in out and "int f(void);" in out


def test_version_matches_header():
    assert tensorasync.__version__ == tensorasync._HEADER_VERSION
