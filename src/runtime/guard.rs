//! Panic guards for user code run by the runtime (callbacks, kernels).

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Run a user callback; a panic in it is reported on stderr and goes no further
/// (it must not take down a worker, and the operation's outcome is already fixed).
pub(crate) fn call_guarded(f: impl FnOnce()) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
        eprintln!("tensorasync: a completion callback {}", panic_message(&p));
    }
}

/// The message of a caught panic, as "panicked: ...".
pub(crate) fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_string()
    }
}
