//! Panic guards for user code run by the runtime (callbacks, kernels).

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    /// How many completion callbacks and tasks this thread is running, one
    /// inside the other (a callback may complete work whose callbacks run
    /// inside it; a waiting task may help run others).
    static LIBRARY_DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Counts this thread into the library's work while it lives.
pub(crate) struct InLibraryWork(());

impl InLibraryWork {
    pub(crate) fn enter() -> InLibraryWork {
        LIBRARY_DEPTH.with(|d| d.set(d.get() + 1));
        InLibraryWork(())
    }
}

impl Drop for InLibraryWork {
    fn drop(&mut self) {
        LIBRARY_DEPTH.with(|d| d.set(d.get() - 1));
    }
}

/// Whether this thread is running a completion callback or a task.
pub(crate) fn in_library_work() -> bool {
    LIBRARY_DEPTH.with(|d| d.get() > 0)
}

/// Run a user callback; a panic in it is reported on stderr and goes no further
/// (it must not take down a worker, and the operation's outcome is already fixed).
pub(crate) fn call_guarded(f: impl FnOnce()) {
    let inside = InLibraryWork::enter();
    let outcome = catch_unwind(AssertUnwindSafe(f));
    drop(inside);
    if let Err(p) = outcome {
        eprintln!("tensorasync: a completion callback {}", panic_message(&p));
    }
}

/// The message of a caught panic, as "panicked: ...".
pub(crate) fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    crate::error::panic_message(&**p)
}
