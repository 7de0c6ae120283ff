import ctypes
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]

if os.environ.get("TA_EXPECT_INSTALLED"):
    import tensorasync
    assert "site-packages" in tensorasync.__file__, f"testing the source tree, not the install: {tensorasync.__file__}"


@pytest.fixture(scope="session")
def native(tmp_path_factory):
    """The compiled test kernels of native_kernels.c, loaded with ctypes."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the native-kernel tests")
    out = tmp_path_factory.mktemp("native") / "libnative_kernels.so"
    from tensorasync._ffi import LIBRARY_PATH
    libdir = os.path.dirname(LIBRARY_PATH)
    subprocess.check_call([cc, "-O1", "-shared", "-fPIC", "-I", str(ROOT / "include"),
                           str(pathlib.Path(__file__).with_name("native_kernels.c")), "-o", str(out),
                           LIBRARY_PATH, "-Wl,-rpath," + libdir])
    return ctypes.CDLL(str(out))


class Gate:
    """A flag a compiled kernel spins on: holds that kernel's accesses until opened."""

    def __init__(self, native):
        self.flag = ctypes.c_int(0)
        self.native = native

    @property
    def address(self):
        return ctypes.addressof(self.flag)

    def open(self):
        self.flag.value = 1


@pytest.fixture
def gate(native):
    g = Gate(native)
    yield g
    g.open()
