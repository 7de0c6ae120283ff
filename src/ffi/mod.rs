//! The C ABI (SPEC §3): a thin layer that converts handles, integers and
//! statuses, and calls the core.
//!
//! Conventions, as in rustls-ffi and hyper's C API: functions are
//! `ta_<noun>_<verb>`, constructors `_new`, destructors `_free` (NULL is a
//! no-op); inputs come before outputs, and outputs are written only on
//! success. Every function catches panics in its body, validates every handle
//! through the generational table in [`handles`], and returns a `ta_status`.
//! Fallible functions that can say more take a trailing `ta_error **error`
//! (may be NULL) that receives a new error object on failure; the calling
//! thread's last error is also kept (`ta_last_error`), but never as the only
//! place a message travels, since Go moves goroutines between threads.

pub mod handles;
pub mod types;

mod blocks;
mod device;
mod error;
mod event;
mod kernel;
mod linalg;
// Observability: trace recording, pending-work dump, counters.
mod observe;
mod ops;
// Readiness, host access, deferred completion, DLPack (one block for easy merges).
mod dlpack;
mod mapping;
mod ready;
mod token;
mod wrap;
pub use dlpack::*;
mod runtime;
mod tensor;
pub mod version;

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{Error, Status};
use handles::{Kind, Object};
pub use types::*;
pub use version::*;

thread_local! {
    static LAST_ERROR: RefCell<Option<Error>> = const { RefCell::new(None) };
}

/// Body-level guard used by every exported function: runs `f`, catches any
/// panic, records a failure as the thread's last error and, if `error_out` is
/// not NULL, as a new error object there. Inlined into each export (it is
/// generic over the body anyway): out of line, the call and the body's
/// closure cost about 20 instructions per call (callgrind, ta_kernel_submit).
#[inline(always)]
pub(crate) fn guard(
    origin: &'static str,
    error_out: *mut *mut ta_error,
    f: impl FnOnce() -> Result<(), Error>,
) -> ta_status {
    let r = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(Error::new(Status::Panic, origin, crate::runtime::guard::panic_message(&p))),
    };
    match r {
        Ok(()) => TA_STATUS_OK,
        Err(e) => report(e, error_out),
    }
}

/// Record `e` as the last error and in `error_out`; returns its status.
pub(crate) fn report(e: Error, error_out: *mut *mut ta_error) -> ta_status {
    let status = e.status() as ta_status;
    if !error_out.is_null() {
        if let Some(h) = new_handle::<ta_error>(Object::Error(e.clone())) {
            // SAFETY: the caller passed a writable `ta_error **` (checked non-NULL).
            unsafe { *error_out = h };
        }
    }
    LAST_ERROR.with(|l| *l.borrow_mut() = Some(e));
    status
}

/// An error for a bad argument.
pub(crate) fn arg_error(status: Status, origin: &'static str, what: &str) -> Error {
    Error::new(status, origin, format!("argument `{what}`: {}", status.description()))
}

/// Fail with `NullPointer` if a required pointer is NULL.
pub(crate) fn need<T>(p: *const T, origin: &'static str, what: &str) -> Result<(), Error> {
    if p.is_null() {
        Err(arg_error(Status::NullPointer, origin, what))
    } else {
        Ok(())
    }
}

/// Write an output (the pointer was checked with [`need`]).
pub(crate) fn put<T>(out: *mut T, v: T) {
    // SAFETY: callers check `out` with `need` before doing any work, and the
    // C contract is that a non-NULL output pointer is writable.
    unsafe { out.write(v) }
}

macro_rules! handle_getter {
    ($fn:ident, $cty:ty, $kind:ident, $rty:ty) => {
        /// Look up a handle of this type, with a status-specific error.
        pub(crate) fn $fn(h: *const $cty, origin: &'static str, what: &str) -> Result<$rty, Error> {
            match handles::get(raw(h), Kind::$kind) {
                Ok(Object::$kind(x)) => Ok(x),
                Ok(_) => Err(arg_error(Status::Internal, origin, what)),
                Err(s) => Err(arg_error(s, origin, what)),
            }
        }
    };
}

macro_rules! handle_in {
    ($fn:ident, $cty:ty, $kind:ident, $rty:ty) => {
        /// The object of this type behind a handle whose shard `b` has
        /// locked (see [`handles::Borrows`] for what the caller must not do
        /// while it holds the result).
        // Inlined: it is on every submission's path (its error arms are cold).
        #[inline(always)]
        pub(crate) fn $fn<'b>(
            b: &'b handles::Borrows,
            h: *const $cty,
            origin: &'static str,
            what: &str,
        ) -> Result<&'b $rty, Error> {
            match b.get(raw(h), Kind::$kind) {
                Ok(Object::$kind(x)) => Ok(x),
                Ok(_) => Err(arg_error(Status::Internal, origin, what)),
                Err(s) => Err(arg_error(s, origin, what)),
            }
        }
    };
}

handle_in!(tensor_in, ta_tensor, Tensor, crate::Tensor);
handle_in!(runtime_in, ta_runtime, Runtime, crate::Runtime);

handle_getter!(tensor_arg, ta_tensor, Tensor, crate::Tensor);
handle_getter!(runtime_arg, ta_runtime, Runtime, crate::Runtime);
handle_getter!(event_arg, ta_event, Event, crate::Event);
handle_getter!(cq_arg, ta_cq, Cq, crate::CompletionQueue);
handle_getter!(error_arg, ta_error, Error, crate::Error);
handle_getter!(blocks_arg, ta_blocks, Blocks, crate::BlockArray);

/// Create a handle for `obj`, failing with `OutOfMemory` if the table is full.
pub(crate) fn make_handle<T>(obj: Object, origin: &'static str) -> Result<*mut T, Error> {
    new_handle(obj).ok_or_else(|| Error::new(Status::OutOfMemory, origin, "the handle table is full"))
}

/// Free a handle of `kind` (NULL is a no-op), under the panic guard.
pub(crate) fn free_handle(h: u64, kind: Kind) -> ta_status {
    #[allow(unreachable_patterns)] // (kinds added later fall back to a generic name)
    let origin = match kind {
        Kind::Runtime => "ta_runtime_free",
        Kind::Tensor => "ta_tensor_free",
        Kind::Event => "ta_event_free",
        Kind::Cq => "ta_cq_free",
        Kind::Error => "ta_error_free",
        Kind::Blocks => "ta_blocks_free",
        Kind::Mapping => "ta_mapping_free",
        _ => "ta_free",
    };
    guard(origin, std::ptr::null_mut(), || match handles::remove(h, kind) {
        Status::Ok => Ok(()),
        s => Err(Error::new(s, origin, s.description())),
    })
}
