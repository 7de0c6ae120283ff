"""Build hook: compiles libtensorasync from this repository into the package.

`pip install ./bindings/python` runs `cargo build --release -p tensorasync-capi --lib` in the
repository root (CARGO_TARGET_DIR is honoured, so a build tree that already
holds a fresh library makes this a no-op) and copies the shared library next
to the Python sources. TENSORASYNC_CARGO_FLAGS adds cargo flags (for example
`--no-default-features`).
"""
import os
import pathlib
import shlex
import shutil
import subprocess
import sys

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


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        lib = _build_library()
        dest = pathlib.Path(self.build_lib) / "tensorasync" / LIBNAME
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(lib, dest)
        os.chmod(dest, 0o755)
        strip = shutil.which("strip")
        if strip and sys.platform.startswith("linux"):
            # Debug info makes the library ten times larger; the wheel does not need it.
            subprocess.call([strip, "--strip-debug", str(dest)])


class BinaryDistribution(Distribution):
    """The wheel holds a native library: it is platform specific."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
