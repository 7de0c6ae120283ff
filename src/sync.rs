//! The atomics and locks of the task graph and of events, imported from
//! here so that a `--cfg loom` build runs them under the loom model checker
//! (see `runtime::loom_models`). In every normal build these are
//! `std::sync::atomic`'s atomics and `parking_lot`'s mutex and condition
//! variable, re-exported unchanged.
//!
//! Under loom, the mutex and condition variable are thin wrappers that give
//! loom's types the `parking_lot` calls the library uses (`lock` without a
//! poison result; `wait_for` returns at once, as a spurious wake-up may, and
//! every waiter re-checks its condition).

#[cfg(not(loom))]
pub(crate) use parking_lot::{Condvar, Mutex};

/// Ask for the line at `p` in exclusive state (prefetchw; nothing on other
/// architectures).
#[inline(always)]
pub(crate) fn prefetch_for_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads and writes nothing the program
    // can observe and never faults, whatever the address.
    unsafe {
        std::arch::asm!("prefetchw [{}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
#[cfg(not(loom))]
pub(crate) mod atomic {
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, Ordering};
}

#[cfg(loom)]
pub(crate) mod atomic {
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU16, AtomicU32};
    pub(crate) use std::sync::atomic::Ordering;
}

#[cfg(loom)]
// (Named apart from the types they stand for, so that the header
// generator, which reads every module, never takes them for those.)
pub(crate) use self::modelled::{ModelCondvar as Condvar, ModelMutex as Mutex};

#[cfg(loom)]
mod modelled {
    use std::time::Duration;

    /// loom's mutex with `parking_lot`'s `lock`.
    #[derive(Default)]
    pub(crate) struct ModelMutex<T>(loom::sync::Mutex<T>);

    pub(crate) type ModelGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

    impl<T> ModelMutex<T> {
        pub(crate) fn new(v: T) -> Self {
            ModelMutex(loom::sync::Mutex::new(v))
        }
        pub(crate) fn lock(&self) -> ModelGuard<'_, T> {
            self.0.lock().unwrap()
        }
    }

    /// A condition variable whose waits return at once (a spurious wake-up).
    #[derive(Default)]
    pub(crate) struct ModelCondvar(());

    impl ModelCondvar {
        pub(crate) fn new() -> Self {
            ModelCondvar(())
        }
        pub(crate) fn notify_all(&self) {}
        pub(crate) fn wait_for<T>(&self, _guard: &mut ModelGuard<'_, T>, _timeout: Duration) {
            loom::thread::yield_now();
        }
    }
}
