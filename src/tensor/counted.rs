//! Counted references whose counts go under their value's lock.
//!
//! Pending operations point at values and views without a count of their
//! own (a count per task would move the object between the submitter's and
//! the worker's caches; see docs/perf-notes/tensor.md). The objects outlive
//! those tasks by another rule: every count goes under its value's lock,
//! and the last one, if tasks are still queued on the value, moves into a
//! release task enrolled behind them. So the last count goes only when the
//! queue is idle, and nothing can be enrolled through the object after that
//! (enrolling needs a counted reference).
//! Every count of a value is a `ValueRc` and every count of a view a
//! `ViewRc`, the runtime's own wait and release tasks' included, so that no
//! count goes around the lock.
//!
//! How a count goes is the [`Release`] trait: defined here, below the
//! runtime, and implemented by the runtime (which owns release tasks) for
//! values and views.

use std::mem::ManuallyDrop;
use std::sync::Arc;

/// A counted reference to `T` whose drop goes through [`Release::release`].
pub(crate) struct Counted<T: Release>(ManuallyDrop<Arc<T>>);

/// How a count of a [`Counted`] object goes.
pub(crate) trait Release: Sized {
    /// Let go of one count, under the lock of the object's value.
    fn release(count: Arc<Self>);
}

impl<T: Release> Counted<T> {
    pub(crate) fn new(v: Arc<T>) -> Counted<T> {
        Counted(ManuallyDrop::new(v))
    }

    pub(crate) fn arc(&self) -> &Arc<T> {
        &self.0
    }
}

impl<T: Release> Clone for Counted<T> {
    fn clone(&self) -> Self {
        Counted::new(Arc::clone(&self.0))
    }
}

impl<T: Release> std::ops::Deref for Counted<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Release> Drop for Counted<T> {
    fn drop(&mut self) {
        // SAFETY: the only place the Arc is taken out, and `self` is not used after.
        let v = unsafe { ManuallyDrop::take(&mut self.0) };
        T::release(v);
    }
}
