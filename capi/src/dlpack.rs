//! DLPack export and import (SPEC §2.8), with the DLPack types declared
//! under `ta_` names (layout-identical to dlpack.h 1.x), so that a program
//! can include dlpack.h beside our header.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::args::timeout_arg;
use super::mapping::mode_arg;
use super::{arg, guard, make_handle, need, put, ta_error, ta_mode, ta_status, ta_tensor};
use ta::DType;
use ta::HostAccess;
use ta::Mode;
use ta::ReleaseFn;
use ta::Tensor;
use ta::{Error, Status};
use ta::{Layout, Order};

/// `DLPackVersion`.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct ta_dl_version {
    pub major: u32,
    pub minor: u32,
}

/// `DLDevice`: `device_type` is a `DLDeviceType` (`TA_DL_DEVICE_CPU` = kDLCPU = 1).
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct ta_dl_device {
    pub device_type: i32,
    pub device_id: i32,
}

/// `DLDataType`: `code` is kDLInt (0), kDLUInt (1), kDLFloat (2) or kDLComplex (5).
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct ta_dl_data_type {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

/// `DLTensor`: element `(i0, i1, ...)` is at
/// `data + byte_offset + sum_k ik * strides[k] * element_size`.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct ta_dl_tensor {
    pub data: *mut c_void,
    pub device: ta_dl_device,
    pub ndim: i32,
    pub dtype: ta_dl_data_type,
    pub shape: *mut i64,
    /// In elements; NULL means dense row-major (on import).
    pub strides: *mut i64,
    pub byte_offset: u64,
}

/// `DLManagedTensor` (unversioned, before DLPack 1.0).
#[repr(C)]
pub struct ta_dl_managed_tensor {
    pub dl_tensor: ta_dl_tensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(managed: *mut ta_dl_managed_tensor)>,
}

/// `DLManagedTensorVersioned` (DLPack 1.x).
#[repr(C)]
pub struct ta_dl_managed_tensor_versioned {
    pub version: ta_dl_version,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(managed: *mut ta_dl_managed_tensor_versioned)>,
    /// `TA_DL_FLAG_READ_ONLY`, `TA_DL_FLAG_IS_COPIED`.
    pub flags: u64,
    pub dl_tensor: ta_dl_tensor,
}

/// `DLPACK_FLAG_BITMASK_READ_ONLY`: the data must not be written.
pub const TA_DL_FLAG_READ_ONLY: u64 = 1;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`: the data is a copy.
pub const TA_DL_FLAG_IS_COPIED: u64 = 2;
/// `kDLCPU`.
pub const TA_DL_DEVICE_CPU: i32 = 1;
/// The DLPack version of exported tensors (`DLPACK_MAJOR_VERSION`).
pub const TA_DL_MAJOR_VERSION: u32 = 1;
/// The DLPack minor version of exported tensors.
pub const TA_DL_MINOR_VERSION: u32 = 0;

const DL_INT: u8 = 0;
const DL_UINT: u8 = 1;
const DL_FLOAT: u8 = 2;
const DL_COMPLEX: u8 = 5;

fn dl_dtype(d: DType) -> ta_dl_data_type {
    let code = match d {
        DType::F32 | DType::F64 => DL_FLOAT,
        DType::C64 | DType::C128 => DL_COMPLEX,
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => DL_INT,
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => DL_UINT,
    };
    ta_dl_data_type { code, bits: (d.size() * 8) as u8, lanes: 1 }
}

fn from_dl_dtype(t: ta_dl_data_type, origin: &'static str) -> Result<DType, Error> {
    let d = match (t.code, t.bits, t.lanes) {
        (DL_FLOAT, 32, 1) => DType::F32,
        (DL_FLOAT, 64, 1) => DType::F64,
        (DL_COMPLEX, 64, 1) => DType::C64,
        (DL_COMPLEX, 128, 1) => DType::C128,
        (DL_INT, 8, 1) => DType::I8,
        (DL_INT, 16, 1) => DType::I16,
        (DL_INT, 32, 1) => DType::I32,
        (DL_INT, 64, 1) => DType::I64,
        (DL_UINT, 8, 1) => DType::U8,
        (DL_UINT, 16, 1) => DType::U16,
        (DL_UINT, 32, 1) => DType::U32,
        (DL_UINT, 64, 1) => DType::U64,
        (c, b, l) => {
            return Err(Error::new(
                Status::Unsupported,
                origin,
                format!("DLPack dtype code {c}, {b} bits, {l} lanes has no tensorasync dtype"),
            ))
        }
    };
    Ok(d)
}

/// What an export owns: the managed tensor handed out (first, so the
/// managed tensor's address is the export's), its shape and strides, and
/// the host access it holds.
#[repr(C)]
struct Export<M> {
    managed: M,
    shape: Vec<i64>,
    strides: Vec<i64>,
    access: Option<HostAccess>,
}

/// Acquire `tensor` as `ta_tensor_acquire` does and describe the view.
fn export_parts(
    tensor: *const ta_tensor,
    mode: ta_mode,
    timeout_ns: i64,
    origin: &'static str,
) -> Result<(HostAccess, ta_dl_tensor, Vec<i64>, Vec<i64>), Error> {
    let t = arg(tensor, origin, "tensor")?;
    let mode = mode_arg(mode, origin)?;
    if t.is_conj() && t.dtype().is_complex() {
        return Err(Error::new(
            Status::Unsupported,
            origin,
            "a conjugate view of a complex tensor cannot be exported: DLPack has no conjugation flag (materialise it with ta_conj first)",
        ));
    }
    let access = t.acquire_named(origin, mode, timeout_arg(timeout_ns))?;
    let v = access.view()?.clone();
    let too_big = || Error::new(Status::Unsupported, origin, "the tensor's rank or extents do not fit DLPack's types");
    let shape: Vec<i64> =
        v.extents.iter().map(|&e| i64::try_from(e).map_err(|_| too_big())).collect::<Result<_, _>>()?;
    let strides: Vec<i64> = v.strides.iter().map(|&s| s as i64).collect();
    let dl = ta_dl_tensor {
        data: v.ptr.cast(),
        device: ta_dl_device { device_type: TA_DL_DEVICE_CPU, device_id: 0 },
        ndim: i32::try_from(shape.len()).map_err(|_| too_big())?,
        dtype: dl_dtype(v.dtype),
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    Ok((access, dl, shape, strides))
}

/// Box an export and point its tensor at its own shape and strides.
fn finish_export<M>(
    managed: M,
    shape: Vec<i64>,
    strides: Vec<i64>,
    access: HostAccess,
    dl: impl FnOnce(&mut M) -> &mut ta_dl_tensor,
    ctx: impl FnOnce(&mut M, *mut c_void),
) -> *mut M {
    let mut b = Box::new(Export { managed, shape, strides, access: Some(access) });
    let (sp, st) = (b.shape.as_mut_ptr(), b.strides.as_mut_ptr());
    let t = dl(&mut b.managed);
    t.shape = sp;
    t.strides = st;
    let p = Box::into_raw(b);
    // SAFETY: `p` is the live box just made; `managed` is its first field.
    unsafe { ctx(&mut (*p).managed, p.cast()) };
    p.cast()
}

/// Drop an export from its deleter: releases the access (never blocks).
///
/// # Safety
/// `ctx` is the `manager_ctx` of an export made here, whose deleter has not run.
unsafe fn drop_export<M>(ctx: *mut c_void) {
    if ctx.is_null() {
        return;
    }
    // SAFETY: by the contract above, `ctx` came from `Box::into_raw` in
    // `finish_export` and is dropped once, here.
    let b = unsafe { Box::from_raw(ctx.cast::<Export<M>>()) };
    // A panic must not cross the C boundary; the export is gone either way.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(b)));
}

unsafe extern "C" fn delete_versioned(m: *mut ta_dl_managed_tensor_versioned) {
    if !m.is_null() {
        // SAFETY: the consumer calls the deleter once with the tensor we exported.
        unsafe { drop_export::<ta_dl_managed_tensor_versioned>((*m).manager_ctx) }
    }
}

unsafe extern "C" fn delete_legacy(m: *mut ta_dl_managed_tensor) {
    if !m.is_null() {
        // SAFETY: as in `delete_versioned`.
        unsafe { drop_export::<ta_dl_managed_tensor>((*m).manager_ctx) }
    }
}

/// Export `tensor` as a DLPack 1.x managed tensor. Acquires host access in
/// `mode` exactly as `ta_tensor_acquire` does (blocking up to `timeout_ns`,
/// with the same statuses and errors) and holds it until the managed
/// tensor's deleter runs: until then a READ export holds later writers, a
/// WRITE or UPDATE export every later access. READ exports set
/// `TA_DL_FLAG_READ_ONLY`. `strides` is always filled (in elements), the
/// device is `kDLCPU`, `byte_offset` is 0. The deleter must be called
/// exactly once, may be called from any thread, never blocks, and is safe
/// during process exit; freeing the tensor's handles before it is fine. A
/// conjugate view of a complex tensor gives `TA_STATUS_UNSUPPORTED`
/// (DLPack has no conjugation flag; materialise it with `ta_conj` first).
#[no_mangle]
pub extern "C" fn ta_tensor_to_dlpack(
    tensor: *const ta_tensor,
    mode: ta_mode,
    timeout_ns: i64,
    out: *mut *mut ta_dl_managed_tensor_versioned,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_to_dlpack";
    guard(O, error, || {
        need(out, O, "out")?;
        let (access, dl, shape, strides) = export_parts(tensor, mode, timeout_ns, O)?;
        let read_only = mode == Mode::Read as ta_mode;
        let managed = ta_dl_managed_tensor_versioned {
            version: ta_dl_version { major: TA_DL_MAJOR_VERSION, minor: TA_DL_MINOR_VERSION },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_versioned),
            flags: if read_only { TA_DL_FLAG_READ_ONLY } else { 0 },
            dl_tensor: dl,
        };
        put(out, finish_export(managed, shape, strides, access, |m| &mut m.dl_tensor, |m, c| m.manager_ctx = c));
        Ok(())
    })
}

/// The same as `ta_tensor_to_dlpack`, as an unversioned (pre-1.0)
/// `DLManagedTensor`, for consumers such as NumPy 2.0. It has no flags
/// field: a READ export must not be written by the consumer.
#[no_mangle]
pub extern "C" fn ta_tensor_to_dlpack_legacy(
    tensor: *const ta_tensor,
    mode: ta_mode,
    timeout_ns: i64,
    out: *mut *mut ta_dl_managed_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_to_dlpack_legacy";
    guard(O, error, || {
        need(out, O, "out")?;
        let (access, dl, shape, strides) = export_parts(tensor, mode, timeout_ns, O)?;
        let managed =
            ta_dl_managed_tensor { dl_tensor: dl, manager_ctx: std::ptr::null_mut(), deleter: Some(delete_legacy) };
        put(out, finish_export(managed, shape, strides, access, |m| &mut m.dl_tensor, |m, c| m.manager_ctx = c));
        Ok(())
    })
}

struct SendPtr<T>(*mut T);
// SAFETY: the pointer goes back to the producer's deleter, which DLPack
// allows to be called from any thread.
unsafe impl<T> Send for SendPtr<T> {}

/// Wrap a DLPack tensor zero-copy; `release` runs after the last access.
fn import(
    t: &ta_dl_tensor,
    writable: bool,
    release: ReleaseFn,
    origin: &'static str,
) -> Result<Tensor, (Error, ReleaseFn)> {
    let parts = (|| {
        if t.device.device_type != TA_DL_DEVICE_CPU {
            return Err(Error::new(
                Status::DomainMismatch,
                origin,
                format!("DLPack device type {} is not kDLCPU (1)", t.device.device_type),
            ));
        }
        let dtype = from_dl_dtype(t.dtype, origin)?;
        let ndim = usize::try_from(t.ndim)
            .map_err(|_| Error::new(Status::InvalidArgument, origin, format!("ndim {} is negative", t.ndim)))?;
        let ndim = crate::args::rank_arg(ndim, origin, "dl_tensor.shape")?;
        let shape: &[i64] = if ndim == 0 {
            &[]
        } else {
            need(t.shape, origin, "dl_tensor.shape")?;
            // SAFETY: DLPack: `shape` holds `ndim` entries.
            unsafe { std::slice::from_raw_parts(t.shape, ndim) }
        };
        let ext: Vec<usize> = shape
            .iter()
            .map(|&e| {
                usize::try_from(e)
                    .map_err(|_| Error::new(Status::InvalidArgument, origin, format!("extent {e} is negative")))
            })
            .collect::<Result<_, _>>()?;
        let layout = if t.strides.is_null() || ndim == 0 {
            Layout::contiguous(&ext, Order::RowMajor)
        } else {
            // SAFETY: DLPack: a non-NULL `strides` holds `ndim` entries.
            let s: Vec<isize> =
                unsafe { std::slice::from_raw_parts(t.strides, ndim) }.iter().map(|&s| s as isize).collect();
            Layout::strided(&ext, &s, 0, origin)?
        };
        let empty = ext.contains(&0);
        let data = if t.data.is_null() && empty {
            // Nothing is ever read or written; any aligned address will do.
            dtype.align() as *mut u8
        } else {
            need(t.data, origin, "dl_tensor.data")?;
            (t.data as *mut u8).wrapping_add(t.byte_offset as usize)
        };
        Ok((dtype, layout, data))
    })();
    let (dtype, layout, data) = match parts {
        Ok(p) => p,
        Err(e) => return Err((e, release)),
    };
    // Wrap with a hook that can be handed back if wrapping fails.
    let slot = std::sync::Arc::new(parking_lot::Mutex::new(Some(release)));
    let hook_slot = slot.clone();
    let hook: ReleaseFn = Box::new(move || {
        if let Some(r) = hook_slot.lock().take() {
            r()
        }
    });
    // SAFETY: DLPack's contract: the producer keeps the memory valid for
    // every element the tensor describes until its deleter runs, which the
    // hook calls after the last access.
    match unsafe { Tensor::wrap(dtype, layout, data, writable, Some(hook)) } {
        Ok(t) => Ok(t),
        Err(e) => {
            let r = slot.lock().take().expect("the hook was not called");
            // The import is the C function called, not the wrap it uses.
            Err((e.with_origin(origin), r))
        }
    }
}

/// Import a DLPack 1.x managed tensor zero-copy as a new host tensor. On
/// success the tensor owns `managed`: its deleter (if not NULL) is called
/// exactly once, after the last access to the tensor (on the thread that
/// lets the memory go). On failure nothing is called and `managed` stays
/// the caller's. Only `kDLCPU` tensors with one lane are accepted
/// (`TA_STATUS_DOMAIN_MISMATCH`, `TA_STATUS_UNSUPPORTED` otherwise); NULL
/// strides mean dense row-major. A `TA_DL_FLAG_READ_ONLY` tensor gives a
/// read-only tensor.
#[no_mangle]
// The C contract makes `managed` valid when non-NULL (checked before use).
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub extern "C" fn ta_tensor_from_dlpack(
    managed: *mut ta_dl_managed_tensor_versioned,
    tensor_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_from_dlpack";
    guard(O, error, || {
        need(tensor_out, O, "tensor_out")?;
        need(managed, O, "managed")?;
        // SAFETY: a non-NULL `managed` is a live DLManagedTensorVersioned by the C contract.
        let m = unsafe { &*managed };
        if m.version.major != TA_DL_MAJOR_VERSION {
            return Err(Error::new(
                Status::Unsupported,
                O,
                format!("DLPack major version {} is not {TA_DL_MAJOR_VERSION}", m.version.major),
            ));
        }
        let (deleter, p) = (m.deleter, SendPtr(managed));
        let release: ReleaseFn = Box::new(move || {
            let p = p;
            if let Some(d) = deleter {
                // SAFETY: the producer's deleter, called once with its own tensor.
                unsafe { d(p.0) }
            }
        });
        let t = import(&m.dl_tensor, m.flags & TA_DL_FLAG_READ_ONLY == 0, release, O).map_err(|(e, r)| {
            drop(r); // dropped uncalled: the caller keeps `managed`
            e
        })?;
        put(tensor_out, make_handle(t, O)?);
        Ok(())
    })
}

/// The same as `ta_tensor_from_dlpack` for an unversioned (pre-1.0)
/// `DLManagedTensor` (always writable).
#[no_mangle]
// The C contract makes `managed` valid when non-NULL (checked before use).
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub extern "C" fn ta_tensor_from_dlpack_legacy(
    managed: *mut ta_dl_managed_tensor,
    tensor_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_from_dlpack_legacy";
    guard(O, error, || {
        need(tensor_out, O, "tensor_out")?;
        need(managed, O, "managed")?;
        // SAFETY: a non-NULL `managed` is a live DLManagedTensor by the C contract.
        let m = unsafe { &*managed };
        let (deleter, p) = (m.deleter, SendPtr(managed));
        let release: ReleaseFn = Box::new(move || {
            let p = p;
            if let Some(d) = deleter {
                // SAFETY: the producer's deleter, called once with its own tensor.
                unsafe { d(p.0) }
            }
        });
        let t = import(&m.dl_tensor, true, release, O).map_err(|(e, r)| {
            drop(r); // dropped uncalled: the caller keeps `managed`
            e
        })?;
        put(tensor_out, make_handle(t, O)?);
        Ok(())
    })
}
