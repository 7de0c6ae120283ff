"""tensorasync: asynchronous tensors whose reads and writes are ordered by epoch queues.

Operations are submitted and return at once; the library runs them on its worker
threads in an order that respects every tensor's reads and writes. Python observes
values only through waiting paths (``np.asarray(t)``, ``float(t)``, ``t.read()``,
DLPack export, ``await t``), so it never sees a pending write. See README.md.
"""
import atexit as _atexit

from ._ffi import ffi as _FFI, lib as _LIB, has as _has, TA_VERSION_STRING as _HEADER_VERSION
from .errors import (
    Error, HandleError, InvalidArgumentError, DTypeError, ShapeError, DomainError, ReadOnlyError,
    AliasError, UnconstructedError, UnsupportedError, KernelError, CancelledError, ShutdownError,
    DeadlockError, TimeoutError, OutOfMemoryError, CudaError, InternalError,
)
from ._completion import Event
from ._tensor import (
    Tensor, BlockArray, zeros, empty, asarray, wrap, copy, copyto, fill, scale, axpy, matmul, gemm,
    add_product, einsum, tensordot, sum, dot, vdot, norm, potrf, trsm, syrk, conj, transpose, dtypes,
    from_dlpack,
)
from ._kernels import submit, submit_native
from ._observe import Stats, trace_start, trace_stop, trace, track, dump, stats

__version__ = _FFI.string(_LIB.ta_version()).decode()

__all__ = [
    "Error", "HandleError", "InvalidArgumentError", "DTypeError", "ShapeError", "DomainError",
    "ReadOnlyError", "AliasError", "UnconstructedError", "UnsupportedError", "KernelError",
    "CancelledError", "ShutdownError", "DeadlockError", "TimeoutError", "OutOfMemoryError",
    "CudaError", "InternalError", "Event", "Tensor", "BlockArray", "zeros", "empty", "asarray",
    "wrap", "copy", "copyto", "fill", "scale", "axpy", "matmul", "gemm", "add_product", "einsum",
    "tensordot", "sum", "dot", "vdot", "norm", "potrf", "trsm", "syrk", "conj", "transpose",
    "dtypes", "from_dlpack", "submit", "submit_native", "wait_all", "shutdown", "Stats", "trace_start",
    "trace_stop", "trace", "track", "dump", "stats", "__version__",
]


def wait_all(timeout=None) -> bool:
    """Wait until every operation submitted so far has completed (GIL released).

    Returns False on timeout."""
    from ._completion import _ns
    rt = _FFI.new("ta_runtime **")
    from .errors import check
    check(_LIB.ta_runtime_default(rt))
    errp = _FFI.new("ta_error **")
    try:
        st = _LIB.ta_runtime_wait_idle(rt[0], _ns(timeout), errp)
    finally:
        _LIB.ta_runtime_free(rt[0])
    if st == _LIB.TA_STATUS_TIMEOUT:
        return False
    if st:
        from .errors import from_handle
        raise from_handle(st, errp[0])
    return True


def shutdown(cancel=True) -> None:
    """Stop the default runtime: cancel (or, with ``cancel=False``, run) the work not yet
    started, and wait for what runs. Later submissions raise ShutdownError. Called at
    interpreter exit with ``cancel=True``, so that exit neither hangs on work that cannot
    start (for example a writer queued behind an export that a module-level array holds)
    nor crashes."""
    rt = _FFI.new("ta_runtime **")
    if _LIB.ta_runtime_default(rt):
        return
    try:
        errp = _FFI.new("ta_error **")
        mode = _LIB.TA_SHUTDOWN_CANCEL if cancel else _LIB.TA_SHUTDOWN_DRAIN
        st = _LIB.ta_runtime_shutdown(rt[0], mode, errp)
        if st:
            from .errors import from_handle
            raise from_handle(st, errp[0])
    finally:
        _LIB.ta_runtime_free(rt[0])


def _at_exit():
    try:
        shutdown(cancel=True)
    except Exception:
        pass
    from ._completion import stop_dispatcher
    stop_dispatcher()


_atexit.register(_at_exit)
