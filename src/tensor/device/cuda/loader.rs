//! Opening the CUDA libraries with `dlopen` (never closed), so that a
//! missing library or symbol is an error, not a cudarc panic.

use std::ffi::{c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;

/// A library opened with `dlopen` and never closed: cudarc opens the same
/// file again (a reference count, not a second copy).
pub(super) struct Lib {
    pub(super) name: String,
    pub(super) handle: *mut c_void,
}

// SAFETY: a dlopen handle is a process-wide token that dlsym accepts from
// any thread; Lib never closes it.
unsafe impl Send for Lib {}
// SAFETY: as for Send; Lib has no interior mutability.
unsafe impl Sync for Lib {}

impl Lib {
    pub(super) fn sym(&self, name: &str) -> *mut c_void {
        let Ok(c) = CString::new(name) else { return null_mut() };
        // SAFETY: `handle` came from a successful dlopen and is never
        // closed; `c` is a NUL-terminated string.
        unsafe { libc::dlsym(self.handle, c.as_ptr()) }
    }

    pub(super) fn missing(&self, symbols: &[&str]) -> Vec<String> {
        symbols.iter().filter(|s| self.sym(s).is_null()).map(|s| s.to_string()).collect()
    }
}

pub(super) fn dlerror_text() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until
    // the next dl* call on this thread; it is copied at once.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown dlopen error".into()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

/// Open the first of `candidates` that loads, in order (the order cudarc's
/// loader uses, so it picks the same file). The error names `preferred`
/// (the usual name) with its dlopen message.
pub(super) fn open_first(candidates: &[String], preferred: &str) -> std::result::Result<Lib, String> {
    let mut preferred_err = None;
    let mut first_err = None;
    for name in candidates {
        let Ok(c) = CString::new(name.as_str()) else { continue };
        // SAFETY: `c` is NUL-terminated; loading a library runs its
        // initialisers, which is what looking for the driver means.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        if !handle.is_null() {
            return Ok(Lib { name: name.clone(), handle });
        }
        let err = dlerror_text();
        if name == preferred {
            preferred_err = Some(err);
        } else if first_err.is_none() {
            first_err = Some((name.clone(), err));
        }
    }
    let others = candidates.len().saturating_sub(1);
    match (preferred_err, first_err) {
        (Some(err), _) => Err(format!("{preferred} not found: {err} (and {others} other names tried)")),
        (None, Some((name, err))) => Err(format!("{name} not found: {err} (and {others} other names tried)")),
        (None, None) => Err(format!("{preferred} not found: no library names to try")),
    }
}

/// Run `f`, turning a panic (cudarc's answer to a missing library or
/// symbol) into an error string.
pub(super) fn guard<R>(what: &str, f: impl FnOnce() -> R) -> std::result::Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("(no message)");
        format!("{what} failed: {msg}")
    })
}

/// The first `<base>.<number>` among the candidates: cudarc's loader
/// puts `lib<name>.so.<major of the bindings>` first among those.
pub(super) fn preferred_versioned(candidates: &[String], base: &str) -> String {
    candidates
        .iter()
        .find(|c| {
            c.strip_prefix(base)
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        })
        .cloned()
        .unwrap_or_else(|| format!("{base}.*"))
}
