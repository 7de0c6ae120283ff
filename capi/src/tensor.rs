//! Tensors: creation, inspection, waiting, release.

use std::ffi::c_void;

use super::args::{array_arg, domain_arg, dtype_arg, layout_arg, order_arg, timeout_arg};
use super::ops::{check_submission, per_form, submit_with};
use super::{arg, guard, make_handle, need, put, ta_error, ta_status, ta_tensor};
use super::{ta_domain, ta_dtype, ta_order, ta_release_fn};
use ta::Layout;
use ta::ReleaseFn;
use ta::Tensor;
use ta::{Error, Status};

/// Create an unconstructed tensor: dtype and domain known, no shape yet. An
/// overwrite (`ta_copy_in`, `ta_copy`) constructs it; reading it before that
/// fails with `TA_STATUS_UNCONSTRUCTED`.
#[no_mangle]
pub extern "C" fn ta_tensor_new(
    dtype: ta_dtype,
    domain: ta_domain,
    tensor_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_new";
    guard(O, error, || {
        need(tensor_out, O, "tensor_out")?;
        let t = Tensor::unconstructed(dtype_arg(dtype, O)?, domain_arg(domain, O)?)?;
        put(tensor_out, make_handle(t, O)?);
        Ok(())
    })
}

/// Create a zero-filled tensor with `rank` extents, stored densely in `order`
/// (`TA_ORDER_ROW_MAJOR` or `TA_ORDER_COL_MAJOR`).
#[no_mangle]
pub extern "C" fn ta_tensor_new_zeros(
    dtype: ta_dtype,
    domain: ta_domain,
    rank: usize,
    extents: *const usize,
    order: ta_order,
    tensor_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_new_zeros";
    guard(O, error, || {
        need(tensor_out, O, "tensor_out")?;
        let ext = array_arg(extents, rank, O, "extents")?;
        let t = Tensor::zeros(dtype_arg(dtype, O)?, ext, order_arg(order, O)?, domain_arg(domain, O)?)?;
        put(tensor_out, make_handle(t, O)?);
        Ok(())
    })
}

/// Create a host tensor holding a copy of `data`, made before this returns.
/// `data` is the address of element `[0, 0, ...]`; `strides` (in elements,
/// may be NULL for dense in `order`; negative ones reach below `data`)
/// place the others. The tensor is stored densely in `order`.
#[no_mangle]
pub extern "C" fn ta_tensor_new_copy(
    dtype: ta_dtype,
    rank: usize,
    extents: *const usize,
    strides: *const isize,
    order: ta_order,
    data: *const c_void,
    tensor_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_new_copy";
    guard(O, error, || {
        need(tensor_out, O, "tensor_out")?;
        let dt = dtype_arg(dtype, O)?;
        let order = order_arg(order, O)?;
        let src = layout_arg(rank, extents, strides, order, O)?;
        if !src.is_empty() {
            need(data, O, "data")?;
        }
        // SAFETY: the C contract: `data` holds every element the layout addresses.
        let t = unsafe { Tensor::from_host(dt, &src, data.cast(), order)? };
        put(tensor_out, make_handle(t, O)?);
        Ok(())
    })
}

struct SendPtr(*mut c_void);
// SAFETY: the pointers are handed back to the user's release function, which
// the user declared callable from any thread.
unsafe impl Send for SendPtr {}

#[allow(clippy::too_many_arguments)]
fn wrap(
    origin: &'static str,
    dtype: ta_dtype,
    rank: usize,
    extents: *const usize,
    strides: *const isize,
    order: ta_order,
    data: *mut c_void,
    writable: bool,
    release: ta_release_fn,
    release_userdata: *mut c_void,
    tensor_out: *mut *mut ta_tensor,
) -> Result<(), Error> {
    need(tensor_out, origin, "tensor_out")?;
    let dt = dtype_arg(dtype, origin)?;
    let layout = layout_arg(rank, extents, strides, order_arg(order, origin)?, origin)?;
    let hook: Option<ReleaseFn> = release.map(|f| {
        let (ud, p) = (SendPtr(release_userdata), SendPtr(data));
        Box::new(move || {
            let (ud, p) = (ud, p);
            // SAFETY: the user's release function, called once with its own arguments.
            unsafe { f(ud.0, p.0) }
        }) as ReleaseFn
    });
    // SAFETY: the C contract: `data` stays valid for the layout until `release` runs.
    let t = unsafe { Tensor::wrap(dt, layout, data.cast(), writable, hook)? };
    put(tensor_out, make_handle(t, origin)?);
    Ok(())
}

/// Wrap host memory without copying. `data` is the address of element
/// `[0, 0, ...]`; `strides` (elements, may be NULL for dense in `order`;
/// negative ones reach below `data`) place the others. `release(release_userdata, data)` (may be
/// NULL) runs exactly once, after the last access, even if operations are
/// still pending when the handle is freed. If this call fails, `release` is
/// not called and the memory stays the caller's. The caller must not touch
/// the memory while operations on the tensor may be running. Strides that
/// make elements overlap give a read-only tensor. Strides that place an
/// element further from `data` than a pointer can be offset (`PTRDIFF_MAX`
/// bytes) fail with `TA_STATUS_INVALID_ARGUMENT`, as in `ta_tensor_new_copy`,
/// `ta_copy_in`, `ta_copy_out` and the DLPack imports.
#[no_mangle]
pub extern "C" fn ta_tensor_wrap(
    dtype: ta_dtype,
    rank: usize,
    extents: *const usize,
    strides: *const isize,
    order: ta_order,
    data: *mut c_void,
    release: ta_release_fn,
    release_userdata: *mut c_void,
    tensor_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_wrap";
    guard(O, error, || wrap(O, dtype, rank, extents, strides, order, data, true, release, release_userdata, tensor_out))
}

/// Like `ta_tensor_wrap`, for memory the library must never write: the tensor
/// is read-only, and any operation that writes it fails at submission with
/// `TA_STATUS_READ_ONLY`.
#[no_mangle]
pub extern "C" fn ta_tensor_wrap_const(
    dtype: ta_dtype,
    rank: usize,
    extents: *const usize,
    strides: *const isize,
    order: ta_order,
    data: *const c_void,
    release: ta_release_fn,
    release_userdata: *mut c_void,
    tensor_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_wrap_const";
    guard(O, error, || {
        wrap(O, dtype, rank, extents, strides, order, data as *mut c_void, false, release, release_userdata, tensor_out)
    })
}

/// A second handle to the same tensor value (same data, same epoch queue).
/// Each handle is freed separately.
#[no_mangle]
pub extern "C" fn ta_tensor_share(tensor: *const ta_tensor, tensor_out: *mut *mut ta_tensor) -> ta_status {
    const O: &str = "ta_tensor_share";
    guard(O, std::ptr::null_mut(), || {
        need(tensor_out, O, "tensor_out")?;
        let t = arg(tensor, O, "tensor")?;
        put(tensor_out, make_handle(t, O)?);
        Ok(())
    })
}

/// Release a tensor handle. Never blocks and never cancels: pending operations
/// keep the data alive, and memory is freed after the last access. NULL is a no-op.
#[no_mangle]
pub extern "C" fn ta_tensor_free(tensor: *mut ta_tensor) -> ta_status {
    super::free_handle(tensor)
}

/// The dtype of a tensor.
#[no_mangle]
pub extern "C" fn ta_tensor_dtype(tensor: *const ta_tensor, dtype_out: *mut ta_dtype) -> ta_status {
    getter("ta_tensor_dtype", tensor, dtype_out, "dtype_out", |t| Ok(t.dtype() as ta_dtype))
}

/// The domain of a tensor (`TA_DOMAIN_HOST` or a CUDA device ordinal).
#[no_mangle]
pub extern "C" fn ta_tensor_domain(tensor: *const ta_tensor, domain_out: *mut ta_domain) -> ta_status {
    getter("ta_tensor_domain", tensor, domain_out, "domain_out", |t| Ok(crate::domain::to_c(t.domain())))
}

/// Whether writes to the tensor are rejected (stores 1 or 0).
#[no_mangle]
pub extern "C" fn ta_tensor_is_read_only(tensor: *const ta_tensor, read_only_out: *mut i32) -> ta_status {
    getter("ta_tensor_is_read_only", tensor, read_only_out, "read_only_out", |t| Ok(t.is_read_only() as i32))
}

/// The rank, as known at submission time. `TA_STATUS_UNCONSTRUCTED` while the
/// tensor has no shape.
#[no_mangle]
pub extern "C" fn ta_tensor_rank(tensor: *const ta_tensor, rank_out: *mut usize) -> ta_status {
    getter("ta_tensor_rank", tensor, rank_out, "rank_out", |t| Ok(shape(t, "ta_tensor_rank")?.rank()))
}

/// The body of a getter: `out` gets `get` of the tensor.
fn getter<T>(
    origin: &'static str,
    tensor: *const ta_tensor,
    out: *mut T,
    what: &str,
    get: impl FnOnce(&Tensor) -> Result<T, Error>,
) -> ta_status {
    guard(origin, std::ptr::null_mut(), || {
        need(out, origin, what)?;
        put(out, get(&arg(tensor, origin, "tensor")?)?);
        Ok(())
    })
}

/// The layout of a constructed tensor.
fn shape(t: &Tensor, origin: &'static str) -> Result<Layout, Error> {
    t.layout().ok_or_else(|| Error::new(Status::Unconstructed, origin, "the tensor is unconstructed"))
}

/// The body of the extents and strides getters: `pick` of the layout into
/// `out`, which holds `cap` entries.
fn dims<T: Copy>(
    origin: &'static str,
    tensor: *const ta_tensor,
    out: *mut T,
    cap: usize,
    pick: impl FnOnce(&Layout) -> &[T],
) -> ta_status {
    guard(origin, std::ptr::null_mut(), || {
        let l = shape(&arg(tensor, origin, "tensor")?, origin)?;
        copy_dims(pick(&l), out, cap, origin)
    })
}

/// Copy the extents (as known at submission time) into `extents_out`, which
/// holds `cap` entries; `TA_STATUS_BUFFER_TOO_SMALL` if `cap` < rank.
#[no_mangle]
pub extern "C" fn ta_tensor_extents(tensor: *const ta_tensor, extents_out: *mut usize, cap: usize) -> ta_status {
    dims("ta_tensor_extents", tensor, extents_out, cap, |l| &l.extents)
}

/// Copy the strides in elements (as known at submission time) into
/// `strides_out`, which holds `cap` entries.
#[no_mangle]
pub extern "C" fn ta_tensor_strides(tensor: *const ta_tensor, strides_out: *mut isize, cap: usize) -> ta_status {
    dims("ta_tensor_strides", tensor, strides_out, cap, |l| &l.strides)
}

fn copy_dims<T: Copy>(src: &[T], out: *mut T, cap: usize, origin: &'static str) -> Result<(), Error> {
    if cap < src.len() {
        return Err(Error::new(Status::BufferTooSmall, origin, format!("rank is {}, buffer holds {cap}", src.len())));
    }
    if !src.is_empty() {
        need(out, origin, "out")?;
        // SAFETY: `out` holds `cap >= src.len()` entries by the C contract.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), out, src.len()) };
    }
    Ok(())
}

/// Wait for every operation enrolled on the tensor so far (`timeout_ns` < 0:
/// forever), then return its state: `TA_STATUS_OK` for a clean value, the
/// status of the error that poisoned it (details in `*error`),
/// `TA_STATUS_UNCONSTRUCTED`, or `TA_STATUS_TIMEOUT`. Called from inside a
/// kernel on a tensor that kernel accesses, it fails with
/// `TA_STATUS_WOULD_DEADLOCK` instead of hanging.
#[no_mangle]
pub extern "C" fn ta_tensor_wait(tensor: *const ta_tensor, timeout_ns: i64, error: *mut *mut ta_error) -> ta_status {
    const O: &str = "ta_tensor_wait";
    guard(O, error, || arg(tensor, O, "tensor")?.wait(timeout_arg(timeout_ns)))
}

/// One axis of a slice, for `ta_tensor_slice`: indices `start, start + step,
/// ...` up to `stop` (exclusive). With a negative `step`, `start` is the
/// highest index and `stop` the one below the last (-1 runs through index 0).
/// `start == stop` selects nothing. A non-zero `drop` removes the axis and
/// needs exactly one index.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct ta_slice {
    pub start: i64,
    pub stop: i64,
    pub step: i64,
    pub drop: i32,
}

fn make_view(
    origin: &'static str,
    tensor: *const ta_tensor,
    view_out: *mut *mut ta_tensor,
    f: impl FnOnce(&Tensor) -> Result<Tensor, Error>,
) -> Result<(), Error> {
    need(view_out, origin, "view_out")?;
    let t = arg(tensor, origin, "tensor")?;
    let v = f(&t)?;
    put(view_out, make_handle(v, origin)?);
    Ok(())
}

/// A view of some elements of `tensor`: `nslices` (= its rank) axis specs.
/// The view shares the tensor's epoch queue, keeps its storage alive after
/// every other handle is freed, and writes through it update the tensor.
/// Operations on disjoint slices of one tensor run concurrently.
/// Each `ta_slice` selects `start, start + step, ...` before `stop`
/// (exclusive; with a negative step `start` is the highest index and `stop`
/// the one below the last, -1 to run through index 0). Indices do not wrap
/// around: a negative `start` is `TA_STATUS_OUT_OF_RANGE`, as is any index
/// outside the axis; `step` 0 is `TA_STATUS_INVALID_ARGUMENT`. `drop` != 0
/// removes the axis and needs exactly one index, `{i, i + 1, 1, 1}`
/// (`TA_STATUS_INVALID_ARGUMENT` otherwise). A slice with a zero extent is a
/// valid, empty view. Poison is tracked per element: a failed write through
/// a view poisons only the elements it wrote, and a later overwrite cleans
/// exactly what it writes.
#[no_mangle]
pub extern "C" fn ta_tensor_slice(
    tensor: *const ta_tensor,
    slices: *const ta_slice,
    nslices: usize,
    view_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_slice";
    guard(O, error, || {
        let specs: Vec<ta::SliceSpec> = array_arg(slices, nslices, O, "slices")?
            .iter()
            .map(|s| {
                let conv =
                    |x: i64| isize::try_from(x).map_err(|_| Error::new(Status::OutOfRange, O, "index does not fit"));
                Ok(ta::SliceSpec { start: conv(s.start)?, stop: conv(s.stop)?, step: conv(s.step)?, drop: s.drop != 0 })
            })
            .collect::<Result<_, Error>>()?;
        make_view(O, tensor, view_out, |t| t.slice(&specs))
    })
}

/// A view with axes reordered: axis `j` of the view is axis `perm[j]` of
/// `tensor`. `rank` must equal the tensor's rank.
#[no_mangle]
pub extern "C" fn ta_tensor_permute(
    tensor: *const ta_tensor,
    perm: *const usize,
    rank: usize,
    view_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_permute";
    guard(O, error, || {
        let perm = array_arg(perm, rank, O, "perm")?;
        make_view(O, tensor, view_out, |t| t.permute(perm))
    })
}

/// A view with the axes in reverse order (the transpose of a matrix).
#[no_mangle]
pub extern "C" fn ta_tensor_transpose(
    tensor: *const ta_tensor,
    view_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_transpose";
    guard(O, error, || make_view(O, tensor, view_out, Tensor::transpose))
}

/// A read-only conjugate view: lazy for complex dtypes (kernels see the conj
/// flag in `ta_view.conj`, and library operations honour it), the identity
/// for real dtypes. Using it as an output fails with `TA_STATUS_READ_ONLY`.
#[no_mangle]
pub extern "C" fn ta_tensor_conj(
    tensor: *const ta_tensor,
    view_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_conj";
    guard(O, error, || make_view(O, tensor, view_out, Tensor::conj))
}

/// A view with new extents over the same elements, read in `order`. The
/// elements must be dense in that order (`TA_STATUS_NOT_CONTIGUOUS`) and the
/// element counts equal (`TA_STATUS_SHAPE_MISMATCH`).
#[no_mangle]
pub extern "C" fn ta_tensor_reshape(
    tensor: *const ta_tensor,
    rank: usize,
    extents: *const usize,
    order: ta_order,
    view_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_reshape";
    guard(O, error, || {
        let ext = array_arg(extents, rank, O, "extents")?;
        let order = order_arg(order, O)?;
        make_view(O, tensor, view_out, |t| t.reshape(ext, order))
    })
}

/// A copy of `tensor`. For a view, a new handle to the same view (a
/// structural copy). For a whole tensor, a new tensor on a fresh epoch queue,
/// filled by a scheduled copy that sees every write submitted before it;
/// `event_out` (may be NULL) reports that copy (NULL for a view: nothing is
/// scheduled).
#[no_mangle]
pub extern "C" fn ta_tensor_clone(
    tensor: *const ta_tensor,
    opts: *const super::ta_submit,
    copy_out: *mut *mut ta_tensor,
    event_out: *mut *mut super::ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_clone";
    guard(O, error, || {
        need(copy_out, O, "copy_out")?;
        let t = arg(tensor, O, "tensor")?;
        let fresh = if t.is_view() {
            // A structural copy (the same view): nothing is scheduled, but the
            // options are checked as for the copy of a whole tensor.
            check_submission(O, opts, event_out)?;
            if !event_out.is_null() {
                put(event_out, std::ptr::null_mut());
            }
            t.clone()
        } else {
            let mut fresh = None;
            per_form!(event_out, |form| submit_with(form, O, opts, event_out, |s| {
                let (c, out) = t.deep_copy(s)?;
                fresh = Some(c);
                Ok(out)
            }))?;
            fresh.expect("set on success")
        };
        put(copy_out, make_handle(fresh, O)?);
        Ok(())
    })
}

/// Whether `tensor` is a view of another tensor (stores 1 or 0). A block of
/// a block array (`ta_blocks_block`, `ta_blocks_tile`) is a tensor of its
/// own and reports 0.
#[no_mangle]
pub extern "C" fn ta_tensor_is_view(tensor: *const ta_tensor, is_view_out: *mut i32) -> ta_status {
    guard("ta_tensor_is_view", std::ptr::null_mut(), || {
        need(is_view_out, "ta_tensor_is_view", "is_view_out")?;
        put(is_view_out, arg(tensor, "ta_tensor_is_view", "tensor")?.is_view() as i32);
        Ok(())
    })
}
