//! The C ABI of tensorasync (SPEC §3): `libtensorasync.so` and
//! `include/tensorasync.h`, a thin layer over the core crate's public Rust
//! API (imported as `ta`) that converts handles, integers and statuses.
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

mod args;
mod cast;

mod domain;
mod first_and_rest;
mod status;

#[cfg(feature = "mimalloc")]
mod allocator;
#[cfg(feature = "mimalloc")]
mod block_cache;

mod blocks;
mod device;
mod error;
mod event;
mod kernel;
mod linalg;
// Observability: trace recording, pending-work dump, counters.
mod observe;
mod ops;
mod submit_ex;
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

use cast::Castable;
use ta::{Error, Status};
pub use types::*;
pub use version::*;

/// Runs when the library is loaded (a C program may never make a runtime
/// of its own: the default one is made inside the core): traces name
/// statuses as the header does, and mimalloc keeps freed memory for reuse
/// (see `ta::allocator::retain_freed_memory`).
extern "C" fn on_load() {
    ta::set_trace_status_names(status::name_of);
    #[cfg(feature = "mimalloc")]
    ta::allocator::retain_freed_memory();
}

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

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
        Err(p) => Err(Error::from_panic(origin, &*p)),
    };
    match r {
        Ok(()) => TA_STATUS_OK,
        Err(e) => report(e, error_out),
    }
}

/// The guard of an exported function that returns no status: runs `f`, and
/// gives `fallback` if it panics (a panic must not unwind into C).
#[inline(always)]
pub(crate) fn guard_value<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// Record `e` as the last error and in `error_out`; returns its status.
pub(crate) fn report(e: Error, error_out: *mut *mut ta_error) -> ta_status {
    let status = status::to_c(e.status());
    if !error_out.is_null() {
        if let Some(h) = new_handle::<ta_error>(e.clone()) {
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

/// The object behind a handle of type `H`, with a status-specific error.
pub(crate) fn arg<H: Castable>(h: *const H, origin: &'static str, what: &str) -> Result<H::RustType, Error> {
    handles::get(raw(h), H::KIND)
        .and_then(|o| H::from_owned(o).ok_or(Status::Internal))
        .map_err(|s| arg_error(s, origin, what))
}

/// The object behind a handle of type `H` whose shard `b` has locked (see
/// [`handles::Borrows`] for what the caller must not do while it holds the
/// result). Inlined: it is on every submission's path (its error arms are
/// cold).
#[inline(always)]
pub(crate) fn borrowed<'b, H: Castable>(
    b: &'b handles::Borrows,
    h: *const H,
    origin: &'static str,
    what: &str,
) -> Result<&'b H::RustType, Error> {
    cast::borrow_as::<H>(b, raw(h)).map_err(|s| arg_error(s, origin, what))
}

/// Remove the handle and return its object (the statuses of
/// [`handles::take`]).
pub(crate) fn take<H: Castable>(h: *mut H, origin: &'static str, what: &str) -> Result<H::RustType, Error> {
    handles::take(raw(h), H::KIND)
        .and_then(|o| H::from_owned(o).ok_or(Status::Internal))
        .map_err(|s| arg_error(s, origin, what))
}

/// A new handle of type `H` for `obj` (`None` only if the table is full).
pub(crate) fn new_handle<H: Castable>(obj: H::RustType) -> Option<*mut H> {
    handles::insert(H::into_object(obj)).map(types::handle)
}

/// A handle of type `H` for `obj` in the slot taken for it.
pub(crate) fn fill_handle<H: Castable>(slot: handles::Reserved, obj: H::RustType) -> *mut H {
    types::handle(slot.fill(H::into_object(obj)))
}

/// A new handle of type `H` for `obj`, failing with `OutOfMemory` if the
/// table is full.
pub(crate) fn make_handle<H: Castable>(obj: H::RustType, origin: &'static str) -> Result<*mut H, Error> {
    new_handle(obj).ok_or_else(|| Error::new(Status::OutOfMemory, origin, "the handle table is full"))
}

/// Free a handle of type `H` (NULL is a no-op), under the panic guard.
pub(crate) fn free_handle<H: Castable>(h: *mut H) -> ta_status {
    guard(H::FREE, std::ptr::null_mut(), || match handles::remove(raw(h), H::KIND) {
        Status::Ok => Ok(()),
        s => Err(Error::new(s, H::FREE, s.description())),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// The origin an exported function gives its errors is its own name:
    /// each `ta_*` name written in an exported function (its `const O` or
    /// `ORIGIN`, or the first argument of a shared body) is the function's,
    /// so a copied function that kept its model's name fails here. Each
    /// handle type's `FREE` names an exported function.
    #[test]
    fn every_origin_names_its_function() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut exported = BTreeSet::new();
        let mut wrong = Vec::new();
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let src = std::fs::read_to_string(&path).unwrap();
            let marker = "pub extern \"C\" fn ";
            for part in src.split(marker).skip(1) {
                let name = &part[..part.find('(').unwrap()];
                exported.insert(name.to_string());
                let body = &part[..part.find("\n}\n").unwrap_or(part.len())];
                let heads = [
                    "const O: &str = \"",
                    "const ORIGIN: &str = \"",
                    "guard(\"",
                    "getter(\"",
                    "dims(\"",
                    "gemm(\"",
                    "product(\"",
                ];
                for head in heads {
                    for at in body.match_indices(head).map(|(i, _)| i + head.len()) {
                        let lit = &body[at..at + body[at..].find('"').unwrap()];
                        checked += 1;
                        if lit != name {
                            wrong.push(format!("{}: {name} names itself {lit}", path.display()));
                        }
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
        assert!(checked >= 100, "only {checked} origins found");
        for free in [
            <crate::ta_runtime as crate::cast::Castable>::FREE,
            <crate::ta_tensor as crate::cast::Castable>::FREE,
            <crate::ta_event as crate::cast::Castable>::FREE,
            <crate::ta_cq as crate::cast::Castable>::FREE,
            <crate::ta_error as crate::cast::Castable>::FREE,
            <crate::ta_blocks as crate::cast::Castable>::FREE,
            <crate::ta_mapping as crate::cast::Castable>::FREE,
            <crate::ta_token as crate::cast::Castable>::FREE,
        ] {
            assert!(exported.contains(free), "{free} is not an exported function");
        }
    }
}
