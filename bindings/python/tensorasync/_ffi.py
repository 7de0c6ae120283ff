"""Loads libtensorasync through cffi with the generated declarations.

The installed package has ``tensorasync._native``, the declarations compiled in cffi's API
mode and linked against the bundled library: its calls are direct C calls. Without it
(no C compiler at install), with ``TENSORASYNC_LIBRARY`` naming another library, or with
``TENSORASYNC_ABI_MODE=1``, the library is opened in ABI mode, whose calls go through
libffi (several times the cost of a call such as ``ta_fill``).
"""
import os
import sys

import cffi

from ._cdef import CDEF, TA_VERSION_STRING

__all__ = ["ffi", "lib", "has", "TA_VERSION_STRING", "MODE", "LIBRARY_PATH"]

# The bundled library, named by its SONAME on Linux (see setup.py).
_LIBNAME = {"darwin": "libtensorasync.dylib", "win32": "tensorasync.dll"}.get(sys.platform, "libtensorasync.so.0")


#: The path of the loaded shared library (TENSORASYNC_LIBRARY overrides the bundled one).
LIBRARY_PATH = os.environ.get("TENSORASYNC_LIBRARY") or os.path.join(os.path.dirname(os.path.abspath(__file__)), _LIBNAME)

#: "api" (the compiled extension) or "abi" (the library opened at run time).
MODE = "abi"
if not os.environ.get("TENSORASYNC_LIBRARY") and not os.environ.get("TENSORASYNC_ABI_MODE"):
    try:
        from ._native import ffi, lib  # noqa: F401

        MODE = "api"
    except ImportError:
        pass
if MODE == "abi":
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    lib = ffi.dlopen(LIBRARY_PATH)


def has(name: str) -> bool:
    """Whether the loaded library exports the C function ``name``."""
    try:
        getattr(lib, name)
        return True
    except AttributeError:
        return False
