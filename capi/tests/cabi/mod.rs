//! Declarations of the C ABI functions that the soak, fault and fuzz
//! programs call, as a C program would: through their exported symbols
//! (the `ta_*` functions are `#[no_mangle] extern "C"` in the library, and
//! the types are its own `ffi` types). Kept in the header's own terms; only
//! the functions these programs use.
#![allow(dead_code)]
// The handle types are opaque: C (and these programs) only pass pointers to
// them, which the library decodes as handle values and never dereferences.
#![allow(improper_ctypes)]

use std::ffi::{c_char, c_void};

pub use tensorasync_ffi::*;

extern "C" {
    pub fn ta_status_name(status: ta_status) -> *const c_char;
    pub fn ta_handles_live(count_out: *mut usize) -> ta_status;

    pub fn ta_error_status(error: *const ta_error, status_out: *mut ta_status) -> ta_status;
    pub fn ta_error_message(error: *const ta_error, buf: *mut c_char, cap: usize, len_out: *mut usize) -> ta_status;
    pub fn ta_error_origin(error: *const ta_error, buf: *mut c_char, cap: usize, len_out: *mut usize) -> ta_status;
    pub fn ta_error_free(error: *mut ta_error) -> ta_status;

    pub fn ta_runtime_new(threads: usize, runtime_out: *mut *mut ta_runtime, error: *mut *mut ta_error) -> ta_status;
    pub fn ta_runtime_default(runtime_out: *mut *mut ta_runtime) -> ta_status;
    pub fn ta_last_error(error_out: *mut *mut ta_error) -> ta_status;
    pub fn ta_kernel_set_error(ctx: *mut ta_kernel_ctx, message: *const c_char) -> ta_status;
    pub fn ta_norm2(
        out: *const ta_tensor,
        x: *const ta_tensor,
        opts: *const ta_submit,
        event_out: *mut *mut ta_event,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_conj(
        dst: *const ta_tensor,
        src: *const ta_tensor,
        opts: *const ta_submit,
        event_out: *mut *mut ta_event,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_tensor_reshape(
        tensor: *const ta_tensor,
        rank: usize,
        extents: *const usize,
        order: ta_order,
        view_out: *mut *mut ta_tensor,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_runtime_shutdown(runtime: *const ta_runtime, mode: ta_shutdown, error: *mut *mut ta_error) -> ta_status;
    pub fn ta_runtime_wait_idle(runtime: *const ta_runtime, timeout_ns: i64, error: *mut *mut ta_error) -> ta_status;
    pub fn ta_runtime_free(runtime: *mut ta_runtime) -> ta_status;

    pub fn ta_tensor_new(
        dtype: ta_dtype,
        domain: ta_domain,
        tensor_out: *mut *mut ta_tensor,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_tensor_new_zeros(
        dtype: ta_dtype,
        domain: ta_domain,
        rank: usize,
        extents: *const usize,
        order: ta_order,
        tensor_out: *mut *mut ta_tensor,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_tensor_wrap(
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
    ) -> ta_status;
    pub fn ta_tensor_share(tensor: *const ta_tensor, tensor_out: *mut *mut ta_tensor) -> ta_status;
    pub fn ta_tensor_free(tensor: *mut ta_tensor) -> ta_status;
    pub fn ta_tensor_rank(tensor: *const ta_tensor, rank_out: *mut usize) -> ta_status;
    pub fn ta_tensor_extents(tensor: *const ta_tensor, extents_out: *mut usize, cap: usize) -> ta_status;
    pub fn ta_tensor_wait(tensor: *const ta_tensor, timeout_ns: i64, error: *mut *mut ta_error) -> ta_status;
    pub fn ta_tensor_slice(
        tensor: *const ta_tensor,
        slices: *const ta_slice,
        nslices: usize,
        view_out: *mut *mut ta_tensor,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_tensor_permute(
        tensor: *const ta_tensor,
        perm: *const usize,
        rank: usize,
        view_out: *mut *mut ta_tensor,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_tensor_transpose(
        tensor: *const ta_tensor,
        view_out: *mut *mut ta_tensor,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_tensor_conj(
        tensor: *const ta_tensor,
        view_out: *mut *mut ta_tensor,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_tensor_clone(
        tensor: *const ta_tensor,
        opts: *const ta_submit,
        copy_out: *mut *mut ta_tensor,
        event_out: *mut *mut ta_event,
        error: *mut *mut ta_error,
    ) -> ta_status;

    pub fn ta_event_poll(event: *const ta_event) -> ta_status;
    pub fn ta_event_wait(event: *const ta_event, timeout_ns: i64) -> ta_status;
    pub fn ta_event_error(event: *const ta_event, error_out: *mut *mut ta_error) -> ta_status;
    pub fn ta_event_on_complete(event: *const ta_event, callback: ta_callback, userdata: *mut c_void) -> ta_status;
    pub fn ta_event_notify(event: *const ta_event, cq: *const ta_cq, tag: u64) -> ta_status;
    pub fn ta_event_free(event: *mut ta_event) -> ta_status;
    pub fn ta_cq_new(cq_out: *mut *mut ta_cq, error: *mut *mut ta_error) -> ta_status;
    pub fn ta_cq_poll(cq: *const ta_cq, out: *mut ta_completion, cap: usize, count_out: *mut usize) -> ta_status;
    pub fn ta_cq_free(cq: *mut ta_cq) -> ta_status;

    pub fn ta_kernel_submit(
        kernel: ta_kernel_fn,
        userdata: *mut c_void,
        name: *const c_char,
        accesses: *const ta_access,
        naccesses: usize,
        opts: *const ta_submit,
        event_out: *mut *mut ta_event,
        error: *mut *mut ta_error,
    ) -> ta_status;

    pub fn ta_fill(
        tensor: *const ta_tensor,
        value: ta_scalar,
        opts: *const ta_submit,
        event_out: *mut *mut ta_event,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_scale(
        x: *const ta_tensor,
        alpha: ta_scalar,
        opts: *const ta_submit,
        event_out: *mut *mut ta_event,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_axpy(
        y: *const ta_tensor,
        alpha: ta_scalar,
        x: *const ta_tensor,
        opts: *const ta_submit,
        event_out: *mut *mut ta_event,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_copy(
        dst: *const ta_tensor,
        src: *const ta_tensor,
        opts: *const ta_submit,
        event_out: *mut *mut ta_event,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_copy_in(
        dst: *const ta_tensor,
        src: *const c_void,
        rank: usize,
        extents: *const usize,
        src_strides: *const isize,
        opts: *const ta_submit,
        event_out: *mut *mut ta_event,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_copy_out(
        src: *const ta_tensor,
        dst: *mut c_void,
        capacity: usize,
        dst_strides: *const isize,
        opts: *const ta_submit,
        event_out: *mut *mut ta_event,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_permute(
        dst: *const ta_tensor,
        src: *const ta_tensor,
        rank: usize,
        perm: *const usize,
        opts: *const ta_submit,
        event_out: *mut *mut ta_event,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_sum(
        out: *const ta_tensor,
        x: *const ta_tensor,
        naxes: usize,
        axes: *const usize,
        opts: *const ta_submit,
        event_out: *mut *mut ta_event,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_dot(
        out: *const ta_tensor,
        x: *const ta_tensor,
        y: *const ta_tensor,
        conjugate: i32,
        opts: *const ta_submit,
        event_out: *mut *mut ta_event,
        error: *mut *mut ta_error,
    ) -> ta_status;
    pub fn ta_gemm(
        c: *const ta_tensor,
        alpha: ta_scalar,
        a: *const ta_tensor,
        b: *const ta_tensor,
        beta: ta_scalar,
        opts: *const ta_submit,
        event_out: *mut *mut ta_event,
        error: *mut *mut ta_error,
    ) -> ta_status;
}

/// A zero-initialised `ta_submit` (every option at its default).
pub fn no_opts() -> ta_submit {
    // SAFETY: `ta_submit` is a C struct of pointers, integers and an optional
    // function pointer, for all of which all-zero bytes are valid (NULL/None/0).
    unsafe { std::mem::zeroed() }
}

/// `ta_handles_live`.
pub fn live_handles() -> usize {
    let mut n = usize::MAX;
    // SAFETY: `n` is a writable usize.
    assert_eq!(unsafe { ta_handles_live(&mut n) }, TA_STATUS_OK);
    n
}

/// The message of an error handle (which stays the caller's).
pub fn message_of(e: *const ta_error) -> String {
    let mut buf = [0 as c_char; 512];
    let mut len = 0usize;
    // SAFETY: `buf` holds `buf.len()` bytes and `len` is writable.
    let st = unsafe { ta_error_message(e, buf.as_mut_ptr(), buf.len(), &mut len) };
    assert_eq!(st, TA_STATUS_OK);
    // SAFETY: the library wrote a NUL-terminated string into `buf`.
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
}

/// The name of a status, for assertion messages.
pub fn name(s: ta_status) -> String {
    // SAFETY: `ta_status_name` returns a static NUL-terminated string.
    unsafe { std::ffi::CStr::from_ptr(ta_status_name(s)) }.to_string_lossy().into_owned()
}

/// One axis of a slice (`ta_slice` in the header).
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct ta_slice {
    pub start: i64,
    pub stop: i64,
    pub step: i64,
    pub drop: i32,
}
