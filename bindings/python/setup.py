"""Build hook: compiles libtensorasync from this repository into the package.

`pip install ./bindings/python` runs `cargo build --release -p tensorasync-capi --lib` in the
repository root (CARGO_TARGET_DIR is honoured, so a build tree that already
holds a fresh library makes this a no-op) and copies the shared library next
to the Python sources. TENSORASYNC_CARGO_FLAGS adds cargo flags (for example
`--no-default-features`).

It then compiles the cffi declarations in API mode into `tensorasync._native`, an
extension linked against that library: a call through it costs a direct C call,
where the ABI mode's run-time call interface costs about 0.6 us for a call such as
`ta_fill` (measured from Python: 0.85 us against 0.22 us from C). Without a C
compiler (or with TENSORASYNC_NO_NATIVE=1) the package works in ABI mode only.
"""
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import importlib.util

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
LIBNAME = {"darwin": "libtensorasync.dylib", "win32": "tensorasync.dll"}.get(sys.platform, "libtensorasync.so")


def _build_library() -> pathlib.Path:
    if not (ROOT / "Cargo.toml").is_file():
        raise SystemExit(f"tensorasync: no Cargo.toml at {ROOT}; build from a checkout of the repository")
    cmd = ["cargo", "build", "--release", "-p", "tensorasync-capi", "--lib"] + shlex.split(os.environ.get("TENSORASYNC_CARGO_FLAGS", ""))
    print("tensorasync: " + " ".join(cmd), flush=True)
    subprocess.check_call(cmd, cwd=ROOT)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    if not target.is_absolute():
        target = ROOT / target
    return target / "release" / LIBNAME


#: The bundled library's file name: its SONAME on Linux, the name the extension's
#: dependency on it carries (found next to the extension through its rpath).
BUNDLED = LIBNAME + ".0" if sys.platform.startswith("linux") else LIBNAME


def _build_native(library: pathlib.Path, tmpdir: pathlib.Path) -> None:
    """Compile `tensorasync._native` (cffi API mode), linked against `library`, next to it."""
    if os.environ.get("TENSORASYNC_NO_NATIVE"):
        return
    try:
        import cffi
    except ImportError:
        print("tensorasync: cffi is not importable at build time; ABI mode only", flush=True)
        return
    spec = importlib.util.spec_from_file_location("_ta_cdef", HERE / "tensorasync" / "_cdef.py")
    cdef = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cdef)
    builder = cffi.FFI()
    builder.cdef(cdef.CDEF)
    builder.set_source(
        "tensorasync._native",
        '#include "tensorasync.h"',
        include_dirs=[str(ROOT / "include")],
        extra_objects=[str(library.resolve())],
        # The extension finds the library next to itself, wherever the package is installed.
        extra_link_args=["-Wl,-rpath,$ORIGIN"] if sys.platform.startswith("linux") else [],
    )
    try:
        built = pathlib.Path(builder.compile(tmpdir=str(tmpdir.resolve())))
    except Exception as e:  # no compiler, or no Python headers: ABI mode still works
        print(f"tensorasync: the API-mode extension did not build ({e}); ABI mode only", flush=True)
        return
    shutil.copyfile(built, library.parent / built.name)


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        lib = _build_library()
        dest = pathlib.Path(self.build_lib) / "tensorasync" / BUNDLED
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(lib, dest)
        os.chmod(dest, 0o755)
        strip = shutil.which("strip")
        if strip and sys.platform.startswith("linux"):
            # Debug info makes the library ten times larger; the wheel does not need it.
            subprocess.call([strip, "--strip-debug", str(dest)])
        tmp = pathlib.Path(self.build_lib).parent / "cffi-native"
        tmp.mkdir(parents=True, exist_ok=True)
        _build_native(dest, tmp)


class BinaryDistribution(Distribution):
    """The wheel holds a native library: it is platform specific."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
