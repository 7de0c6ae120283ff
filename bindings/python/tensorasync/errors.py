"""Exceptions raised by tensorasync: one class per family of ``ta_status`` values."""
import builtins

from ._ffi import ffi, lib

__all__ = [
    "Error", "HandleError", "InvalidArgumentError", "DTypeError", "ShapeError", "DomainError",
    "ReadOnlyError", "AliasError", "UnconstructedError", "UnsupportedError", "KernelError",
    "CancelledError", "ShutdownError", "DeadlockError", "TimeoutError", "OutOfMemoryError",
    "CudaError", "InternalError",
]


class Error(Exception):
    """An error reported by the library.

    Attributes:
        status: the status name, for example ``"TA_STATUS_SHAPE_MISMATCH"``.
        status_code: the numeric ``ta_status``.
        code: the raw code: the status value, or for a failed user kernel the value it returned.
        message: the library's message.
        origin: the name of the operation where the error started ("" if none).
    """

    def __init__(self, status_code: int, code: int, message: str, origin: str = ""):
        self.status_code = int(status_code)
        self.status = ffi.string(lib.ta_status_name(self.status_code)).decode()
        self.code = int(code)
        self.message = message
        self.origin = origin
        super().__init__(str(self))

    def __str__(self):
        s = f"{self.status}: {self.message}"
        if self.origin:
            s += f" (in {self.origin})"
        return s

    def __reduce__(self):
        return (_rebuild, (self.status_code, self.code, self.message, self.origin))


def _rebuild(status_code, code, message, origin):
    return error_class(status_code)(status_code, code, message, origin)


class HandleError(Error):
    """A NULL, stale, double-freed or wrong-type handle or pointer."""


class InvalidArgumentError(Error, ValueError):
    """An argument outside its allowed range (also out-of-range indices and small buffers)."""


class DTypeError(Error, TypeError):
    """Operand dtypes do not fit the operation."""


class ShapeError(Error, ValueError):
    """Operand shapes do not fit, are unknown, or the data is not dense where it must be."""


class DomainError(Error, ValueError):
    """Operands live in different domains (host, devices)."""


class ReadOnlyError(Error, ValueError):
    """The output is read-only."""


class AliasError(Error, ValueError):
    """The output shares the epoch queue of an input."""


class UnconstructedError(Error):
    """The tensor has no value yet."""


class UnsupportedError(Error):
    """The operation is not supported for these operands, or no backend accepted it."""


class KernelError(Error):
    """A kernel (user or library) failed, or a panic was caught."""


class CancelledError(Error):
    """The operation was cancelled before it ran (for example by a shutdown)."""


class ShutdownError(Error):
    """The runtime is shut down and accepts no work."""


class DeadlockError(Error):
    """Blocking here would deadlock."""


class TimeoutError(Error, builtins.TimeoutError):
    """A wait ran out of time."""


class OutOfMemoryError(Error, MemoryError):
    """Memory could not be allocated."""


class CudaError(Error):
    """CUDA is unavailable or a CUDA call failed."""


class InternalError(Error):
    """An internal invariant failed, or a status this package does not know."""


def _families():
    names = {
        HandleError: ["NULL_HANDLE", "STALE_HANDLE", "DOUBLE_FREE", "WRONG_HANDLE_TYPE", "INVALID_HANDLE",
                      "NULL_POINTER", "ALREADY_FINISHED"],
        InvalidArgumentError: ["INVALID_ARGUMENT", "OUT_OF_RANGE", "BUFFER_TOO_SMALL"],
        DTypeError: ["DTYPE_MISMATCH"],
        ShapeError: ["SHAPE_MISMATCH", "SHAPE_UNKNOWN", "NOT_CONTIGUOUS"],
        DomainError: ["DOMAIN_MISMATCH"],
        ReadOnlyError: ["READ_ONLY"],
        AliasError: ["ALIAS"],
        UnconstructedError: ["UNCONSTRUCTED"],
        UnsupportedError: ["UNSUPPORTED", "NO_BACKEND"],
        KernelError: ["KERNEL_FAILED", "PANIC"],
        CancelledError: ["CANCELLED"],
        ShutdownError: ["SHUTDOWN"],
        DeadlockError: ["WOULD_DEADLOCK"],
        TimeoutError: ["TIMEOUT"],
        OutOfMemoryError: ["OUT_OF_MEMORY"],
        CudaError: ["CUDA_UNAVAILABLE", "CUDA_ERROR"],
        InternalError: ["INTERNAL"],
    }
    table = {}
    for cls, members in names.items():
        for m in members:
            value = getattr(lib, "TA_STATUS_" + m, None)
            if value is not None:
                table[int(value)] = cls
    return table


_CLASS_OF = _families()


def error_class(status_code: int) -> type:
    """The exception class for a ``ta_status`` value."""
    return _CLASS_OF.get(int(status_code), InternalError)


def _string(fn, err) -> str:
    n = ffi.new("size_t *")
    if fn(err, ffi.NULL, 0, n) != 0:
        return ""
    buf = ffi.new("char[]", n[0] + 1)
    if fn(err, buf, n[0] + 1, n) != 0:
        return ""
    return ffi.string(buf).decode("utf-8", "replace")


def from_handle(status_code: int, err) -> Error:
    """Build the exception for ``status_code`` from an error handle (which is freed); NULL is allowed."""
    if err != ffi.NULL:
        try:
            st = ffi.new("ta_status *")
            if lib.ta_error_status(err, st) == 0:
                status_code = st[0]
            code = ffi.new("int64_t *")
            raw = code[0] if lib.ta_error_code(err, code) == 0 else status_code
            message = _string(lib.ta_error_message, err)
            origin = _string(lib.ta_error_origin, err)
        finally:
            lib.ta_error_free(err)
        return error_class(status_code)(status_code, raw, message, origin)
    message = ffi.string(lib.ta_status_describe(status_code)).decode()
    return error_class(status_code)(status_code, status_code, message, "")


def check(status: int, errp=None) -> None:
    """Raise the exception for a failed call (``errp`` is the ``ta_error **`` it filled)."""
    if status:
        raise from_handle(status, errp[0] if errp is not None else ffi.NULL)
