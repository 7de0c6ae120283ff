"""Loads libtensorasync through cffi (ABI mode) with the generated declarations."""
import os
import sys

import cffi

from ._cdef import CDEF, TA_VERSION_STRING

__all__ = ["ffi", "lib", "has", "TA_VERSION_STRING"]

ffi = cffi.FFI()
ffi.cdef(CDEF)

_LIBNAME = {"darwin": "libtensorasync.dylib", "win32": "tensorasync.dll"}.get(sys.platform, "libtensorasync.so")


#: The path of the loaded shared library (TENSORASYNC_LIBRARY overrides the bundled one).
LIBRARY_PATH = os.environ.get("TENSORASYNC_LIBRARY") or os.path.join(os.path.dirname(os.path.abspath(__file__)), _LIBNAME)

lib = ffi.dlopen(LIBRARY_PATH)


def has(name: str) -> bool:
    """Whether the loaded library exports the C function ``name``."""
    try:
        getattr(lib, name)
        return True
    except AttributeError:
        return False
