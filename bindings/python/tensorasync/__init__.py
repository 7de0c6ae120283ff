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
    "dtypes", "from_dlpack", "submit", "submit_native", "wait_all", "small_in_place", "shutdown", "Stats",
    "trace_start",
    "trace_stop", "trace", "track", "dump", "stats", "__version__",
]


def wait_all(timeout=None) -> bool:
    """Wait until every operation submitted so far has completed (GIL released).

    Returns False on timeout. Live exports (``np.asarray(t)``, ``t.read()``, ...) are
    operations until released: with no timeout, waiting while this thread holds one
    raises DeadlockError instead of hanging."""
    from ._completion import _ns
    from . import _exports
    rt = _FFI.new("ta_runtime **")
    from .errors import check
    check(_LIB.ta_runtime_default(rt))
    errp = _FFI.new("ta_error **")
    try:
        held = _exports.own() if timeout is None else None
        if held:
            st = _LIB.ta_runtime_wait_idle(rt[0], 0, errp)
            if st == _LIB.TA_STATUS_TIMEOUT:
                raise _exports.deadlock_error(held[0], "wait_all()")
        else:
            st = _LIB.ta_runtime_wait_idle(rt[0], _ns(timeout), errp)
    finally:
        _LIB.ta_runtime_free(rt[0])
    if st == _LIB.TA_STATUS_TIMEOUT:
        return False
    if st:
        from .errors import from_handle
        raise from_handle(st, errp[0])
    return True


def small_in_place(enable=None) -> bool:
    """Whether small library operations run on the calling thread: with ``enable``,
    turn that on or off for the default runtime first; returns the setting in force.

    On (the default), a small operation whose tensors are idle and unpoisoned (fill,
    scale, axpy, copy, conj, dot, norm, a full sum, of at most 256 elements per operand;
    a gemm of at most 8x8) runs before the call returns, because handing it to a worker
    costs more than it does; it never blocks and runs no Python code. Off, every
    operation goes to the workers (``stats().steals`` counts them)."""
    from .errors import check
    rt = _FFI.new("ta_runtime **")
    check(_LIB.ta_runtime_default(rt))
    try:
        if enable is not None:
            check(_LIB.ta_runtime_set_small_in_place(rt[0], 1 if enable else 0))
        out = _FFI.new("int32_t *")
        check(_LIB.ta_runtime_small_in_place(rt[0], out))
        return bool(out[0])
    finally:
        _LIB.ta_runtime_free(rt[0])


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
