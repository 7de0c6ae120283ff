//! Panic guards for user code run by the runtime (callbacks, kernels).

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    /// How many completion callbacks this thread is running (one may complete
    /// work whose callbacks run inside it).
    static CALLBACK_DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Run a user callback; a panic in it is reported on stderr and goes no further
/// (it must not take down a worker, and the operation's outcome is already fixed).
pub(crate) fn call_guarded(f: impl FnOnce()) {
    CALLBACK_DEPTH.with(|d| d.set(d.get() + 1));
    let outcome = catch_unwind(AssertUnwindSafe(f));
    CALLBACK_DEPTH.with(|d| d.set(d.get() - 1));
    if let Err(p) = outcome {
        eprintln!("tensorasync: a completion callback {}", panic_message(&p));
    }
}

/// Whether this thread is running a completion callback.
pub(crate) fn in_callback() -> bool {
    CALLBACK_DEPTH.with(|d| d.get() > 0)
}

/// The message of a caught panic, as "panicked: ...".
pub(crate) fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    crate::error::panic_message(&**p)
}
