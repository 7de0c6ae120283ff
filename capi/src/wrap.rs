//! Wrapping user memory with options (release through a completion queue).

use std::ffi::c_void;

use super::args::{dtype_arg, layout_arg, order_arg};
use super::{
    arg, guard, make_handle, need, put, ta_cq, ta_dtype, ta_error, ta_order, ta_release_fn, ta_status, ta_tensor,
};
use ta::CompletionEntry;
use ta::ReleaseFn;
use ta::Tensor;
use ta::{Error, Status};

/// `ta_wrap_options.flags`: the tensor is read-only (as `ta_tensor_wrap_const`).
pub const TA_WRAP_READ_ONLY: u32 = 1;

/// Options for `ta_tensor_wrap_ex`. Set `struct_size` to
/// `sizeof(ta_wrap_options)` and zero-initialise the fields you do not set.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct ta_wrap_options {
    /// `sizeof(ta_wrap_options)`.
    pub struct_size: u32,
    /// `TA_WRAP_READ_ONLY`, or 0.
    pub flags: u32,
    /// Called as `release(release_userdata, data)` exactly once after the
    /// last access, on whichever thread lets the memory go (a worker, or the
    /// thread that frees the last handle); may be NULL.
    pub release: ta_release_fn,
    /// Passed to `release`.
    pub release_userdata: *mut c_void,
    /// If not NULL, the release is also reported as the completion entry
    /// `{release_tag, TA_STATUS_OK, NULL}` on this queue (with `release`
    /// NULL, no code of the caller's runs on a library thread for it). The
    /// queue is kept alive until then.
    pub release_cq: *const ta_cq,
    /// Tag of that completion entry.
    pub release_tag: u64,
}

struct SendPtr(*mut c_void);
// SAFETY: the pointers are handed back to the user's release function, which
// the user declared callable from any thread.
unsafe impl Send for SendPtr {}

/// As `ta_tensor_wrap` (writable) or `ta_tensor_wrap_const` (with
/// `TA_WRAP_READ_ONLY`), with the release reported as `options` says.
/// `options` may be NULL: writable, no release notification. An
/// `options->struct_size` smaller than this version's struct, or unknown
/// flags, give `TA_STATUS_INVALID_ARGUMENT`. If this call fails, nothing is
/// called or queued and the memory stays the caller's.
#[no_mangle]
pub extern "C" fn ta_tensor_wrap_ex(
    dtype: ta_dtype,
    rank: usize,
    extents: *const usize,
    strides: *const isize,
    order: ta_order,
    data: *mut c_void,
    options: *const ta_wrap_options,
    tensor_out: *mut *mut ta_tensor,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_tensor_wrap_ex";
    guard(O, error, || {
        need(tensor_out, O, "tensor_out")?;
        let opts = if options.is_null() {
            None
        } else {
            // SAFETY: a non-NULL `options` points to a readable `ta_wrap_options`
            // of at least `struct_size` bytes by the C contract; its first
            // field is read first, and the rest only if it is large enough.
            let size = unsafe { (*options).struct_size } as usize;
            if size < std::mem::size_of::<ta_wrap_options>() {
                return Err(Error::new(
                    Status::InvalidArgument,
                    O,
                    format!(
                        "options.struct_size is {size}, expected at least {}",
                        std::mem::size_of::<ta_wrap_options>()
                    ),
                ));
            }
            // SAFETY: see above.
            Some(unsafe { *options })
        };
        let flags = opts.map_or(0, |o| o.flags);
        let unknown = flags & !TA_WRAP_READ_ONLY;
        if unknown != 0 {
            return Err(Error::new(Status::InvalidArgument, O, format!("unknown flags {unknown:#x}")));
        }
        let dt = dtype_arg(dtype, O)?;
        let layout = layout_arg(rank, extents, strides, order_arg(order, O)?, O)?;
        let cq = match opts {
            Some(o) if !o.release_cq.is_null() => Some((arg(o.release_cq, O, "options.release_cq")?, o.release_tag)),
            _ => None,
        };
        let release = opts.and_then(|o| o.release.map(|f| (f, SendPtr(o.release_userdata))));
        let hook: Option<ReleaseFn> = if release.is_none() && cq.is_none() {
            None
        } else {
            let p = SendPtr(data);
            Some(Box::new(move || {
                let (release, cq, p) = (release, cq, p);
                if let Some((f, ud)) = release {
                    // SAFETY: the user's release function, called once with its own arguments.
                    unsafe { f(ud.0, p.0) }
                }
                if let Some((q, tag)) = cq {
                    q.push(CompletionEntry { tag, result: Ok(()) });
                }
            }))
        };
        // SAFETY: the C contract: `data` stays valid for the layout until the release.
        let t = unsafe { Tensor::wrap(dt, layout, data.cast(), flags & TA_WRAP_READ_ONLY == 0, hook)? };
        put(tensor_out, make_handle(t, O)?);
        Ok(())
    })
}
