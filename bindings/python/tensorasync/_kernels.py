"""User kernels: Python callables run on package-owned threads, compiled functions on workers.

A Python kernel is submitted with ``ta_external_submit``: the library enrolls its
accesses and signals ``started`` once they are granted; the package's dispatcher thread
hands it to a kernel thread, which takes the views (``ta_token_views``), calls the Python
function with NumPy arrays over them, and completes the operation (``ta_token_finish``).
No Python code runs on a library worker. Python kernels hold the GIL while they run:
they run concurrently with each other only inside NumPy calls that release it, and a
Python kernel costs a thread hand-off and GIL acquisition (tens of microseconds) more
than a compiled one. A compiled C function (a ``ta_kernel_fn``) submitted with
``submit_native`` runs directly on the library's workers, without the GIL.
"""
import ctypes
import numbers
import operator
import os
import queue
import threading
import traceback

import numpy as np

from ._ffi import ffi, has, lib
from . import errors
from ._completion import Event, dispatcher
from ._tensor import Tensor, _cname, _view_array, _tensor, _writes

__all__ = ["submit", "submit_native"]

_MODES = {"r": lib.TA_MODE_READ, "read": lib.TA_MODE_READ,
          "w": lib.TA_MODE_WRITE, "write": lib.TA_MODE_WRITE,
          "rw": lib.TA_MODE_UPDATE, "u": lib.TA_MODE_UPDATE, "update": lib.TA_MODE_UPDATE}


def _accesses(pairs):
    tensors, modes = [], []
    for item in pairs:
        try:
            t, m = item
        except (TypeError, ValueError):
            raise TypeError("each access is a (tensor, mode) pair, mode 'read', 'write' or 'update'") from None
        if isinstance(m, str):
            try:
                m = _MODES[m.lower()]
            except KeyError:
                raise ValueError(f"unknown access mode {m!r}") from None
        else:
            try:
                m = operator.index(m)
            except TypeError:
                raise TypeError(f"an access mode is 'read', 'write' or 'update' (or a ta_mode value), "
                                f"not {m!r}") from None
        if not isinstance(t, Tensor):
            if m != lib.TA_MODE_READ:
                # An array-like would be copied into a temporary tensor: the kernel's writes
                # would go to the copy and be lost.
                raise TypeError(f"a {'write' if m == lib.TA_MODE_WRITE else 'update'} access needs a "
                                f"tensorasync.Tensor, not {type(t).__name__} (tensorasync.wrap(ndarray) "
                                f"makes a tensor over a NumPy array's memory)")
            t = _tensor(t)
        tensors.append(t)
        modes.append(m)
    arr = ffi.new("ta_access[]", max(len(tensors), 1))
    for i, (t, m) in enumerate(zip(tensors, modes)):
        arr[i].tensor = t._h
        arr[i].mode = m
    return arr, tensors, modes


class _Pool:
    def __init__(self, n):
        self.q = queue.SimpleQueue()
        self.threads = []
        for i in range(n):
            th = threading.Thread(target=self._run, name=f"tensorasync-kernel-{i}", daemon=True)
            th.start()
            self.threads.append(th)

    def _run(self):
        while True:
            job = self.q.get()
            if job is None:
                return
            try:
                job.run()
            except BaseException:  # run() finishes its token whatever happens; keep serving
                pass


_pool = None
_pool_lock = threading.Lock()


def _get_pool():
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                n = int(os.environ.get("TENSORASYNC_PY_KERNEL_THREADS", "0")) or min(4, os.cpu_count() or 1)
                _pool = _Pool(n)
    return _pool


class _Job:
    __slots__ = ("fn", "token", "started", "tensors", "modes", "name")

    def __init__(self, fn, token, started, tensors, modes, name):
        self.fn, self.token, self.started = fn, token, started
        self.tensors, self.modes, self.name = tensors, modes, name

    def on_started(self, status, exc):
        lib.ta_event_free(self.started)
        self.started = None
        if status == 0:
            _get_pool().q.put(self)
        else:
            # An input was poisoned (or the work was cancelled): the operation has failed
            # already; finishing frees the token (a status saying so is expected).
            lib.ta_token_finish(self.token, status, ffi.NULL)
            self.token = None
            self.tensors = None

    def run(self):
        token, self.token = self.token, None
        status, message, exact = lib.TA_STATUS_OK, None, None
        try:
            n = len(self.modes)
            views = ffi.new("ta_view[]", max(n, 1))
            count = ffi.new("size_t *")
            errors.check(lib.ta_token_views(token, views, n, count))
            arrays = [_view_array(views[i], self, self.modes[i] != lib.TA_MODE_READ) for i in range(count[0])]
            result = self.fn(*arrays)
            del arrays
            if isinstance(result, numbers.Integral) and not isinstance(result, (bool, np.bool_)) and result != 0:
                result = int(result)
                message = f"kernel {self.name or ''} returned {result}"
                # The status given to ta_token_finish becomes the error's code (a ta_status,
                # 32 bits unsigned), as a compiled kernel's return value does. Values outside
                # that range, and CANCELLED's (which ta_token_finish turns into a
                # cancellation, where a compiled kernel's return always fails it), fail
                # with KERNEL_FAILED's code.
                ok = 0 < result <= 0xFFFFFFFF and result != lib.TA_STATUS_CANCELLED
                status = result if ok else lib.TA_STATUS_KERNEL_FAILED
                # Any 64-bit value is kept exactly by finishing with an error object.
                if _HAS_FINISH_ERROR and self.name and -2**63 <= result < 2**63:
                    exact = result
        except BaseException as e:
            status = lib.TA_STATUS_KERNEL_FAILED
            message = "".join(traceback.format_exception_only(type(e), e)).strip()
        finally:
            self.tensors = None
            if exact is not None and _finish_with_code(token, exact, self.name, message):
                return
            lib.ta_token_finish(token, status,
                                ffi.NULL if message is None else message.encode("utf-8", "replace"))


_HAS_FINISH_ERROR = has("ta_error_new") and has("ta_token_finish_error")


def _finish_with_code(token, code, name, message) -> bool:
    """Finish ``token`` as failed with KERNEL_FAILED carrying ``code`` exactly, named
    ``name``; False (token untouched) if the error object cannot be made."""
    ep = ffi.new("ta_error **")
    if lib.ta_error_new(lib.TA_STATUS_KERNEL_FAILED, code, name.encode("utf-8", "replace"),
                        message.encode("utf-8", "replace"), ep):
        return False
    try:
        lib.ta_token_finish_error(token, ep[0])
    finally:
        lib.ta_error_free(ep[0])
    return True


def submit(fn, *accesses, name=None) -> Event:
    """Run the Python callable ``fn`` on NumPy views of its operands, in order.

    ``accesses`` are ``(tensor, mode)`` pairs, mode ``"read"``, ``"write"`` or ``"update"``
    (also ``"r"``, ``"w"``, ``"rw"``). ``fn(*arrays)`` runs on one of the package's kernel
    threads once the accesses are granted (readers after earlier writers, writers after
    every earlier access); read operands are read-only arrays. A read operand may also be
    a NumPy array or other array-like, copied into a new tensor at submission; a write or
    update operand must be a Tensor (TypeError otherwise: the writes would go to a copy).
    An exception fails the operation (KernelError, its message becomes the error's) and
    poisons what it writes; so does returning a non-zero integer (any
    ``numbers.Integral``, NumPy's included, but not a bool): the error's ``code`` is the
    value returned, as for a compiled kernel, when it is a ``ta_status`` value
    (1..2**32-1) other than CANCELLED's (41); otherwise it is KERNEL_FAILED's (40).
    Returns the operation's Event. Do not keep the arrays after
    ``fn`` returns, and do not wait on (or ``np.asarray``) the operands' tensors inside
    ``fn``: the operation holds their accesses until it returns.

    The GIL's cost: ``fn`` holds the GIL while it runs Python code, so Python kernels run
    one at a time (NumPy calls that release the GIL overlap with each other and with the
    library's workers), and each kernel adds a hand-off to a package thread and back (tens
    of microseconds per kernel in a dependency chain). Use ``submit_native`` for small,
    frequent kernels.
    """
    acc, tensors, modes = _accesses(accesses)
    tok = ffi.new("ta_token **")
    started = ffi.new("ta_event **")
    ev = ffi.new("ta_event **")
    errp = ffi.new("ta_error **")
    label = name or getattr(fn, "__name__", None)
    st = lib.ta_external_submit(acc, len(tensors), _cname(label), ffi.NULL, tok, started, ev, errp)
    if st:
        raise errors.from_handle(st, errp[0])
    job = _Job(fn, tok[0], started[0], tensors, modes, label)
    dispatcher().notify(started[0], job.on_started)
    return _writes(Event(ev[0]), *_written(tensors, modes))


def _written(tensors, modes):
    return [t for t, m in zip(tensors, modes) if m != lib.TA_MODE_READ]


def _fn_address(fn):
    if isinstance(fn, int):
        return fn
    if isinstance(fn, ffi.CData):
        return int(ffi.cast("uintptr_t", fn))
    if isinstance(fn, ctypes._CFuncPtr):
        return ctypes.cast(fn, ctypes.c_void_p).value
    raise TypeError("submit_native takes a compiled function: an address, a cffi or a ctypes function pointer")


def submit_native(fn, *accesses, userdata=None, name=None) -> Event:
    """Submit a compiled ``ta_kernel_fn`` (an address, cffi or ctypes function pointer).

    It runs directly on the library's worker threads, without the GIL:
    ``status fn(const ta_view *views, size_t nviews, void *userdata, ta_kernel_ctx *ctx)``.
    It must be compiled code; a ctypes or cffi callback wrapping a Python function would
    run Python on a worker thread (use ``submit`` for Python). ``userdata`` is an int
    address or a cffi pointer, and must stay valid until the operation completes.
    """
    acc, tensors, modes = _accesses(accesses)
    kfn = ffi.cast("ta_kernel_fn", _fn_address(fn))
    if userdata is None:
        ud = ffi.NULL
    elif isinstance(userdata, int):
        ud = ffi.cast("void *", userdata)
    else:
        ud = ffi.cast("void *", userdata)
    ev = ffi.new("ta_event **")
    errp = ffi.new("ta_error **")
    st = lib.ta_kernel_submit(kfn, ud, _cname(name), acc, len(tensors), ffi.NULL, ev, errp)
    if st:
        raise errors.from_handle(st, errp[0])
    return _writes(Event(ev[0], userdata), *_written(tensors, modes))
