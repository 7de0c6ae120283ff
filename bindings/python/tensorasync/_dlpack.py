"""DLPack export: ``Tensor.__dlpack__`` through the C ABI's ``ta_tensor_to_dlpack``.

The library waits for pending writes, then exports a managed tensor that holds a read
access until its deleter runs: later writers wait for the consumer to drop it. The
capsule protocol: the capsule is named ``"dltensor_versioned"`` (DLPack 1.x) or
``"dltensor"`` (legacy, for consumers that do not pass ``max_version``, such as NumPy
2.0); a consumer renames it to ``"used_..."``, and the capsule's destructor calls the
deleter only if it is still unconsumed.
"""
import ctypes

from ._ffi import ffi, lib
from . import errors
from . import _exports

_KDLCPU = 1

# Capsule names must outlive every capsule: module globals, never freed.
_NAME_VERSIONED = b"dltensor_versioned"
_NAME_LEGACY = b"dltensor"

_api = ctypes.pythonapi
_Destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_PyCapsule_New = _api.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _Destructor]
_PyCapsule_IsValid = _api.PyCapsule_IsValid
_PyCapsule_IsValid.restype = ctypes.c_int
_PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_PyCapsule_GetPointer = _api.PyCapsule_GetPointer
_PyCapsule_GetPointer.restype = ctypes.c_void_p
_PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


def _capsule_destructor(capsule, _valid=_PyCapsule_IsValid, _get=_PyCapsule_GetPointer,
                        _ffi=ffi, _v=_NAME_VERSIONED, _l=_NAME_LEGACY):
    # Runs on the Python thread that drops the capsule. A consumed capsule has been
    # renamed ("used_...") and is left alone: its consumer calls the deleter.
    try:
        if _valid(capsule, _v):
            m = _ffi.cast("ta_dl_managed_tensor_versioned *", _get(capsule, _v))
        elif _valid(capsule, _l):
            m = _ffi.cast("ta_dl_managed_tensor *", _get(capsule, _l))
        else:
            return
        if m.deleter != _ffi.NULL:
            m.deleter(m)
    except BaseException:  # never raise from a destructor
        pass


# Kept alive for the life of the process (capsules may outlive the module's teardown).
_DESTRUCTOR = _Destructor(_capsule_destructor)


def _capsule(ptr, versioned):
    name = _NAME_VERSIONED if versioned else _NAME_LEGACY
    return _PyCapsule_New(int(ffi.cast("uintptr_t", ptr)), name, _DESTRUCTOR)


def _to_dlpack(tensor, versioned, mode):
    kind = "ta_dl_managed_tensor_versioned *" if versioned else "ta_dl_managed_tensor *"
    fn = lib.ta_tensor_to_dlpack if versioned else lib.ta_tensor_to_dlpack_legacy
    outp = ffi.new(kind + " *")
    errp = ffi.new("ta_error **")
    st = fn(tensor._h, mode, -1, outp, errp)
    if st:
        raise errors.from_handle(st, errp[0])
    return outp[0]


def export(tensor, *, stream=None, max_version=None, dl_device=None, copy=None):
    """Implements ``Tensor.__dlpack__`` (array API 2023.12 signature)."""
    if stream not in (None, -1):
        raise BufferError("a host tensor takes stream=None (or -1) only")
    if tensor.__dlpack_device__()[0] != _KDLCPU:
        raise BufferError("only host tensors can be exported through DLPack")
    if dl_device is not None and tuple(int(v) for v in dl_device) != (_KDLCPU, 0):
        raise BufferError(f"cannot export to device {tuple(dl_device)}; only (kDLCPU, 0)")
    versioned = max_version is not None and int(max_version[0]) >= 1
    # The export (or the copy it makes) waits for pending writers of the tensor: one that
    # waits for an export this thread holds would never let it finish.
    _exports.check_acquire(tensor, lib.TA_MODE_READ, "__dlpack__()")
    # A copy belongs to the consumer alone: it is exported writable (an exclusive access
    # of a tensor nobody else has). Otherwise a read access: later writers wait for it.
    src = tensor.copy() if copy else tensor
    mode = lib.TA_MODE_UPDATE if copy else lib.TA_MODE_READ
    try:
        managed = _to_dlpack(src, versioned, mode)
    except errors.UnsupportedError:
        # A conj view of a complex tensor: DLPack has no conjugation flag; materialise it
        # (the consumer then gets a copy).
        if copy is False:
            raise BufferError("exporting a conj view needs a copy") from None
        src = tensor.copy()
        copy = True
        managed = _to_dlpack(src, versioned, lib.TA_MODE_UPDATE)
    if versioned and copy:
        managed.flags |= lib.TA_DL_FLAG_IS_COPIED
    return _capsule(managed, versioned)
