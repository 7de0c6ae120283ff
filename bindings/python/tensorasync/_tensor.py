"""Tensors, views, block arrays and the library's operations."""
import builtins
import numbers
import operator
import threading

import numpy as np

from ._ffi import ffi, lib, has
from . import errors
from . import _exports
from ._completion import Event, dispatcher, _ns
from ._dlpack import export as _export_dlpack

__all__ = [
    "Tensor", "BlockArray", "zeros", "empty", "asarray", "wrap", "copy", "copyto", "fill", "scale",
    "axpy", "matmul", "gemm", "add_product", "einsum", "tensordot", "sum", "dot", "vdot", "norm",
    "potrf", "trsm", "syrk", "conj", "transpose", "dtypes", "from_dlpack",
]

_NULL = ffi.NULL
_builtin_sum = builtins.sum
HOST = lib.TA_DOMAIN_HOST
READ, WRITE, UPDATE = lib.TA_MODE_READ, lib.TA_MODE_WRITE, lib.TA_MODE_UPDATE

_TA_TO_NP = {
    lib.TA_DTYPE_F32: np.dtype(np.float32),
    lib.TA_DTYPE_F64: np.dtype(np.float64),
    lib.TA_DTYPE_C64: np.dtype(np.complex64),
    lib.TA_DTYPE_C128: np.dtype(np.complex128),
    lib.TA_DTYPE_I8: np.dtype(np.int8),
    lib.TA_DTYPE_I16: np.dtype(np.int16),
    lib.TA_DTYPE_I32: np.dtype(np.int32),
    lib.TA_DTYPE_I64: np.dtype(np.int64),
    lib.TA_DTYPE_U8: np.dtype(np.uint8),
    lib.TA_DTYPE_U16: np.dtype(np.uint16),
    lib.TA_DTYPE_U32: np.dtype(np.uint32),
    lib.TA_DTYPE_U64: np.dtype(np.uint64),
}
_NP_TO_TA = {v.newbyteorder("="): k for k, v in _TA_TO_NP.items()}

#: The NumPy dtypes the library has, in the library's order.
dtypes = tuple(_TA_TO_NP.values())


def _ta_dtype(dtype) -> int:
    dt = np.dtype(dtype)
    if not dt.isnative:
        raise errors.DTypeError(lib.TA_STATUS_DTYPE_MISMATCH, lib.TA_STATUS_DTYPE_MISMATCH,
                                f"dtype {dt} is not in native byte order")
    try:
        return _NP_TO_TA[dt]
    except KeyError:
        raise errors.DTypeError(lib.TA_STATUS_DTYPE_MISMATCH, lib.TA_STATUS_DTYPE_MISMATCH,
                                f"dtype {dt} is not one of the library's dtypes") from None


def _order(order) -> int:
    if order in ("C", "c"):
        return lib.TA_ORDER_ROW_MAJOR
    if order in ("F", "f"):
        return lib.TA_ORDER_COL_MAJOR
    raise ValueError(f"order must be 'C' or 'F', not {order!r}")


def _shape(shape):
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    shape = tuple(operator.index(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"negative extent in shape {shape}")
    return shape


def _call(fn, *args):
    """Call ``fn(*args, &error)`` and raise the error it reports."""
    errp = ffi.new("ta_error **")
    st = fn(*args, errp)
    if st:
        raise errors.from_handle(st, errp[0])


def _out_call(kind, fn, *args):
    """Call ``fn(*args, &out, &error)`` and return ``out``."""
    outp = ffi.new(kind + " *")
    errp = ffi.new("ta_error **")
    st = fn(*args, outp, errp)
    if st:
        raise errors.from_handle(st, errp[0])
    return outp[0]


_tls = threading.local()


def _bufs():
    """This thread's out-parameter cells (read right after each call, so reusable)."""
    try:
        return _tls.bufs
    except AttributeError:
        b = _tls.bufs = (ffi.new("ta_event **"), ffi.new("ta_error **"))
        return b


def _submit_call(fn, *args):
    """Submit an operation ``fn(*args, opts, &event, &error)``; returns its Event."""
    evp, errp = _bufs()
    st = fn(*args, _NULL, evp, errp)
    if st:
        e = errp[0]
        errp[0] = _NULL
        raise errors.from_handle(st, e)
    return Event(evp[0])


def _invalid(message):
    st = lib.TA_STATUS_INVALID_ARGUMENT
    return errors.InvalidArgumentError(st, st, message)


def _number(value, what):
    """``value`` as a Python int, float or complex. Numbers (Python's, NumPy's scalars and
    0-d arrays, bools) are accepted; anything else (a string, a list, a tensor) raises
    TypeError: the package converts no text to numbers."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biufc":
        value = value[()]
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Number):
        try:
            if isinstance(value, numbers.Real) or not isinstance(value, numbers.Complex):
                return float(value)
            return complex(value)
        except OverflowError:
            raise _invalid(f"{what} {value!r} is not representable as a double") from None
    raise TypeError(f"{what} must be a number, not {type(value).__name__}")


def _int_value(value, dt, what="scalar"):
    """``value`` as an exact int of integer dtype ``dt``: InvalidArgumentError, the
    library's class for a scalar not representable in the dtype, when it is not an
    integer or out of the dtype's range."""
    v = _number(value, what)
    if isinstance(v, complex):
        if v.imag != 0:
            raise _invalid(f"{what} {value!r} is not representable as {dt.name}")
        v = v.real
    if isinstance(v, float):
        if not v.is_integer():
            raise _invalid(f"{what} {value!r} is not representable as {dt.name} (not an integer)")
        v = int(v)
    info = np.iinfo(dt)
    if not info.min <= v <= info.max:
        raise _invalid(f"{what} {value!r} is not representable as {dt.name} "
                       f"(range {info.min}..{info.max})")
    return v


def _scalar(value, dtype=None, what="scalar"):
    """A ``ta_scalar`` initialiser ``(re, im)`` for ``value``, checked for ``dtype`` when
    given (integer dtypes take exact integers in range only)."""
    if dtype is not None and dtype.kind in "iu":
        return (float(_int_value(value, dtype, what)), 0.0)
    if type(value) is float:
        return (value, 0.0)
    v = _number(value, what)
    try:
        c = complex(v)
    except OverflowError:
        raise _invalid(f"{what} {value!r} is not representable as a double") from None
    return (c.real, c.imag)


_name_cache = {}
_name_lock = threading.Lock()


def _cname(name):
    """A NUL-terminated copy of ``name`` that lives as long as the process (operation names
    are not copied by the library)."""
    if name is None:
        return _NULL
    with _name_lock:
        c = _name_cache.get(name)
        if c is None:
            c = ffi.new("char[]", name.encode())
            _name_cache[name] = c
    return c


class _ViewArrayOwner:
    """Base object of a NumPy array over library memory; holds what keeps that memory valid."""

    __slots__ = ("__array_interface__", "_owner", "__weakref__")

    def __init__(self, interface, owner):
        self.__array_interface__ = interface
        self._owner = owner


def _view_array(view, owner, writable, copy=None):
    """A NumPy array over a resolved ``ta_view`` whose memory ``owner`` keeps valid.

    A conj view of complex data is materialised (NumPy has no lazy conjugation): with
    ``copy=False`` that raises ValueError, NumPy 2's contract for a copy it cannot avoid."""
    dt = _TA_TO_NP[view.dtype]
    if view.conj and dt.kind == "c" and copy is False:
        raise ValueError("a conj view of a complex tensor cannot be exported without a copy "
                         "(NumPy has no lazy conjugation); use copy=None or copy=True")
    rank = view.rank
    shape = tuple(int(view.extents[i]) for i in range(rank))
    strides = tuple(int(view.strides[i]) * dt.itemsize for i in range(rank))
    if 0 in shape:
        return np.empty(shape, dt)
    addr = int(ffi.cast("uintptr_t", view.data))
    iface = {"version": 3, "shape": shape, "strides": strides, "typestr": dt.str,
             "data": (addr, not writable)}
    arr = np.asarray(_ViewArrayOwner(iface, owner))
    if view.conj and dt.kind == "c":
        arr = np.conj(arr)  # a copy: NumPy has no lazy conjugation
        if not writable:
            arr.flags.writeable = False
    return arr


def _view_dims(view):
    rank = view.rank
    return (tuple(int(view.extents[i]) for i in range(rank)), tuple(int(view.strides[i]) for i in range(rank)))


class _Mapping:
    """Owns a granted ``ta_mapping``; frees it (never blocking) when collected or closed.

    While it lives it is recorded as an export of its tensor (see ``_exports``)."""

    __slots__ = ("_h", "_rec", "__weakref__")

    def __init__(self, h):
        self._h = h
        self._rec = None

    def track(self, tensor, view, mode, what):
        self._rec = _exports.record(_root_key(tensor), tensor, view, mode, what)

    def close(self):
        rec, self._rec = getattr(self, "_rec", None), None
        if rec is not None:
            _exports.forget(rec)
        h = getattr(self, "_h", None)
        if h is not None:
            self._h = None
            lib.ta_mapping_free(h)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


_MODE_NAMES = {READ: "read", WRITE: "write", UPDATE: "update"}


class _HostAccess:
    """Context manager of ``Tensor.read()``, ``.write()`` and ``.update()``."""

    def __init__(self, tensor, mode, timeout):
        self._tensor = tensor
        self._mode = mode
        self._timeout = timeout
        self._mapping = None

    def __enter__(self):
        self._mapping, arr = self._tensor._acquire(self._mode, self._timeout, what=_MODE_NAMES[self._mode] + "()")
        return arr

    def __exit__(self, *exc):
        m, self._mapping = self._mapping, None
        if m is not None:
            m.close()
        return False


class _AsyncHostAccess:
    """Async context manager of ``Tensor.read_async()``, ``.write_async()``, ``.update_async()``."""

    def __init__(self, tensor, mode):
        self._tensor = tensor
        self._mode = mode
        self._mapping = None

    async def __aenter__(self):
        t = self._tensor
        name = _MODE_NAMES[self._mode] + "_async()"
        _check_acquire(t, self._mode, f"t.{name}", task_only=True)
        mpp = ffi.new("ta_mapping **")
        evp = ffi.new("ta_event **")
        errp = ffi.new("ta_error **")
        st = lib.ta_tensor_acquire_async(t._h, self._mode, mpp, evp, errp)
        if st:
            raise errors.from_handle(st, errp[0])
        mapping = _Mapping(mpp[0])
        if self._mode != READ:
            _note_writes((t,))
        try:
            await Event(evp[0], t)  # granted, or the tensor's error
            view = ffi.new("ta_view *")
            errors.check(lib.ta_mapping_view(mapping._h, view))
            mapping.track(t, view, self._mode, name)
        except BaseException:  # failure or cancellation: the access is released when granted
            mapping.close()
            raise
        self._mapping = mapping
        return _view_array(view, mapping, self._mode != READ)

    async def __aexit__(self, *exc):
        m, self._mapping = self._mapping, None
        if m is not None:
            m.close()
        return False


# ----- which live exports a wait depends on ------------------------------------------------

def _root_key(t):
    """``(token, sub)``: the identity of the storage ``t``'s elements belong to. ``sub`` is 0
    for a tensor value and its views, the tile index for a tile of a block array (and its
    views), None for a coalesced view of a block array (it may touch every tile)."""
    while t._key is None:  # a view: its parent's
        t = t._keep
    return t._key


def _region(t, dims=None):
    """``(token, sub, lo, hi)``: ``t``'s root key and the range of element offsets it spans,
    relative to the origin of that root (``lo > hi`` for no element)."""
    off = 0
    u = t
    while u._key is None and isinstance(u._keep, Tensor):
        o = u._off
        if type(o) is tuple:  # a slice's start per axis of its parent: an offset in elements
            o = u._off = _builtin_sum(a * st for a, st in zip(o, u._keep.element_strides))
        off += o
        u = u._keep
    tok, sub = _root_key(u)
    if sub is None:
        return (tok, None, 0, 0)
    if dims is None:
        try:
            dims = (t.shape, t.element_strides)
        except errors.Error:
            return (tok, sub, float("-inf"), float("inf"))
    lo = hi = off
    for n, st in zip(*dims):
        if n == 0:
            return (tok, sub, 0, -1)
        d = (n - 1) * st
        if d < 0:
            lo += d
        else:
            hi += d
    return (tok, sub, lo, hi)


def _rec_region(rec):
    r = rec.region
    if r is None:
        r = rec.region = _region(rec.tensor, _view_dims(rec.view))
    return r


def _overlap(a, b):
    if a[0] is not b[0]:
        return False
    if a[1] is None or b[1] is None:
        return True
    return a[1] == b[1] and a[2] <= b[3] and b[2] <= a[3]


def _depends(tensors, *, task_only=False, before=None, mode=None):
    """The oldest live export made by the calling thread (its running asyncio task, with
    ``task_only``) that may share elements with one of ``tensors`` (any export, with
    ``tensors`` None), or None. With ``mode`` READ (a new read access), only the exports
    that a read waits for count: write and update exports, and exports with a write
    submitted after them. Element ranges are compared, so disjoint slices of one tensor do
    not count (interleaved strided slices conservatively do)."""
    recs = _exports.own(task_only, before)
    if not recs:
        return None
    if mode == READ:
        recs = [r for r in recs if r.mode != READ or r.written]
        if not recs:
            return None
    if tensors is None:
        return recs[0]
    cache = {}
    for r in recs:
        for i, t in enumerate(tensors):
            if _root_key(t)[0] is not r.root[0]:
                continue
            reg = cache.get(i)
            if reg is None:
                reg = cache[i] = _region(t)
            if _overlap(reg, _rec_region(r)):
                return r
    return None


def _note_writes(tensors):
    """Mark the live exports that a write to ``tensors``, just submitted, waits for."""
    if not _exports.live:
        return
    for r in _exports.snapshot():
        for t in tensors:
            if _root_key(t)[0] is r.root[0] and _overlap(_region(t), _rec_region(r)):
                r.written = True


def _writes(ev, *tensors):
    """``ev``, the event of an operation just submitted that writes ``tensors``: marks the
    exports it waits for, and lets ``ev``'s waits detect that they wait for one of them."""
    if _exports.live:
        _note_writes(tensors)
        ev._guard = (tensors, _exports.next_seq(), "the operation's event")
    return ev


def _check_acquire(t, mode, call, task_only=False):
    """Raise DeadlockError if a new ``mode`` access to ``t`` would wait for an export that
    the calling thread (asyncio task) holds."""
    if _exports.live:
        rec = _depends((t,), task_only=task_only, mode=mode)
        if rec is not None:
            raise _exports.deadlock_error(rec, call)


_exports.depends, _exports.check_acquire = _depends, _check_acquire


class Tensor:
    """An asynchronous tensor handle (a value, or a view of one).

    Operations on tensors are submitted and return at once; the library orders them by
    the tensors' epoch queues. Reading the value from Python (``np.asarray(t)``,
    ``float(t)``, ``t.read()``, DLPack export) waits for pending writes, and later writes
    wait until such an export is released. Handles are freed when the object is collected,
    which never blocks: pending operations keep their data alive.

    ``copy.copy(t)`` follows the library's ``ta_tensor_clone``: a view gives a new handle to
    the same view (writes through it reach this tensor's value), a whole tensor a new value
    holding a copy (made asynchronously). ``copy.deepcopy(t)`` always gives a new value (as
    ``t.copy()``). Tensors cannot be pickled (they are handles to asynchronous state):
    pickle ``np.asarray(t)`` instead.
    """

    __slots__ = ("_h", "_keep", "_dt", "_key", "_off", "__weakref__")

    def __init__(self, *args, **kwargs):
        raise TypeError("create tensors with tensorasync.zeros, empty, asarray or wrap")

    @classmethod
    def _from_handle(cls, handle, keep=None, key=None, off=0):
        self = object.__new__(cls)
        self._h = handle
        self._keep = keep
        self._dt = None
        if key is None and not isinstance(keep, Tensor):
            key = (_exports.Token(), 0)  # a value of its own (made here: no race on first use)
        self._key = key   # (token, sub), the export-tracking root (see _root_key); None for a view
        self._off = off   # a view's origin in its parent's elements (or the slice starts)
        return self

    def __del__(self):
        h = getattr(self, "_h", None)
        if h is not None:
            self._h = None
            try:
                lib.ta_tensor_free(h)
            except Exception:
                pass

    # ----- attributes -------------------------------------------------------------------
    @property
    def dtype(self) -> np.dtype:
        """The element type, as a NumPy dtype."""
        dt = self._dt
        if dt is None:
            out = ffi.new("ta_dtype *")
            errors.check(lib.ta_tensor_dtype(self._h, out))
            dt = self._dt = _TA_TO_NP[out[0]]
        return dt

    @property
    def ndim(self) -> int:
        """The rank (raises UnconstructedError while the tensor has no shape)."""
        out = ffi.new("size_t *")
        errors.check(lib.ta_tensor_rank(self._h, out))
        return int(out[0])

    @property
    def shape(self) -> tuple:
        """The extents, as known at submission time."""
        n = self.ndim
        buf = ffi.new("size_t[]", max(n, 1))
        errors.check(lib.ta_tensor_extents(self._h, buf, n))
        return tuple(int(buf[i]) for i in range(n))

    @property
    def element_strides(self) -> tuple:
        """The strides in elements (may be negative or zero)."""
        n = self.ndim
        buf = ffi.new("ptrdiff_t[]", max(n, 1))
        errors.check(lib.ta_tensor_strides(self._h, buf, n))
        return tuple(int(buf[i]) for i in range(n))

    @property
    def strides(self) -> tuple:
        """The strides in bytes, as NumPy gives them."""
        size = self.dtype.itemsize
        return tuple(s * size for s in self.element_strides)

    @property
    def size(self) -> int:
        """The number of elements."""
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    @property
    def read_only(self) -> bool:
        """Whether writes to this tensor are rejected."""
        out = ffi.new("int32_t *")
        errors.check(lib.ta_tensor_is_read_only(self._h, out))
        return bool(out[0])

    @property
    def is_view(self) -> bool:
        """Whether this handle is a view of another tensor."""
        out = ffi.new("int32_t *")
        errors.check(lib.ta_tensor_is_view(self._h, out))
        return bool(out[0])

    def __len__(self):
        shape = self.shape
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return shape[0]

    def __repr__(self):
        try:
            return f"tensorasync.Tensor(shape={self.shape}, dtype={self.dtype})"
        except errors.UnconstructedError:
            return f"tensorasync.Tensor(unconstructed, dtype={self.dtype})"

    def __iter__(self):
        shape = self.shape
        if not shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(shape[0]))

    def __contains__(self, value):
        """``value in t``: whether some element equals ``value``, as NumPy's
        ``(a == value).any()`` (waits for pending writes, like ``np.asarray(t)``)."""
        with self.read() as a:
            return bool((a == value).any())

    # ----- copies -----------------------------------------------------------------------
    def __copy__(self):
        view = self.is_view
        outp = ffi.new("ta_tensor **")
        _call(lib.ta_tensor_clone, self._h, _NULL, outp, _NULL)
        h = outp[0]
        # A view's clone is the same view (it keeps this one's parent, and shares its
        # queue); a whole tensor's is a new value.
        out = Tensor._from_handle(h, self if view else None)
        out._dt = self._dt
        return out

    def __deepcopy__(self, memo):
        out = copy(self)
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, protocol):
        raise TypeError("cannot pickle a tensorasync.Tensor (a handle to asynchronous state); "
                        "pickle np.asarray(t) and rebuild it with tensorasync.asarray")

    # ----- views ------------------------------------------------------------------------
    def _view(self, handle, off=0):
        return Tensor._from_handle(handle, self, off=off)

    def __getitem__(self, key):
        shape = self.shape
        if not isinstance(key, tuple):
            key = (key,)
        n_ell = _builtin_sum(1 for k in key if k is Ellipsis)
        if n_ell > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if any(k is None for k in key):
            raise IndexError("np.newaxis is not supported; use reshape()")
        n_axes = _builtin_sum(1 for k in key if k is not Ellipsis)
        if n_axes > len(shape):
            raise IndexError(f"too many indices: tensor is {len(shape)}-dimensional, but {n_axes} were indexed")
        full = []
        for k in key:
            if k is Ellipsis:
                full.extend([slice(None)] * (len(shape) - n_axes))
            else:
                full.append(k)
        full.extend([slice(None)] * (len(shape) - len(full)))
        if not shape:
            return self
        specs = ffi.new("ta_slice[]", len(shape))
        starts = [0] * len(shape)
        for axis, (k, n) in enumerate(zip(full, shape)):
            s = specs[axis]
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                if len(range(start, stop, step)) == 0:
                    stop = start = 0 if step > 0 else n - 1 if n else 0
                    if n == 0:
                        start = stop = 0
                s.start, s.stop, s.step, s.drop = start, stop, step, 0
                starts[axis] = start
            else:
                try:
                    i = operator.index(k)
                except TypeError:
                    raise IndexError(f"only integers, slices and '...' are valid indices, not {k!r}") from None
                if i < -n or i >= n:
                    raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
                if i < 0:
                    i += n
                s.start, s.stop, s.step, s.drop = i, i + 1, 1, 1
                starts[axis] = i
        return self._view(_out_call("ta_tensor *", lib.ta_tensor_slice, self._h, specs, len(shape)), tuple(starts))

    def __setitem__(self, key, value):
        target = self[key]
        if isinstance(value, Tensor):
            copyto(target, value)
        elif np.ndim(value) == 0 and not isinstance(value, np.ndarray):
            target.fill(value)
        else:
            src = asarray(np.broadcast_to(np.asarray(value, dtype=target.dtype), target.shape))
            copyto(target, src)

    @property
    def T(self):
        """The view with the axes reversed."""
        return self._view(_out_call("ta_tensor *", lib.ta_tensor_transpose, self._h))

    def transpose(self, *axes):
        """A view with axes reordered: axis ``j`` of the view is axis ``axes[j]`` of this tensor."""
        if not axes:
            return self.T
        if len(axes) == 1 and not isinstance(axes[0], numbers.Integral):
            axes = tuple(axes[0])
        nd = self.ndim
        if len(axes) != nd:
            raise ValueError("axes don't match tensor")
        perm = [_axis(a, nd) for a in axes]
        arr = ffi.new("size_t[]", perm) if perm else ffi.new("size_t[]", 1)
        return self._view(_out_call("ta_tensor *", lib.ta_tensor_permute, self._h, arr, len(perm)))

    def conj(self):
        """A lazy, read-only conjugate view (the identity for real dtypes)."""
        return self._view(_out_call("ta_tensor *", lib.ta_tensor_conj, self._h))

    conjugate = conj

    def reshape(self, *shape, order="C"):
        """A view with new extents over the same (dense) elements; one extent may be -1."""
        if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
            shape = tuple(shape[0])
        shape = [operator.index(s) for s in shape]
        if shape.count(-1) > 1:
            raise ValueError("can only specify one unknown dimension")
        if -1 in shape:
            known = 1
            for s in shape:
                if s != -1:
                    known *= s
            total = self.size
            if known == 0 or total % known:
                raise ValueError(f"cannot reshape tensor of size {total} into shape {tuple(shape)}")
            shape[shape.index(-1)] = total // known
        ext = ffi.new("size_t[]", shape) if shape else ffi.new("size_t[]", 1)
        return self._view(_out_call("ta_tensor *", lib.ta_tensor_reshape, self._h, len(shape), ext, _order(order)))

    def copy(self):
        """A new tensor (dense, row-major) holding a copy of the value, made asynchronously."""
        return copy(self)

    # ----- waiting and readiness --------------------------------------------------------
    def wait(self, timeout=None) -> bool:
        """Wait for everything enrolled on the tensor so far (GIL released).

        Returns True for a clean value, False on timeout; raises the error that poisoned it,
        or UnconstructedError. Everything enrolled includes live exports (``np.asarray(t)``,
        ``t.read()``, ...): with no timeout, waiting for an export that this thread holds
        raises DeadlockError instead of hanging.
        """
        errp = ffi.new("ta_error **")
        if timeout is None and _exports.live:
            rec = _depends((self,))
            if rec is not None:
                st = lib.ta_tensor_wait(self._h, 0, errp)
                if st == lib.TA_STATUS_TIMEOUT:
                    raise _exports.deadlock_error(rec, "t.wait()")
                if st:
                    raise errors.from_handle(st, errp[0])
                return True
        st = lib.ta_tensor_wait(self._h, _ns(timeout), errp)
        if st == lib.TA_STATUS_TIMEOUT:
            return False
        if st:
            raise errors.from_handle(st, errp[0])
        return True

    def ready(self) -> Event:
        """An event that completes when everything enrolled on the tensor so far has completed.

        Its error, if any, is the tensor's. Never blocks.
        """
        return self._ready("t.ready()")

    def _ready(self, what):
        ev = Event(_out_call("ta_event *", lib.ta_tensor_ready, self._h), self)
        if _exports.live:
            ev._guard = ((self,), _exports.next_seq(), what)
        return ev

    def __await__(self):
        yield from self._ready("t").__await__()
        return self

    # ----- host access ------------------------------------------------------------------
    def _acquire(self, mode, timeout=None, what="np.asarray()", copy=None):
        if timeout is None:
            _check_acquire(self, mode, what if what.startswith("np.") else "t." + what)
        mp = _out_call("ta_mapping *", lib.ta_tensor_acquire, self._h, mode, _ns(timeout))
        mapping = _Mapping(mp)
        view = ffi.new("ta_view *")
        st = lib.ta_mapping_view(mp, view)
        if st:
            mapping.close()
            errors.check(st)
        if mode != READ:
            _note_writes((self,))
        try:
            arr = _view_array(view, mapping, mode != READ, copy)
        except BaseException:
            mapping.close()
            raise
        mapping.track(self, view, mode, what)
        return mapping, arr

    def read(self, timeout=None):
        """``with t.read() as a:`` — a read-only NumPy view once earlier writers are done.

        Later writers wait until the block ends; later readers do not. Do not keep ``a``
        beyond the block.
        """
        return _HostAccess(self, READ, timeout)

    def write(self, timeout=None):
        """``with t.write() as a:`` — a writable NumPy view once every earlier access is done.

        A pure overwrite: write every element (the old contents are unspecified); it
        clears a poison.
        """
        return _HostAccess(self, WRITE, timeout)

    def update(self, timeout=None):
        """``with t.update() as a:`` — a read-modify-write NumPy view of the current value."""
        return _HostAccess(self, UPDATE, timeout)

    def read_async(self):
        """``async with t.read_async() as a:`` — ``read()`` without blocking the event loop."""
        return _AsyncHostAccess(self, READ)

    def write_async(self):
        """``async with t.write_async() as a:`` — ``write()`` without blocking the event loop."""
        return _AsyncHostAccess(self, WRITE)

    def update_async(self):
        """``async with t.update_async() as a:`` — ``update()`` without blocking the event loop."""
        return _AsyncHostAccess(self, UPDATE)

    def numpy(self):
        """A NumPy copy of the value (waits for pending writes, raises a poisoning error)."""
        return np.array(self.__array__(), copy=True)

    def __array__(self, dtype=None, copy=None):
        # A read mapping: granted once earlier writers are done, held by the array (later
        # writers wait until it is gone), or released at once after a copy.
        mapping, arr = self._acquire(READ, copy=copy)
        if copy:
            arr = np.array(arr, copy=True)
            mapping.close()
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            if copy is False:
                raise ValueError("a dtype conversion needs a copy")
            arr = arr.astype(dtype)
        return arr

    def item(self):
        """The single element as a Python scalar (waits; raises the tensor's error)."""
        a = self.__array__()
        if a.size != 1:
            raise ValueError("only tensors of one element can be converted to Python scalars")
        return a.reshape(()).item()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __complex__(self):
        return complex(self.item())

    def __bool__(self):
        return bool(self.item())

    def __index__(self):
        if self.dtype.kind not in "iu":
            raise TypeError("only integer tensors can be used as an index")
        return int(self.item())

    # ----- DLPack -----------------------------------------------------------------------
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return _export_dlpack(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        dom = ffi.new("ta_domain *")
        errors.check(lib.ta_tensor_domain(self._h, dom))
        if dom[0] == HOST:
            return (1, 0)  # kDLCPU
        return (2, int(dom[0]))  # kDLCUDA

    # ----- operations as methods --------------------------------------------------------
    def fill(self, value) -> Event:
        """Set every element to ``value`` (an overwrite). Returns the operation's Event."""
        return fill(self, value)

    def scale(self, alpha) -> Event:
        """``self = alpha * self``."""
        return scale(self, alpha)

    def axpy(self, alpha, x) -> Event:
        """``self = alpha * x + self``."""
        return axpy(alpha, x, self)

    def copy_from(self, src) -> Event:
        """``self = src`` element by element."""
        return copyto(self, src)

    def __matmul__(self, other):
        return matmul(self, other)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        """The sum over ``axis`` (None: all) as a new tensor; 0-d for a full sum.

        As ``tensorasync.sum`` (NumPy's signature, so ``np.sum(t)`` dispatches here)."""
        return sum(self, axis, dtype=dtype, out=out, keepdims=keepdims)

    def dot(self, other):
        """``sum(self * other)`` as a 0-d tensor."""
        return dot(self, other)

    def norm(self):
        """The Euclidean norm as a 0-d real tensor."""
        return norm(self)


def _tensor(x):
    """``x`` as a Tensor: an array-like is copied into a new one (``asarray``). The caller
    keeps the result referenced until its C call returns: a temporary collected earlier
    frees its handle."""
    if isinstance(x, Tensor):
        return x
    return asarray(x)


def _target(t, func, arg):
    """``t``, an operation's output: a Tensor (an array-like would receive nothing)."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{func}() writes its argument {arg!r}, which must be a tensorasync.Tensor, "
                        f"not {type(t).__name__} (tensorasync.wrap(ndarray) makes a tensor over "
                        f"a NumPy array's memory)")
    return t


def _axis(axis, ndim):
    """``axis`` normalised to 0..ndim-1, as NumPy: negative counts from the end, anything
    else out of range raises numpy.exceptions.AxisError."""
    a = operator.index(axis)
    if not -ndim <= a < ndim:
        raise np.exceptions.AxisError(a, ndim)
    return a + ndim if a < 0 else a


# ----- creation ---------------------------------------------------------------------------

def zeros(shape, dtype=np.float64, order="C") -> Tensor:
    """A new zero-filled host tensor of ``shape``, stored densely in ``order`` ("C" or "F")."""
    shape = _shape(shape)
    ext = ffi.new("size_t[]", shape) if shape else ffi.new("size_t[]", 1)
    return Tensor._from_handle(_out_call("ta_tensor *", lib.ta_tensor_new_zeros, _ta_dtype(dtype), HOST,
                                         len(shape), ext, _order(order)))


def empty(dtype=np.float64) -> Tensor:
    """A new unconstructed tensor: dtype known, no shape yet. An overwrite (``copyto``,
    ``matmul``'s output, ...) constructs it; reading it first raises UnconstructedError."""
    return Tensor._from_handle(_out_call("ta_tensor *", lib.ta_tensor_new, _ta_dtype(dtype), HOST))


def _layout(arr):
    size = arr.dtype.itemsize
    if any(s % size for s in arr.strides):
        return None
    return [s // size for s in arr.strides]


def asarray(obj, dtype=None, order="C") -> Tensor:
    """A new tensor holding a copy of ``obj`` (any array-like), made before this returns.

    A Tensor is returned as it is (with ``dtype`` None or equal to its own).
    """
    if isinstance(obj, Tensor):
        if dtype is None or np.dtype(dtype) == obj.dtype:
            return obj
        raise errors.DTypeError(lib.TA_STATUS_DTYPE_MISMATCH, lib.TA_STATUS_DTYPE_MISMATCH,
                                "asarray cannot convert a Tensor's dtype")
    arr = np.asarray(obj, dtype=dtype)
    if not arr.dtype.isnative:  # a copy is made anyway: take it in native byte order
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.dtype.kind == "b":
        arr = arr.astype(np.uint8)
    elif dtype is None and arr.dtype.kind == "i" and arr.dtype.itemsize < 8 and not isinstance(obj, np.ndarray):
        arr = arr.astype(np.int64)
    strides = _layout(arr)
    if strides is None:
        arr = np.ascontiguousarray(arr)
        strides = _layout(arr)
    ta_dt = _ta_dtype(arr.dtype)
    ext = ffi.new("size_t[]", arr.shape) if arr.ndim else ffi.new("size_t[]", 1)
    st = ffi.new("ptrdiff_t[]", strides) if arr.ndim else ffi.new("ptrdiff_t[]", 1)
    # No element is read from an empty array; it still gets a valid address (kept alive
    # across the call).
    scratch = np.empty(1, arr.dtype) if not arr.size else arr
    data = ffi.cast("void *", scratch.__array_interface__["data"][0])
    h = _out_call("ta_tensor *", lib.ta_tensor_new_copy, ta_dt, arr.ndim, ext, st, _order(order), data)
    del scratch
    return Tensor._from_handle(h)


class _WrapRelease:
    """Keeps a wrapped array alive until the library reports its release."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __call__(self, status, exc):
        self.array = None


def wrap(array, readonly=None) -> Tensor:
    """A tensor over ``array``'s memory, without copying.

    The array is kept alive until the library's last access to it (also after every handle
    is gone). ``readonly`` None follows ``array.flags.writeable``; asking for a writable
    tensor over a read-only array raises ReadOnlyError. Do not touch the array while
    operations on the tensor may be running; use ``t.read()``/``t.write()`` instead.
    """
    if not isinstance(array, np.ndarray):
        raise TypeError("wrap() takes a numpy.ndarray; use asarray() to copy other objects")
    if readonly is None:
        readonly = not array.flags.writeable
    elif not readonly and not array.flags.writeable:
        raise errors.ReadOnlyError(lib.TA_STATUS_READ_ONLY, lib.TA_STATUS_READ_ONLY,
                                   "the array is read-only and cannot be wrapped as writable")
    strides = _layout(array)
    if strides is None:
        raise errors.InvalidArgumentError(lib.TA_STATUS_INVALID_ARGUMENT, lib.TA_STATUS_INVALID_ARGUMENT,
                                          "the array's strides are not multiples of its item size")
    ta_dt = _ta_dtype(array.dtype)
    ext = ffi.new("size_t[]", array.shape) if array.ndim else ffi.new("size_t[]", 1)
    st = ffi.new("ptrdiff_t[]", strides) if array.ndim else ffi.new("ptrdiff_t[]", 1)
    addr = array.__array_interface__["data"][0]
    keep = np.empty(1, array.dtype) if array.size == 0 else None
    if keep is not None:
        addr = keep.ctypes.data
    data = ffi.cast("void *", addr)
    d = dispatcher()
    release = _WrapRelease((array, keep))
    tag = d.add(release)
    opts = ffi.new("ta_wrap_options *")
    opts.struct_size = ffi.sizeof("ta_wrap_options")
    opts.flags = lib.TA_WRAP_READ_ONLY if readonly else 0
    opts.release = _NULL
    opts.release_userdata = _NULL
    opts.release_cq = d.cq
    opts.release_tag = tag
    try:
        h = _out_call("ta_tensor *", lib.ta_tensor_wrap_ex, ta_dt, array.ndim, ext, st,
                      lib.TA_ORDER_ROW_MAJOR, data, opts)
    except BaseException:
        d.discard(tag)
        raise
    return Tensor._from_handle(h, release)


def from_dlpack(obj, readonly=None) -> Tensor:
    """A tensor over the memory of any host DLPack producer (``obj.__dlpack__``), zero copy.

    The capsule is consumed by NumPy on this thread and the resulting array is wrapped
    (see ``wrap``): the producer's deleter then runs on a Python thread when the array is
    released after the library's last access, never on a library worker.
    """
    return wrap(np.from_dlpack(obj), readonly=readonly)


# ----- operations -------------------------------------------------------------------------

_HAS_I64 = has("ta_fill_i64") and has("ta_scale_i64")
_HAS_U64 = has("ta_fill_u64") and has("ta_scale_u64")
_I64, _U64 = np.dtype(np.int64), np.dtype(np.uint64)


def _submit_scalar(fn, h, scalar):
    evp, errp = _bufs()
    st = fn(h, scalar, _NULL, evp, errp)
    if st:
        e = errp[0]
        errp[0] = _NULL
        raise errors.from_handle(st, e)
    return Event(evp[0])


def fill(t, value) -> Event:
    """Set every element of ``t`` to ``value`` (an overwrite: clears a poison).

    ``value`` is a number (a string or another object raises TypeError); for an integer
    ``t`` it must be an integer in the dtype's range (``2.0`` is, ``2.5`` is not), else
    InvalidArgumentError, as the library reports a value not representable in the dtype."""
    try:
        dt = t._dt
    except AttributeError:
        _target(t, "fill", "t")
        raise
    if dt is None:
        dt = t.dtype
    if dt.kind in "fc":
        return _writes(_submit_scalar(lib.ta_fill, t._h, _scalar(value, None, "fill value")), t)
    if dt == _I64 and _HAS_I64:
        return _writes(_submit_call(lib.ta_fill_i64, t._h, _int_value(value, dt, "fill value")), t)
    if dt == _U64 and _HAS_U64:
        return _writes(_submit_call(lib.ta_fill_u64, t._h, _int_value(value, dt, "fill value")), t)
    return _writes(_submit_call(lib.ta_fill, t._h, _scalar(value, dt, "fill value")), t)


def scale(t, alpha) -> Event:
    """``t = alpha * t`` (an update: a poisoned ``t`` fails the operation).

    ``alpha`` is checked as ``fill``'s value is."""
    try:
        dt = t._dt
    except AttributeError:
        _target(t, "scale", "t")
        raise
    if dt is None:
        dt = t.dtype
    if dt.kind in "fc":
        return _writes(_submit_scalar(lib.ta_scale, t._h, _scalar(alpha, None, "alpha")), t)
    if dt == _I64 and _HAS_I64:
        return _writes(_submit_call(lib.ta_scale_i64, t._h, _int_value(alpha, dt, "alpha")), t)
    if dt == _U64 and _HAS_U64:
        return _writes(_submit_call(lib.ta_scale_u64, t._h, _int_value(alpha, dt, "alpha")), t)
    return _writes(_submit_call(lib.ta_scale, t._h, _scalar(alpha, dt, "alpha")), t)


def axpy(alpha, x, y) -> Event:
    """``y = alpha * x + y`` (equal shapes and dtypes, different values)."""
    _target(y, "axpy", "y")
    x = _tensor(x)
    return _writes(_submit_call(lib.ta_axpy, y._h, _scalar(alpha, y.dtype, "alpha"), x._h), y)


def copyto(dst, src) -> Event:
    """``dst = src`` element by element, any strides; constructs an unconstructed ``dst``."""
    _target(dst, "copyto", "dst")
    src = _tensor(src)
    return _writes(_submit_call(lib.ta_copy, dst._h, src._h), dst)


def copy(x) -> Tensor:
    """A new tensor (dense, row-major) holding a copy of ``x``'s value, made asynchronously.

    A conj view gives the conjugated values."""
    x = _tensor(x)
    out = empty(x.dtype)
    copyto(out, x)
    return out


def conj(x):
    """The lazy conjugate view of ``x`` (see ``Tensor.conj``)."""
    return _tensor(x).conj()


def transpose(x, axes=None):
    """``x.transpose(axes)``: a view."""
    x = _tensor(x)
    return x.T if axes is None else x.transpose(axes)


def _product_dtype(a, b):
    if a.dtype != b.dtype:
        raise errors.DTypeError(lib.TA_STATUS_DTYPE_MISMATCH, lib.TA_STATUS_DTYPE_MISMATCH,
                                f"operand dtypes differ: {a.dtype} and {b.dtype}")
    return a.dtype


def matmul(a, b, alpha=1.0) -> Tensor:
    """``alpha * a @ b`` into a new tensor (``ta_assign_product``); also ``a @ b``."""
    a, b = _tensor(a), _tensor(b)
    out = empty(_product_dtype(a, b))
    _submit_call(lib.ta_assign_product, out._h, _scalar(alpha, None, "alpha"), a._h, b._h)
    return out


def gemm(c, a, b, alpha=1.0, beta=0.0) -> Event:
    """``c = alpha * a @ b + beta * c`` in place (``c`` has the product's shape)."""
    _target(c, "gemm", "c")
    a, b = _tensor(a), _tensor(b)
    return _writes(_submit_call(lib.ta_gemm, c._h, _scalar(alpha, None, "alpha"), a._h, b._h,
                                _scalar(beta, None, "beta")), c)


def add_product(c, a, b, alpha=1.0) -> Event:
    """``c = alpha * a @ b + c`` in place."""
    _target(c, "add_product", "c")
    a, b = _tensor(a), _tensor(b)
    return _writes(_submit_call(lib.ta_add_product, c._h, _scalar(alpha, None, "alpha"), a._h, b._h), c)


def tensordot(a, b, axes=2, alpha=1.0, out=None, beta=None):
    """Contraction over pairs of axes, as ``numpy.tensordot`` (``ta_contract``).

    ``axes`` is an int N (the last N of ``a`` with the first N of ``b``) or a pair of
    sequences (negative axes count from the end; others out of range raise
    numpy.exceptions.AxisError). With ``out`` None, returns a new tensor; otherwise writes
    ``out`` (``out = alpha * a.b + beta * out`` when ``beta`` is given) and returns the Event.
    """
    if out is not None:
        _target(out, "tensordot", "out")
    a, b = _tensor(a), _tensor(b)
    if isinstance(axes, numbers.Integral):
        na, nb = a.ndim, b.ndim
        if axes > na or axes > nb:
            raise np.exceptions.AxisError(f"tensordot: axes={axes} contracts more axes than the operands "
                                          f"have ({na} and {nb})")
        a_axes = list(range(na - axes, na)) if axes > 0 else []
        b_axes = list(range(axes)) if axes > 0 else []
    else:
        a_axes, b_axes = (list(x) if not isinstance(x, numbers.Integral) else [x] for x in axes)
        na, nb = a.ndim, b.ndim
        a_axes = [_axis(ax, na) for ax in a_axes]
        b_axes = [_axis(ax, nb) for ax in b_axes]
    if len(a_axes) != len(b_axes):
        raise ValueError("tensordot: the two axis lists differ in length")
    n = len(a_axes)
    aa = ffi.new("size_t[]", a_axes or [0])
    bb = ffi.new("size_t[]", b_axes or [0])
    beta_p = _NULL if beta is None else ffi.new("ta_scalar *", _scalar(beta, None, "beta"))
    target = out if out is not None else empty(_product_dtype(a, b))
    ev = _submit_call(lib.ta_contract, target._h, _scalar(alpha, None, "alpha"), a._h, b._h, n, aa, bb, beta_p)
    return _writes(ev, out) if out is not None else target


def einsum(subscripts, *operands) -> Tensor:
    """A subset of ``numpy.einsum`` on tensors, as one library operation.

    Two operands: a contraction (``"ij,jk->ik"``, ``"abc,cbd->ad"``, ...): every index of
    the output appears in exactly one operand and every other index in both. One operand: a
    permutation (``"ij->ji"``) or a sum over the indices left out (``"ij->i"``). Repeated
    indices within one operand (traces, diagonals) and indices kept from both operands
    (batch axes) are not supported.
    """
    spec = subscripts.replace(" ", "")
    if "->" not in spec:
        raise ValueError("einsum here needs an explicit output ('...->...')")
    ins, outs = spec.split("->")
    ins = ins.split(",")
    if len(ins) != len(operands):
        raise ValueError(f"einsum: {len(ins)} operand specs for {len(operands)} operands")
    ops = [_tensor(o) for o in operands]
    for s, o in zip(ins, ops):
        if len(s) != o.ndim:
            raise ValueError(f"einsum: spec {s!r} for a {o.ndim}-dimensional operand")
        if len(set(s)) != len(s):
            raise NotImplementedError("einsum: repeated indices within one operand")
    if len(set(outs)) != len(outs):
        raise ValueError("einsum: repeated output index")
    if len(ops) == 1:
        (s,), (x,) = ins, ops
        summed = [i for i, ch in enumerate(s) if ch not in outs]
        kept = [ch for ch in s if ch in outs]
        if set(outs) - set(s):
            raise ValueError("einsum: output index not in the operand")
        if summed:
            out = empty(x.dtype)
            ax = ffi.new("size_t[]", summed)
            _submit_call(lib.ta_sum, out._h, x._h, len(summed), ax)
        else:
            out = x
        perm = [kept.index(ch) for ch in outs]
        if perm != list(range(len(perm))):
            res = empty(x.dtype)
            pp = ffi.new("size_t[]", perm)
            _submit_call(lib.ta_permute, res._h, out._h, len(perm), pp)
            return res
        return copy(out) if out is x else out
    if len(ops) != 2:
        raise NotImplementedError("einsum: one or two operands")
    (sa, sb), (a, b) = ins, ops
    common = [ch for ch in sa if ch in sb]
    if any(ch in outs for ch in common):
        raise NotImplementedError("einsum: an index kept from both operands (batch axes)")
    for ch in outs:
        if ch not in sa and ch not in sb:
            raise ValueError(f"einsum: output index {ch!r} in no operand")
    for s in (sa, sb):
        for ch in s:
            if ch not in outs and ch not in common:
                raise NotImplementedError("einsum: an index summed within one operand")
    a_axes = [sa.index(ch) for ch in common]
    b_axes = [sb.index(ch) for ch in common]
    natural = [ch for ch in sa if ch not in common] + [ch for ch in sb if ch not in common]
    res = tensordot(a, b, (a_axes, b_axes))
    perm = [natural.index(ch) for ch in outs]
    if perm == list(range(len(perm))):
        return res
    final = empty(res.dtype)
    pp = ffi.new("size_t[]", perm)
    _submit_call(lib.ta_permute, final._h, res._h, len(perm), pp)
    return final





def sum(x, axis=None, dtype=None, out=None, keepdims=False):
    """The sum of ``x`` over ``axis`` as ``numpy.sum``: an int or a tuple of ints (negative
    ones count from the end; out of range raises numpy.exceptions.AxisError), None for
    every axis (a 0-d tensor), ``()`` for none (a copy). ``keepdims`` keeps the summed
    axes with extent 1. Returns a new tensor, or with ``out`` (a Tensor) writes that and
    returns it. ``dtype`` may only be None or ``x``'s dtype: the sum accumulates in it."""
    x = _tensor(x)
    if dtype is not None and np.dtype(dtype) != x.dtype:
        st = lib.TA_STATUS_DTYPE_MISMATCH
        raise errors.DTypeError(st, st, f"sum() accumulates in the tensor's dtype {x.dtype}, not {np.dtype(dtype)}")
    if out is not None:
        _target(out, "sum", "out")
    if axis is None and not keepdims:  # no shape needed (an unconstructed x fails in ta_sum)
        axes = reduced = kept = None
    else:
        shape = x.shape
        nd = len(shape)
        if axis is None:
            axes = list(range(nd))
        else:
            axes = [_axis(a, nd) for a in ((axis,) if isinstance(axis, numbers.Integral) else axis)]
            if len(set(axes)) != len(axes):
                raise ValueError("duplicate value in 'axis'")
        reduced = [n for i, n in enumerate(shape) if i not in axes]
        kept = [1 if i in axes else n for i, n in enumerate(shape)]
    if out is None:
        target = empty(x.dtype)
    elif keepdims:
        target = out.reshape(reduced)
    else:
        target = out
    if axis is None:  # axes NULL: every element
        ev = _submit_call(lib.ta_sum, target._h, x._h, 0, _NULL)
    else:  # the axes listed (none, for ``()``: the values themselves)
        ev = _submit_call(lib.ta_sum, target._h, x._h, len(axes), ffi.new("size_t[]", axes or [0]))
    if out is not None:
        _writes(ev, out)
        return out
    return target.reshape(kept) if keepdims and kept != reduced else target


def dot(x, y, conjugate=False) -> Tensor:
    """``sum(x * y)`` (``sum(conj(x) * y)`` with ``conjugate``) as a 0-d tensor."""
    x, y = _tensor(x), _tensor(y)
    out = empty(_product_dtype(x, y))
    _submit_call(lib.ta_dot, out._h, x._h, y._h, 1 if conjugate else 0)
    return out


def vdot(x, y) -> Tensor:
    """``sum(conj(x) * y)`` as a 0-d tensor, as ``numpy.vdot``."""
    return dot(x, y, conjugate=True)


def norm(x) -> Tensor:
    """The Euclidean norm of all elements as a 0-d tensor of the real dtype."""
    x = _tensor(x)
    real = {np.dtype(np.complex64): np.float32, np.dtype(np.complex128): np.float64}.get(x.dtype, x.dtype)
    out = empty(real)
    _submit_call(lib.ta_norm2, out._h, x._h)
    return out


_SIDES = {"left": lib.TA_SIDE_LEFT, "right": lib.TA_SIDE_RIGHT}


def _uplo(lower):
    return lib.TA_UPLO_LOWER if lower else lib.TA_UPLO_UPPER


def potrf(a, lower=True) -> Event:
    """In-place Cholesky factorisation of a square ``a`` (the chosen triangle is overwritten)."""
    _target(a, "potrf", "a")
    return _writes(_submit_call(lib.ta_potrf, a._h, _uplo(lower)), a)


def trsm(b, a, side="left", lower=True, unit_diagonal=False, alpha=1.0) -> Event:
    """Triangular solve in place: ``a @ x = alpha * b`` (side "left") or ``x @ a = alpha * b``
    (side "right"), ``x`` overwriting ``b``. ``lower`` describes ``a`` as given (a transposed
    view of a lower matrix is upper)."""
    _target(b, "trsm", "b")
    try:
        sd = _SIDES[side]
    except (KeyError, TypeError):
        raise ValueError(f"side must be 'left' or 'right', not {side!r}") from None
    diag = lib.TA_DIAG_UNIT if unit_diagonal else lib.TA_DIAG_NON_UNIT
    a = _tensor(a)
    return _writes(_submit_call(lib.ta_trsm, b._h, sd, _uplo(lower), diag, _scalar(alpha, None, "alpha"), a._h), b)


def syrk(c, a, alpha=1.0, beta=0.0, lower=True) -> Event:
    """Rank-k update of one triangle of square ``c``: ``c = alpha * a @ a^H + beta * c``."""
    _target(c, "syrk", "c")
    a = _tensor(a)
    return _writes(_submit_call(lib.ta_syrk, c._h, _uplo(lower), _scalar(alpha, None, "alpha"), a._h,
                                _scalar(beta, None, "beta")), c)


# ----- block arrays -----------------------------------------------------------------------

class BlockArray:
    """One allocation cut into blocks, each with its own epoch queue.

    ``BlockArray.tiled(shape, tile, dtype, order)`` makes a tiled array; ``block(i, j)``
    returns the tile at a grid index as a Tensor ordered on that tile's own queue;
    ``all()`` a view of the whole array over every tile.

    A block array cannot be copied or pickled (``copy.copy`` and ``copy.deepcopy`` raise
    TypeError): copy its tiles, or ``all()``, instead.
    """

    __slots__ = ("_h", "_grid", "_key", "__weakref__")

    def __init__(self, *a, **k):
        raise TypeError("create block arrays with BlockArray.tiled")

    @classmethod
    def tiled(cls, shape, tile, dtype=np.float64, order="C"):
        """A zero-filled tiled array of ``shape`` in tiles of ``tile`` (ragged at the ends).

        ``tile`` has one extent per axis of ``shape``; a single int is the tile extent on
        every axis (``tiled((n, n), 256)`` is ``tiled((n, n), (256, 256))``). Other ranks
        raise ShapeError."""
        shape = _shape(shape)
        if isinstance(tile, numbers.Integral):
            tile = (tile,) * len(shape)
        tile = _shape(tile)
        if len(tile) != len(shape):
            st = lib.TA_STATUS_SHAPE_MISMATCH
            raise errors.ShapeError(st, st, f"tile extents {tile} have rank {len(tile)}, the shape {shape} "
                                            f"rank {len(shape)}")
        ext = ffi.new("size_t[]", shape or [0])
        te = ffi.new("size_t[]", tile or [0])
        h = _out_call("ta_blocks *", lib.ta_blocks_new_tiled, _ta_dtype(dtype), HOST, len(shape), ext, te,
                      _order(order))
        self = object.__new__(cls)
        self._h = h
        self._key = _exports.Token()
        buf = ffi.new("size_t[]", max(len(shape), 1))
        errors.check(lib.ta_blocks_grid(h, buf, len(shape)))
        self._grid = tuple(int(buf[i]) for i in range(len(shape)))
        return self

    def __del__(self):
        h = getattr(self, "_h", None)
        if h is not None:
            self._h = None
            try:
                lib.ta_blocks_free(h)
            except Exception:
                pass

    def __copy__(self):
        raise TypeError("a tensorasync.BlockArray cannot be copied (the library has no copy of a block "
                        "array); copy its tiles or all() instead")

    def __deepcopy__(self, memo):
        self.__copy__()

    def __reduce_ex__(self, protocol):
        raise TypeError("cannot pickle a tensorasync.BlockArray (a handle to asynchronous state); "
                        "pickle np.asarray(blocks) instead")

    @property
    def grid(self) -> tuple:
        """Tiles per axis."""
        return self._grid

    def __len__(self):
        out = ffi.new("size_t *")
        errors.check(lib.ta_blocks_count(self._h, out))
        return int(out[0])

    def block(self, *index) -> Tensor:
        """The tile at grid index ``index`` (one int per axis) as a Tensor.

        Negative indices count from the end of their axis, as in Python; an index out of
        the grid, or a number of indices other than the grid's rank, raises IndexError."""
        if len(index) == 1 and not isinstance(index[0], numbers.Integral):
            index = tuple(index[0])
        grid = self._grid
        if len(index) != len(grid):
            raise IndexError(f"block() takes {len(grid)} indices, one per axis of the grid {grid}, "
                             f"not {len(index)}")
        idx = []
        for axis, (i, n) in enumerate(zip(index, grid)):
            i = operator.index(i)
            if not -n <= i < n:
                raise IndexError(f"tile index {i} is out of bounds for axis {axis} of the grid {grid}")
            idx.append(i + n if i < 0 else i)
        h = _out_call("ta_tensor *", lib.ta_blocks_tile, self._h, len(idx), ffi.new("size_t[]", idx or [0]))
        return Tensor._from_handle(h, self, key=(self._key, tuple(idx)))

    def all(self) -> Tensor:
        """The whole array as one view over every tile."""
        return Tensor._from_handle(_out_call("ta_tensor *", lib.ta_blocks_all, self._h), self, key=(self._key, None))

    def coalesce(self, lo, hi) -> Tensor:
        """One view over tiles ``lo[k] .. hi[k]-1`` on each axis (one entry per grid axis)."""
        lo = [operator.index(i) for i in lo]
        hi = [operator.index(i) for i in hi]
        grid = self._grid
        if len(lo) != len(grid) or len(hi) != len(grid):
            st = lib.TA_STATUS_INVALID_ARGUMENT
            raise errors.InvalidArgumentError(
                st, st, f"coalesce() takes lo and hi of {len(grid)} entries, one per axis of the grid "
                        f"{grid}, not {len(lo)} and {len(hi)}")
        for axis, (a, b) in enumerate(zip(lo, hi)):
            if a < 0 or b < 0:
                st = lib.TA_STATUS_OUT_OF_RANGE
                raise errors.InvalidArgumentError(st, st, f"tiles {a}..{b} on axis {axis} of the grid {grid}")
        lo_c = ffi.new("size_t[]", lo or [0])
        hi_c = ffi.new("size_t[]", hi or [0])
        h = _out_call("ta_tensor *", lib.ta_blocks_coalesce, self._h, len(lo), lo_c, hi_c)
        return Tensor._from_handle(h, self, key=(self._key, None))

    def __array__(self, dtype=None, copy=None):
        return self.all().__array__(dtype, copy)
