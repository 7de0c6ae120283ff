//! Deferred completion and external operations from C (SPEC §2.8).

use std::ffi::{c_char, CStr};
use std::sync::Arc;

use super::args::array_arg;
use super::kernel::{operands_and_name, Operands};
use super::mapping::c_view;
use super::ops::{per_form, submit_borrowing, submit_in};
use super::{guard, make_handle, need, put};
use super::{ta_access, ta_error, ta_event, ta_kernel_ctx, ta_status, ta_submit, ta_token, ta_view};
use ta::{Error, Status};

/// Inside a user kernel: defer the operation's completion. The operation
/// does not complete when the kernel returns (its return value is then
/// ignored) but when `ta_token_finish(*token_out, ...)` is called, from any
/// thread, before or after the kernel returns. Until then it keeps its
/// accesses (later conflicting operations wait) and its operands' storage,
/// without occupying a worker. The data pointers of the kernel's views stay
/// valid until the finish; the `extents` and `strides` arrays of the views
/// passed to the kernel do not outlive the call (copy them, or use
/// `ta_token_views`). `ctx` is valid only during the kernel call and on its
/// thread (`TA_STATUS_INVALID_HANDLE` otherwise); a second call in one
/// kernel gives `TA_STATUS_INVALID_ARGUMENT`.
#[no_mangle]
pub extern "C" fn ta_kernel_defer(ctx: *mut ta_kernel_ctx, token_out: *mut *mut ta_token) -> ta_status {
    const O: &str = "ta_kernel_defer";
    guard(O, std::ptr::null_mut(), || {
        need(token_out, O, "token_out")?;
        let t = super::kernel::with_ctx(ctx, O, |c| c.defer().map(Arc::new))??;
        put(token_out, make_handle(t, O)?);
        Ok(())
    })
}

/// Enroll an operation with these accesses (the same rules as
/// `ta_kernel_submit`: host tensors, no input also declared as an output)
/// whose body the caller's own code runs: no library worker runs anything
/// of the caller's. `*started_out` (may be NULL) completes with
/// `TA_STATUS_OK` once every access is granted; then `ta_token_views` gives
/// the views and the caller does the work and calls `ta_token_finish`. If
/// an input it reads is poisoned, `started` completes with that error's
/// status instead: the operation has failed already (its outputs are
/// poisoned with that error), and the token then only needs
/// `ta_token_finish` (which returns `TA_STATUS_OK`). `*event_out` (may be
/// NULL) is the operation's completion, as for any submission, and
/// `opts` (may be NULL) its callback and completion queue. `name` (may be
/// NULL) names the operation in error objects; it is not copied, so it must
/// stay valid until the operation completes.
#[no_mangle]
pub extern "C" fn ta_external_submit(
    accesses: *const ta_access,
    naccesses: usize,
    name: *const c_char,
    options: *const ta_submit,
    token_out: *mut *mut ta_token,
    started_out: *mut *mut ta_event,
    event_out: *mut *mut ta_event,
    error: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_external_submit";
    guard(O, error, || {
        need(token_out, O, "token_out")?;
        let acc = array_arg(accesses, naccesses, O, "accesses")?;
        let mut token = None;
        per_form!(event_out, |form| submit_borrowing(
            form,
            O,
            acc.iter().map(|a| a.tensor),
            options,
            event_out,
            |b| {
                let mut operands = Operands::new();
                let name = operands_and_name(b, acc, name, "external", O, &mut operands)?;
                submit_in(form, b, O, options, |s| {
                    let (t, out) = ta::ops::external(name, &operands, s)?;
                    token = Some(Arc::new(t));
                    Ok(out)
                })
            }
        ))?;
        let token = token.expect("set on success");
        let started = token.started().clone();
        // The submission is made: from here on only handles are created.
        put(token_out, make_handle(token, O)?);
        if !started_out.is_null() {
            put(started_out, make_handle(started, O)?);
        }
        Ok(())
    })
}

/// The resolved views of a token's operation, one per access in declaration
/// order, into `views_out` (room for `cap`); the number goes to
/// `*count_out`. Every pointer in them stays valid until the token is
/// finished. `TA_STATUS_PENDING` before the accesses are granted;
/// `TA_STATUS_BUFFER_TOO_SMALL` (with `*count_out` set) if `cap` is too
/// small; the failure's status if the operation failed before it started.
#[no_mangle]
pub extern "C" fn ta_token_views(
    token: *const ta_token,
    views_out: *mut ta_view,
    cap: usize,
    count_out: *mut usize,
) -> ta_status {
    const O: &str = "ta_token_views";
    guard(O, std::ptr::null_mut(), || {
        need(count_out, O, "count_out")?;
        let t = super::arg(token, O, "token")?;
        let views = t.views()?;
        if cap < views.len() {
            put(count_out, views.len());
            return Err(Error::new(
                Status::BufferTooSmall,
                O,
                format!("the operation has {} accesses, the buffer holds {cap}", views.len()),
            ));
        }
        if !views.is_empty() {
            need(views_out, O, "views_out")?;
        }
        for (i, v) in views.iter().enumerate() {
            // SAFETY: `views_out` holds `cap >= views.len()` entries by the C contract.
            unsafe { views_out.add(i).write(c_view(v)) };
        }
        put(count_out, views.len());
        Ok(())
    })
}

/// Complete a token's operation with `status`: `TA_STATUS_OK`, or a failure
/// (the outputs are poisoned with `TA_STATUS_KERNEL_FAILED`, whose error
/// object has `status` as its code, or with `TA_STATUS_CANCELLED` if
/// `status` is that; `message` (may be NULL) is the error message and the
/// operation's name its origin), and free the token handle. May be called
/// from any thread, and before `started` completes (the operation then
/// completes with that status as soon as its accesses are granted). Never
/// blocks on other operations; callbacks and completion entries of this
/// operation, and work it releases, may run in this call. Finishing again
/// gives a handle status (`TA_STATUS_DOUBLE_FREE` or
/// `TA_STATUS_STALE_HANDLE`). If the runtime was shut down with
/// `TA_SHUTDOWN_CANCEL` first, the operation was completed as cancelled
/// then: this returns `TA_STATUS_ALREADY_FINISHED` and frees the handle.
#[no_mangle]
pub extern "C" fn ta_token_finish(token: *mut ta_token, status: ta_status, message: *const c_char) -> ta_status {
    const O: &str = "ta_token_finish";
    guard(O, std::ptr::null_mut(), || {
        let msg = if message.is_null() {
            None
        } else {
            // SAFETY: a non-NULL message is a NUL-terminated string by the C contract.
            Some(unsafe { CStr::from_ptr(message) }.to_string_lossy().into_owned())
        };
        let t = super::take(token, O, "token")?;
        match status {
            super::TA_STATUS_OK => t.finish_shared(Status::Ok, msg),
            super::TA_STATUS_CANCELLED => t.finish_shared(Status::Cancelled, msg),
            code => t.fail_shared(ta::KernelFailure { code: code.into(), message: msg }),
        }
    })
}

/// Complete a token's operation as failed with `error` itself, and free the
/// token handle: its outputs are poisoned with that error object (status,
/// code, origin and message as they are; `ta_error_same` holds between it
/// and what later readers of the outputs get), as when an error from
/// another process (`ta_error_new`) travels on. `error` stays the caller's.
/// Otherwise as `ta_token_finish` with a failure status; a bad `error`
/// handle gives its handle status and leaves the token unfinished.
#[no_mangle]
pub extern "C" fn ta_token_finish_error(token: *mut ta_token, error: *const ta_error) -> ta_status {
    const O: &str = "ta_token_finish_error";
    guard(O, std::ptr::null_mut(), || {
        let e = super::arg(error, O, "error")?;
        let t = super::take(token, O, "token")?;
        t.finish_error_shared(e.clone())
    })
}
