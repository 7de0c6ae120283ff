//! C-visible types and constants. Enumerations are plain integer typedefs
//! with `#define` values, so a C caller can pass any integer and the library
//! rejects unknown values with a status instead of undefined behaviour.

#![allow(non_camel_case_types)]

use std::ffi::c_void;

/// Status code returned by every fallible function. Values are stable and never reused.
pub type ta_status = u32;
/// Success.
pub const TA_STATUS_OK: ta_status = 0;
/// The operation has not completed yet.
pub const TA_STATUS_PENDING: ta_status = 1;
/// A wait ran out of time before the operation completed.
pub const TA_STATUS_TIMEOUT: ta_status = 2;
/// A required handle argument was NULL.
pub const TA_STATUS_NULL_HANDLE: ta_status = 10;
/// The handle was valid once but its object has been freed.
pub const TA_STATUS_STALE_HANDLE: ta_status = 11;
/// The handle was already freed.
pub const TA_STATUS_DOUBLE_FREE: ta_status = 12;
/// The handle refers to an object of another type.
pub const TA_STATUS_WRONG_HANDLE_TYPE: ta_status = 13;
/// The value is not a handle this library issued.
pub const TA_STATUS_INVALID_HANDLE: ta_status = 14;
/// A required pointer argument was NULL.
pub const TA_STATUS_NULL_POINTER: ta_status = 15;
/// An argument is outside its allowed range.
pub const TA_STATUS_INVALID_ARGUMENT: ta_status = 20;
/// Operand dtypes do not fit the operation.
pub const TA_STATUS_DTYPE_MISMATCH: ta_status = 21;
/// Operand shapes do not fit the operation.
pub const TA_STATUS_SHAPE_MISMATCH: ta_status = 22;
/// Operands live in different domains.
pub const TA_STATUS_DOMAIN_MISMATCH: ta_status = 23;
/// The output is read-only.
pub const TA_STATUS_READ_ONLY: ta_status = 24;
/// The output shares the epoch queue of an input.
pub const TA_STATUS_ALIAS: ta_status = 25;
/// The tensor has no value yet.
pub const TA_STATUS_UNCONSTRUCTED: ta_status = 26;
/// The tensor's shape is not known at submission.
pub const TA_STATUS_SHAPE_UNKNOWN: ta_status = 27;
/// The operation is not supported for these operands.
pub const TA_STATUS_UNSUPPORTED: ta_status = 28;
/// An index or range is out of bounds.
pub const TA_STATUS_OUT_OF_RANGE: ta_status = 29;
/// A caller buffer is too small for the result.
pub const TA_STATUS_BUFFER_TOO_SMALL: ta_status = 30;
/// The operation needs data dense in memory (for example a reshape).
pub const TA_STATUS_NOT_CONTIGUOUS: ta_status = 31;
/// A user kernel reported failure.
pub const TA_STATUS_KERNEL_FAILED: ta_status = 40;
/// The operation was cancelled before it ran.
pub const TA_STATUS_CANCELLED: ta_status = 41;
/// The runtime is shut down and accepts no work.
pub const TA_STATUS_SHUTDOWN: ta_status = 42;
/// Blocking here would deadlock (for example, a kernel waiting on its own output).
pub const TA_STATUS_WOULD_DEADLOCK: ta_status = 43;
/// Memory could not be allocated.
pub const TA_STATUS_OUT_OF_MEMORY: ta_status = 44;
/// A panic was caught inside the library or a Rust kernel.
pub const TA_STATUS_PANIC: ta_status = 45;
/// Every backend declined the operation.
pub const TA_STATUS_NO_BACKEND: ta_status = 46;
/// A deferred-completion token was already finished: the runtime was shut
/// down with `TA_SHUTDOWN_CANCEL` and completed its operation as cancelled.
pub const TA_STATUS_ALREADY_FINISHED: ta_status = 47;
/// CUDA is not available (no driver or no device).
pub const TA_STATUS_CUDA_UNAVAILABLE: ta_status = 50;
/// A CUDA call failed.
pub const TA_STATUS_CUDA_ERROR: ta_status = 51;
/// An internal invariant failed; please report it.
pub const TA_STATUS_INTERNAL: ta_status = 99;

/// Element type of a tensor.
pub type ta_dtype = u32;
/// 32-bit IEEE float.
pub const TA_DTYPE_F32: ta_dtype = 1;
/// 64-bit IEEE float.
pub const TA_DTYPE_F64: ta_dtype = 2;
/// Complex of two f32 (C99 `float complex`).
pub const TA_DTYPE_C64: ta_dtype = 3;
/// Complex of two f64 (C99 `double complex`).
pub const TA_DTYPE_C128: ta_dtype = 4;
/// Signed 8-bit integer.
pub const TA_DTYPE_I8: ta_dtype = 10;
/// Signed 16-bit integer.
pub const TA_DTYPE_I16: ta_dtype = 11;
/// Signed 32-bit integer.
pub const TA_DTYPE_I32: ta_dtype = 12;
/// Signed 64-bit integer.
pub const TA_DTYPE_I64: ta_dtype = 13;
/// Unsigned 8-bit integer.
pub const TA_DTYPE_U8: ta_dtype = 14;
/// Unsigned 16-bit integer.
pub const TA_DTYPE_U16: ta_dtype = 15;
/// Unsigned 32-bit integer.
pub const TA_DTYPE_U32: ta_dtype = 16;
/// Unsigned 64-bit integer.
pub const TA_DTYPE_U64: ta_dtype = 17;

/// Where a tensor lives: `TA_DOMAIN_HOST`, or N >= 0 for CUDA device N.
pub type ta_domain = i32;
/// Host memory.
pub const TA_DOMAIN_HOST: ta_domain = -1;

/// Element order of dense layouts.
pub type ta_order = u32;
/// Row-major (C): the last axis is contiguous.
pub const TA_ORDER_ROW_MAJOR: ta_order = 0;
/// Column-major (Fortran, Julia): the first axis is contiguous.
pub const TA_ORDER_COL_MAJOR: ta_order = 1;

/// How an operation uses an operand.
pub type ta_mode = u32;
/// Read only; readers of one epoch run concurrently.
pub const TA_MODE_READ: ta_mode = 1;
/// Overwrite every element without reading; a success leaves a clean value.
pub const TA_MODE_WRITE: ta_mode = 2;
/// Read-modify-write: one exclusive access that sees the old value.
pub const TA_MODE_UPDATE: ta_mode = 3;

/// What `ta_runtime_shutdown` does with work that has not started.
pub type ta_shutdown = u32;
/// Run everything already submitted, then stop.
pub const TA_SHUTDOWN_DRAIN: ta_shutdown = 0;
/// Complete everything not yet started with `TA_STATUS_CANCELLED`, then stop.
pub const TA_SHUTDOWN_CANCEL: ta_shutdown = 1;

/// Backend family, for `ta_submit.backends` (bit `1u << TA_BACKEND_x`).
pub type ta_backend = u32;
/// The pure-Rust CPU backend.
pub const TA_BACKEND_NATIVE: ta_backend = 1;
/// A system BLAS found at run time.
pub const TA_BACKEND_BLAS: ta_backend = 2;
/// CUDA.
pub const TA_BACKEND_CUDA: ta_backend = 3;

/// Which triangle of a matrix an operation uses.
pub type ta_uplo = u32;
/// The lower triangle.
pub const TA_UPLO_LOWER: ta_uplo = 0;
/// The upper triangle.
pub const TA_UPLO_UPPER: ta_uplo = 1;

/// Which side a triangular matrix multiplies from.
pub type ta_side = u32;
/// `op(A)·X = alpha·B`.
pub const TA_SIDE_LEFT: ta_side = 0;
/// `X·op(A) = alpha·B`.
pub const TA_SIDE_RIGHT: ta_side = 1;

/// Whether a triangular matrix has a unit diagonal.
pub type ta_diag = u32;
/// Use the stored diagonal.
pub const TA_DIAG_NON_UNIT: ta_diag = 0;
/// Treat the diagonal as ones (it is not read).
pub const TA_DIAG_UNIT: ta_diag = 1;

/// Wait forever (for the `timeout_ns` arguments).
pub const TA_WAIT_FOREVER: i64 = -1;

/// A runtime: a pool of worker threads.
pub struct ta_runtime {
    _opaque: [u8; 0],
}
/// A tensor handle (a value, or later a view of one).
pub struct ta_tensor {
    _opaque: [u8; 0],
}
/// The completion of one submitted operation.
pub struct ta_event {
    _opaque: [u8; 0],
}
/// A completion queue with a pollable file descriptor.
pub struct ta_cq {
    _opaque: [u8; 0],
}
/// An error object: status, code, message and the operation where it started.
pub struct ta_error {
    _opaque: [u8; 0],
}
/// A block array: one allocation cut into blocks, each with its own epoch queue.
pub struct ta_blocks {
    _opaque: [u8; 0],
}
/// A host access to a tensor (see `ta_tensor_acquire`): while it lives it
/// holds one read, write or update access on the tensor's epoch queue.
pub struct ta_mapping {
    _opaque: [u8; 0],
}
/// One unfinished deferred or external operation (see `ta_kernel_defer` and
/// `ta_external_submit`), finished with `ta_token_finish`.
pub struct ta_token {
    _opaque: [u8; 0],
}
/// The context of a running user kernel; valid only during the kernel call.
pub struct ta_kernel_ctx {
    _opaque: [u8; 0],
}

/// An immediate scalar. Real dtypes require `im == 0`; integer dtypes require
/// an integral `re` that the dtype holds exactly.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct ta_scalar {
    pub re: f64,
    pub im: f64,
}

/// Called once with the final status of an operation, never while the
/// library holds a lock. It runs on the thread that completes the operation:
/// usually a worker of the runtime, or the thread that calls
/// `ta_token_finish` or `ta_mapping_free` for deferred and external work, or
/// a thread whose `ta_runtime_shutdown` cancels them (and, for
/// `ta_event_on_complete` on an event that is complete already, the calling
/// thread). When it runs the operation is complete in every observable way:
/// `ta_event_poll` on its event gives the final status, `ta_event_error` its
/// error, `ta_event_wait(event, 0)` returns at once, and the operation's
/// accesses are released (a zero-timeout `ta_tensor_wait` on a tensor whose
/// last operation it was returns that status). It may submit operations,
/// poll, wait and free handles (the event it was called for included); a
/// blocking wait there occupies the worker (it helps run other work
/// meanwhile), so keep callbacks short; a wait there on an operation that
/// starts only after the callback returns (see below), or on a tensor one
/// such operation accesses, fails with `TA_STATUS_WOULD_DEADLOCK`, and
/// while the runtime drains (`ta_runtime_shutdown`) the callback's own
/// submissions are accepted as follow-up work, on any thread it runs on.
/// `ta_event_wait` on a thread of the
/// program's own returns after the callbacks of the operation (its own and
/// those attached to its event) have returned and its completion-queue entry
/// has been posted (if its timeout ends first, it returns the operation's
/// status all the same); inside a callback or a kernel it returns as soon as
/// the status is known. `ta_runtime_wait_idle` and `ta_runtime_shutdown`
/// return only after every callback of the runtime's operations has
/// returned. An operation that was submitted while this one was unfinished
/// and waits for it (it reads what this one writes, or writes what this one
/// accesses) starts only after these callbacks have returned and the entry
/// has been posted, even when another operation it waits for finishes
/// later: so dependent operations report in order, and wrapped memory given
/// back behind them (see `ta_release_fn`) comes after those reports.
pub type ta_callback = Option<unsafe extern "C" fn(status: ta_status, userdata: *mut c_void)>;

/// Called exactly once, after the last access, to give wrapped memory back,
/// on the thread that lets the memory go (a worker, or the thread that frees
/// the last handle), never while the library holds a lock. When the last
/// handle is freed while operations on the tensor are queued or their
/// kernels are running, it is called after their completions (callbacks,
/// completion entries) have been reported. (An operation whose callbacks
/// are already running when the handle is freed has released its accesses:
/// the release may then run beside those callbacks.) It must not call back
/// into the library for the tensor it releases; use `ta_tensor_wrap_ex`
/// with a completion queue to avoid running code on a library thread.
pub type ta_release_fn = Option<unsafe extern "C" fn(userdata: *mut c_void, data: *mut c_void)>;

/// How to submit an operation. Pass NULL for all defaults (default runtime,
/// no notification besides the optional event, any backend). Zero-initialise
/// the fields you do not set.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct ta_submit {
    /// Runtime that runs the operation; NULL for the default runtime.
    pub runtime: *const ta_runtime,
    /// Called once with the final status (see `ta_callback` for the thread
    /// and what it may do); NULL for none. A rejected submission calls nothing.
    pub callback: ta_callback,
    /// Passed to `callback`.
    pub callback_userdata: *mut c_void,
    /// Completion queue that receives `{cq_tag, status}`; NULL for none.
    pub cq: *const ta_cq,
    /// Tag for the completion queue entry.
    pub cq_tag: u64,
    /// Allowed backends: a bit set of `1u << TA_BACKEND_x`; 0 for any.
    pub backends: u32,
    /// Flags: `TA_SUBMIT_TRANSFER`, `TA_SUBMIT_DEFER`, and
    /// `TA_SUBMIT_EXTENDED` in the `submit` of a `ta_submit_ex`; 0 for none.
    pub flags: u32,
}

/// `ta_submit.flags`: inputs that live in another domain than the output are
/// copied there first (by ordinary scheduled copies into temporaries),
/// instead of failing with `TA_STATUS_DOMAIN_MISMATCH`.
pub const TA_SUBMIT_TRANSFER: u32 = 1;

/// `ta_submit.flags`: this `ta_submit` is the `submit` member of a
/// `ta_submit_ex`, whose other fields the operation reads too. Set it only
/// there: the library then reads the memory before the `ta_submit`.
pub const TA_SUBMIT_EXTENDED: u32 = 2;

/// `ta_submit.flags`: hand the operation to the runtime's workers even when
/// it is small and ready at submission, where it would otherwise run on the
/// calling thread before the call returns (see
/// `ta_runtime_set_small_in_place`).
pub const TA_SUBMIT_DEFER: u32 = 4;

/// Submission options beyond `ta_submit`'s (a `ta_submit` cannot grow).
/// Zero-initialise it, set `struct_size` to `sizeof(ta_submit_ex)`, the
/// options you want, and `TA_SUBMIT_EXTENDED` in `submit.flags`; then pass
/// `&ex.submit` wherever an operation takes a `const ta_submit *opts`:
///
/// ```c
/// ta_submit_ex ex = {0};
/// ex.struct_size = sizeof(ta_submit_ex);
/// ex.priority = 10;
/// ex.submit.flags = TA_SUBMIT_EXTENDED;
/// ta_potrf(a, TA_UPLO_LOWER, &ex.submit, NULL, &err);
/// ```
///
/// A `struct_size` smaller than this version's `sizeof(ta_submit_ex)` gives
/// `TA_STATUS_INVALID_ARGUMENT`; a larger one (a caller built against a
/// later version) is accepted when every byte beyond the fields this
/// version knows is zero, and gives `TA_STATUS_INVALID_ARGUMENT` otherwise.
/// Later versions add fields only at the end.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct ta_submit_ex {
    /// `sizeof(ta_submit_ex)`.
    pub struct_size: u32,
    /// Rank among ready operations: when a worker has a choice, it takes
    /// the ready operation of highest priority first, and operations of
    /// equal priority in the order they became ready. A priority never
    /// overrides an ordering between operations (it orders only those whose
    /// predecessors have all finished). 0, the default, is the order of an
    /// operation submitted without a priority; a negative priority runs
    /// after the ready operations of priority 0.
    pub priority: i32,
    /// The usual options, with `TA_SUBMIT_EXTENDED` in `flags`.
    pub submit: ta_submit,
}

/// One operand of a user kernel: a tensor and how the kernel uses it.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct ta_access {
    pub tensor: *const ta_tensor,
    pub mode: ta_mode,
}

/// A resolved view, passed to user kernels; valid only during the call.
/// Element `(i0, i1, ...)` is at `data + sum_k ik * strides[k] * element_size`.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct ta_view {
    /// Address of element `[0, 0, ...]`.
    pub data: *mut c_void,
    /// `rank` extents.
    pub extents: *const usize,
    /// `rank` strides, in elements (may be negative or zero).
    pub strides: *const isize,
    pub rank: usize,
    pub dtype: ta_dtype,
    pub mode: ta_mode,
    pub domain: ta_domain,
    /// Non-zero when reads must conjugate (complex dtypes).
    pub conj: u8,
}

/// One entry taken from a completion queue. `error` is NULL on success;
/// otherwise it is a new error handle that the caller frees with `ta_error_free`.
#[repr(C)]
#[derive(Copy, Clone)]
pub struct ta_completion {
    pub tag: u64,
    pub status: ta_status,
    pub error: *mut ta_error,
}

/// A user kernel: called with the resolved views of its operands in
/// declaration order. Return `TA_STATUS_OK` (0) for success; any other value
/// fails the operation, poisons every operand it writes, and is kept as the
/// error's code (the status is `TA_STATUS_KERNEL_FAILED`).
pub type ta_kernel_fn = Option<
    unsafe extern "C" fn(
        views: *const ta_view,
        nviews: usize,
        userdata: *mut c_void,
        ctx: *mut ta_kernel_ctx,
    ) -> ta_status,
>;

/// A piece of a parallel loop: handles items `[begin, end)`.
pub type ta_range_fn = Option<unsafe extern "C" fn(begin: usize, end: usize, userdata: *mut c_void)>;

/// A handle's raw 64-bit value.
pub(crate) fn raw<T>(h: *const T) -> u64 {
    h as usize as u64
}

/// A handle from its raw value.
pub(crate) fn handle<T>(h: u64) -> *mut T {
    h as usize as *mut T
}
