//! Status names and error objects.

use std::ffi::{c_char, CString};
use std::sync::OnceLock;

use super::{arg, guard, make_handle, need, put, ta_error, ta_status, LAST_ERROR};
use ta::Status;

/// The descriptions of the statuses as C strings, in `Status::ALL` order.
fn descriptions() -> &'static [CString] {
    static S: OnceLock<Vec<CString>> = OnceLock::new();
    S.get_or_init(|| Status::ALL.iter().map(|s| CString::new(s.description()).unwrap()).collect())
}

/// The name of a status (for example `"TA_STATUS_STALE_HANDLE"`), as a static
/// string; `"TA_STATUS_UNKNOWN"` for a value that is not a status. Never fails.
#[no_mangle]
pub extern "C" fn ta_status_name(status: ta_status) -> *const c_char {
    let unknown = c"TA_STATUS_UNKNOWN".as_ptr();
    super::guard_value(unknown, || crate::status::name(status).map_or(unknown, |n| n.as_ptr()))
}

/// A one-line description of a status, as a static string; `"unknown status"`
/// for a value that is not a status. Never fails.
#[no_mangle]
pub extern "C" fn ta_status_describe(status: ta_status) -> *const c_char {
    let unknown = c"unknown status".as_ptr();
    super::guard_value(unknown, || {
        match crate::status::from_c(status).and_then(|s| Status::ALL.iter().position(|a| *a == s)) {
            Some(i) => descriptions()[i].as_ptr(),
            None => unknown,
        }
    })
}

/// A string buffer argument: NULL is allowed only with `cap` 0
/// (`TA_STATUS_NULL_POINTER` otherwise).
pub(crate) fn check_buf(buf: *mut c_char, cap: usize, origin: &'static str) -> Result<(), ta::Error> {
    if buf.is_null() && cap > 0 {
        need(buf, origin, "buf")
    } else {
        Ok(())
    }
}

/// Copy `s` into `buf` (capacity `cap` bytes, always NUL-terminated when
/// `cap > 0`, truncated if needed; checked with [`check_buf`]) and store its
/// full length in `*len`.
pub(crate) fn copy_str(s: &str, buf: *mut c_char, cap: usize, len: *mut usize) {
    if !buf.is_null() && cap > 0 {
        let n = s.len().min(cap - 1);
        // SAFETY: the caller gave `cap` writable bytes at `buf`; we write n + 1 <= cap.
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), n);
            *buf.add(n) = 0;
        }
    }
    if !len.is_null() {
        put(len, s.len());
    }
}

/// The status of an error object.
#[no_mangle]
pub extern "C" fn ta_error_status(error: *const ta_error, status_out: *mut ta_status) -> ta_status {
    guard("ta_error_status", std::ptr::null_mut(), || {
        need(status_out, "ta_error_status", "status_out")?;
        let e = arg(error, "ta_error_status", "error")?;
        put(status_out, crate::status::to_c(e.status()));
        Ok(())
    })
}

/// The raw code of an error object: the status value, or for a failed user
/// kernel the value it returned.
#[no_mangle]
pub extern "C" fn ta_error_code(error: *const ta_error, code_out: *mut i64) -> ta_status {
    guard("ta_error_code", std::ptr::null_mut(), || {
        need(code_out, "ta_error_code", "code_out")?;
        let e = arg(error, "ta_error_code", "error")?;
        put(code_out, e.code());
        Ok(())
    })
}

/// Copy the error's message into `buf` (`cap` bytes, NUL-terminated, truncated
/// if needed; `buf` may be NULL only when `cap` is 0, otherwise
/// `TA_STATUS_NULL_POINTER`) and store its full length, without the NUL, in
/// `*len_out` (may be NULL). Call it with `cap` 0 first to learn the length.
#[no_mangle]
pub extern "C" fn ta_error_message(
    error: *const ta_error,
    buf: *mut c_char,
    cap: usize,
    len_out: *mut usize,
) -> ta_status {
    guard("ta_error_message", std::ptr::null_mut(), || {
        let e = arg(error, "ta_error_message", "error")?;
        check_buf(buf, cap, "ta_error_message")?;
        copy_str(e.message(), buf, cap, len_out);
        Ok(())
    })
}

/// The origin of `e` as the C API names it: the library's operations carry
/// a tag (`fill`, `tensor_slice`), rendered as the C function's name
/// (`ta_fill`, `ta_tensor_slice`); a name the caller gave (a user kernel's)
/// is kept as given.
pub(crate) fn c_origin(e: &ta::Error) -> std::borrow::Cow<'_, str> {
    let o = e.origin();
    if e.origin_is_library() && o == "kernel" {
        // A user kernel submitted without a name.
        std::borrow::Cow::Borrowed("ta_kernel_submit")
    } else if e.origin_is_library() && !o.starts_with("ta_") && !o.is_empty() && o != "cuda" {
        // ("cuda": a CUDA driver failure, which no one C function starts.)
        std::borrow::Cow::Owned(format!("ta_{o}"))
    } else {
        std::borrow::Cow::Borrowed(o)
    }
}

/// Copy the name of the operation where the error started, as
/// `ta_error_message` does: the C function that was called (for example
/// `"ta_tensor_slice"`, `"ta_fill"`), or for a user kernel the name given to
/// `ta_kernel_submit`.
#[no_mangle]
pub extern "C" fn ta_error_origin(
    error: *const ta_error,
    buf: *mut c_char,
    cap: usize,
    len_out: *mut usize,
) -> ta_status {
    guard("ta_error_origin", std::ptr::null_mut(), || {
        let e = arg(error, "ta_error_origin", "error")?;
        check_buf(buf, cap, "ta_error_origin")?;
        copy_str(&c_origin(&e), buf, cap, len_out);
        Ok(())
    })
}

/// Whether two error handles refer to the same error object (a propagated
/// error is the original object, not a copy). Stores 1 or 0 in `*same_out`.
#[no_mangle]
pub extern "C" fn ta_error_same(a: *const ta_error, b: *const ta_error, same_out: *mut i32) -> ta_status {
    guard("ta_error_same", std::ptr::null_mut(), || {
        need(same_out, "ta_error_same", "same_out")?;
        let x = arg(a, "ta_error_same", "a")?;
        let y = arg(b, "ta_error_same", "b")?;
        put(same_out, x.same_as(&y) as i32);
        Ok(())
    })
}

/// A new error object, for an error made elsewhere (in another process,
/// another library) that should travel on as it is: `ta_token_finish_error`
/// poisons a token's outputs with it. `status` is the status of a failed
/// operation (`TA_STATUS_INVALID_ARGUMENT` for `TA_STATUS_OK`,
/// `TA_STATUS_PENDING`, a handle or pointer status, or an unknown value);
/// `code` its code; `origin` and `message` (NUL-terminated, copied; NULL
/// for empty) name where it started and what happened, and
/// `ta_error_origin` and `ta_error_message` give them back unchanged. Free
/// it with `ta_error_free`.
#[no_mangle]
pub extern "C" fn ta_error_new(
    status: ta_status,
    code: i64,
    origin: *const c_char,
    message: *const c_char,
    error_out: *mut *mut ta_error,
) -> ta_status {
    const O: &str = "ta_error_new";
    guard(O, std::ptr::null_mut(), || {
        need(error_out, O, "error_out")?;
        let s = crate::status::from_c(status).filter(|s| {
            !matches!(
                s,
                Status::Ok
                    | Status::Pending
                    | Status::NullHandle
                    | Status::StaleHandle
                    | Status::DoubleFree
                    | Status::WrongHandleType
                    | Status::InvalidHandle
                    | Status::NullPointer
            )
        });
        let Some(s) = s else {
            return Err(ta::Error::new(
                Status::InvalidArgument,
                O,
                format!("status {status} is not the status of a failed operation"),
            ));
        };
        let text = |p: *const c_char| {
            if p.is_null() {
                String::new()
            } else {
                // SAFETY: a non-NULL string argument is NUL-terminated by the C contract.
                unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        };
        let e = ta::Error::with_code(s, text(origin), text(message), code);
        put(error_out, make_handle(e, O)?);
        Ok(())
    })
}

/// Free an error object. NULL is a no-op.
#[no_mangle]
pub extern "C" fn ta_error_free(error: *mut ta_error) -> ta_status {
    super::free_handle(error)
}

/// A new handle to the calling thread's most recent error, or NULL if no call
/// on this thread has failed. Prefer the `error` out-parameters: a thread's
/// last error is overwritten by its next failure.
#[no_mangle]
pub extern "C" fn ta_last_error(error_out: *mut *mut ta_error) -> ta_status {
    guard("ta_last_error", std::ptr::null_mut(), || {
        need(error_out, "ta_last_error", "error_out")?;
        let h = match LAST_ERROR.with(|l| l.borrow().clone()) {
            Some(e) => make_handle(e, "ta_last_error")?,
            None => std::ptr::null_mut(),
        };
        put(error_out, h);
        Ok(())
    })
}

/// The number of live handles of every kind (tensors, events, runtimes,
/// completion queues, errors) in the process: a leak check for tests, since a
/// handle never freed is reachable memory that tools such as valgrind do not
/// report.
#[no_mangle]
pub extern "C" fn ta_handles_live(count_out: *mut usize) -> ta_status {
    guard("ta_handles_live", std::ptr::null_mut(), || {
        need(count_out, "ta_handles_live", "count_out")?;
        put(count_out, super::handles::live());
        Ok(())
    })
}
